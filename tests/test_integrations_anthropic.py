"""ctxwin.integrations.anthropic against the real ``anthropic`` package and a stand-in
provider on 127.0.0.1 that counts prompts with a real tokenizer and refuses overflows
as Anthropic does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")

import ctxwin  # noqa: E402
from ctxwin.fitting.calibration import grow  # noqa: E402
from ctxwin.integrations.anthropic import wrap  # noqa: E402
from tests.provider_standin import Standin, serve  # noqa: E402
from tests.test_integrations_openai import FILE, SEED, SYSTEM, TASK, TURNS, WINDOW  # noqa: E402

MODEL = "claude-sonnet-4-5"
TOOLS = [
    {
        "name": "read_file",
        "description": "Read a source file",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
]
MODES = ["create", "create-stream", "stream"]


def client(url: str, asynchronous: bool = False) -> Any:
    cls = anthropic.AsyncAnthropic if asynchronous else anthropic.Anthropic
    return cls(base_url=url, api_key="test", max_retries=0)


def kwargs(history: list[Any]) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 200,
        "system": SYSTEM,
        "messages": history,
        "tools": TOOLS,
    }


def step(history: list[Any], content: list[Any]) -> None:
    """Append the model's message (the SDK's own blocks) and the results of its calls."""
    history.append({"role": "assistant", "content": content})
    results = [
        {"type": "tool_result", "tool_use_id": b.id, "content": FILE}
        for b in content
        if b.type == "tool_use"
    ]
    history.append({"role": "user", "content": results})


def loop(api: Any, mode: str, turns: int = TURNS) -> list[Any]:
    history: list[Any] = [{"role": "user", "content": TASK}]
    for _ in range(turns):
        if mode == "stream":
            with api.messages.stream(**kwargs(history)) as stream:
                content = list(stream.get_final_message().content)
        elif mode == "create-stream":
            content = [
                event.content_block
                for event in api.messages.create(stream=True, **kwargs(history))
                if event.type == "content_block_start"
            ]
        else:
            content = list(api.messages.create(**kwargs(history)).content)
        step(history, content)
    return history


async def async_loop(api: Any, mode: str, turns: int = TURNS) -> list[Any]:
    history: list[Any] = [{"role": "user", "content": TASK}]
    for _ in range(turns):
        if mode == "stream":
            async with api.messages.stream(**kwargs(history)) as stream:
                content = list((await stream.get_final_message()).content)
        elif mode == "create-stream":
            events = await api.messages.create(stream=True, **kwargs(history))
            content = [e.content_block async for e in events if e.type == "content_block_start"]
        else:
            content = list((await api.messages.create(**kwargs(history))).content)
        step(history, content)
    return history


def check_overflow(caught: Any, standin: Standin) -> None:
    error = caught.value
    assert error.status_code == 400
    assert error.body["type"] == "error"
    assert error.body["error"]["type"] == "invalid_request_error"
    assert error.body["error"]["message"].startswith("prompt is too long")
    assert standin.refused == 1


@pytest.mark.parametrize("mode", MODES)
def test_a_long_loop_overflows_unwrapped_and_completes_wrapped(mode: str) -> None:
    standin = Standin(window=WINDOW)
    with serve(standin) as url:
        with pytest.raises(anthropic.BadRequestError) as caught:
            loop(client(url), mode)
        check_overflow(caught, standin)
        standin.refused = 0
        standin.bodies.clear()
        wrapped = wrap(client(url), context_length=WINDOW)
        history = loop(wrapped, mode)
    assert len(standin.bodies) == TURNS and standin.refused == 0
    sent = standin.bodies[-1]["messages"]
    assert len(sent) < len(history)
    assert sent[0] == {"role": "user", "content": TASK}  # the first user message goes
    assert sent[-1]["content"][0]["type"] == "tool_result"  # so does the newest turn
    assert sent[1]["role"] == "assistant"  # whole turns were left out: roles still alternate
    manager = wrapped.ctxwin.fittings[0].managers[MODEL]
    assert manager.messages_read == len(history) - 2  # each message sent estimated once


@pytest.mark.parametrize("mode", MODES)
def test_the_async_client_completes_wrapped(mode: str) -> None:
    standin = Standin(window=WINDOW)
    with serve(standin) as url:
        with pytest.raises(anthropic.BadRequestError) as caught:
            asyncio.run(async_loop(client(url, asynchronous=True), mode))
        check_overflow(caught, standin)
        standin.refused = 0
        standin.bodies.clear()
        asyncio.run(async_loop(wrap(client(url, asynchronous=True), context_length=WINDOW), mode))
    assert len(standin.bodies) == TURNS and standin.refused == 0


@pytest.mark.parametrize("mode", MODES)
def test_usage_is_learned(mode: str) -> None:
    """After a call, the calibration is what the usage the stand-in reported teaches."""
    standin = Standin(window=100_000)
    with serve(standin) as url:
        wrapped = wrap(client(url), context_length=100_000, calibration=1.0, estimator=SEED)
        loop(wrapped, mode, turns=1)
    manager = wrapped.ctxwin.fittings[0].managers[MODEL]
    raw = wrapped.ctxwin.last.raw_tokens_sent
    assert manager.calibration == grow(1.0, raw, standin.prompts[0]) > 1.0


def test_a_floor_that_does_not_fit_raises_before_sending() -> None:
    standin = Standin(window=WINDOW)
    with serve(standin) as url:
        wrapped = wrap(client(url), context_length=WINDOW)
        history = [{"role": "user", "content": FILE * 20}]
        with pytest.raises(ctxwin.ContextTruncated):
            wrapped.messages.create(**kwargs(history))
        with pytest.raises(ctxwin.ContextTruncated):
            wrapped.messages.stream(**kwargs(history))
    assert standin.bodies == []
