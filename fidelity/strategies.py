"""Strategies on the recorded corpus: does clearing old tool results keep more of a run?

    python -m fidelity.strategies [--corpus DIR] [--out fidelity/strategies.md]

Every whole conversation of ``../shared/corpus`` (:func:`fidelity.corpus.transcripts`)
with at least two turns is fitted twice to the same budget, with ``drop-turns``
and with ``clear-results,drop-turns``, and the messages each keeps are compared.
The estimator is the default one at its default calibration.

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
against the provider's rules (``ctxwin.rules``): ``rule breaks`` counts the
outputs with a problem the input did not have.
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
from ctxwin.budget import Budget, resolve_spec
from ctxwin.estimate import calibrated, default_calibration
from ctxwin.formats.base import RESULT
from ctxwin.pruning import fit, segment
from ctxwin.rules import blocking
from ctxwin.strategy import CLEAR_RESULTS, DROP_TURNS, Strategy, clearable
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


def _budget(target: int) -> Budget:
    return Budget(resolve_spec(None, context_length=10**9), 0, "flag", 0, max(1, target))


def _breaks(t: core.Transcript, p: core.Plan) -> int:
    """Blocking problems in ``p``'s output that the input did not have."""
    before = {(pr.rule, pr.message) for pr in t.problems()}
    after = core.load(p.output(), t.format, t.estimator).problems()
    return sum(1 for pr in blocking(after) if (pr.rule, pr.message) not in before)


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
            plain = core.fit_plan(t, budget, cal, None)
            for keep in KEEPS:
                strategy = Strategy((CLEAR_RESULTS, DROP_TURNS), keep_results=keep)
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
