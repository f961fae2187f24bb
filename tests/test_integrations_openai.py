"""ctxwin.integrations.openai against the real ``openai`` package and a stand-in provider
on 127.0.0.1 that counts prompts with a real tokenizer and refuses overflows as OpenAI does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

openai = pytest.importorskip("openai")

import ctxwin  # noqa: E402
from ctxwin.fitting.calibration import grow  # noqa: E402
from ctxwin.fitting.strategy import PLACEHOLDER, Strategy  # noqa: E402
from ctxwin.integrations.openai import wrap  # noqa: E402
from tests.provider_standin import READ_FILE, UNDER_COUNTING, Standin, serve  # noqa: E402

WINDOW = 4000
TURNS = 30
MODEL = "gpt-4o"
SEED = UNDER_COUNTING
SYSTEM = "You are a coding agent. Read files with read_file until the task is done."
TASK = "Find where the retry budget is computed and explain it."
FILE = "".join(
    f"def handler_{i}(request, retries={i}):\n"
    f"    # retry budget for route {i}: backoff * 2 ** attempt, capped\n"
    f"    return min(request.backoff * 2 ** retries, {100 + i})\n"
    for i in range(12)
)
TOOLS = [READ_FILE]
RESPONSE_TOOLS = [
    {
        "type": "function",
        "name": "read_file",
        "description": "Read a source file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
]


def client(url: str, asynchronous: bool = False) -> Any:
    cls = openai.AsyncOpenAI if asynchronous else openai.OpenAI
    return cls(base_url=f"{url}/v1", api_key="test", max_retries=0)


def chat_history() -> list[Any]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]


def chat_loop(chat: Any, turns: int = TURNS, stream: bool = False) -> list[Any]:
    """An agent loop: send the history, append the model's tool call and its result."""
    history = chat_history()
    for _ in range(turns):
        if stream:
            events = chat.chat.completions.create(
                model=MODEL,
                messages=history,
                tools=TOOLS,
                max_tokens=200,
                stream=True,
                stream_options={"include_usage": True},
            )
            calls: dict[int, dict[str, Any]] = {}
            for chunk in events:
                for choice in chunk.choices:
                    for d in choice.delta.tool_calls or ():
                        call = calls.setdefault(
                            d.index,
                            {
                                "id": "",
                                "type": "function",
                                "function": {"name": "", "arguments": ""},
                            },
                        )
                        call["id"] = d.id or call["id"]
                        call["function"]["name"] += d.function.name or ""
                        call["function"]["arguments"] += d.function.arguments or ""
            message: Any = {
                "role": "assistant",
                "content": None,
                "tool_calls": list(calls.values()),
            }
            ids = [c["id"] for c in calls.values()]
        else:
            response = chat.chat.completions.create(
                model=MODEL, messages=history, tools=TOOLS, max_tokens=200
            )
            message = response.choices[0].message  # the SDK's own object, as people append it
            ids = [c.id for c in message.tool_calls]
        history.append(message)
        history += [{"role": "tool", "tool_call_id": i, "content": FILE} for i in ids]
    return history


async def async_chat_loop(chat: Any, turns: int = TURNS, stream: bool = False) -> list[Any]:
    history = chat_history()
    for _ in range(turns):
        if stream:
            events = await chat.chat.completions.create(
                model=MODEL,
                messages=history,
                tools=TOOLS,
                max_tokens=200,
                stream=True,
                stream_options={"include_usage": True},
            )
            ids: list[str] = []
            async for chunk in events:
                for choice in chunk.choices:
                    ids += [d.id for d in choice.delta.tool_calls or () if d.id]
            calls = [
                {"id": i, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
                for i in ids
            ]
            message: Any = {"role": "assistant", "content": None, "tool_calls": calls}
        else:
            response = await chat.chat.completions.create(
                model=MODEL, messages=history, tools=TOOLS, max_tokens=200
            )
            message = response.choices[0].message
            ids = [c.id for c in message.tool_calls]
        history.append(message)
        history += [{"role": "tool", "tool_call_id": i, "content": FILE} for i in ids]
    return history


def test_a_long_chat_loop_overflows_unwrapped() -> None:
    standin = Standin(window=WINDOW)
    with serve(standin) as url, pytest.raises(openai.BadRequestError) as caught:
        chat_loop(client(url))
    assert caught.value.status_code == 400
    assert caught.value.code == "context_length_exceeded"
    assert standin.refused == 1 and max(standin.prompts) + 200 > WINDOW


@pytest.mark.parametrize("stream", [False, True])
def test_a_long_chat_loop_completes_wrapped(stream: bool) -> None:
    standin = Standin(window=WINDOW)
    with serve(standin) as url:
        wrapped = wrap(client(url), context_length=WINDOW)
        history = chat_loop(wrapped, stream=stream)
    assert len(standin.bodies) == TURNS and standin.refused == 0
    assert max(standin.prompts) + 200 <= WINDOW
    sent = standin.bodies[-1]["messages"]
    assert len(sent) < len(history)  # old turns were left out of what was sent
    assert sent[:2] == chat_history()  # the system prompt and the task always go
    assert sent[-1]["content"] == FILE and sent[-2]["tool_calls"]  # so does the newest turn
    manager = wrapped.ctxwin.fittings[0].managers[MODEL]
    assert manager.messages_read == len(history) - 2  # each message sent estimated once


@pytest.mark.parametrize("stream", [False, True])
def test_the_async_client_completes_wrapped(stream: bool) -> None:
    standin = Standin(window=WINDOW)
    with serve(standin) as url:
        with pytest.raises(openai.BadRequestError):
            asyncio.run(async_chat_loop(client(url, asynchronous=True), stream=stream))
        standin.refused = 0
        standin.bodies.clear()
        wrapped = wrap(client(url, asynchronous=True), context_length=WINDOW)
        asyncio.run(async_chat_loop(wrapped, stream=stream))
    assert len(standin.bodies) == TURNS and standin.refused == 0


@pytest.mark.parametrize("stream", [False, True])
def test_usage_teaches_the_calibration(stream: bool) -> None:
    """After a call, the calibration is what the usage the stand-in reported teaches
    (an estimator that under-counts the stand-in's tokenizer has to grow)."""
    standin = Standin(window=100_000)
    with serve(standin) as url:
        wrapped = wrap(client(url), context_length=100_000, calibration=1.0, estimator=SEED)
        chat_loop(wrapped, turns=1, stream=stream)
    manager = wrapped.ctxwin.fittings[0].managers[MODEL]
    raw = wrapped.ctxwin.last.raw_tokens_sent
    assert manager.calibration == grow(1.0, raw, standin.prompts[0]) > 1.0


def test_a_floor_that_does_not_fit_raises_before_sending() -> None:
    standin = Standin(window=WINDOW)
    history = [*chat_history(), {"role": "user", "content": FILE * 20}]
    with serve(standin) as url:
        wrapped = wrap(client(url), context_length=WINDOW)
        with pytest.raises(ctxwin.ContextTruncated) as caught:
            wrapped.chat.completions.create(model=MODEL, messages=history, max_tokens=200)
    assert standin.bodies == []  # nothing reached the provider
    assert caught.value.result.overflow_at_floor


def responses_loop(api: Any, turns: int = TURNS, stream: bool = False) -> list[Any]:
    history: list[Any] = [{"role": "user", "content": TASK}]
    for _ in range(turns):
        kwargs: dict[str, Any] = {
            "model": MODEL,
            "instructions": SYSTEM,
            "input": history,
            "tools": RESPONSE_TOOLS,
            "max_output_tokens": 200,
        }
        if stream:
            output: list[Any] = []
            for event in api.responses.create(stream=True, **kwargs):
                if event.type == "response.completed":
                    output = list(event.response.output)
        else:
            output = list(api.responses.create(**kwargs).output)
        for item in output:
            history.append(item.model_dump(exclude_none=True))
            history.append(
                {"type": "function_call_output", "call_id": item.call_id, "output": FILE}
            )
    return history


@pytest.mark.parametrize("stream", [False, True])
def test_a_long_responses_loop_overflows_unwrapped_and_completes_wrapped(stream: bool) -> None:
    standin = Standin(window=WINDOW)
    with serve(standin) as url:
        with pytest.raises(openai.BadRequestError) as caught:
            responses_loop(client(url), stream=stream)
        assert caught.value.code == "context_length_exceeded"
        standin.refused = 0
        standin.bodies.clear()
        wrapped = wrap(client(url), context_length=WINDOW)
        history = responses_loop(wrapped, stream=stream)
    assert len(standin.bodies) == TURNS and standin.refused == 0
    assert len(standin.bodies[-1]["input"]) < len(history)


def test_everything_else_is_the_clients_own() -> None:
    raw = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="test")
    wrapped = wrap(raw, context_length=WINDOW)
    assert wrapped.base_url == raw.base_url
    assert wrapped.chat.completions.with_raw_response is not None
    assert wrapped.models is raw.models


def test_a_clearing_strategy_sends_the_cleared_results() -> None:
    """With ``clear-results`` the old tool results reach the provider cleared (copies);
    the history keeps them whole."""
    standin = Standin(window=WINDOW)
    steps = Strategy(steps=("clear-results", "drop-turns"))
    with serve(standin) as url:
        history = chat_loop(wrap(client(url), context_length=WINDOW, strategy=steps), turns=12)
    sent = standin.bodies[-1]["messages"]
    assert any(str(m.get("content")).startswith(PLACEHOLDER[:20]) for m in sent)
    assert all(m["content"] == FILE for m in history if isinstance(m, dict) and "tool_call_id" in m)
    assert standin.refused == 0
