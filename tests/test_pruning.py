"""Segmentation, fitting and the pairing guard, on hand-made transcripts."""

from __future__ import annotations

import pytest

from ctxwin.core import load
from ctxwin.errors import PairingError
from ctxwin.fitting.pruning import fit, head_end, pairing_problems, segment
from ctxwin.tokens.seed import SeedEstimator
from tests.builders import Message, assistant, system, tool, user


def items_of(messages: list[Message]):  # type: ignore[no-untyped-def]
    return load(messages, estimator=SeedEstimator()).view.items


def test_head_is_system_run_through_first_user() -> None:
    msgs = [system(), system("dev"), user(), assistant("a"), tool("a")]
    assert head_end(items_of(msgs)) == 3


def test_head_without_user_is_the_system_run() -> None:
    assert head_end(items_of([system(), assistant("a"), tool("a")])) == 1


def test_head_reaches_a_late_first_user() -> None:
    msgs = [system(), assistant(content="hi"), user(), assistant("a"), tool("a")]
    assert head_end(items_of(msgs)) == 3


def test_each_assistant_opens_a_turn_and_others_join() -> None:
    msgs = [system(), user(), assistant("a"), tool("a"), user("more"), assistant("b"), tool("b")]
    seg = segment(items_of(msgs))
    assert seg.turn_starts == [2, 5]
    assert seg.unit_starts == [0, 1]


def test_interleaved_results_make_one_unit() -> None:
    # [a1(c1), a2(c2), t1, t2] is one unit: t1 (in turn 2) answers a call of turn 1.
    msgs = [system(), user(), assistant("c1"), assistant("c2"), tool("c1"), tool("c2")]
    seg = segment(items_of(msgs))
    assert seg.turn_starts == [2, 3]
    assert seg.unit_starts == [0]


def test_units_chain_transitively() -> None:
    msgs = [
        user(),
        assistant("c1"),
        assistant("c2"),
        tool("c1"),
        assistant("c3"),
        tool("c2"),
        tool("c3"),
        assistant("c4"),
        tool("c4"),
    ]
    seg = segment(items_of(msgs))
    assert seg.turn_starts == [1, 2, 4, 7]
    assert seg.unit_starts == [0, 3]


def test_messages_after_head_before_any_assistant_form_a_turn() -> None:
    msgs = [user(), user("again"), assistant("a"), tool("a")]
    seg = segment(items_of(msgs))
    assert seg.turn_starts == [1, 2]


def big_turns(n: int, size: int = 4000) -> list[Message]:
    msgs = [system(), user()]
    for i in range(n):
        msgs += [assistant(f"c{i}"), tool(f"c{i}", "x" * size)]
    return msgs


def test_fits_is_inclusive() -> None:
    view = load(big_turns(3), estimator=SeedEstimator()).view
    est = SeedEstimator()
    exact = fit(view, 10**9, est).estimated_tokens
    result = fit(view, exact, est)
    assert result.fits and not result.pruned
    assert fit(view, exact - 1, est).pruned


def test_drops_oldest_units_first_and_no_more_than_needed() -> None:
    est = SeedEstimator()
    view = load(big_turns(5), estimator=est).view
    one_turn = fit(view, 10**9, est).estimated_tokens // 5
    result = fit(view, one_turn * 3, est)
    assert result.pruned and not result.overflow_at_floor
    assert result.dropped == list(range(2, 2 + 2 * result.dropped_turns))
    assert result.keep[:2] == [0, 1]
    assert result.estimated_tokens_after <= one_turn * 3
    # keeping one more turn would not fit
    assert result.dropped_turns >= 1
    keep_more = [0, 1, *range(result.dropped[-2], len(view.items))]
    body = [load(big_turns(5)).body[i] for i in keep_more]
    assert fit(load(body, estimator=est).view, 10**9, est).estimated_tokens > one_turn * 3


def test_overflow_at_floor_keeps_head_and_newest_turn() -> None:
    est = SeedEstimator()
    view = load(big_turns(4), estimator=est).view
    result = fit(view, 50, est)
    assert result.overflow_at_floor
    assert result.keep == [0, 1, 8, 9]
    assert result.estimated_tokens_after > 50


def test_broken_pairing_is_refused_only_when_pruning_is_needed() -> None:
    est = SeedEstimator()
    msgs = [*big_turns(3), tool("ghost", "boo")]
    view = load(msgs, estimator=est).view
    assert fit(view, 10**9, est).fits  # passes through untouched
    with pytest.raises(PairingError) as err:
        fit(view, 1000, est)
    assert err.value.where == "messages[8]"
    assert "'ghost'" in str(err.value)


def test_a_call_id_made_again_before_its_result_is_a_pairing_problem() -> None:
    msgs = [user(), assistant("a"), assistant("a"), tool("a"), tool("a")]
    problems = pairing_problems(load(msgs).view)
    assert [p.rule for p in problems] == ["duplicate-call-id"]
    assert problems[0].where == "messages[2]"


def test_a_call_id_reused_after_its_result_is_accepted_and_prunable() -> None:
    # Recorded provider-accepted runs reuse ids across turns; a result answers the
    # latest call with its id, so each turn is still its own drop unit.
    est = SeedEstimator()
    msgs = [system(), user()]
    for _ in range(3):
        msgs += [assistant("same"), tool("same", "x" * 4000)]
    view = load(msgs, estimator=est).view
    assert pairing_problems(view) == []
    assert segment(view.items).unit_starts == [0, 1, 2]
    result = fit(view, 2000, est)
    assert result.pruned and not result.overflow_at_floor
    assert result.keep == [0, 1, 6, 7]


def test_result_before_its_call_is_an_orphan() -> None:
    msgs = [user(), tool("a"), assistant("a")]
    problems = pairing_problems(load(msgs).view)
    assert [p.rule for p in problems] == ["orphan-result"]


@pytest.mark.parametrize("budget", [0, -12_600])
def test_non_positive_budget_is_an_overflow_at_the_floor(budget: int) -> None:
    """No prompt fits a budget that is not positive: nothing is dropped, and the fit says
    nothing may be sent (it used to say the transcript passes through)."""
    est = SeedEstimator()
    view = load(big_turns(3), estimator=est).view
    result = fit(view, budget, est)
    assert not result.enforced and not result.pruned and not result.fits
    assert result.overflow_at_floor
    assert result.keep == list(range(8))


def test_empty_transcript() -> None:
    est = SeedEstimator()
    result = fit(load([], estimator=est).view, 100, est)
    assert result.fits and result.keep == []


def test_head_keeps_the_results_of_calls_it_makes() -> None:
    # No system message and an assistant call before the first user message:
    # the call's result (after the user message) joins the head.
    msgs = [assistant("c0"), user(), tool("c0"), assistant("c1"), tool("c1")]
    assert head_end(items_of(msgs)) == 3


def test_head_extension_is_transitive() -> None:
    msgs = [user(), tool("nope")]  # no head calls: unchanged
    assert head_end(items_of(msgs)) == 1
    msgs = [assistant("c0"), user(), assistant("c1"), tool("c0"), tool("c1"), assistant("c2")]
    assert head_end(items_of(msgs)) == 5


def test_shares_ids_sees_every_link_across_the_cut() -> None:
    from ctxwin.fitting.pruning import _shares_ids

    msgs = [system(), user(), assistant("a"), tool("a"), assistant("b"), tool("b")]
    items = items_of(msgs)
    assert not _shares_ids(items, 2, 4)  # drop turn a: nothing links it to b
    assert _shares_ids(items, 2, 3)  # keeps a's result without its call
    assert _shares_ids(items, 3, 4)  # keeps a's call without its result
    reused = items_of([*msgs, assistant("a"), tool("a")])
    assert _shares_ids(reused, 2, 4)  # the id "a" is made again later


def test_the_guard_stops_a_cut_that_splits_a_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """If segmentation ever offered a cut inside a unit, the post-fit guard refuses it."""
    import sys

    from ctxwin.fitting.pruning import Segments

    prune_module = sys.modules["ctxwin.fitting.pruning"]

    big = assistant("a", content="x" * 4000)  # dropping this call alone would fit
    msgs = [system(), user(), big, tool("a"), assistant("b"), tool("b")]
    view = load(msgs, estimator=SeedEstimator()).view
    wrong = Segments(2, [2, 3, 4], [0, 1, 2])  # a "unit" starting at a's result
    monkeypatch.setattr(prune_module, "segment", lambda items, pinned=0: wrong)
    with pytest.raises(PairingError, match=r"would break a rule: .*\[orphan-result\]"):
        fit(view, 400, SeedEstimator(), 1.0)
