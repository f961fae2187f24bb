"""Where a request's tokens go, and what each strategy step could save.

:func:`explain` takes a :class:`~ctxwin.core.Plan` and returns plain data about
its input (:attr:`~ctxwin.core.Plan.source`, before any edit)
(what ``ctxwin estimate --explain`` prints, and adds to its JSON report under
``explain``):

* ``outside_messages``: system prompt or instructions, tool definitions and
  request framing (everything outside the message list);
* ``head`` and ``turns``: the head and each turn (its first message, how many
  messages, its tokens);
* ``largest``: the largest messages;
* ``steps``: per strategy step, what it could save at most on this request
  with the plan's options (``clear-results`` with its ``keep_results`` and
  ``exclude_tools``; ``drop-turns`` everything above the floor;
  ``truncate-results`` at most the results it may cut, less their heads,
  tails and markers).

One arithmetic with the request's estimate, ``overhead + ceil(raw ×
calibration)`` (:class:`~ctxwin.fitting.pruning.Scale`): each part is what it adds to
that estimate, taken in order (outside the messages, the head, each turn), so
``outside_messages + head + turns`` is ``estimated_tokens`` exactly;
``outside_messages`` includes the ``overhead`` learned from usage (a session's
system prompt and tools its file never shows), and ``calibration`` and
``raw_tokens`` say how the raw estimate was scaled. When the estimate is anchored on
the provider's last report (:mod:`ctxwin.fitting.anchor`), ``anchored`` is what it
differs from that arithmetic by (the report's count less the bound's, in the part the
report counted), and ``outside_messages`` carries it. A step's saving is the
estimate less the estimate without what it removes, so it is never more than
what it could remove. ``largest`` rates each message on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from ctxwin.fitting.pruning import segment, superseded_turns
from ctxwin.fitting.strategy import (
    CLEAR_RESULTS,
    CLEAR_THINKING,
    DROP_TURNS,
    PLACEHOLDER,
    TRUNCATE_RESULTS,
    clearable,
)
from ctxwin.formats.base import RESULT, THINKING, Part
from ctxwin.tokens.base import scaled

if TYPE_CHECKING:
    from ctxwin.core import Plan, Transcript

LARGEST = 5
"""How many of the largest messages are listed."""


def _sum(costs: Sequence[Sequence[int]], width: int) -> list[int]:
    total = [0] * width
    for cost in costs:
        for k in range(width):
            total[k] += cost[k]
    return total


def explain(plan: Plan, largest: int = LARGEST) -> dict[str, Any]:
    """Where the tokens of ``plan``'s input go, and what each step of its strategy
    could save."""
    t = plan.source
    view = t.view
    items = view.items
    est = t.estimator
    cal = plan.result.calibration
    width = len(view.base)

    def tokens(cost: Sequence[int]) -> int:
        return scaled(est.raw(cost), cal)

    seg = segment(items, view.pinned)
    starts = [*seg.turn_starts, len(items)]
    running = list(view.base)
    before = tokens(running)

    def part(a: int, b: int) -> int:
        """What items ``[a, b)`` add to the estimate after everything before them."""
        nonlocal before
        for it in items[a:b]:
            for k in range(width):
                running[k] += it.cost[k]
        now = tokens(running)
        added, before = now - before, now
        return added

    outside = plan.result.overhead + before
    head_tokens = part(0, starts[0])
    turns = [
        {"turn": n + 1, "first": view.where(a), "messages": b - a, "tokens": part(a, b)}
        for n, (a, b) in enumerate(pairwise(starts))
    ]
    whole = before

    def saving(cost: Sequence[int]) -> int:
        """What the estimate falls by without ``cost``."""
        return whole - tokens([t - c for t, c in zip(running, cost, strict=True)])

    ranked = sorted(range(len(items)), key=lambda i: tokens(items[i].cost), reverse=True)
    strategy = plan.applied.strategy
    parts = t.adapter.parts(t.body, view, est)
    results = [p for p in parts if p.kind == RESULT and p.index >= seg.head_end]
    cut = [p for p in results if p.text and p.tool not in strategy.exclude_tools]
    newest = seg.turn_starts[-1] if seg.turn_starts else len(items)
    above = [*items[seg.head_end : newest]]
    if view.superseded is not None:  # dropped as one block before any turn
        above += items[slice(*view.superseded)]
    droppable = _sum([it.cost for it in above], width)
    found = clearable(t.body, view, t.adapter, est, cal, strategy)
    saved = {
        CLEAR_RESULTS: (len(found), saving(_sum([_saving(t, p, tokens) for p in found], width))),
        CLEAR_THINKING: _count(
            clearable(t.body, view, t.adapter, est, cal, strategy, THINKING), saving
        ),
        DROP_TURNS: (
            max(len(seg.unit_starts) - 1, 0) + superseded_turns(view),
            saving(droppable),
        ),
        TRUNCATE_RESULTS: (len(cut), saving(_sum([p.cost for p in cut], width))),
    }
    # an estimate anchored on the provider's last report (ctxwin.fitting.anchor) is not the
    # bound's sum: what the report counts beyond it (or the bound's excess, below 0) is
    # put outside the messages, where a session's unseen system prompt and tools are
    # (the parts add up to overhead + whole: each is what it adds after the ones before)
    anchored = plan.result.estimated_tokens - (plan.result.overhead + whole)
    return {
        "estimated_tokens": plan.result.estimated_tokens,
        "outside_messages": outside + anchored,
        "anchored": anchored,
        "head": {"messages": seg.head_end, "tokens": head_tokens},
        "turns": turns,
        "overhead": plan.result.overhead,
        "calibration": cal,
        "raw_tokens": est.raw(running),
        "largest": [
            {"message": view.where(i), "role": items[i].role, "tokens": tokens(items[i].cost)}
            for i in ranked[:largest]
        ],
        "steps": [
            {"step": step, "in_strategy": step in strategy.steps, "items": n, "tokens": tok}
            for step, (n, tok) in saved.items()
        ],
    }


def _saving(t: Transcript, p: Part, tokens: Any) -> list[int]:
    """What clearing ``p`` saves: its content less the placeholder that replaces it."""
    text = PLACEHOLDER.format(tokens=tokens(p.cost))
    placeholder = t.adapter.replaced_cost(p, text, t.estimator)
    return [a - b for a, b in zip(p.cost, placeholder, strict=True)]


def _count(found: Sequence[Any], tokens: Any) -> tuple[int, int]:
    if not found:
        return 0, 0
    width = len(found[0].cost)
    return len(found), tokens(_sum([p.cost for p in found], width))
