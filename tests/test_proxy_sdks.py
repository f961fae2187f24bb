"""The real OpenAI and Anthropic SDKs pointed at the proxy: a long agent loop that would
overflow the (fake, local) provider's window completes through it."""

from __future__ import annotations

import itertools
from typing import Any

import anthropic
import openai
import orjson
import pytest

from tests.proxy_support import FakeUpstream, proxied, serve_fake

WINDOW = 8000
TURNS = 40
RESULT = "line of tool output, with numbers 12345 and words\n" * 30  # ~1.5 kB


def openai_loop(base_url: str, turns: int = TURNS) -> list[dict[str, str]]:
    """An agent loop on Chat Completions; every other call streams. The ctxwin headers seen."""
    # Any: the loop builds its messages as plain dicts, as an agent would
    client: Any = openai.OpenAI(api_key="sk-test", base_url=base_url, max_retries=0)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Find the bug."},
    ]
    tools: Any = [{"type": "function", "function": {"name": "read", "parameters": {}}}]
    seen = []
    for turn in range(turns):
        if turn % 2:
            with client.chat.completions.with_streaming_response.create(
                model="gpt-4o",
                messages=messages,
                tools=tools,
                max_tokens=500,
                stream=True,
                stream_options={"include_usage": True},
            ) as raw:
                seen.append(dict(raw.headers))
                chunks = list(raw.parse())
            delta = chunks[0].choices[0].delta
            assert delta.tool_calls is not None
            call = delta.tool_calls[0]
            call_id, name, args = call.id, call.function.name, call.function.arguments
            assert chunks[-1].usage is not None
        else:
            raw_response = client.chat.completions.with_raw_response.create(
                model="gpt-4o",
                messages=messages,
                tools=tools,
                max_tokens=500,
            )
            seen.append(dict(raw_response.headers))
            completion = raw_response.parse()
            calls = completion.choices[0].message.tool_calls
            assert calls is not None
            call = calls[0]
            call_id, name, args = call.id, call.function.name, call.function.arguments
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": args},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": f"{turn}: {RESULT}"})
    return seen


def anthropic_loop(base_url: str, turns: int = TURNS) -> list[dict[str, str]]:
    """An agent loop on Messages; every other call streams. The ctxwin headers seen."""
    client = anthropic.Anthropic(api_key="sk-ant-test", base_url=base_url, max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Find the bug."}]
    seen = []
    for turn in range(turns):
        kwargs: Any = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 500,
            "system": "You are a coding agent.",
            "messages": messages,
            "tools": [{"name": "read", "input_schema": {"type": "object"}}],
        }
        if turn % 2:
            with client.messages.stream(**kwargs) as stream:
                message = stream.get_final_message()
                seen.append(dict(stream.response.headers))
        else:
            raw = client.messages.with_raw_response.create(**kwargs)
            seen.append(dict(raw.headers))
            message = raw.parse()
        block = message.content[0]
        assert block.type == "tool_use"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": block.id, "content": f"{turn}: {RESULT}"}
                ],
            }
        )
    return seen


def test_openai_loop_overflows_without_the_proxy() -> None:
    fake = FakeUpstream(window=WINDOW, ratio=1.3)
    with serve_fake(fake) as upstream, pytest.raises(openai.BadRequestError) as info:
        openai_loop(upstream.url + "/v1")
    assert info.value.code == "context_length_exceeded"


def test_openai_loop_completes_through_the_proxy() -> None:
    fake = FakeUpstream(window=WINDOW, ratio=1.3)
    with proxied(fake, context_length=WINDOW) as (served, proxy, _):
        seen = openai_loop(served.url + "/v1")
    assert len(seen) == TURNS
    assert max(int(h["x-ctxwin-dropped-turns"]) for h in seen) > 0
    assert seen[-1]["x-ctxwin-action"] == "pruned"
    # learned from usage: the fake counts 1.3× ctxwin's raw estimate
    assert float(seen[-1]["x-ctxwin-calibration"]) == pytest.approx(1.3, rel=0.02)
    assert proxy.metrics.counters["pruned"] > 0


def test_anthropic_loop_overflows_without_the_proxy() -> None:
    fake = FakeUpstream(window=WINDOW, ratio=1.5)
    with serve_fake(fake) as upstream, pytest.raises(anthropic.BadRequestError):
        anthropic_loop(upstream.url)


def test_anthropic_loop_completes_through_the_proxy() -> None:
    fake = FakeUpstream(window=WINDOW, ratio=1.5)
    with proxied(fake, context_length=WINDOW) as (served, _, _fake):
        seen = anthropic_loop(served.url)
    assert len(seen) == TURNS
    assert seen[-1]["x-ctxwin-action"] == "pruned"
    assert float(seen[-1]["x-ctxwin-calibration"]) == pytest.approx(1.5, rel=0.02)
    # every forwarded body still starts with the first user message and alternates roles
    for got in fake.received:
        roles = [m["role"] for m in orjson.loads(got.body)["messages"]]
        assert roles[0] == "user"
        assert all(a != b for a, b in itertools.pairwise(roles))


def test_sdk_errors_for_a_floor_overflow_name_ctxwin() -> None:
    with proxied(context_length=WINDOW) as (served, _, fake):
        client = openai.OpenAI(api_key="sk-test", base_url=served.url + "/v1", max_retries=0)
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(
                model="gpt-4o",
                messages=[{"role": "user", "content": "word " * 40_000}],
                max_tokens=500,
            )
        claude = anthropic.Anthropic(api_key="k", base_url=served.url, max_retries=0)
        with pytest.raises(anthropic.BadRequestError) as info2:
            claude.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=500,
                messages=[{"role": "user", "content": "word " * 40_000}],
            )
    assert info.value.code == "context_length_exceeded"
    assert "ctxwin" in str(info.value.message)
    assert "ctxwin" in str(info2.value.message)
    assert fake.received == []


def test_openai_responses_through_the_proxy() -> None:
    fake = FakeUpstream(window=WINDOW)
    items: list[Any] = [{"role": "user", "content": "Find the bug."}]
    for i in range(30):
        args = f'{{"n": {i}}}'
        items.append(
            {"type": "function_call", "call_id": f"c{i}", "name": "read", "arguments": args}
        )
        items.append({"type": "function_call_output", "call_id": f"c{i}", "output": RESULT})
    with proxied(fake, context_length=WINDOW) as (served, _, _fake):
        client = openai.OpenAI(api_key="sk-test", base_url=served.url + "/v1", max_retries=0)
        raw = client.responses.with_raw_response.create(
            model="gpt-4o", input=items, max_output_tokens=500
        )
    response = raw.parse()
    assert response.output[0].type == "function_call"
    assert raw.headers["x-ctxwin-action"] == "pruned"
    sent = orjson.loads(fake.received[-1].body)["input"]
    assert sent[0] == items[0] and sent[-1] == items[-1]
