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

:func:`attribute` says what fills the same estimate, by kind of content (``by_kind``:
the system prompt, the tool definitions, user and assistant text, thinking, tool calls,
tool results, media, and the overhead: request framing, what usage taught and what an
anchored estimate differs by), by tool (``by_tool``: each tool's calls and results),
and which tool results are the largest. The same arithmetic: each kind is what it adds
after the ones before it, so the kinds sum to ``estimated_tokens`` exactly, and the
tools to ``tool_calls + tool_results``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
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
from ctxwin.formats.base import (
    CALL,
    MEDIA,
    RESULT,
    SYSTEM_PROMPT,
    THINKING,
    TOOL_DEFINITIONS,
    Part,
)
from ctxwin.tokens.base import scaled
from ctxwin.view import ASSISTANT, SYSTEM, TOOL, USER

if TYPE_CHECKING:
    from ctxwin.core import Plan, Transcript
    from ctxwin.fitting.rows import Filling, ToolUse

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


KINDS = (
    "system",
    "tools",
    "user",
    "assistant",
    "thinking",
    "tool_calls",
    "tool_results",
    "media",
    "overhead",
)
"""The kinds of content :func:`attribute` sorts a request's tokens into, in the order the
report lists them (``by_kind``)."""

UNNAMED_TOOL = "(unnamed)"
"""``by_tool``'s name for results whose tool the body does not say."""

_PART_KIND = {
    SYSTEM_PROMPT: "system",
    TOOL_DEFINITIONS: "tools",
    THINKING: "thinking",
    MEDIA: "media",
    CALL: "tool_calls",
    RESULT: "tool_results",
}
_ROLE_KIND = {SYSTEM: "system", USER: "user", ASSISTANT: "assistant", TOOL: "tool_results"}
_ORDER = ("system", "tools", "overhead", "user", "assistant", "thinking", "media")
"""The order in which kinds other than the tools' add to the estimate (then each tool's
calls and results, in the order the body first names the tool)."""


class _Tool:
    __slots__ = ("calls", "calls_cost", "results", "results_cost")

    def __init__(self, width: int) -> None:
        self.calls = self.results = 0
        self.calls_cost = [0] * width
        self.results_cost = [0] * width


def attribute(plan: Plan, largest: int = LARGEST) -> Filling:
    """What fills the estimate of ``plan``'s input (:attr:`~ctxwin.core.Plan.source`):
    ``by_kind`` (each of :data:`KINDS`: tokens), ``by_tool`` (each tool's ``calls``,
    ``results`` and their ``tokens``, the most first) and ``largest_results`` (the
    ``largest`` tool results, each priced on its own, with the message holding it).

    Each entry's pieces come from its adapter (:meth:`~ctxwin.formats.base.Adapter.kinds`);
    what the entry costs beyond them is its role's text (a ``tool`` entry's, its result's).
    The kinds then add to the estimate one after the other, as :func:`explain`'s parts do
    (``overhead + ceil(raw × calibration)``, the anchored difference in ``overhead``), so
    ``sum(by_kind.values())`` is ``estimated_tokens`` and the tools' tokens sum to
    ``tool_calls + tool_results``."""
    t = plan.source
    view = t.view
    est = t.estimator
    cal = plan.result.calibration
    width = len(view.base)

    def tokens(cost: Sequence[int]) -> int:
        return scaled(est.raw(cost), cal)

    pieces: dict[int, list[Part]] = {}
    for p in t.adapter.kinds(t.body, view, est):
        pieces.setdefault(p.index, []).append(p)
    totals = {kind: [0] * width for kind in KINDS}
    tools: dict[str, _Tool] = {}
    results: list[tuple[int, str, list[int]]] = []

    def add(into: list[int], cost: Sequence[int]) -> None:
        for k in range(width):
            into[k] += cost[k]

    def settle(index: int, whole: Sequence[int], rest_kind: str) -> None:
        parts = pieces.get(index, [])
        rest = list(whole)
        for p in parts:
            for k in range(width):
                rest[k] -= p.cost[k]
        if any(r < 0 for r in rest):
            parts = _shared_out(parts, rest)
        named = None
        for p in parts:
            kind = _PART_KIND[p.kind]
            if kind in ("tool_calls", "tool_results"):
                name = p.tool or UNNAMED_TOOL
                tool = tools.setdefault(name, _Tool(width))
                if kind == "tool_calls":
                    tool.calls += 1
                    add(tool.calls_cost, p.cost)
                else:
                    tool.results += 1
                    add(tool.results_cost, p.cost)
                    named = name
                    results.append((index, name, list(p.cost)))
            else:
                add(totals[kind], p.cost)
        if rest_kind == "tool_results":  # a tool entry's own framing: its result's
            name = named or UNNAMED_TOOL
            tool = tools.setdefault(name, _Tool(width))
            if named is None:
                tool.results += 1
                results.append((index, name, rest))
            add(tool.results_cost, rest)
        else:
            add(totals[rest_kind], rest)

    settle(-1, view.base, "overhead")
    for i, item in enumerate(view.items):
        settle(i, item.cost, _ROLE_KIND.get(item.role, "user"))

    running = [0] * width
    before = tokens(running)
    start = before

    def part(cost: Sequence[int]) -> int:
        nonlocal before
        add(running, cost)
        now = tokens(running)
        added, before = now - before, now
        return added

    by_kind = dict.fromkeys(KINDS, 0)
    for kind in _ORDER:
        by_kind[kind] = part(totals[kind])
    by_tool: dict[str, ToolUse] = {}
    for name, tool in tools.items():
        calls = part(tool.calls_cost)
        answers = part(tool.results_cost)
        by_kind["tool_calls"] += calls
        by_kind["tool_results"] += answers
        by_tool[name] = {"calls": tool.calls, "results": tool.results, "tokens": calls + answers}
    # the overhead learned from usage, and what an anchored estimate differs by (explain)
    r = plan.result
    by_kind["overhead"] += start + r.overhead + (r.estimated_tokens - (r.overhead + before))
    ranked = sorted(results, key=lambda x: tokens(x[2]), reverse=True)[:largest]
    return {
        "by_kind": by_kind,
        "by_tool": dict(sorted(by_tool.items(), key=lambda kv: -kv[1]["tokens"])),
        "largest_results": [
            {"message": view.where(i), "tool": name, "tokens": tokens(cost)}
            for i, name, cost in ranked
        ],
    }


def _shared_out(parts: list[Part], rest: list[int]) -> list[Part]:
    """``parts`` with what they cost beyond their entry (``rest``: the entry's cost less
    theirs, negative in some slot) taken off them, the largest first, and ``rest`` set to
    0 there (in place). An entry read as one text can cost less than its pieces priced
    alone (a word that spans two of them, a call's name and arguments measured together),
    so the entry's cost is shared out exactly all the same."""
    costs = [list(p.cost) for p in parts]
    for k, r in enumerate(rest):
        if r >= 0:
            continue
        excess = -r
        for j in sorted(range(len(parts)), key=lambda j: -costs[j][k]):
            take = min(excess, costs[j][k])
            costs[j][k] -= take
            excess -= take
            if not excess:
                break
        rest[k] = -excess  # 0 unless the entry costs less than nothing (never)
    return [replace(p, cost=c) for p, c in zip(parts, costs, strict=True)]
