"""The structural rules (``ctxwin.fitting.rules``) and how the pruner uses them."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ctxwin import core
from ctxwin.errors import PairingError
from ctxwin.fitting import rules
from ctxwin.fitting.pruning import fit
from ctxwin.tokens.seed import SeedEstimator
from ctxwin.view import ASSISTANT, SYSTEM, TOOL, USER, Item, Problem, View
from tests.hostile_util import transcript


def item(role: str, calls: tuple[str, ...] = (), answers: tuple[str, ...] = ()) -> Item:
    return Item(role, [8, 0, 0], calls, answers)


def view(*items: Item) -> View:
    return View("test", list(items), [0, 0, 0], items_path="messages")


def found(v: View, keep: Sequence[int] | None = None) -> list[tuple[int, str]]:
    return [(p.index, p.rule) for p in rules.generic_problems(v, keep)]


S, U = item(SYSTEM), item(USER)


def a(*calls: str) -> Item:
    return item(ASSISTANT, calls=calls)


def t(call_id: str) -> Item:
    return item(TOOL, answers=(call_id,))


def test_a_clean_transcript_has_no_problems() -> None:
    v = view(S, U, a("c1", "c2"), t("c1"), t("c2"), a(), U, a("c3"), t("c3"), a())
    assert rules.generic_problems(v) == []
    assert rules.problems(v) == []


def test_orphan_result() -> None:
    v = view(S, U, a("c1"), t("c1"), t("c9"))
    assert rules.generic_problems(v) == [
        Problem(
            4,
            "messages[4]",
            "orphan-result",
            "tool result answers call id 'c9', which no earlier message made",
        )
    ]


def test_duplicate_call_id_is_reported_once_per_repeat() -> None:
    v = view(S, U, a("c1"), a("c1"), t("c1"), t("c1"))
    assert found(v) == [(2, "unanswered-call"), (3, "duplicate-call-id"), (5, "duplicate-result")]


def test_reusing_an_answered_call_id_is_advisory() -> None:
    v = view(S, U, a("c1"), t("c1"), a("c1"), t("c1"))
    assert found(v) == [(4, "reused-call-id")]
    assert rules.blocking(rules.generic_problems(v)) == []


def test_duplicate_result() -> None:
    v = view(S, U, a("c1"), t("c1"), t("c1"), a())
    problems = rules.generic_problems(v)
    assert [(p.index, p.rule) for p in problems] == [(4, "duplicate-result")]
    assert problems[0].message == "call id 'c1' was already answered by messages[3]"


def test_unanswered_call_before_a_later_turn() -> None:
    v = view(S, U, a("c1", "c2"), t("c1"), U, a())
    problems = rules.generic_problems(v)
    assert [(p.index, p.rule) for p in problems] == [(2, "unanswered-call")]
    assert problems[0].message == "call id 'c2' gets no result before messages[4]"


def test_an_answer_after_the_next_turn_is_still_unanswered_in_time() -> None:
    v = view(S, U, a("c1"), a(), t("c1"))
    assert found(v) == [(2, "unanswered-call")]


def test_a_call_pending_at_the_end_is_not_a_problem() -> None:
    assert found(view(S, U, a("c1"))) == []
    assert found(view(S, U, a("c1", "c2"), t("c1"))) == []


def test_joined_model_items_keep_calls_pending() -> None:
    """Formats where one response spans several items: calls stay open across them."""
    joined = Item(ASSISTANT, [8, 0, 0], ("c2",), (), joins=True)
    assert found(view(S, U, a("c1"), joined, t("c1"), t("c2"), a())) == []


def test_results_carried_by_a_user_item() -> None:
    """Formats that put tool results in the next user message (e.g. Anthropic)."""
    results = item(USER, answers=("c1", "c2"))
    assert found(view(S, U, a("c1", "c2"), results, a())) == []
    partial = item(USER, answers=("c1",))
    assert found(view(S, U, a("c1", "c2"), partial, a())) == [(2, "unanswered-call")]


def test_keep_checks_the_kept_items_as_one_transcript() -> None:
    v = view(S, U, a("c1"), t("c1"), a("c2"), t("c2"), a())
    assert found(v, [0, 1, 4, 5, 6]) == []
    assert found(v, [0, 1, 3, 4, 5, 6]) == [(3, "orphan-result")]
    assert found(v, [0, 1, 2, 4, 5]) == [(2, "unanswered-call")]


def test_pairing_problems_is_still_importable_from_prune() -> None:
    from ctxwin.fitting.pruning import pairing_problems

    assert pairing_problems is rules.pairing_problems
    v = view(S, U, a("c1"), t("c9"), a("c1"))
    assert [(p.index, p.rule) for p in pairing_problems(v)] == [
        (3, "orphan-result"),
        (4, "duplicate-call-id"),
    ]
    v = view(S, U, a("c1"), t("c1"), a("c1"), t("c1"))
    assert pairing_problems(v) == []


class FlagsEveryUser:
    """A stand-in adapter whose format forbids... every user message after the first."""

    name = "flags-users"

    def problems(self, v: View, keep: Sequence[int]) -> list[Problem]:
        users = [i for i in keep if v.items[i].role == USER]
        return [Problem(i, v.where(i), "no-second-user", "second user message") for i in users[1:]]


def test_adapter_rules_are_merged_in_item_order() -> None:
    v = view(S, U, a("c1"), t("c9"), U, a())
    adapter = FlagsEveryUser()
    problems = rules.problems(v, adapter)  # type: ignore[arg-type]
    assert [(p.index, p.rule) for p in problems] == [
        (2, "unanswered-call"),
        (3, "orphan-result"),
        (4, "no-second-user"),
    ]
    assert rules.problems(v, adapter, [0, 1, 5]) == []  # type: ignore[arg-type]


def test_fit_refuses_when_a_rule_is_broken_and_pruning_is_needed() -> None:
    est = SeedEstimator()
    v = view(S, U, a("c1"), t("c1"), U, a("c2"), t("c2"), a())
    clean = fit(v, 40, est, 1.0)
    assert clean.pruned
    assert rules.generic_problems(v, clean.keep) == []

    strict = FlagsEveryUser().problems
    with pytest.raises(
        PairingError, match=r"messages\[4\]: second user message \[no-second-user\]"
    ):
        fit(v, 40, est, 1.0, strict)
    assert fit(v, 10_000, est, 1.0, strict).fits  # a transcript that fits is never checked


def test_plan_refuses_broken_pairing_and_goes_on_with_advisory_problems() -> None:
    body = transcript()
    body["messages"].insert(6, {"role": "tool", "tool_call_id": "call_404", "content": "?"})
    with pytest.raises(PairingError, match=r"messages\[6\]: .* \[orphan-result\]"):
        core.plan(core.load(body), context_length=4000, max_tokens=0)
    body = transcript()
    body["messages"][5] = {"role": "user", "content": "stop"}  # call_1 never answered
    plan = core.plan(core.load(body), context_length=4000, max_tokens=0)
    assert plan.result.pruned
    assert plan.result.warnings == [
        "messages[4]: call id 'call_1' gets no result before messages[5] [unanswered-call]; "
        "kept as it was (see `ctxwin lint`)"
    ]


def test_advisory_and_blocking_rules() -> None:
    assert sorted(rules.ADVISORY_RULES) == [
        "duplicate-result",
        "reused-call-id",
        "unanswered-call",
    ]
    v = view(S, U, a("c1", "c2"), t("c1"), t("c1"), U, t("c9"))
    found = rules.generic_problems(v)
    assert [p.rule for p in rules.blocking(found)] == ["orphan-result"]
    assert rules.most_telling(found).rule == "orphan-result"
    assert rules.summary(found).endswith("(and 2 more problems)")


def test_one_wording_of_and_more_everywhere() -> None:
    """`lint`'s summary and the pruner's refusal name the rest of the problems the same way,
    with the right plural (they read "(and 2 more)" and "(and 1 more problems)")."""
    from ctxwin.errors import PairingError
    from ctxwin.fitting.pruning import refuse
    from ctxwin.words import and_more, plural

    assert (and_more(0), and_more(1), and_more(2)) == (
        "",
        " (and 1 more problem)",
        " (and 2 more problems)",
    )
    assert (plural(1, "estimate"), plural(1_200, "estimate")) == ("1 estimate", "1,200 estimates")
    two = [p for p in rules.generic_problems(view(S, U, t("c8"), t("c9"))) if p.rule != "x"]
    assert len(two) == 2
    assert rules.summary(two).endswith("(and 1 more problem)")
    with pytest.raises(PairingError) as caught:
        refuse(two)
    assert "(and 1 more problem);" in str(caught.value)
