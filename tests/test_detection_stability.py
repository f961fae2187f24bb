"""Pruning never changes how a transcript is detected.

A message that decides wire-format detection can be dropped: before, an Anthropic body
with ``"tool_calls": false`` (or null, or ``[]``) on one message was read as Chat, its
blocks miscounted; prune dropped that message and the output, read as Anthropic, was
over the budget it claimed to fit. Property: in every format, with such junk fields on
any messages, the pruned output detects as the input's format, and its estimate read
back that way is within the budget.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwin import core
from ctxwin.formats import get_adapter
from tests.test_format_properties import SHAPES, Shape, anthropic, chat, gemini, responses

JUNK: st.SearchStrategy[Any] = st.sampled_from([None, False, 0, "", [], {}])
"""Values of ``tool_calls`` / ``function_call`` that make no call."""

RENDER: dict[str, Callable[[Shape], dict[str, Any]]] = {
    "anthropic": anthropic,
    "openai-responses": responses,
    "gemini": gemini,
    "openai-chat": chat,
}


@settings(max_examples=300, deadline=None)
@given(
    SHAPES,
    st.sampled_from(sorted(RENDER)),
    st.lists(st.tuples(st.integers(0, 40), st.sampled_from(["tool_calls", "function_call"]), JUNK)),
    st.floats(0.0, 1.0),
    st.booleans(),
)
def test_pruned_output_detects_as_the_input(
    shape: Shape, fmt: str, junk: list[tuple[int, str, Any]], fraction: float, bare: bool
) -> None:
    body = RENDER[fmt](shape)
    if bare and fmt == "anthropic":
        # no system, no tools: only the blocks (which dropped turns may take) and the
        # request's model and max_tokens say Anthropic
        body.pop("system", None)
        body.pop("tools")
    key = next(k for k in ("messages", "contents", "input") if k in body)
    entries = body[key]
    for at, field, value in junk:
        if fmt != "openai-chat":  # Chat reads these fields; elsewhere they are unknown keys
            entries[at % len(entries)] = {**entries[at % len(entries)], field: value}
    transcript = core.load(body)
    assert transcript.format == fmt
    whole = core.plan(transcript, context_length=1 << 40, max_tokens=0).result.estimated_tokens
    plan = core.plan(transcript, context_length=int(whole * fraction) + 1, max_tokens=0)
    if plan.result.overflow_at_floor or not plan.result.enforced:
        return
    out = plan.output()
    assert get_adapter(out).name == fmt
    again = core.plan(core.load(out), context_length=int(whole * fraction) + 1, max_tokens=0)
    assert again.result.estimated_tokens <= plan.result.budget


@pytest.mark.parametrize("value", [None, False, 0, "", [], {}])
@pytest.mark.parametrize("field", ["tool_calls", "function_call"])
def test_a_field_that_makes_no_call_does_not_make_a_body_chat(field: str, value: Any) -> None:
    body = anthropic(Shape(system=None, first=10, first_media=False, turns=[], flag=False))
    body["messages"][0] = {**body["messages"][0], field: value}
    assert core.load(body).format == "anthropic"


def test_a_real_call_still_makes_a_body_chat() -> None:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    body: dict[str, Any] = {
        "system": "s",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
        ],
    }
    assert get_adapter(body).name == "openai-chat"
    body["messages"][1] = {"role": "assistant", "content": None, "function_call": {"name": "f"}}
    assert get_adapter(body).name == "openai-chat"


def _plain_turns(body: dict[str, Any]) -> dict[str, Any]:
    turns = [
        {"role": "user", "content": "task"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "r", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]},
        {"role": "assistant", "content": "read it"},
        {"role": "user", "content": "summarise"},
    ]
    return {**body, "messages": turns}


def test_an_anthropic_request_without_its_blocks_stays_anthropic() -> None:
    body = _plain_turns({"model": "claude-sonnet-4-5", "max_tokens": 1000})
    assert get_adapter(body).name == "anthropic"
    out = {**body, "messages": [body["messages"][0], *body["messages"][3:]]}
    assert get_adapter(out).name == "anthropic"  # what pruning the tool turn writes
    for model in ("anthropic.claude-3-5-sonnet-20240620-v1:0", "claude-3-5-sonnet-v2@20241022"):
        assert get_adapter({**out, "model": model}).name == "anthropic"


@pytest.mark.parametrize(
    "change",
    [
        {"model": "anthropic/claude-sonnet-4.5"},  # a router's name: it takes Chat bodies
        {"model": "gpt-4o"},
        {"max_tokens": None},
        {"stop": ["\n"]},
        {"max_completion_tokens": 100},
        {"tools": [{"type": "function", "function": {"name": "f"}}]},
        {"tool_choice": "auto"},
    ],
)
def test_plain_messages_with_a_chat_sign_are_chat(change: dict[str, Any]) -> None:
    plain = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1000,
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
    }
    body = {k: v for k, v in {**plain, **change}.items() if v is not None}
    assert get_adapter(body).name == "openai-chat"
    named = {**plain, "messages": [{"role": "user", "content": "hi", "name": "ann"}]}
    assert get_adapter(named).name == "openai-chat"
    image = {"type": "image_url", "image_url": {"url": "https://x/y.png"}}
    parts = {**plain, "messages": [{"role": "user", "content": [image]}]}
    assert get_adapter(parts).name == "openai-chat"
