"""Strategies on the recorded corpus: does clearing old tool results keep more of a run?

    python -m fidelity.strategies [--corpus DIR] [--out fidelity/strategies.md]

Every whole conversation of ``../shared/corpus`` (:func:`fidelity.corpus.transcripts`)
with at least two turns is fitted twice to the same budget, with ``drop-turns``
and with ``clear-results,drop-turns``, and the messages each keeps are compared.
The estimator is the default one at its default calibration; both cut at just-fit's
arithmetic (``block=0``: the fewest turns that fit), which the comparison is about.

Two budgets, both derived from the run itself:

* **half**: half the tokens the whole run needs (its estimate) — the issue's
  definition. When that is below the floor (the head plus the newest turn,
  which no step drops), both strategies overflow and keep the same floor;
* **half-droppable**: the floor plus half of what lies above it, so every run
  can be fitted by dropping turns.

Each run where ``clear-results`` keeps no more is put in one bucket: *below
floor* (the budget is under the floor), *nothing clearable* (no result outside
the head, the newest turn and the newest ``keep`` results), or *clearing too
small* (the results it may clear sit in turns that are dropped anyway, or
save less than the next turn needs). Every output is read again and checked
against the provider's rules (``ctxwin.fitting.rules``): ``rule breaks`` counts the
outputs with a problem the input did not have.

Each *clearing too small* run is also checked against an oracle that does not
use the strategy's planner: for every cut that keeps more than ``drop-turns``
does, it clears every result that cut keeps and may clear, writes and reads the
body again and estimates it. ``smaller cut fits`` counts the runs where any
does (a plan within the rules that would keep more); the report also says how
many of these runs have every clearable result in turns that ``drop-turns``
drops anyway, and by how many tokens the next larger set of kept turns misses
the budget with all its clearable results cleared.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ctxwin import core
from ctxwin.fitting.budget import Budget, resolve_spec
from ctxwin.fitting.pruning import drop_options, fit, segment
from ctxwin.fitting.rules import blocking
from ctxwin.fitting.strategy import CLEAR_RESULTS, DROP_TURNS, PLACEHOLDER, Strategy, clearable
from ctxwin.formats.base import RESULT, Part
from ctxwin.formats.base import Path as Path_
from ctxwin.tokens.base import calibrated
from ctxwin.tokens.registry import default_calibration
from fidelity import corpus

BUDGETS = ("half", "half-droppable")
KEEPS = (3, 0)
BETTER, BELOW, NOTHING, SMALL, WORSE = (
    "better",
    "below floor",
    "nothing clearable",
    "clearing too small",
    "worse",
)
BUCKETS = (BETTER, BELOW, NOTHING, SMALL, WORSE)


@dataclass(frozen=True, slots=True)
class Row:
    source: str
    name: str
    budget: str
    keep: int
    bucket: str
    kept_plain: int
    kept_clear: int
    messages: int
    rule_breaks: int
    dropped_anyway: bool = False
    """(clearing too small) every clearable result is in a turn drop-turns drops."""
    smaller_fits: bool = False
    """(clearing too small) the oracle finds a cut keeping more that fits."""
    short_by: int | None = None
    """(clearing too small) how far over the budget the next larger set of kept turns
    is with all its clearable results cleared."""


def _budget(target: int) -> Budget:
    return Budget(resolve_spec(None, context_length=10**9), 0, "flag", 0, max(1, target))


def _breaks(t: core.Transcript, p: core.Plan) -> int:
    """Blocking problems in ``p``'s output that the input did not have."""
    before = {(pr.rule, pr.message) for pr in t.problems()}
    after = core.load(p.output(), t.format, t.estimator).problems()
    return sum(1 for pr in blocking(after) if (pr.rule, pr.message) not in before)


def _oracle(
    t: core.Transcript, found: Sequence[Part], cut: int, budget: int, cal: float
) -> tuple[bool, bool, int | None]:
    """For a run where clearing kept no more than ``drop-turns`` (which kept the items
    from ``cut`` on): whether every clearable result lies before ``cut``, whether any
    cut keeping more fits once every clearable result it keeps is cleared (written,
    read again and estimated), and by how much the nearest such cut misses."""
    view = t.view
    seg = segment(view.items, view.pinned)
    smaller = sorted({c for _, c in drop_options(view, seg) if c < cut})
    over: list[int] = []
    for c in smaller:
        edits: dict[tuple[int, Path_], str | None] = {
            (x.index, x.path): PLACEHOLDER.format(tokens=calibrated(t.estimator.raw(x.cost), cal))
            for x in found
            if x.index >= c
        }
        body = t.adapter.write(
            t.adapter.edit(t.body, edits), [*range(seg.head_end), *range(c, len(view.items))]
        )
        estimate = fit(core.load(body, t.format, t.estimator).view, 0, t.estimator, cal)
        over.append(estimate.estimated_tokens - budget)
    return (
        all(x.index < cut for x in found),
        any(o <= 0 for o in over),
        over[-1] if over else None,
    )


def measure(root: Path) -> tuple[list[Row], dict[str, float]]:
    rows: list[Row] = []
    shares: dict[str, list[float]] = {}
    floors: list[float] = []
    for sample in corpus.transcripts(root):
        t = core.load(sample.body)
        view = t.view
        seg = segment(view.items)
        if seg.turn_count() < 2:
            continue
        cal = default_calibration(t.estimator.name, view.model)
        need = fit(view, 0, t.estimator, cal).estimated_tokens
        floor = fit(view, 1, t.estimator, cal).estimated_tokens_after
        floors.append(floor / need if need else 0.0)
        targets = {"half": need // 2, "half-droppable": floor + (need - floor) // 2}
        parts = t.adapter.parts(t.body, view, t.estimator)
        result_cost = sum(
            calibrated(t.estimator.raw(p.cost), cal) for p in parts if p.kind == RESULT
        )
        shares.setdefault(sample.source, []).append(result_cost / need if need else 0.0)
        for name, target in targets.items():
            budget = _budget(target)
            plain = core.fit_plan(t, budget, cal, Strategy(block=0))
            for keep in KEEPS:
                strategy = Strategy((CLEAR_RESULTS, DROP_TURNS), keep_results=keep, block=0)
                p = core.fit_plan(t, budget, cal, strategy)
                a, c = len(plain.result.keep), len(p.result.keep)
                if c > a:
                    bucket = BETTER
                elif c < a:
                    bucket = WORSE
                elif plain.result.overflow_at_floor:
                    bucket = BELOW
                else:
                    found = clearable(t.body, view, t.adapter, t.estimator, cal, strategy)
                    bucket = SMALL if found else NOTHING
                oracle: tuple[bool, bool, int | None] = (False, False, None)
                if bucket == SMALL:
                    oracle = _oracle(t, found, plain.result.cut, budget.budget, cal)
                rows.append(
                    Row(
                        sample.source,
                        sample.name,
                        name,
                        keep,
                        bucket,
                        a,
                        c,
                        len(view.items),
                        _breaks(t, p) + _breaks(t, plain),
                        *oracle,
                    )
                )
    medians = {s: statistics.median(v) for s, v in shares.items()}
    medians["(floor)"] = statistics.median(floors) if floors else 0.0
    return rows, medians


def report(rows: Sequence[Row], medians: dict[str, float]) -> str:
    runs = len({(r.source, r.name) for r in rows})
    lines = [
        "# Strategies on the recorded corpus",
        "",
        "Written by `python -m fidelity.strategies` (see its docstring for the method). "
        f"{runs} multi-turn runs (two turns or more) of `../shared/corpus`; per budget and "
        "`--keep-results`, how many runs `clear-results,drop-turns` keeps strictly more "
        "messages of than `drop-turns`, and why the others keep the same.",
        "",
        "| budget | keep-results | " + " | ".join(BUCKETS) + " | rule breaks |",
        "|---|---:|" + "---:|" * (len(BUCKETS) + 1),
    ]
    for budget in BUDGETS:
        for keep in KEEPS:
            sel = [r for r in rows if r.budget == budget and r.keep == keep]
            counts = Counter(r.bucket for r in sel)
            cells = [f"{counts[b]}/{len(sel)}" if b == BETTER else str(counts[b]) for b in BUCKETS]
            breaks = sum(r.rule_breaks for r in sel)
            lines.append(f"| {budget} | {keep} | " + " | ".join(cells) + f" | {breaks} |")
    lines += ["", "Per source (budget half, keep-results 3 → better / runs):", ""]
    lines += ["| source | runs | better | below floor | median tool-result share of tokens |"]
    lines += ["|---|---:|---:|---:|---:|"]
    lines.insert(
        4,
        f"The floor (head + newest turn) is a median {medians.get('(floor)', 0.0):.0%} "
        "of a run's tokens.\n",
    )
    for source in sorted({r.source for r in rows}):
        sel = [r for r in rows if r.source == source and r.budget == "half" and r.keep == 3]
        better = sum(1 for r in sel if r.bucket == BETTER)
        below = sum(1 for r in sel if r.bucket == BELOW)
        lines.append(
            f"| {source} | {len(sel)} | {better} | {below} | {medians.get(source, 0.0):.0%} |"
        )
    sel = [r for r in rows if r.budget == "half" and r.keep == 3 and r.bucket == BETTER]
    if sel:
        gain = statistics.median(r.kept_clear - r.kept_plain for r in sel)
        lines += ["", f"Where it keeps more (half, keep 3): median {gain:g} more messages."]
    lines += [
        "",
        "The *clearing too small* runs against the oracle (clear every clearable result a "
        "cut keeping more would keep, write, read again, estimate):",
        "",
        "| budget | keep-results | clearing too small | every clearable result in a dropped "
        "turn | smaller cut fits | next larger cut over by (median tokens) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for budget in BUDGETS:
        for keep in KEEPS:
            sel = [r for r in rows if r.budget == budget and r.keep == keep and r.bucket == SMALL]
            anyway = sum(1 for r in sel if r.dropped_anyway)
            fits = sum(1 for r in sel if r.smaller_fits)
            short = [r.short_by for r in sel if r.short_by is not None]
            median = f"{statistics.median(short):,.0f}" if short else "–"
            lines.append(f"| {budget} | {keep} | {len(sel)} | {anyway} | {fits} | {median} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--corpus", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    root = args.corpus or corpus.corpus_dir()
    if root is None:
        print("no corpus: set CTXWIN_CORPUS or put it at ../shared/corpus", file=sys.stderr)
        return 1
    rows, medians = measure(root)
    text = report(rows, medians)
    if args.out:
        args.out.write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
