"""ctxwin.integrations.pydantic_ai against the real ``pydantic-ai`` package: the lossless
view of its messages, and an agent on its OpenAI Chat model pointed at the stand-in
provider on 127.0.0.1."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import (
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import ctxwin
from ctxwin.fitting.strategy import CLEARED_PREFIX, Strategy
from ctxwin.integrations.pydantic_ai import HistoryProcessor, history_processor, to_chat
from tests.provider_standin import (
    EXAMPLE_VIEW,
    FINAL,
    IMAGE_URL,
    Standin,
    dropped_some,
    serve,
)
from tests.strategies import transcripts
from tests.test_integrations_openai import FILE, MODEL, SEED, SYSTEM, TASK, WINDOW

TURNS = 30
REPLY = 200


def view(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    return [entry for m in messages for entry, _ in to_chat(m)]


@pytest.mark.filterwarnings("ignore:`RetryPromptPart` is deprecated")
def test_messages_read_as_chat_completions() -> None:
    image = ImageUrl(IMAGE_URL)
    history: list[ModelMessage] = [
        ModelRequest([SystemPromptPart("be brief"), UserPromptPart(["look", image])]),
        ModelResponse([TextPart("reading"), ToolCallPart("read_file", {"path": "a.py"}, "call_1")]),
        ModelRequest(
            [
                ToolReturnPart("read_file", "print(1)", "call_1"),
                RetryPromptPart("bad path", tool_name="read_file", tool_call_id="c2"),
            ]
        ),
    ]
    entries = view(history)
    assert entries[:4] == EXAMPLE_VIEW
    retry = entries[4]
    assert retry["role"] == "tool" and retry["tool_call_id"] == "c2"
    assert "bad path" in retry["content"]
    assert [k for _, k in to_chat(history[2])] == [0, 1]  # each entry names its part


def pa_messages(chat: list[dict[str, Any]]) -> list[ModelMessage]:
    """Chat Completions dicts as a pydantic-ai history: an assistant message is a response,
    each run of other messages one request."""
    out: list[ModelMessage] = []
    parts: list[Any] = []
    for m in chat:
        role, content = m["role"], m.get("content") or ""
        if role == "assistant":
            if parts:
                out.append(ModelRequest(parts))
                parts = []
            calls = [
                ToolCallPart(c["function"]["name"], c["function"]["arguments"], c["id"])
                for c in m.get("tool_calls", [])
            ]
            out.append(ModelResponse([TextPart(content), *calls]))
        elif role == "tool":
            parts.append(ToolReturnPart("f", content, m["tool_call_id"]))
        elif role == "user":
            parts.append(UserPromptPart(content))
        else:
            parts.append(SystemPromptPart(content))
    if parts:
        out.append(ModelRequest(parts))
    return out


@settings(max_examples=60, deadline=None)
@given(transcripts(), st.sampled_from([600, 1500, 4000, 20_000]))
def test_the_fit_keeps_original_objects(chat: list[dict[str, Any]], context: int) -> None:
    """The processor keeps exactly the parts ctxwin's planner keeps in the Chat view, as
    the original objects; a request loses parts only when some of them are dropped; every
    kept tool return follows the response that made its call."""
    history = pa_messages(chat)
    entries = view(history)
    assert [e["role"] for e in entries] == [
        "system" if m["role"] == "developer" else m["role"] for m in chat
    ]
    assert [e.get("tool_call_id") for e in entries] == [m.get("tool_call_id") for m in chat]
    processor = history_processor(context_length=context, max_tokens=100, learn_overhead=False)
    try:
        _, plan = ctxwin.prune(entries, context_length=context, max_tokens=100, fmt="openai-chat")
    except ctxwin.ContextTruncated:
        with pytest.raises(ctxwin.ContextTruncated):
            processor.fitting.fit(history)
        return
    except ctxwin.InputError:
        return
    kept, _ = processor.fitting.fit(history)
    where = [(k, part) for k, m in enumerate(history) for _, part in to_chat(m)]
    expected_parts = [where[i] for i in plan.result.keep]
    got_parts: list[tuple[int, int | None]] = []
    for message in kept:
        original = next(m for m in history if m is message or _same_request(m, message))
        k = history.index(original)
        if isinstance(message, ModelResponse):
            assert message is original
            got_parts.append((k, None))
            continue
        for part in message.parts:
            index = next(i for i, p in enumerate(original.parts) if p is part)
            got_parts.append((k, index))
        if message is not original:
            assert len(message.parts) < len(original.parts)  # copied only to drop parts
    assert got_parts == expected_parts
    calls_seen: set[str] = set()
    for message in kept:
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                calls_seen.add(part.tool_call_id)
            elif isinstance(part, ToolReturnPart):
                assert part.tool_call_id in calls_seen


def _same_request(original: ModelMessage, copy: ModelMessage) -> bool:
    return (
        isinstance(original, ModelRequest)
        and isinstance(copy, ModelRequest)
        and bool(copy.parts)
        and any(p is copy.parts[0] for p in original.parts)
    )


def test_a_clearing_strategy_replaces_only_the_result() -> None:
    history: list[ModelMessage] = [ModelRequest([SystemPromptPart(SYSTEM), UserPromptPart(TASK)])]
    for i in range(8):
        history.append(ModelResponse([ToolCallPart("read_file", {"path": f"{i}.py"}, f"c{i}")]))
        history.append(ModelRequest([ToolReturnPart("read_file", FILE, f"c{i}")]))
    strategy = Strategy(steps=("clear-results", "drop-turns"), keep_results=2)
    processor = history_processor(context_length=3000, max_tokens=100, strategy=strategy)
    kept, fit = processor.fitting.fit(history)
    assert len(kept) == len(history) and fit.applied.cleared_results > 0
    changed = [(k, m) for k, m in zip(kept, history, strict=True) if k is not m]
    assert len(changed) == fit.applied.cleared_results
    for copy, original in changed:
        assert isinstance(copy, ModelRequest) and isinstance(original, ModelRequest)
        (new,), (old,) = copy.parts, original.parts
        assert isinstance(new, ToolReturnPart) and isinstance(old, ToolReturnPart)
        assert str(new.content).startswith(CLEARED_PREFIX) and old.content == FILE
        assert new.tool_call_id == old.tool_call_id
    assert kept[-1] is history[-1] and kept[-3] is history[-3]


# --- an agent against the stand-in ---------------------------------------------------


def read_file(path: str) -> str:
    """Read a source file of the repository."""
    return FILE


def agent(url: str, processor: HistoryProcessor | None = None) -> Agent[None, str]:
    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=f"{url}/v1", api_key="test"))
    return Agent(
        model,
        tools=[read_file],
        instructions=SYSTEM,
        model_settings={"max_tokens": REPLY},
        capabilities=[ProcessHistory(processor)] if processor is not None else [],
    )


def test_an_agent_overflows_unwrapped() -> None:
    standin = Standin(window=WINDOW, final_after=TURNS)
    with serve(standin) as url, pytest.raises(ModelHTTPError) as caught:
        agent(url).run_sync(TASK)
    assert caught.value.status_code == 400
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["code"] == "context_length_exceeded"
    assert standin.refused == 1 and len(standin.bodies) < TURNS


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_agent_completes_with_the_processor(asynchronous: bool) -> None:
    standin = Standin(window=WINDOW, final_after=TURNS)
    processor = history_processor(context_length=WINDOW)
    with serve(standin) as url:
        runner = agent(url, processor)
        result = asyncio.run(runner.run(TASK)) if asynchronous else runner.run_sync(TASK)
    assert result.output == FINAL
    assert standin.refused == 0 and len(standin.bodies) == TURNS + 1
    assert max(standin.prompts) + REPLY <= WINDOW
    sent = standin.bodies[-1]["messages"]
    assert [m["content"] for m in sent[:2]] == [SYSTEM, TASK]  # the head always goes
    assert sent[-1]["role"] == "tool" and sent[-2]["tool_calls"]  # so does the newest turn
    fit = processor.last
    # turns were dropped (a block cut leaves the calls after it within budget until the
    # run reaches it again, so the last call need not be cut)
    assert fit is not None and dropped_some(standin)
    # the run's tools, max_tokens and model were read from the run: nothing unseen
    assert fit.budget.budget == WINDOW - REPLY - 120
    assert processor.fitting.manager.overhead == 0
    assert processor.fitting.manager.messages_read <= 2 * (2 + 2 * TURNS)


def test_a_floor_that_does_not_fit_raises_before_the_request() -> None:
    standin = Standin(window=WINDOW)
    with serve(standin) as url, pytest.raises(ctxwin.ContextTruncated) as caught:
        agent(url, history_processor(context_length=WINDOW)).run_sync(FILE * 20)
    assert standin.bodies == [] and caught.value.result.overflow_at_floor


@settings(max_examples=40, deadline=None)
@given(transcripts(max_steps=16), st.sampled_from([600, 1500, 4000]))
def test_a_growing_history_fits_as_a_fresh_one(chat: list[dict[str, Any]], context: int) -> None:
    """pydantic-ai keeps what the processor returned and appends to it: one processor over
    that history keeps what a fresh one keeps (reading only what is new changes nothing)."""
    options: dict[str, Any] = {"context_length": context, "max_tokens": 100}
    processor = history_processor(learn_overhead=False, **options)
    history: list[ModelMessage] = []
    for message in pa_messages(chat):
        history.append(message)
        fresh = history_processor(learn_overhead=False, **options)
        try:
            expected, _ = fresh.fitting.fit(list(history))
        except (ctxwin.ContextTruncated, ctxwin.InputError) as exc:
            with pytest.raises(type(exc)):
                processor.fitting.fit(list(history))
            continue
        got, _ = processor.fitting.fit(list(history))
        assert len(got) == len(expected)
        for a, b in zip(got, expected, strict=True):
            assert a is b or (  # a request kept in part: a copy of the same parts
                isinstance(a, ModelRequest)
                and isinstance(b, ModelRequest)
                and len(a.parts) == len(b.parts)
                and all(p is q for p, q in zip(a.parts, b.parts, strict=True))
            )
        history = got


def test_a_streamed_run_completes_with_the_processor() -> None:
    """``agent.run_stream`` streams each model request; the processor fits each one and
    learns from the streamed responses' usage (an estimator that counts fewer tokens than
    the stand-in's tokenizer is corrected by it: a line above the seed's, and no
    overflow)."""
    standin = Standin(window=WINDOW, final_after=TURNS)
    processor = history_processor(context_length=WINDOW, estimator=SEED)

    async def run(url: str) -> str:
        async with agent(url, processor).run_stream(TASK) as streamed:
            return await streamed.get_output()

    with serve(standin) as url:
        output = asyncio.run(run(url))
    assert output == FINAL
    assert all(body.get("stream") for body in standin.bodies)
    assert standin.refused == 0 and len(standin.bodies) == TURNS + 1
    assert max(standin.prompts) + REPLY <= WINDOW
    fit = processor.last
    assert fit is not None and dropped_some(standin)
    manager = processor.fitting.manager
    assert manager.overhead > 0 or manager.calibration > 1.0
