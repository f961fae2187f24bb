"""Property tests per wire format: pruning keeps each provider's rules.

Each test draws a transcript shape (turns with optional thinking/reasoning,
text, 0-3 parallel tool calls and their results, follow-up user text, media),
renders it in one wire format, and fits it to a window drawn between "far too
small" and "more than enough". The output must:

* obey that provider's rules, checked here on the raw JSON independently of
  the adapter's own checker;
* be an ordered subsequence of the input's messages (the same objects), with
  everything outside the message list passed through;
* keep the head and the newest turn;
* be within the budget unless even the floor does not fit;
* come back untouched (equal as JSON, key order included) when it fits.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from hypothesis import event, given, settings
from hypothesis import strategies as st

from ctxwin import core
from ctxwin.fitting.pruning import segment
from tests.samples import b64, data_uri, png

IMAGE = png(800, 600, pad=64)
WORDS = "the quick brown fox jumps over a lazy dog and then reads the logs again "


def txt(n: int) -> str:
    return (WORDS * (n // len(WORDS) + 1))[: max(n, 1)]


@dataclass(frozen=True)
class Turn:
    thinking: bool
    text: int | None
    calls: list[tuple[str, int]]
    user: int | None
    media: bool


@dataclass(frozen=True)
class Shape:
    system: int | None
    first: int
    first_media: bool
    turns: list[Turn]
    flag: bool
    """Gemini: calls carry ids; Chat: one-call turns use the legacy function_call shape."""


SIZES = st.integers(0, 900)
TURNS = st.builds(
    Turn,
    thinking=st.booleans(),
    text=st.none() | SIZES,
    calls=st.lists(st.tuples(st.sampled_from(["search", "read", "run"]), SIZES), max_size=3),
    user=st.none() | SIZES,
    media=st.booleans(),
)
SHAPES = st.builds(
    Shape,
    system=st.none() | SIZES,
    first=SIZES,
    first_media=st.booleans(),
    turns=st.lists(TURNS, max_size=8),
    flag=st.booleans(),
)
FRACTION = st.floats(-0.1, 1.2)
"""Where the budget falls: 0 is the floor (head + newest unit), 1 the whole transcript."""
PROPERTY = settings(max_examples=500, deadline=None)


# --- renderers ------------------------------------------------------------------


def anthropic(s: Shape) -> dict[str, Any]:
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": b64(IMAGE)},
    }
    body: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 1000}
    if s.system is not None:
        body["system"] = txt(s.system)
    first: list[Any] = [{"type": "text", "text": txt(s.first)}]
    msgs: list[Any] = [{"role": "user", "content": [*first, image] if s.first_media else first}]
    for t, turn in enumerate(s.turns):
        blocks: list[Any] = []
        if turn.thinking:
            blocks.append({"type": "thinking", "thinking": txt(60), "signature": f"sig{t}"})
        if turn.text is not None or not turn.calls:
            blocks.append({"type": "text", "text": txt(turn.text or 5)})
        ids = [f"toolu_{t}_{k}" for k in range(len(turn.calls))]
        for call_id, (name, _) in zip(ids, turn.calls, strict=True):
            blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": {"q": txt(9)}})
        msgs.append({"role": "assistant", "content": blocks})
        user: list[Any] = []
        for call_id, (_, size) in zip(ids, turn.calls, strict=True):
            content: Any = txt(size)
            if turn.media:
                content = [{"type": "text", "text": txt(size)}, image]
            user.append({"type": "tool_result", "tool_use_id": call_id, "content": content})
        if turn.user is not None or (user == [] and t < len(s.turns) - 1):
            user.append({"type": "text", "text": txt(turn.user or 3)})
        if user:
            msgs.append({"role": "user", "content": user})
    body["messages"] = msgs
    body["tools"] = [
        {"name": n, "input_schema": {"type": "object"}} for n in ("search", "read", "run")
    ]
    return body


def responses(s: Shape) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "gpt-5"}
    if s.system is not None:
        body["instructions"] = txt(s.system)
    first: list[Any] = [{"type": "input_text", "text": txt(s.first)}]
    if s.first_media:
        first.append({"type": "input_image", "image_url": data_uri("image/png", IMAGE)})
    items: list[Any] = [{"role": "user", "content": first}]
    for t, turn in enumerate(s.turns):
        if turn.thinking:
            items.append(
                {
                    "type": "reasoning",
                    "id": f"rs_{t}",
                    "summary": [{"type": "summary_text", "text": txt(50)}],
                }
            )
        if turn.text is not None or not turn.calls:
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": txt(turn.text or 5)}],
                }
            )
        for k, (name, _) in enumerate(turn.calls):
            if name == "run":
                items.append(
                    {
                        "type": "custom_tool_call",
                        "call_id": f"c{t}_{k}",
                        "name": name,
                        "input": txt(12),
                    }
                )
            else:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": f"c{t}_{k}",
                        "name": name,
                        "arguments": "{}",
                    }
                )
        for k, (name, size) in enumerate(turn.calls):
            kind = "custom_tool_call_output" if name == "run" else "function_call_output"
            items.append({"type": kind, "call_id": f"c{t}_{k}", "output": txt(size)})
        if turn.user is not None or t < len(s.turns) - 1:
            content: list[Any] = [{"type": "input_text", "text": txt(turn.user or 3)}]
            if turn.media:
                content.append({"type": "input_image", "image_url": data_uri("image/png", IMAGE)})
            items.append({"role": "user", "content": content})
    body["input"] = items
    body["max_output_tokens"] = 1000
    return body


def gemini(s: Shape) -> dict[str, Any]:
    inline = {"inlineData": {"mimeType": "image/png", "data": b64(IMAGE)}}
    body: dict[str, Any] = {}
    if s.system is not None:
        body["systemInstruction"] = {"parts": [{"text": txt(s.system)}]}
    first: list[Any] = [{"text": txt(s.first)}]
    contents: list[Any] = [{"role": "user", "parts": [*first, inline] if s.first_media else first}]
    for t, turn in enumerate(s.turns):
        parts: list[Any] = []
        if turn.thinking:
            parts.append({"text": txt(60), "thought": True})
        if turn.text is not None or not turn.calls:
            parts.append({"text": txt(turn.text or 5)})
        for k, (name, _) in enumerate(turn.calls):
            call: dict[str, Any] = {"name": name, "args": {"q": txt(9)}}
            if s.flag:
                call["id"] = f"f{t}_{k}"
            parts.append({"functionCall": call})
        contents.append({"role": "model", "parts": parts})
        user: list[Any] = []
        for k, (name, size) in enumerate(turn.calls):
            response: dict[str, Any] = {"name": name, "response": {"out": txt(size)}}
            if s.flag:
                response["id"] = f"f{t}_{k}"
            user.append({"functionResponse": response})
        if turn.media:
            user.append(inline)
        if turn.user is not None or (user == [] and t < len(s.turns) - 1):
            user.append({"text": txt(turn.user or 3)})
        if user:
            contents.append({"role": "user", "parts": user})
    body["contents"] = contents
    body["tools"] = [{"functionDeclarations": [{"name": n} for n in ("search", "read", "run")]}]
    body["generationConfig"] = {"maxOutputTokens": 1000}
    return body


def chat(s: Shape) -> dict[str, Any]:
    msgs: list[Any] = []
    if s.system is not None:
        msgs.append({"role": "developer" if s.flag else "system", "content": txt(s.system)})
    first: list[Any] = [{"type": "text", "text": txt(s.first)}]
    if s.first_media:
        first.append({"type": "image_url", "image_url": {"url": data_uri("image/png", IMAGE)}})
    msgs.append({"role": "user", "content": first})
    for t, turn in enumerate(s.turns):
        text = txt(turn.text or 5) if turn.text is not None or not turn.calls else None
        if s.flag and len(turn.calls) == 1:
            name, size = turn.calls[0]
            msgs.append(
                {
                    "role": "assistant",
                    "content": text,
                    "function_call": {"name": name, "arguments": "{}"},
                }
            )
            msgs.append({"role": "function", "name": name, "content": txt(size)})
        else:
            m: dict[str, Any] = {"role": "assistant", "content": text}
            if turn.calls:
                m["tool_calls"] = [
                    {
                        "id": f"call_{t}_{k}",
                        "type": "function",
                        "function": {"name": n, "arguments": "{}"},
                    }
                    for k, (n, _) in enumerate(turn.calls)
                ]
            msgs.append(m)
            for k, (_, size) in enumerate(turn.calls):
                msgs.append({"role": "tool", "tool_call_id": f"call_{t}_{k}", "content": txt(size)})
        if turn.user is not None or t < len(s.turns) - 1:
            content: list[Any] = [{"type": "text", "text": txt(turn.user or 3)}]
            if turn.media:
                content.append(
                    {"type": "image_url", "image_url": {"url": data_uri("image/png", IMAGE)}}
                )
            msgs.append({"role": "user", "content": content})
    tools = [{"type": "function", "function": {"name": n}} for n in ("search", "read", "run")]
    return {"model": "gpt-4o", "messages": msgs, "tools": tools, "max_tokens": 1000}


# --- provider rules, on the raw JSON ---------------------------------------------


def blocks(m: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    content = m.get("content")
    return [b for b in content if b.get("type") == kind] if isinstance(content, list) else []


def anthropic_rules(out: dict[str, Any]) -> None:
    msgs = out["messages"]
    assert msgs[0]["role"] == "user"
    for j, m in enumerate(msgs):
        if j:
            assert m["role"] != msgs[j - 1]["role"], "user/assistant alternate"
        results = {b["tool_use_id"] for b in blocks(m, "tool_result")}
        if results:
            prev = msgs[j - 1]
            assert prev["role"] == "assistant"
            assert results <= {b["id"] for b in blocks(prev, "tool_use")}
        uses = {b["id"] for b in blocks(m, "tool_use")}
        if uses and j + 1 < len(msgs):
            assert uses <= {b["tool_use_id"] for b in blocks(msgs[j + 1], "tool_result")}
        if blocks(m, "thinking"):
            assert m["role"] == "assistant"


def responses_rules(out: dict[str, Any], body: dict[str, Any]) -> None:
    items = out["input"]
    source = body["input"]
    made: set[str] = set()
    for j, it in enumerate(items):
        kind = it.get("type")
        k = next(n for n, x in enumerate(source) if x is it)
        if kind == "reasoning":
            assert j + 1 < len(items) and items[j + 1] is source[k + 1], "reasoning keeps its item"
        if k and source[k - 1].get("type") == "reasoning":
            assert j and items[j - 1] is source[k - 1], "an item keeps its reasoning"
        if kind in ("function_call", "custom_tool_call"):
            made.add(it["call_id"])
        if kind in ("function_call_output", "custom_tool_call_output"):
            assert it["call_id"] in made


def gemini_rules(out: dict[str, Any]) -> None:
    contents = out["contents"]
    assert contents[0]["role"] == "user"

    def of(c: dict[str, Any], key: str) -> list[dict[str, Any]]:
        return [p[key] for p in c["parts"] if key in p]

    for j, c in enumerate(contents):
        responses_ = of(c, "functionResponse")
        if responses_:
            calls = of(contents[j - 1], "functionCall")
            assert contents[j - 1]["role"] == "model"
            assert sorted(r["name"] for r in responses_) == sorted(x["name"] for x in calls)
            assert [r.get("id") for r in responses_] == [x.get("id") for x in calls]
        if of(c, "functionCall") and j + 1 < len(contents):
            assert len(of(contents[j + 1], "functionResponse")) == len(of(c, "functionCall"))


def chat_rules(out: dict[str, Any]) -> None:
    made: set[str] = set()
    pending: list[str] = []
    for m in out["messages"]:
        for call in m.get("tool_calls") or []:
            made.add(call["id"])
        if m.get("function_call"):
            pending.append(m["function_call"]["name"])
        if m["role"] == "tool":
            assert m["tool_call_id"] in made
        if m["role"] == "function":
            assert m["name"] in pending
            pending.remove(m["name"])


# --- the shared property ----------------------------------------------------------


def check(body: dict[str, Any], key: str, fraction: float, rules: Callable[[Any], None]) -> None:
    transcript = core.load(body)
    view = transcript.view
    full = core.plan(transcript, context_length=10_000_000, max_tokens=0).result
    assert full.fits and full.keep == list(range(len(view.items)))
    floor = core.plan(transcript, context_length=2, max_tokens=0).result.estimated_tokens_after
    target = floor + (full.estimated_tokens - floor) * fraction
    context = max(2, math.ceil(target / 0.97) + 1)
    p = core.plan(transcript, context_length=context, max_tokens=0)
    r = p.result
    out = p.output()
    source = body[key]
    kept = out[key]
    # an ordered subsequence of the same objects; the rest of the body passed through
    assert kept == [source[i] for i in r.keep]
    assert all(kept[n] is source[i] for n, i in enumerate(r.keep))
    assert r.keep == sorted(set(r.keep))
    assert list(out) == list(body)
    assert all(out[k] is body[k] for k in body if k != key)
    # head and newest turn kept
    seg = segment(view.items)
    n = len(view.items)
    assert set(range(seg.head_end)) <= set(r.keep)
    if seg.turn_starts:
        assert set(range(seg.turn_starts[-1], n)) <= set(r.keep)
    # within budget, or the floor itself overflows
    assert r.estimated_tokens_after <= r.budget or r.overflow_at_floor or not r.enforced
    event("fits" if r.fits else "floor overflows" if r.overflow_at_floor else "pruned")
    # provider rules
    rules(out)
    if r.fits:
        fitted, _ = core.prune(body, context_length=context, max_tokens=0)
        assert orjson.dumps(fitted) == orjson.dumps(body)
    elif not r.overflow_at_floor:
        again = core.plan(core.load(out), context_length=context, max_tokens=0).result
        assert not again.pruned


@PROPERTY
@given(SHAPES, FRACTION)
def test_anthropic(shape: Shape, fraction: float) -> None:
    check(anthropic(shape), "messages", fraction, anthropic_rules)


@PROPERTY
@given(SHAPES, FRACTION)
def test_responses(shape: Shape, fraction: float) -> None:
    body = responses(shape)
    check(body, "input", fraction, lambda out: responses_rules(out, body))


@PROPERTY
@given(SHAPES, FRACTION)
def test_gemini(shape: Shape, fraction: float) -> None:
    check(gemini(shape), "contents", fraction, gemini_rules)


@PROPERTY
@given(SHAPES, FRACTION)
def test_chat(shape: Shape, fraction: float) -> None:
    check(chat(shape), "messages", fraction, chat_rules)


SAMPLE = Shape(
    system=10,
    first=10,
    first_media=True,
    turns=[
        Turn(True, 5, [("read", 20), ("run", 30)], 5, True),
        Turn(True, 5, [("search", 9)], None, False),
    ],
    flag=False,
)


def _raises(check_: Callable[[], None]) -> bool:
    try:
        check_()
    except AssertionError:
        return True
    return False


def test_rule_checkers_reject_broken_outputs() -> None:
    a = anthropic(SAMPLE)
    anthropic_rules(a)
    assert _raises(
        lambda: anthropic_rules({**a, "messages": [a["messages"][0], *a["messages"][2:]]})
    )
    r = responses(SAMPLE)
    responses_rules(r, r)
    assert _raises(lambda: responses_rules({**r, "input": [r["input"][0], *r["input"][2:]]}, r))
    g = gemini(SAMPLE)
    gemini_rules(g)
    assert _raises(lambda: gemini_rules({**g, "contents": [g["contents"][0], *g["contents"][2:]]}))
    c = chat(SAMPLE)
    chat_rules(c)
    assert _raises(lambda: chat_rules({**c, "messages": [c["messages"][0], *c["messages"][3:]]}))
