"""Anchor an estimate on the last count the provider reported.

Every provider response reports the prompt tokens of the request it answers. When the
next request extends that one (the same items first: :class:`~ctxwin.fitting.incremental.Reader`
knows), nothing in that prefix needs estimating again: the next request costs

    ``reported + factor × bound(items added since)``

where the items added since are the model's answer (as it is sent back) and what came
after it, priced by the estimator's bound at the run's factor (the ADR's calibration,
which only grows, or the slope :class:`~ctxwin.fitting.calibration.OverheadLearner`
fits): only what no report has counted is estimated.

After a cut the kept request has no report of its own. Its estimate stays an upper bound
as the report minus a *lower* bound of what the cut drops, plus the bound of what is new:

* a request that was sent whole and reported gives the count of every prefix it ends:
  ``T(e)``, the count of the items ``[0, e)``; a request sent with ``[head, cut)``
  dropped gives ``T(e) = reported + T(cut) − T(head)``. Where a format's messages are
  counted independently of each other (one message's tokens never merge with the next
  one's: OpenAI Chat messages, each wrapped in its role markers), the
  items ``[a, b)`` cost exactly ``T(b) − T(a)``, in every later request too;
* so for a cut at ``c'`` (at or after the reported request's cut ``c``), with ``b`` the
  last boundary at or before ``c'`` whose ``T`` is known, what goes beyond what the report
  already left out is at least ``T(b) − T(c)`` (the items ``[b, c')`` cost 0 or more);
  for a cut before ``c`` what comes back costs at most ``T(c) − T(b)``;
* formats whose earlier turns are counted differently once a later turn is sent (Anthropic
  thinking blocks and Responses reasoning items count in the turn that made them, and
  are stripped later; Gemini's thought signatures ride on the parts of the turn that
  made them) record no boundary: a boundary measured while such content was counted
  would overstate what a later cut drops. Their cuts use the calibrated bound of what is
  kept, as before.

The estimate of a cut option is the lesser of this and the calibrated bound of what it
keeps: both are upper bounds, so their minimum is one, and both fall as the cut moves
later, so the search for the fewest units to drop stays a binary one.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from ctxwin.fitting.budget import SAFETY_PERCENT
from ctxwin.tokens.base import scaled

__all__ = ["ADDITIVE_FORMATS", "Anchor", "unlogged_tokens"]

ADDITIVE_FORMATS = frozenset({"openai-chat"})
"""Formats whose messages a provider counts one by one, the same in every request
that holds them (see the module docstring): their reports give the count of a range
of items."""


def unlogged_tokens(reported: int, predicted: int, safety: int) -> int:
    """By how much ``reported`` exceeds a prediction made from the run's earlier reports,
    when that is more than the safety share of the report (``SAFETY_PERCENT`` %, the
    share the budget keeps of the window) or more than the budget's safety margin
    ``safety``, whichever is less; else 0.

    A prediction made from a report is that report plus the bound of what the file shows
    was added since, at a factor never below the model family's seed: a report further
    above it counted content the file does not record (or that its reader misses).
    """
    short = reported - predicted
    return short if short > min(safety, -((-SAFETY_PERCENT * reported) // 100)) else 0


class Anchor:
    """The last report on one growing item list (one lineage of
    :class:`~ctxwin.fitting.incremental.Prefixes`), and the counts of the item boundaries
    the reports so far have measured.

    ``head``, ``cut`` and ``end``: the reported request kept the items ``[0, head)`` and
    ``[cut, end)`` (``cut == head`` when it was sent whole); ``reported`` is what the
    provider counted for it. (A plain class: a dataclass would compile at every start.)
    """

    __slots__ = ("additive", "cut", "end", "head", "keys", "reported", "values")

    def __init__(self, additive: bool) -> None:
        self.additive = additive
        """Whether the format counts items independently (:data:`ADDITIVE_FORMATS`)."""
        self.head = 0
        self.cut = 0
        self.end = 0
        self.reported = 0
        self.keys: list[int] = []
        """Item boundaries whose count ``T`` is known, ascending."""
        self.values: list[int] = []
        """``T`` at each of :attr:`keys`: the count of a request holding the items before it."""

    def known(self, boundary: int) -> int | None:
        """``T(boundary)``, when a report measured it."""
        keys = self.keys
        j = bisect_right(keys, boundary) - 1
        if j >= 0 and keys[j] == boundary:
            return self.values[j]
        return None

    def _at_or_before(self, boundary: int) -> tuple[int, int] | None:
        """The last known boundary at or before ``boundary`` (not before the head), and
        its ``T``."""
        j = bisect_right(self.keys, boundary) - 1
        if j < 0 or self.keys[j] < self.head:
            return None
        return self.keys[j], self.values[j]

    def _set(self, boundary: int, value: int) -> None:
        keys = self.keys
        j = bisect_right(keys, boundary)
        if j and keys[j - 1] == boundary:
            self.values[j - 1] = value
            return
        if j == len(keys):
            keys.append(boundary)
            self.values.append(value)
        else:
            keys.insert(j, boundary)
            self.values.insert(j, value)
        # a later boundary never counts less than an earlier one
        if j and self.values[j - 1] > value:
            del keys[j], self.values[j]
            return
        while j + 1 < len(keys) and self.values[j + 1] < value:
            del keys[j + 1], self.values[j + 1]

    def record(self, head: int, cut: int, end: int, reported: int) -> None:
        """The provider counted ``reported`` tokens for the request of the items
        ``[0, head)`` and ``[cut, end)``."""
        if head != self.head:
            self.keys.clear()
            self.values.clear()
        self.head, self.cut, self.end, self.reported = head, cut, end, reported
        if not self.additive:
            return
        if cut == head:
            self._set(end, reported)
            return
        t_head, t_cut = self.known(head), self.known(cut)
        if t_head is not None and t_cut is not None:
            self._set(end, reported + t_cut - t_head)

    def estimate(self, cut: int, new: int) -> int | None:
        """An upper bound of a request that keeps ``[0, head)`` and ``[cut, i)`` of this
        lineage (``i >= end``), whose items ``[end, i)`` cost ``new`` (an upper bound
        already: their calibrated bound); ``None`` when no report bounds it (see the
        module docstring)."""
        base = self.reported + new
        c = self.cut
        if cut == c:
            return base
        t_c = self.known(c) if self.additive else None
        if cut > c:
            if t_c is None:
                return base  # what the cut drops costs at least 0
            found = self._at_or_before(cut)
            if found is None or found[0] < c:
                return base
            return base - (found[1] - t_c)
        if t_c is None or cut < self.head:
            return None
        found = self._at_or_before(cut)
        if found is None:
            return None
        return base + (t_c - found[1])

    def moved(self, keep: Sequence[int]) -> Anchor | None:
        """This anchor on the item list of the last request sent, ``keep`` (ascending
        indices into this lineage) continued by new items, when the anchored request is
        that one (else ``None``: its report does not bound the new list)."""
        head, cut, end = self.head, self.cut, self.end
        expected = [*range(head), *range(cut, end)]
        if list(keep) != expected:
            return None
        out = Anchor(self.additive)
        out.head, out.cut, out.end, out.reported = head, head, len(expected), self.reported
        if self.additive:
            t_head, t_cut = self.known(head), self.known(cut)
            if t_head is not None:
                out._set(head, t_head)
            if t_head is not None and t_cut is not None:
                for key, value in zip(self.keys, self.values, strict=True):
                    if cut < key <= end:
                        out._set(head + key - cut, value - t_cut + t_head)
            out._set(out.end, self.reported)
        return out


def new_cost(factor: float, raw_new: int) -> int:
    """What the items no report counted cost: their bound at ``factor``."""
    return scaled(raw_new, factor) if raw_new > 0 else 0
