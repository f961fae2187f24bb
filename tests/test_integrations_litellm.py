"""ctxwin.integrations.litellm against the real ``litellm`` package and the stand-in provider
on 127.0.0.1 (a real tokenizer, OpenAI's own 400 ``context_length_exceeded`` on overflow)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from typing import Any

import pytest

litellm = pytest.importorskip("litellm")

import ctxwin  # noqa: E402
from ctxwin.fitting.strategy import PLACEHOLDER, Strategy  # noqa: E402
from ctxwin.formats.openai_chat import OpenAIChat  # noqa: E402
from ctxwin.integrations.litellm import (  # noqa: E402
    CONVERSATION_KEY,
    ContextWindowCallback,
    ContextWindowExceeded,
)
from tests.provider_standin import READ_FILE, UNDER_COUNTING, Standin, assert_taught, serve  # noqa: E402

WINDOW = 4000
TURNS = 14
MODEL = "openai/gpt-4o"
SYSTEM = "You are a careful coding agent. Call read_file to inspect the code."
TASK = "Why does the scheduler skip jobs on the last day of the month?"
RESULT = "".join(
    f"def next_run_{i}(job, now):\n"
    f"    # month-end rule {i}: clamp the day to the month's length\n"
    f"    return job.schedule.after(now, day=min(job.day, {28 + i % 4}))\n"
    for i in range(12)
)
TOOLS = [READ_FILE]


@pytest.fixture(autouse=True)
def quiet_litellm() -> Iterator[None]:
    """No callback outlives its test; no help banner on errors."""
    litellm.suppress_debug_info = True
    yield
    litellm.logging_callback_manager._reset_all_callbacks()


def history() -> list[Any]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]


def step(messages: list[Any], response: Any) -> None:
    """Append the model's message (LiteLLM's own object) and a result per tool call."""
    message = response.choices[0].message
    messages.append(message)
    for call in message.tool_calls:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": RESULT})


def call_args(url: str, messages: list[Any], **extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": messages,
        "tools": TOOLS,
        "max_tokens": 200,
        "api_base": f"{url}/v1",
        "api_key": "test",
        "num_retries": 0,
        **extra,
    }


async def async_loop(url: str, turns: int = TURNS, **extra: Any) -> list[Any]:
    messages = history()
    for _ in range(turns):
        step(messages, await litellm.acompletion(**call_args(url, messages, **extra)))
    return messages


def sync_loop(completion: Any, url: str, turns: int = TURNS) -> list[Any]:
    messages = history()
    for _ in range(turns):
        step(messages, completion(**call_args(url, messages)))
    return messages


def assert_fitted(standin: Standin, messages: list[Any]) -> None:
    assert len(standin.bodies) == TURNS and standin.refused == 0
    assert max(standin.prompts) + 200 <= WINDOW
    sent = standin.bodies[-1]["messages"]
    assert len(sent) < len(messages)  # old turns were left out of what was sent
    assert sent[:2] == history()  # the system prompt and the task always go
    assert sent[-1]["content"] == RESULT and sent[-2]["tool_calls"]  # so does the newest turn


def test_a_long_loop_overflows_without_the_callback() -> None:
    standin = Standin(window=WINDOW)
    with serve(standin) as url, pytest.raises(litellm.ContextWindowExceededError) as caught:
        asyncio.run(async_loop(url))
    assert caught.value.status_code == 400
    assert "maximum context length is 4000 tokens" in str(caught.value)
    assert standin.refused == 1 and max(standin.prompts) + 200 > WINDOW


def test_a_long_async_loop_completes_with_the_callback() -> None:
    standin = Standin(window=WINDOW)
    fit = ContextWindowCallback(context_length=WINDOW)
    litellm.callbacks = [fit]
    with serve(standin) as url:
        messages = asyncio.run(async_loop(url))
    assert_fitted(standin, messages)
    assert len(fit.managers) == 1  # one conversation
    assert fit.last is not None and fit.last.pruned


def test_a_streamed_async_loop_completes_and_learns_usage() -> None:
    standin = Standin(window=WINDOW)
    fit = ContextWindowCallback(context_length=WINDOW, learn_overhead=False)
    litellm.callbacks = [fit]
    learned: list[float] = []

    async def loop(url: str) -> None:
        messages = history()
        for _ in range(TURNS):
            events = await litellm.acompletion(
                **call_args(url, messages, stream=True, stream_options={"include_usage": True})
            )
            chunks = [chunk async for chunk in events]
            ids = [d.id for c in chunks for ch in c.choices for d in ch.delta.tool_calls or ()]
            calls = [
                {"id": i, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
                for i in ids
                if i
            ]
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
            messages += [
                {"role": "tool", "tool_call_id": c["id"], "content": RESULT} for c in calls
            ]
            # LiteLLM reports a stream's usage to its success callback in the background,
            # after the stream ends: wait for it before the next call
            for _ in range(200):
                if not fit.conversations.pending:
                    break
                await asyncio.sleep(0.01)
            learned.append(fit.managers[next(iter(fit.managers))].calibration)

    with serve(standin) as url:
        asyncio.run(loop(url))
    assert len(standin.bodies) == TURNS and standin.refused == 0
    assert not fit.conversations.pending  # every call's usage was learned
    (manager,) = fit.managers.values()
    raw = fit.last.raw_tokens_sent if fit.last else 0
    assert manager.calibration == max(learned[-2], standin.prompts[-1] / raw)


def test_the_sync_completion_fits_and_plain_litellm_completion_overflows() -> None:
    standin = Standin(window=WINDOW)
    fit = ContextWindowCallback(context_length=WINDOW)
    with serve(standin) as url:
        with pytest.raises(litellm.ContextWindowExceededError):
            sync_loop(litellm.completion, url)
        standin.refused = 0
        standin.bodies.clear()
        standin.prompts.clear()
        messages = sync_loop(fit.completion, url)
    assert_fitted(standin, messages)


def test_a_router_call_is_fitted() -> None:
    standin = Standin(window=WINDOW)
    litellm.callbacks = [ContextWindowCallback(context_length=WINDOW)]
    with serve(standin) as url:
        params = {"model": MODEL, "api_base": f"{url}/v1", "api_key": "test"}
        router = litellm.Router(model_list=[{"model_name": "agent", "litellm_params": params}])

        async def loop() -> list[Any]:
            messages = history()
            for _ in range(TURNS):
                response = await router.acompletion(
                    model="agent", messages=messages, tools=TOOLS, max_tokens=200
                )
                step(messages, response)
            return messages

        messages = asyncio.run(loop())
    assert_fitted(standin, messages)


def one_call(fit: ContextWindowCallback, sync: bool) -> Standin:
    standin = Standin(window=100_000)
    with serve(standin) as url:
        if sync:
            sync_loop(fit.completion, url, turns=1)
        else:
            litellm.callbacks = [fit]
            asyncio.run(async_loop(url, turns=1))
    return standin


@pytest.mark.parametrize("sync", [False, True])
def test_usage_teaches_an_overhead(sync: bool) -> None:
    """What the provider counted beyond the estimate is learned as an overhead."""
    fit = ContextWindowCallback(context_length=100_000, calibration=1.0, estimator=UNDER_COUNTING)
    standin = one_call(fit, sync)
    (manager,) = fit.managers.values()
    assert fit.last is not None
    assert manager.overhead == standin.prompts[0] - fit.last.raw_tokens_sent > 0


@pytest.mark.parametrize("sync", [False, True])
def test_usage_teaches_the_calibration_without_overhead_learning(sync: bool) -> None:
    fit = ContextWindowCallback(
        context_length=100_000, calibration=1.0, estimator=UNDER_COUNTING, learn_overhead=False
    )
    assert_taught(fit, one_call(fit, sync))


def anthropic_loop(learn_overhead: bool) -> tuple[Standin, ContextWindowCallback]:
    """The tool loop through LiteLLM to an Anthropic model, at a 4,000-token window (the
    stand-in and the callback, after it; docs/integrations/litellm.md quotes it)."""
    standin = Standin(window=WINDOW)
    fit = ContextWindowCallback(context_length=WINDOW, learn_overhead=learn_overhead)
    litellm.callbacks = [fit]

    async def loop(url: str) -> None:
        messages = history()
        for _ in range(TURNS):
            args = call_args(url, messages, model="anthropic/claude-sonnet-4-5", api_base=url)
            step(messages, await litellm.acompletion(**args))

    try:
        with serve(standin) as url:
            asyncio.run(loop(url))
    finally:
        litellm.logging_callback_manager._reset_all_callbacks()
    return standin, fit


@pytest.mark.parametrize("learn_overhead", [True, False])
def test_an_anthropic_model_through_litellm(learn_overhead: bool) -> None:
    """LiteLLM translates the call to Anthropic Messages, whose provider adds its own tool
    prompt (346 tokens) that the messages do not show. Learned as an overhead, the loop
    goes on using the window; learned as a factor of the small first request, it keeps
    the fit far below the window. (What each call adds is priced at Claude's seed at
    least, 1.4, the worst ratio of Claude's count to the largest of the four open
    tokenizers measured on recorded calls; this stand-in counts o200k, so on it the loop
    keeps a quarter of the window back, not a fifth.)"""
    standin, _ = anthropic_loop(learn_overhead)
    assert len(standin.bodies) == TURNS and standin.refused == 0
    assert "system" in standin.bodies[0]  # the stand-in was spoken to in Anthropic's API
    # the largest prompt (the cut moves in blocks: the last call may sit low in one)
    used = max(standin.prompts) + 200
    assert used > 0.75 * WINDOW if learn_overhead else used < 0.5 * WINDOW


def test_a_floor_that_does_not_fit_raises_before_sending() -> None:
    standin = Standin(window=WINDOW)
    fit = ContextWindowCallback(context_length=WINDOW)
    litellm.callbacks = [fit]
    messages = [*history(), {"role": "user", "content": RESULT * 20}]
    with serve(standin) as url:
        with pytest.raises(ctxwin.ContextTruncated) as caught:
            asyncio.run(litellm.acompletion(**call_args(url, messages)))
        with pytest.raises(ContextWindowExceeded):
            fit.completion(**call_args(url, messages))
    assert standin.bodies == []  # nothing reached the provider
    error = caught.value
    assert isinstance(error, litellm.ContextWindowExceededError)  # Router fallbacks apply
    assert error.status_code == 400 and error.code == "context_length_exceeded"
    assert error.result.overflow_at_floor


def proxy_data(messages: list[Any], **extra: Any) -> dict[str, Any]:
    """A chat request as the LiteLLM proxy hands it to its pre-call hooks."""
    return {
        "model": "agent",
        "messages": messages,
        "tools": TOOLS,
        "max_tokens": 200,
        "metadata": {"user_api_key_hash": "hashed", "headers": {}},
        "proxy_server_request": {"url": "http://127.0.0.1/chat/completions"},
        **extra,
    }


def test_the_proxy_pre_call_hook_fits_what_the_proxy_routes() -> None:
    """The proxy runs ``async_pre_call_hook`` on the request, then routes what it returns."""
    standin = Standin(window=WINDOW)
    fit = ContextWindowCallback(context_length=WINDOW)
    litellm.callbacks = [fit]  # as the proxy registers it: its deployment hook runs too

    async def loop(url: str) -> list[Any]:
        messages = history()
        for n in range(TURNS):
            # the proxy parses a fresh copy of the conversation from each HTTP request
            copy = [dict(m) if isinstance(m, dict) else m for m in messages]
            data = proxy_data(copy, litellm_call_id=f"proxy-{n}")
            data = await fit.async_pre_call_hook(None, None, data, "completion")
            data.pop("proxy_server_request")
            data.update(model=MODEL, api_base=f"{url}/v1", api_key="test")
            step(messages, await litellm.acompletion(**data))
        return messages

    with serve(standin) as url:
        messages = asyncio.run(loop(url))
    assert_fitted(standin, messages)
    assert [model for model, _ in fit.managers] == ["agent"]  # not fitted again at the deployment
    data = proxy_data([*history(), {"role": "user", "content": RESULT * 20}])
    with pytest.raises(litellm.ContextWindowExceededError) as caught:
        asyncio.run(fit.async_pre_call_hook(None, None, data, "completion"))
    assert caught.value.status_code == 400  # what the proxy answers with


def test_other_call_types_pass_through() -> None:
    fit = ContextWindowCallback(context_length=10)
    data = {"model": "text-embedding-3-small", "input": ["x" * 100]}
    assert asyncio.run(fit.async_pre_call_hook(None, None, data, "aembedding")) is data
    assert asyncio.run(fit.async_pre_call_deployment_hook(data, "aembedding")) is None
    assert fit.managers == {}


def test_each_conversation_has_its_own_manager() -> None:
    fit = ContextWindowCallback(context_length=WINDOW, conversations=2)
    a = history()
    b = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Another task."}]
    for messages in (a, b, [*a, {"role": "assistant", "content": "Looking."}], b):
        fit.fit({"model": MODEL, "messages": messages})
    assert len(fit.managers) == 2  # a's head, b's head
    fit.fit({"model": MODEL, "messages": a, "metadata": {CONVERSATION_KEY: "run-7"}})
    assert len(fit.managers) == 2 and (MODEL, "run-7") in fit.managers  # a bounded table


def test_a_strategy_clears_results_in_copies() -> None:
    """With ``clear-results`` the old results are sent cleared; the caller's messages, and
    every entry the strategy did not edit, are sent as the very objects given."""
    fit = ContextWindowCallback(
        context_length=WINDOW, strategy=Strategy(steps=("clear-results", "drop-turns"))
    )
    messages = history()
    for n in range(8):
        function = {"name": "read_file", "arguments": "{}"}
        call = {"id": f"call_{n}", "type": "function", "function": function}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{n}", "content": RESULT})
    done = fit.fit({"model": MODEL, "messages": messages, "max_tokens": 200})
    assert done is not None
    sent, fitted = done
    cleared = [m for m in sent if str(m.get("content", "")).startswith(PLACEHOLDER[:20])]
    assert cleared and fitted.applied.cleared_results == len(cleared)
    assert all(m["content"] == RESULT for m in messages if m["role"] == "tool")  # untouched
    untouched = [m for m in sent if m not in cleared]
    assert all(any(m is o for o in messages) for m in untouched)


def test_a_loop_reads_each_message_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """LiteLLM deep-copies the messages of every call; the callback still reads each
    message once: the 14 calls read as many messages as the last request holds (one
    read a call, of its new messages), not the sum of the 14 requests."""
    reads: list[int] = []
    real = OpenAIChat.read

    def counting(self: OpenAIChat, body: Any, estimator: Any) -> Any:
        view = real(self, body, estimator)
        reads.append(len(view.items))
        return view

    monkeypatch.setattr(OpenAIChat, "read", counting)
    standin = Standin(window=WINDOW)
    fit = ContextWindowCallback(context_length=WINDOW)
    litellm.callbacks = [fit]
    with serve(standin) as url:
        messages = asyncio.run(async_loop(url))
    assert_fitted(standin, messages)
    assert fit.last is not None
    last = fit.last.result.items  # the messages of the 14th request
    (manager,) = fit.managers.values()
    assert len(reads) == TURNS
    assert sum(reads) == manager.messages_read == fit.conversations.entries_read == last
    assert sum(range(2, last + 1, 2)) > 3 * last  # what reading every call whole reads


def steps(n: int) -> list[Any]:
    messages = history()
    for k in range(n):
        call = {
            "id": f"c{k}",
            "type": "function",
            "function": {"name": "read_file", "arguments": "{}"},
        }
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{k}", "content": RESULT},
        ]
    return messages


def test_a_copied_history_fits_as_a_fresh_callback_fits_it_and_an_edited_one_is_read_whole() -> (
    None
):
    """Each call given a deep copy of the history (as LiteLLM gives it) fits exactly as a
    fresh callback fits that call; a call whose earlier message was edited is read whole."""
    fit = ContextWindowCallback(context_length=WINDOW)
    read = 0
    for n in (3, 4, 8, 9):
        messages = steps(n)
        got = fit.fit(call_args("http://unused", copy.deepcopy(messages)))
        fresh = ContextWindowCallback(context_length=WINDOW)
        want = fresh.fit(call_args("http://unused", copy.deepcopy(messages)))
        assert got is not None and want is not None
        assert got[0] == want[0] and got[1].result == want[1].result
        assert got[1].raw_tokens_sent == want[1].raw_tokens_sent
        read = len(messages)
    (manager,) = fit.managers.values()
    assert manager.messages_read == read  # each message read once
    assert fit.last is not None and fit.last.pruned
    edited = steps(10)
    edited[3] = {**edited[3], "content": RESULT + "# edited\n"}
    got = fit.fit(call_args("http://unused", copy.deepcopy(edited)))
    want = ContextWindowCallback(context_length=WINDOW).fit(call_args("http://unused", edited))
    assert got is not None and want is not None
    assert got[0] == want[0] and got[1].result == want[1].result
    assert manager.messages_read == read + len(edited)  # the edited call was read whole
