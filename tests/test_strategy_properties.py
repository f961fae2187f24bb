"""Property tests of the strategy steps (``ctxwin.fitting.strategy``), in all four wire formats.

Each test draws a transcript shape (see ``test_format_properties``), a strategy
(steps in a valid order, ``keep_results``, excluded tools, ``clear_at_least``, the
cut's ``block``)
and a budget between "far too small" and "more than enough". The output must:

* be an ordered subsequence of the input's entries, each the same object
  unless one of its results or thinking blocks was edited;
* keep every call id and every pairing (the output read again has the same
  calls and answers per entry) and obey the provider's rules on the raw JSON;
* keep the head, and the newest turn, untouched (``truncate-results`` aside);
* leave the newest ``keep_results`` results and the excluded tools' results alone;
* be within the budget, or say the floor overflows;
* change nothing when fitted again with the same strategy;
* with the default strategy, be byte for byte what drop-turns alone gives;
* with ``clear-results`` before ``drop-turns``, keep at least as many entries;
* never clear a result its placeholder is not cheaper than (fewer estimated tokens
  and fewer UTF-8 bytes), whatever the result's characters.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import orjson
from hypothesis import event, given, settings
from hypothesis import strategies as st

from ctxwin import core
from ctxwin.fitting.budget import Budget, resolve_spec
from ctxwin.fitting.pruning import fit, segment
from ctxwin.fitting.strategy import (
    CLEARED_PREFIX,
    DEFAULT_STEPS,
    DEFAULT_STRATEGY,
    DROP_TURNS,
    STEPS,
    TRUNCATE_RESULTS,
    Strategy,
)
from ctxwin.formats.base import RESULT
from tests.test_format_properties import (
    SHAPES,
    Shape,
    Turn,
    anthropic,
    anthropic_rules,
    chat,
    chat_rules,
    gemini,
    gemini_rules,
    responses,
    responses_rules,
)
from tests.test_strategy import RENDER, set_results

PROPERTY = settings(max_examples=300, deadline=None)


@st.composite
def strategies(draw: st.DrawFn) -> Strategy:
    editing = [s for s in STEPS if s not in (DROP_TURNS, TRUNCATE_RESULTS)]
    steps = draw(st.permutations(editing))[: draw(st.integers(0, len(editing)))]
    steps = list(steps)
    if draw(st.booleans()):
        steps.insert(draw(st.integers(0, len(steps))), DROP_TURNS)
    if draw(st.booleans()) or not steps:
        steps.append(TRUNCATE_RESULTS)
    return Strategy(
        tuple(steps),
        keep_results=draw(st.integers(0, 4)),
        exclude_tools=frozenset(draw(st.lists(st.sampled_from(["search", "read", "run"])))),
        clear_at_least=draw(st.sampled_from([0, 0, 50, 400])),
        block=draw(st.sampled_from([0.0, 0.0, 0.25, 0.5, 1.0])),
    )


FRACTION = st.floats(-0.1, 1.05)


def _budget(view_estimate: int, floor: int, fraction: float) -> Budget:
    spec = resolve_spec(None, context_length=10**9)
    target = max(1, math.ceil(floor + (view_estimate - floor) * fraction))
    return Budget(spec, 0, "flag", 0, target)


def _pairing(view: Any) -> list[tuple[list[int], list[int]]]:
    """Each entry's calls and answers, ids numbered by first appearance (an id the
    adapter makes up from a position may move when a thinking part goes)."""
    seen: dict[str, int] = {}

    def number(ids: tuple[str, ...]) -> list[int]:
        return [seen.setdefault(i, len(seen)) for i in ids]

    return [(number(x.calls), number(x.answers)) for x in view.items]


def cheaper(x: Any, placeholder: str, t: core.Transcript) -> None:
    """A cleared result's placeholder costs fewer estimated tokens and bytes than it did."""
    est = t.estimator
    assert est.raw(t.adapter.replaced_cost(x, placeholder, est)) < est.raw(x.cost)
    if x.text is not None:
        assert len(placeholder.encode()) < len(x.text.encode("utf-8", "surrogatepass"))


def check(
    body: dict[str, Any],
    key: str,
    strategy: Strategy,
    fraction: float,
    rules: Callable[[Any], None],
) -> None:
    t = core.load(body)
    view = t.view
    n = len(view.items)
    cal = 1.15
    total = fit(view, 0, t.estimator, cal).estimated_tokens
    floor = fit(view, 1, t.estimator, cal).estimated_tokens_after
    budget = _budget(total, floor, fraction)
    p = core.fit_plan(t, budget, cal, strategy)
    r, applied = p.result, p.applied
    out = p.output()
    source, kept = body[key], out[key]
    assert r.keep == sorted(set(r.keep)) and len(kept) == len(r.keep)
    edited = {i for i, _ in applied.edits}
    for pos, i in enumerate(r.keep):
        assert (kept[pos] is source[i]) == (i not in edited)
    assert list(out) == list(body)
    assert all(out[k] is body[k] for k in body if k != key)
    # ids and pairing untouched; provider rules hold on the raw JSON
    again = core.load(out).view
    unedited = core.load(t.write(r.keep)).view
    assert _pairing(again) == _pairing(unedited)
    rules(out)
    # the head kept untouched; the newest turn kept (untouched unless cut)
    seg = segment(view.items)
    assert set(range(seg.head_end)) <= set(r.keep)
    assert not edited & set(range(seg.head_end))
    if seg.turn_starts:
        newest = set(range(seg.turn_starts[-1], n))
        assert newest <= set(r.keep)
        if not applied.truncated_results:
            assert not edited & newest
    # the newest keep_results results and excluded tools' results untouched
    parts = [x for x in t.adapter.parts(body, view, t.estimator) if x.kind == RESULT]
    guarded = parts[len(parts) - strategy.keep_results :] if strategy.keep_results else []
    for x in parts:
        new = applied.edits.get((x.index, x.path), x.text)
        if new is not None and new != x.text and new.startswith(CLEARED_PREFIX):
            cheaper(x, new, t)
        if x.tool in strategy.exclude_tools or (x in guarded and not applied.truncated_results):
            assert (x.index, x.path) not in applied.edits
        if new is not None and new != x.text and not applied.truncated_results:
            assert new.startswith(CLEARED_PREFIX)
    # within budget, or the floor overflows; the estimate is the output's
    assert r.estimated_tokens_after <= r.budget or r.overflow_at_floor
    assert r.estimated_tokens == total
    assert fit(again, 0, t.estimator, cal).estimated_tokens == r.estimated_tokens_after
    event("fits" if r.fits else "floor overflows" if r.overflow_at_floor else "fitted")
    event(f"cleared {min(applied.cleared_results, 3)}+ truncated {applied.truncated_results}")
    # idempotent
    if not r.overflow_at_floor:
        second = core.fit_plan(core.load(out), budget, cal, strategy)
        assert not second.applied.edits and not second.result.pruned
        assert orjson.dumps(second.output()) == orjson.dumps(out)
    # the default is drop-turns alone, byte for byte
    plain = core.fit_plan(t, budget, cal)
    default = core.fit_plan(t, budget, cal, Strategy(DEFAULT_STEPS, keep_results=0))
    assert orjson.dumps(default.output()) == orjson.dumps(plain.output())
    # fit's own default is just-fit (block 0); the default strategy cuts in blocks
    block = DEFAULT_STRATEGY.block
    found = fit(view, budget.budget, t.estimator, cal, t.adapter.problems, block=block)
    assert plain.result.keep == found.keep
    # clearing before dropping never keeps fewer entries (cutting in the same blocks)
    if strategy.steps[:2] == ("clear-results", DROP_TURNS):
        blocks = core.fit_plan(t, budget, cal, Strategy(DEFAULT_STEPS, block=strategy.block))
        assert len(r.keep) >= len(blocks.result.keep)


@PROPERTY
@given(SHAPES, strategies(), FRACTION)
def test_anthropic(shape: Shape, strategy: Strategy, fraction: float) -> None:
    check(anthropic(shape), "messages", strategy, fraction, anthropic_rules)


@PROPERTY
@given(SHAPES, strategies(), FRACTION)
def test_responses(shape: Shape, strategy: Strategy, fraction: float) -> None:
    body = responses(shape)

    def rules(out: dict[str, Any]) -> None:
        # the raw check finds each kept item by identity: give it the source
        # object of each edited item (an edit changes an output, never the shape)
        by_id = {orjson.dumps(x.get("call_id")): x for x in body["input"]}
        shadow = [
            x if "output" not in x else by_id[orjson.dumps(x["call_id"])] for x in out["input"]
        ]
        responses_rules({**out, "input": shadow}, body)

    check(body, "input", strategy, fraction, rules)


@PROPERTY
@given(SHAPES, strategies(), FRACTION)
def test_gemini(shape: Shape, strategy: Strategy, fraction: float) -> None:
    check(gemini(shape), "contents", strategy, fraction, gemini_rules)


@PROPERTY
@given(SHAPES, strategies(), FRACTION)
def test_chat(shape: Shape, strategy: Strategy, fraction: float) -> None:
    check(chat(shape), "messages", strategy, fraction, chat_rules)


RESULT_TEXT = st.text(st.sampled_from('0123456789abcdefXYZ :/-_.,\n"{}é漢🙂'), max_size=120)


@PROPERTY
@given(st.lists(RESULT_TEXT, min_size=1, max_size=6), st.sampled_from(list(RENDER)))
def test_clearing_never_makes_a_result_dearer(texts: list[str], fmt: str) -> None:
    """Results of any characters, digits and short strings included: each one cleared
    is dearer than its placeholder, by the estimate and in bytes."""
    shape = Shape(
        system=20,
        first=20,
        first_media=False,
        turns=[Turn(False, 5, [("read", 7)], 5, False) for _ in range(len(texts) + 1)],
        flag=True,
    )
    body = RENDER[fmt](shape)
    results = iter(texts)
    set_results(body, lambda: next(results, "x"))
    t = core.load(body)
    p = core.fit_plan(t, _budget(1, 1, 0), 1.15, Strategy(("clear-results",), keep_results=0))
    parts = {(x.index, x.path): x for x in t.adapter.parts(body, t.view, t.estimator)}
    for key, new in p.applied.edits.items():
        assert new is not None
        cheaper(parts[key], new, t)
    event(f"cleared {min(p.applied.cleared_results, 3)}+")
