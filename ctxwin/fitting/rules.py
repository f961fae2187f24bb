"""Structural rules of a transcript, shared by the pruner's input check and ``ctxwin lint``.

:func:`check` is the one implementation (``fit`` calls it, ``lint`` calls it
through :func:`problems`): the generic tool-call pairing rules below (they
hold in every wire format, on the neutral view), plus the format's own rules
from its adapter's ``problems(view, keep)`` hook (consecutive roles, where a
result must sit, and so on).

Generic rules, by name:

* ``orphan-result``: a tool result answers a call id no earlier item made;
* ``duplicate-call-id``: a call id is made again while an earlier call with
  that id still awaits its result, so a result could answer either;
* ``reused-call-id``: a call id is made again after its earlier call was
  answered. Providers accept this (recorded gpt-4o runs reuse ids across
  turns): a result answers the latest call with its id;
* ``duplicate-result``: a call id is answered twice;
* ``unanswered-call``: a call gets no result before the next turn (a user,
  system or new model item). A call left open at the very end of the
  transcript is the agent's pending step, not a problem.

``orphan-result`` and ``duplicate-call-id`` break tool-call pairing: the
pruner refuses an input that breaks them (or a format's rule) when it must
drop something. The other three are *advisory* (:data:`ADVISORY_RULES`):
``lint`` reports them and the CLI warns, but the pruner goes on, because a
drop unit keeps a call and all its results together (however late they
come), so pruning never makes them worse; the pruner's guard refuses any
problem its output has that the input did not.

Every rule reads the items at ``keep`` (all items when ``None``) as one
transcript, so the same code checks an input and a pruned output. Problems
are listed in item order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from ctxwin.view import TOOL, Problem, View

if TYPE_CHECKING:
    from ctxwin.formats.base import Adapter

GENERIC_RULES = (
    "orphan-result",
    "duplicate-call-id",
    "reused-call-id",
    "duplicate-result",
    "unanswered-call",
)
"""The rules :func:`generic_problems` checks."""

ADVISORY_RULES = frozenset({"reused-call-id", "duplicate-result", "unanswered-call"})
"""Rules reported and warned about, which do not stop the pruner (see above)."""


def _indices(view: View, keep: Sequence[int] | None) -> Sequence[int]:
    return range(len(view.items)) if keep is None else keep


PAIRING_RULES = frozenset({"orphan-result", "duplicate-call-id"})
"""The rules that break tool-call pairing."""


def pairing_problems(view: View, keep: Sequence[int] | None = None) -> list[Problem]:
    """Tool results that answer no call made earlier, and call ids made again while
    an earlier call with the id awaits its result.

    The two rules a pruned transcript must never break (the provider rejects
    both): :func:`generic_problems` restricted to :data:`PAIRING_RULES`.
    Checks the items at ``keep`` (all items when ``None``).
    """
    return [p for p in generic_problems(view, keep) if p.rule in PAIRING_RULES]


def generic_problems(view: View, keep: Sequence[int] | None = None) -> list[Problem]:
    """Every generic rule (see the module docstring), in item order.

    One pass; an item without calls or results costs two attribute reads.
    """
    scan = PairingScan(view)
    scan.feed(_indices(view, keep))
    problems = scan.problems
    problems.sort(key=_index)  # stable: same-index problems keep their order
    return problems


def _index(p: Problem) -> int:
    return p.index


class PairingScan:
    """The generic rules as one left-to-right pass that can be resumed.

    :meth:`feed` reads items in order; :attr:`problems` holds what the items
    read so far break, in the order found (not sorted). Fed ``range(i)`` and
    then ``range(i, j)``, it finds exactly what one pass over ``range(j)``
    finds, so the problems of every prefix of a growing transcript cost one
    pass in all (``ctxwin.fitting.incremental``).
    """

    __slots__ = ("answered", "blocking", "made", "open_ids", "pending", "problems", "view")

    def __init__(self, view: View) -> None:
        self.view = view
        self.made: dict[str, int] = {}
        self.answered: dict[str, int] = {}
        self.pending: dict[str, int] = {}
        """Call id → index of the item that made it, for calls awaiting a result in this turn."""
        self.open_ids: set[str] = set()
        """Call ids made and not answered yet, whatever the turn."""
        self.problems: list[Problem] = []
        self.blocking = 0
        """How many of :attr:`problems` are not advisory."""

    def feed(self, indices: Iterable[int], marks: list[int] | None = None) -> None:
        """Read the items at ``indices`` (ascending, after every index already read);
        after each item, ``marks`` (when given) gets the number of problems found so far."""
        view = self.view
        items = view.items
        where = view.where
        made = self.made
        answered = self.answered
        pending = self.pending
        open_ids = self.open_ids
        problems = self.problems
        add = problems.append
        blocking = 0
        for i in indices:
            item = items[i]
            answers = item.answers
            if answers:
                for call_id in answers:
                    if call_id not in made:
                        blocking += 1
                        add(
                            Problem(
                                i,
                                where(i),
                                "orphan-result",
                                f"tool result answers call id {call_id!r}, "
                                "which no earlier message made",
                            )
                        )
                    elif call_id in answered:
                        add(
                            Problem(
                                i,
                                where(i),
                                "duplicate-result",
                                f"call id {call_id!r} was already answered by "
                                f"{where(answered[call_id])}",
                            )
                        )
                    else:
                        answered[call_id] = i
                    pending.pop(call_id, None)
                    open_ids.discard(call_id)
            if pending and item.role != TOOL and not item.joins:
                # A new turn opens: every call still pending was never answered.
                for call_id, at in pending.items():
                    add(
                        Problem(
                            at,
                            where(at),
                            "unanswered-call",
                            f"call id {call_id!r} gets no result before {where(i)}",
                        )
                    )
                pending.clear()
            calls = item.calls
            if calls:
                for call_id in calls:
                    if call_id in made:
                        if call_id in open_ids:
                            blocking += 1
                            add(
                                Problem(
                                    i,
                                    where(i),
                                    "duplicate-call-id",
                                    f"call id {call_id!r} was already made by "
                                    f"{where(made[call_id])}, which has no result yet",
                                )
                            )
                        else:
                            add(
                                Problem(
                                    i,
                                    where(i),
                                    "reused-call-id",
                                    f"call id {call_id!r} reuses the id of the answered call "
                                    f"in {where(made[call_id])}",
                                )
                            )
                        answered.pop(call_id, None)  # its next result answers this call
                    made[call_id] = i
                    pending[call_id] = i
                    open_ids.add(call_id)
            if marks is not None:
                marks.append(len(problems))
        self.blocking += blocking


FormatRules = Callable[[View, Sequence[int]], list[Problem]]
"""A format's own rules: an adapter's ``problems(view, keep)``."""


def check(
    view: View, format_rules: FormatRules | None = None, keep: Sequence[int] | None = None
) -> list[Problem]:
    """The generic rules plus ``format_rules`` on the items at ``keep``, in item order."""
    found = generic_problems(view, keep)
    if format_rules is not None:
        # At one index, the format's (more specific) problem comes first.
        found = format_rules(view, _indices(view, keep)) + found
        found.sort(key=lambda p: p.index)
    return found


_RANK = {
    "orphan-result": 0,
    "duplicate-call-id": 0,
    "reused-call-id": 2,
    "duplicate-result": 2,
    "unanswered-call": 2,
}


def most_telling(found: Sequence[Problem]) -> Problem:
    """The problem to name when refusing: broken pairing first, then the format's rules,
    then the other generic rules; the earliest within each."""
    return min(found, key=lambda p: (_RANK.get(p.rule, 1), p.index))


def blocking(found: Sequence[Problem]) -> list[Problem]:
    """The problems that stop the pruner: all but the :data:`ADVISORY_RULES`."""
    return [p for p in found if p.rule not in ADVISORY_RULES]


def summary(found: Sequence[Problem]) -> str:
    """One line naming the first problem and how many more there are."""
    from ctxwin.words import and_more  # a message's wording: loaded when one is worded

    return f"{found[0]}{and_more(len(found) - 1)}"


def problems(
    view: View, adapter: Adapter | None = None, keep: Sequence[int] | None = None
) -> list[Problem]:
    """Every structural problem of the items at ``keep``: :func:`check` with ``adapter``'s rules."""
    return check(view, adapter.problems if adapter is not None else None, keep)


__all__ = [
    "ADVISORY_RULES",
    "GENERIC_RULES",
    "PAIRING_RULES",
    "FormatRules",
    "PairingScan",
    "blocking",
    "check",
    "generic_problems",
    "most_telling",
    "pairing_problems",
    "problems",
    "summary",
]
