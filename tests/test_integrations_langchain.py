"""ctxwin.integrations.langchain against the real ``langchain`` / ``langgraph`` packages:
the lossless view of LangChain messages, and agents (``create_agent`` with the middleware,
``create_react_agent`` with the pre-model hook) on ``ChatOpenAI`` pointed at the stand-in
provider on 127.0.0.1."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest

pytest.importorskip("langchain")
pytest.importorskip("langgraph")
pytest.importorskip("langchain_openai")

import openai
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_openai import ChatOpenAI

import ctxwin
from ctxwin.fitting.strategy import CLEARED_PREFIX, Strategy
from ctxwin.integrations.langchain import (
    ContextWindowMiddleware,
    PreModelHook,
    pre_model_hook,
    to_chat,
)
from tests.provider_standin import (
    EXAMPLE_VIEW,
    FINAL,
    IMAGE_URL,
    Standin,
    dropped_some,
    serve,
)
from tests.strategies import transcripts
from tests.test_integrations_openai import FILE, MODEL, SYSTEM, TASK, WINDOW

TURNS = 30
REPLY = 200


@pytest.fixture(autouse=True)
def no_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing leaves the machine: LangSmith tracing stays off."""
    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGSMITH_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def read_file(path: str) -> str:
    """Read a source file of the repository."""
    return FILE


def chat_model(url: str) -> ChatOpenAI:
    options: dict[str, Any] = {"base_url": f"{url}/v1", "api_key": "test", "max_tokens": REPLY}
    return ChatOpenAI(model=MODEL, max_retries=0, **options)


def task() -> Any:
    return {"messages": [{"role": "user", "content": TASK}]}


LIMIT: Any = {"recursion_limit": 500}


# --- the view -------------------------------------------------------------------------


def test_messages_read_as_chat_completions() -> None:
    call = {"id": "call_1", "name": "read_file", "args": {"path": "a.py"}}
    image = {"type": "image", "url": IMAGE_URL}
    history = [
        SystemMessage("be brief"),
        HumanMessage(content=[{"type": "text", "text": "look"}, image]),
        AIMessage(content="reading", tool_calls=[call]),
        ToolMessage("print(1)", tool_call_id="call_1"),
    ]
    assert [to_chat(m) for m in history] == EXAMPLE_VIEW


def lc_message(m: dict[str, Any]) -> BaseMessage:
    """A Chat Completions dict as the LangChain message an agent's state holds."""
    role, content = m["role"], m.get("content") or ""
    if role == "assistant":
        calls = [
            {
                "id": c["id"],
                "name": c["function"]["name"],
                "args": {"q": c["function"]["arguments"]},
            }
            for c in m.get("tool_calls", [])
        ]
        return AIMessage(content, tool_calls=calls)
    if role == "tool":
        return ToolMessage(content, tool_call_id=m["tool_call_id"])
    if role == "user":
        return HumanMessage(content)
    return SystemMessage(content)


def lc_messages(chat: list[dict[str, Any]]) -> list[BaseMessage]:
    return [lc_message(m) for m in chat]


def test_langchains_own_reading_of_chat_dicts_reads_back() -> None:
    chat: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    view = [to_chat(m) for m in convert_to_messages(chat)]
    assert view[1]["tool_calls"] == chat[1]["tool_calls"]
    assert view[0] == chat[0] and view[2] == chat[2]


@settings(max_examples=60, deadline=None)
@given(transcripts(), st.sampled_from([600, 1500, 4000, 20_000]))
def test_the_fit_keeps_original_objects(chat: list[dict[str, Any]], context: int) -> None:
    """What the middleware keeps is the original objects at exactly the indices ctxwin's
    planner keeps in the Chat view, and the view keeps every call id and result."""
    history = lc_messages(chat)
    view = [to_chat(m) for m in history]
    assert [v["role"] for v in view] == [
        "system" if m["role"] == "developer" else m["role"] for m in chat
    ]
    for v, m in zip(view, chat, strict=True):
        assert [c["id"] for c in v.get("tool_calls", [])] == [
            c["id"] for c in m.get("tool_calls", [])
        ]
        assert v.get("tool_call_id") == m.get("tool_call_id")
    hook = PreModelHook(context_length=context, max_tokens=100, learn_overhead=False)
    settings_: dict[str, Any] = {"context_length": context, "max_tokens": 100, "fmt": "openai-chat"}
    try:
        expected, plan = ctxwin.prune(view, **settings_)
    except ctxwin.ContextTruncated:
        with pytest.raises(ctxwin.ContextTruncated):
            hook({"messages": history})
        return
    except ctxwin.InputError:
        return  # a view ctxwin refuses to prune is refused the same way either way
    kept = hook({"messages": history})["llm_input_messages"]
    assert len(kept) == len(plan.result.keep)
    assert all(k is history[i] for k, i in zip(kept, plan.result.keep, strict=True))
    assert [to_chat(m) for m in kept] == expected


def test_a_clearing_strategy_replaces_only_the_result() -> None:
    """Under clear-results an old result is a copy with the placeholder (same id and
    call id); every other message is the original object."""
    history: list[BaseMessage] = [SystemMessage(SYSTEM), HumanMessage(TASK)]
    for i in range(8):
        call = {"id": f"c{i}", "name": "read_file", "args": {"path": f"{i}.py"}}
        history += [AIMessage("", tool_calls=[call], id=f"a{i}")]
        history += [ToolMessage(FILE, tool_call_id=f"c{i}", id=f"t{i}")]
    strategy = Strategy(steps=("clear-results", "drop-turns"), keep_results=2)
    hook = pre_model_hook(context_length=3000, max_tokens=100, strategy=strategy)
    kept = hook({"messages": history})["llm_input_messages"]
    assert len(kept) == len(history)  # clearing was enough: nothing dropped
    cleared = [(k, m) for k, m in zip(kept, history, strict=True) if k is not m]
    assert cleared and all(isinstance(m, ToolMessage) for _, m in cleared)
    for copy, original in cleared:
        assert isinstance(copy, ToolMessage) and isinstance(original, ToolMessage)
        assert str(copy.content).startswith(CLEARED_PREFIX)
        assert (copy.id, copy.tool_call_id) == (original.id, original.tool_call_id)
        assert original.content == FILE  # the original is untouched
    assert kept[-1] is history[-1] and kept[-3] is history[-3]  # the newest results stay


# --- agents against the stand-in -----------------------------------------------------


def test_create_agent_overflows_unwrapped() -> None:
    standin = Standin(window=WINDOW, final_after=TURNS)
    with serve(standin) as url, pytest.raises(openai.BadRequestError) as caught:
        agent = create_agent(chat_model(url), [read_file], system_prompt=SYSTEM)
        agent.invoke(task(), LIMIT)
    assert caught.value.code == "context_length_exceeded"
    assert standin.refused == 1 and len(standin.bodies) < TURNS


def completed_run(middleware: ContextWindowMiddleware, asynchronous: bool) -> tuple[Standin, Any]:
    """A create_agent loop with ``middleware`` against the stand-in, checked to have
    completed within the window; the stand-in and the final state."""
    standin = Standin(window=WINDOW, final_after=TURNS)
    with serve(standin) as url:
        agent = create_agent(
            chat_model(url), [read_file], system_prompt=SYSTEM, middleware=[middleware]
        )
        if asynchronous:
            state = asyncio.run(agent.ainvoke(task(), LIMIT))
        else:
            state = agent.invoke(task(), LIMIT)
    assert state["messages"][-1].content == FINAL
    assert standin.refused == 0 and len(standin.bodies) == TURNS + 1
    assert max(standin.prompts) + REPLY <= WINDOW
    return standin, state


@pytest.mark.parametrize("asynchronous", [False, True])
def test_create_agent_completes_with_the_middleware(asynchronous: bool) -> None:
    middleware = ContextWindowMiddleware(model=MODEL, context_length=WINDOW, max_tokens=REPLY)
    standin, state = completed_run(middleware, asynchronous)
    sent = standin.bodies[-1]["messages"]
    assert [m["content"] for m in sent[:2]] == [SYSTEM, TASK]  # the head always goes
    assert sent[-1]["role"] == "tool" and sent[-2]["tool_calls"]  # so does the newest turn
    # turns were dropped: the state holds what was kept, so after a block cut the calls
    # that follow fit until the run reaches the budget again (the last need not be cut)
    assert middleware.last is not None and dropped_some(standin)
    # the state holds what was kept: fewer messages than the run produced
    assert len(state["messages"]) < 2 + 2 * TURNS
    # usage taught the overhead the state never shows (system prompt, tool schema)
    assert middleware.fitting.manager.overhead > 0


@pytest.mark.parametrize("asynchronous", [False, True])
def test_the_middleware_can_keep_the_state_whole(asynchronous: bool) -> None:
    """``keep_state=True``: only the model call's messages are fitted (wrap_model_call);
    the state keeps every message, and the system prompt, the tool schema and the chat
    model's max_tokens are costed from the first call on (nothing left to learn)."""
    middleware = ContextWindowMiddleware(keep_state=True, context_length=WINDOW)
    standin, state = completed_run(middleware, asynchronous)
    assert len(state["messages"]) == 2 + 2 * TURNS  # the whole history, the final answer too
    sent = standin.bodies[-1]["messages"]
    assert [m["content"] for m in sent[:2]] == [SYSTEM, TASK]
    fit = middleware.last
    assert fit is not None and fit.pruned and fit.budget.budget == WINDOW - REPLY - 120
    assert middleware.fitting.manager.overhead == 0  # the request showed everything


def test_a_floor_that_does_not_fit_raises_before_the_call() -> None:
    standin = Standin(window=WINDOW)
    middleware = ContextWindowMiddleware(model=MODEL, context_length=WINDOW, max_tokens=REPLY)
    with serve(standin) as url:
        agent = create_agent(chat_model(url), [read_file], middleware=[middleware])
        with pytest.raises(ctxwin.ContextTruncated) as caught:
            agent.invoke({"messages": [{"role": "user", "content": FILE * 20}]}, LIMIT)
    assert standin.bodies == [] and caught.value.result.overflow_at_floor


def react_agent(url: str, hook: PreModelHook) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated for create_agent
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(chat_model(url), [read_file], prompt=SYSTEM, pre_model_hook=hook)


def test_create_react_agent_overflows_unwrapped() -> None:
    standin = Standin(window=WINDOW, final_after=TURNS)
    with serve(standin) as url, pytest.raises(openai.BadRequestError):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from langgraph.prebuilt import create_react_agent

            agent = create_react_agent(chat_model(url), [read_file], prompt=SYSTEM)
        agent.invoke(task(), LIMIT)
    assert standin.refused == 1


@pytest.mark.parametrize("keep_state", [True, False])
def test_create_react_agent_completes_with_the_hook(keep_state: bool) -> None:
    standin = Standin(window=WINDOW, final_after=TURNS)
    hook = pre_model_hook(
        keep_state=keep_state, model=MODEL, context_length=WINDOW, max_tokens=REPLY
    )
    with serve(standin) as url:
        state = react_agent(url, hook).invoke(task(), LIMIT)
    assert state["messages"][-1].content == FINAL
    assert standin.refused == 0 and len(standin.bodies) == TURNS + 1
    assert max(standin.prompts) + REPLY <= WINDOW
    assert [m["content"] for m in standin.bodies[-1]["messages"][:2]] == [SYSTEM, TASK]
    if keep_state:  # the graph state keeps the whole history
        assert len(state["messages"]) == 2 + 2 * TURNS
    else:
        assert len(state["messages"]) < 2 + 2 * TURNS
    # each message is read once, whether the state grows or is rewritten
    assert hook.fitting.manager.messages_read <= 2 * (1 + 2 * TURNS)


@settings(max_examples=40, deadline=None)
@given(transcripts(max_steps=16), st.sampled_from([600, 1500, 4000]), st.booleans())
def test_a_growing_history_fits_as_a_fresh_one(
    chat: list[dict[str, Any]], context: int, keep_state: bool
) -> None:
    """One hook over an agent's growing state (the whole history, or what the last fit
    kept, plus what is new) keeps what a fresh hook keeps of the same state: reading only
    what is new changes nothing."""
    options: dict[str, Any] = {"context_length": context, "max_tokens": 100}
    hook = pre_model_hook(keep_state=keep_state, learn_overhead=False, **options)
    state: list[BaseMessage] = []
    for message in lc_messages(chat):
        state.append(message)
        fresh = pre_model_hook(keep_state=keep_state, learn_overhead=False, **options)
        try:
            expected = fresh({"messages": list(state)})
        except (ctxwin.ContextTruncated, ctxwin.InputError) as exc:
            with pytest.raises(type(exc)):
                hook({"messages": list(state)})
            continue
        got = hook({"messages": list(state)})
        key = "llm_input_messages" if keep_state else "messages"
        assert len(got[key]) == len(expected[key])
        assert all(
            a is b or (isinstance(a, RemoveMessage) and isinstance(b, RemoveMessage))
            for a, b in zip(got[key], expected[key], strict=True)
        )
        if not keep_state and got[key]:
            state = got[key][1:]  # RemoveMessage(REMOVE_ALL_MESSAGES), then the kept ones


class Recording(ContextWindowMiddleware):
    """The middleware, keeping every fit it made."""

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self.fits: list[Any] = []

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        update = super().before_model(state, runtime)
        self.fits.append(self.last)
        return update


def test_usage_teaches_the_overhead_the_state_does_not_show() -> None:
    """After the first answer, the overhead is what the stand-in counted beyond the
    estimate of the messages sent (the system prompt and the tool schema)."""
    standin = Standin(window=100_000, final_after=1)
    middleware = Recording(model=MODEL, context_length=100_000, max_tokens=REPLY)
    with serve(standin) as url:
        agent = create_agent(
            chat_model(url), [read_file], system_prompt=SYSTEM, middleware=[middleware]
        )
        agent.invoke(task(), LIMIT)
    assert len(middleware.fits) == len(standin.prompts) == 2
    manager = middleware.fitting.manager
    expected = standin.prompts[0] - middleware.fits[0].raw_tokens_sent
    assert manager.overhead == expected > 0
    assert middleware.fits[1].result.overhead > 0  # the second fit counted it


def test_a_streamed_agent_completes_and_learns_from_streamed_usage() -> None:
    """``agent.stream(stream_mode="messages")`` streams each model call; with
    ``stream_usage=True`` the streamed AIMessage carries usage, and the middleware
    learns from it as from a plain answer."""
    standin = Standin(window=WINDOW, final_after=TURNS)
    middleware = ContextWindowMiddleware(model=MODEL, context_length=WINDOW, max_tokens=REPLY)
    with serve(standin) as url:
        options: dict[str, Any] = {"base_url": f"{url}/v1", "api_key": "test", "max_tokens": REPLY}
        model = ChatOpenAI(model=MODEL, max_retries=0, stream_usage=True, **options)
        agent = create_agent(model, [read_file], system_prompt=SYSTEM, middleware=[middleware])
        texts = [
            chunk.content
            for chunk, _ in agent.stream(task(), LIMIT, stream_mode="messages")
            if isinstance(chunk, AIMessage) and isinstance(chunk.content, str)
        ]
    assert "".join(texts).endswith(FINAL)
    assert all(body.get("stream") for body in standin.bodies)
    assert standin.refused == 0 and len(standin.bodies) == TURNS + 1
    assert max(standin.prompts) + REPLY <= WINDOW
    assert middleware.fitting.manager.overhead > 0
