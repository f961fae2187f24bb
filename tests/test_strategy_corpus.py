"""On the recorded corpus, clearing before dropping never keeps less and never breaks a rule.

The figures themselves (how many runs keep more) are written by
``python -m fidelity.strategies`` to ``fidelity/strategies.md``; this test checks
the promises behind them on every multi-turn run, at both budgets and both
``--keep-results`` settings the report uses, and that where clearing keeps no more
no plan within the rules would (the report's oracle).
"""

from __future__ import annotations

import pytest

from fidelity import corpus
from fidelity.strategies import BELOW, BETTER, BUDGETS, KEEPS, SMALL, WORSE, report
from tests import figures

ROOT = corpus.corpus_dir()


@pytest.mark.skipif(ROOT is None, reason="../shared/corpus is absent")
def test_clearing_never_keeps_less_and_never_breaks_a_rule() -> None:
    assert ROOT is not None
    rows, medians = figures.strategies_measured()  # what make docs reports
    runs = {(r.source, r.name) for r in rows}
    assert len(rows) == len(runs) * len(BUDGETS) * len(KEEPS)
    assert not [r for r in rows if r.bucket == WORSE]
    assert sum(r.rule_breaks for r in rows) == 0
    # a budget above the floor is never "below floor"; clearing more never keeps less
    assert not [r for r in rows if r.budget == "half-droppable" and r.bucket == BELOW]
    by_keep = {(r.source, r.name, r.budget, r.keep): r.kept_clear for r in rows}
    for (source, name, budget, keep), kept in by_keep.items():
        if keep == 3:
            assert by_keep[(source, name, budget, 0)] >= kept
    # where clearing is too small, no cut keeping more fits even with every clearable
    # result it keeps cleared (an oracle that writes, reads again and estimates)
    small = [r for r in rows if r.bucket == SMALL]
    assert small and not [r for r in small if r.smaller_fits]
    assert all(r.short_by is None or r.short_by > 0 for r in small)
    text = report(rows, medians)
    for budget in BUDGETS:
        for keep in KEEPS:
            sel = [r for r in rows if r.budget == budget and r.keep == keep]
            better = sum(1 for r in sel if r.bucket == BETTER)
            assert f"| {budget} | {keep} | {better}/{len(sel)} |" in text
            too_small = [r for r in sel if r.bucket == SMALL]
            anyway = sum(1 for r in too_small if r.dropped_anyway)
            assert f"| {budget} | {keep} | {len(too_small)} | {anyway} | 0 |" in text


@pytest.mark.skipif(ROOT is None, reason="../shared/corpus is absent")
def test_under_the_default_block_cut_clearing_never_keeps_less() -> None:
    """The report measures just-fit's arithmetic (block 0); under the default cut, which
    moves in blocks, clearing before dropping still keeps at least as many messages as
    dropping alone (an edited body is just fitted inside the block the plan chose)."""
    import math

    from ctxwin import core
    from ctxwin.fitting.budget import Budget, resolve_spec
    from ctxwin.fitting.pruning import fit
    from ctxwin.fitting.strategy import DEFAULT_STRATEGY, Strategy
    from ctxwin.runs import read_runs

    assert ROOT is not None
    cases = 0
    for path in sorted((ROOT / "taubench").glob("*.json")):
        for run in read_runs(path.read_bytes())[:60]:
            t = core.load(run.body)
            whole = fit(t.view, 0, t.estimator, 1.15).estimated_tokens
            for share in (0.3, 0.5, 0.7):
                tokens = max(1, math.ceil(whole * share))
                budget = Budget(resolve_spec(None, context_length=10**9), 0, "flag", 0, tokens)
                plain = core.fit_plan(t, budget, 1.15, DEFAULT_STRATEGY)
                for keep in (0, 3):
                    steps = ("clear-results", "drop-turns")
                    cleared = core.fit_plan(t, budget, 1.15, Strategy(steps, keep_results=keep))
                    assert len(cleared.result.keep) >= len(plain.result.keep), (run.name, share)
                    cases += 1
    assert cases >= 300
