"""Property tests of ``ctxwin.repair``, in all four wire formats.

Each test draws a valid transcript shape (see ``test_format_properties``) and
damages it the way trimming and hand edits do: entries dropped, result entries
(or result blocks) dropped, moved, copied, and results for unknown calls added.
Then:

* a valid transcript comes back as the very same object, with no changes;
* the repaired output has no lint problem (``reused-call-id`` aside, which
  providers accept) and obeys the provider's placement rules on the raw JSON;
* repairing the output again changes nothing;
* the input is never modified;
* a refusal names one of the problems a fix would have to guess about.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import orjson
from hypothesis import event, given, settings
from hypothesis import strategies as st

from ctxwin import core
from ctxwin.fitting.repairing import LEFT_AS_IS, RepairError, repair
from tests.test_format_properties import SHAPES, Shape, anthropic, chat, gemini, responses

PROPERTY = settings(max_examples=200, deadline=None)

REFUSALS = ("is made again", "first-is-user", "reasoning-", "a stub would have to make up")
"""What a refusal may be about (see ``ctxwin.fitting.repairing``)."""


def _is_result(fmt: str, entry: Any) -> bool:
    if fmt == "openai-chat":
        return entry.get("role") in ("tool", "function")
    if fmt == "openai-responses":
        return str(entry.get("type", "")).endswith("_call_output")
    return any(_result_block(fmt, b) for b in _blocks(fmt, entry))


def _blocks(fmt: str, entry: Any) -> list[Any]:
    content = entry.get("content" if fmt == "anthropic" else "parts")
    return content if isinstance(content, list) else []


def _result_block(fmt: str, block: Any) -> bool:
    if fmt == "anthropic":
        return bool(block.get("type") == "tool_result")
    return "functionResponse" in block


def _orphan(fmt: str, n: int) -> Any:
    if fmt == "openai-chat":
        return {"role": "tool", "tool_call_id": f"gone_{n}", "content": "lost"}
    if fmt == "openai-responses":
        return {"type": "function_call_output", "call_id": f"gone_{n}", "output": "lost"}
    if fmt == "anthropic":
        block = {"type": "tool_result", "tool_use_id": f"gone_{n}", "content": "lost"}
        return {"role": "user", "content": [block]}
    return {
        "role": "user",
        "parts": [{"functionResponse": {"name": "gone", "id": f"gone_{n}", "response": {}}}],
    }


@st.composite
def damaged(draw: st.DrawFn, render: Callable[[Shape], dict[str, Any]], key: str) -> Any:
    body = render(draw(SHAPES))
    fmt = core.load(body).format
    entries = body[key]
    for n in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["drop", "drop-result", "move", "copy", "orphan", "block"]))
        results = [k for k, e in enumerate(entries) if _is_result(fmt, e)]
        if op == "drop" and len(entries) > 1:
            del entries[draw(st.integers(1, len(entries) - 1))]
        elif op == "drop-result" and results:
            del entries[draw(st.sampled_from(results))]
        elif op == "move" and results:
            entry = entries.pop(draw(st.sampled_from(results)))
            entries.insert(draw(st.integers(1, len(entries))), entry)
        elif op == "copy" and results:
            entry = entries[draw(st.sampled_from(results))]
            entries.insert(draw(st.integers(1, len(entries))), copy.deepcopy(entry))
        elif op == "orphan":
            entries.insert(draw(st.integers(1, len(entries))), _orphan(fmt, n))
        elif op == "block" and results and fmt in ("anthropic", "gemini"):
            k = draw(st.sampled_from(results))
            inner = _blocks(fmt, entries[k])
            hits = [j for j, b in enumerate(inner) if _result_block(fmt, b)]
            j = draw(st.sampled_from(hits))
            key_ = "content" if fmt == "anthropic" else "parts"
            left = [b for i, b in enumerate(inner) if i != j]
            if left:
                entries[k] = {**entries[k], key_: left}
            else:
                del entries[k]
    return body


def _placement(fmt: str, out: Any, key: str) -> None:
    """The provider's placement rules, checked on the raw JSON."""
    entries = out[key]
    if fmt in ("anthropic", "gemini"):
        view = core.load(out, fmt).view
        for i, item in enumerate(view.items):
            if item.answers:
                assert i > 0 and set(item.answers) <= set(view.items[i - 1].calls)
            if item.calls and i + 1 < len(entries):
                assert set(item.calls) <= set(view.items[i + 1].answers)
        return
    if fmt == "openai-chat":
        allowed: set[str] = set()
        for m in entries:
            if m["role"] == "assistant":
                allowed = {c["id"] for c in m.get("tool_calls") or ()}
            elif m["role"] == "tool":
                assert m["tool_call_id"] in allowed, "a tool message follows its call's message"
            elif m["role"] != "function":
                allowed = set()
        return
    made: set[str] = set()
    for it in entries:
        if it.get("type") in ("function_call", "custom_tool_call"):
            made.add(it["call_id"])
        elif str(it.get("type", "")).endswith("_call_output"):
            assert it["call_id"] in made


def check(body: Any, key: str) -> None:
    snapshot = orjson.dumps(body)
    before = core.load(body)
    problems = [p for p in before.problems() if p.rule not in LEFT_AS_IS]
    try:
        out, done = repair(body)
    except RepairError as exc:
        event("refused")
        assert any(r in str(exc) for r in REFUSALS), str(exc)
        assert orjson.dumps(body) == snapshot
        return
    assert orjson.dumps(body) == snapshot, "the input is never modified"
    if not problems:
        event("valid")
        assert out is body and not done.changes
        return
    event("repaired")
    assert done.changes
    after = core.load(out, before.format)
    assert [p for p in after.problems() if p.rule not in LEFT_AS_IS] == []
    _placement(before.format, out, key)
    again, redone = repair(out, before.format)
    assert again is out and not redone.changes, redone
    assert done.messages_after == len(out[key])


@PROPERTY
@given(damaged(anthropic, "messages"))
def test_anthropic(body: Any) -> None:
    check(body, "messages")


@PROPERTY
@given(damaged(responses, "input"))
def test_responses(body: Any) -> None:
    check(body, "input")


@PROPERTY
@given(damaged(gemini, "contents"))
def test_gemini(body: Any) -> None:
    check(body, "contents")


@PROPERTY
@given(damaged(chat, "messages"))
def test_chat(body: Any) -> None:
    check(body, "messages")


@settings(max_examples=100, deadline=None)
@given(SHAPES, st.sampled_from([anthropic, responses, gemini, chat]))
def test_valid_transcripts_are_unchanged(shape: Shape, render: Callable[[Shape], Any]) -> None:
    body = render(shape)
    out, done = repair(body)
    assert out is body and done.changes == ()
