"""Where a fit cuts: the one search for the fewest oldest units to drop.

A fit (:func:`ctxwin.fitting.pruning.fit`), a growing transcript's fits
(:class:`ctxwin.fitting.incremental.Prefixes`) and the strategies' planner
(:func:`ctxwin.fitting.strategy.plan_edits`) each list what they may drop, least first
(:func:`ctxwin.fitting.pruning.drop_options`); :class:`Kept` prices each option from prefix
sums of the items' costs and :func:`fewest_units` finds the first that fits. The
estimate after dropping more is never larger, so the search is a binary one (galloping
from the previous answer in an agent loop).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxwin.tokens.base import Estimator


def prefix_sums(columns: Sequence[Sequence[int]]) -> list[list[int]]:
    """Per-slot prefix sums of cost columns (:func:`cost_columns`): ``prefix[slot][i]`` is
    the cost of items ``[0, i)`` in that slot."""
    return [[0, *accumulate(col)] for col in columns]


if TYPE_CHECKING:  # a Protocol class costs its creation at every start
    from typing import Protocol

    class Options(Protocol):
        """What a fit may drop, least first (:func:`ctxwin.fitting.pruning.drop_options`'s list,
        or a growing segmentation's own: :class:`ctxwin.fitting.incremental.Prefixes`)."""

        def __len__(self) -> int: ...

        def __getitem__(self, k: int, /) -> tuple[bool, int]: ...


class Kept:
    """The cost a fit keeps when it takes option ``k`` of ``options`` (as
    :func:`~ctxwin.fitting.pruning.drop_options` gives them: whether the superseded block ``gap``
    goes, and the first kept item after the head ``[0, start)``), from per-slot prefix
    sums of the items' costs (:func:`prefix_sums`): O(width) per option.

    The one search for the fewest units to drop (:meth:`fewest`, over
    :func:`fewest_units`) runs on it for :func:`~ctxwin.fitting.pruning.fit`, for
    :class:`ctxwin.fitting.incremental.Prefixes` and for the strategies' planner, which passes
    ``less``: what its editing steps would save on the items from a cut on, taken off
    each option's cost. Raw estimates are remembered per option. (A plain class: a
    dataclass would cost its generated code at every start.)
    """

    __slots__ = (
        "block_raw",
        "estimator",
        "gap",
        "known",
        "less",
        "options",
        "prefix",
        "start",
        "total",
    )

    def __init__(
        self,
        total: Sequence[int],
        prefix: Sequence[Sequence[int]],
        start: int,
        options: Options,
        estimator: Estimator,
        gap: tuple[int, int] | None = None,
        less: Callable[[int], Sequence[int]] | None = None,
    ) -> None:
        self.total = total
        self.prefix = prefix
        self.start = start
        self.options = options
        self.estimator = estimator
        self.gap = gap
        self.less = less
        self.known: dict[int, int] = {}
        self.block_raw: Callable[[Sequence[int]], int] = getattr(
            estimator, "block_raw", estimator.raw
        )
        """What :meth:`dropped` measures a cost in: the estimator's ``block_raw`` when it
        has one (``bound``'s cheap tier: :meth:`ctxwin.tokens.tiered.TieredBound.block_raw`),
        else its raw estimate."""

    def cost(self, k: int) -> list[int]:
        """The summed cost vector of what option ``k`` keeps."""
        dropped_gap, c = self.options[k]
        start = self.start
        kept = [t - p[c] + p[start] for t, p in zip(self.total, self.prefix, strict=True)]
        gap = self.gap
        if dropped_gap and gap is not None:
            a, b = gap
            kept = [t - p[b] + p[a] for t, p in zip(kept, self.prefix, strict=True)]
        return kept

    def raw(self, k: int) -> int:
        """The raw estimate of what option ``k`` keeps (less what ``less`` saves)."""
        raw = self.known.get(k)
        if raw is None:
            cost = self.cost(k)
            if self.less is not None:
                saved = self.less(self.options[k][1])
                cost = [c - s for c, s in zip(cost, saved, strict=True)]
            raw = self.known[k] = self.estimator.raw(cost)
        return raw

    def dropped(self, k: int) -> int:
        """What option ``k`` drops, unedited, in :attr:`block_raw`: the items from the
        head's end to its cut (and the superseded block when it goes). A function of the
        history alone: appending items never changes it, and neither does pricing items
        at the bound's own price (:attr:`ctxwin.view.View.tighten`)."""
        dropped_gap, c = self.options[k]
        start = self.start
        cost = [p[c] - p[start] for p in self.prefix]
        gap = self.gap
        if dropped_gap and gap is not None:
            a, b = gap
            cost = [x + p[b] - p[a] for x, p in zip(cost, self.prefix, strict=True)]
        return self.block_raw(cost)

    def stable(
        self,
        limit: int,
        block: float,
        near: int = 0,
        price: Callable[[int], int] | None = None,
        budget: int = 0,
        size: int = 0,
    ) -> int:
        """The option a cache-stable cut takes: :meth:`fewest` when that drops nothing or
        ``block`` is 0; else the first option that drops at least the next multiple of
        ``block × limit`` raw tokens at or above what :meth:`fewest` drops, short of the
        floor (when no such option is, :meth:`fewest`'s: a cut never empties a request
        to the floor to reach a block). The multiples sit at fixed offsets of the history's cost, so
        consecutive requests of a growing run keep one cut, and the prefix a provider
        caches, until what must go crosses the next one.

        ``price``, when given, is the estimate of each option (non-increasing in it: an
        estimate anchored on the provider's last report, :mod:`ctxwin.fitting.anchor`), and
        the fewest units are those priced within ``budget``; ``limit`` then only sizes the
        blocks. ``size``, when given, is the block in :attr:`block_raw` units itself."""
        if price is None:
            k = self.fewest(limit, near)
        else:
            k = fewest_units(len(self.options), price, budget, near)
        last = len(self.options) - 1
        if k == 0 or block <= 0 or k >= last:
            return k
        size = size or max(1, int(block * limit))
        # the least multiple above what the option before ``k`` drops: the first option
        # reaching it is at or after ``k`` (it fits), and the cut a block reached before
        # stays while it fits (the next multiple would move it while no more must go)
        target = (self.dropped(k - 1) // size + 1) * size
        if self.dropped(last - 1) < target:
            return k  # no block boundary short of the floor: drop what must go, no more
        lo, hi = k, last - 1  # the first option at or after k dropping at least target
        while lo < hi:
            mid = (lo + hi) // 2
            if self.dropped(mid) >= target:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def fewest(self, limit: int, near: int = 0) -> int:
        """The first option whose raw estimate is within ``limit``; the last (the floor)
        when none is (see :func:`fewest_units`)."""
        return fewest_units(len(self.options), self.raw, limit, near)


def fewest_units(cuts: int, after: Callable[[int], int], limit: int, near: int = 0) -> int:
    """The fewest oldest units to drop (``0 .. cuts - 1``) for ``after(k) <= limit``;
    ``cuts - 1`` (the floor) when none is enough. ``after(0)`` is over the limit and
    ``after`` is non-increasing. ``near`` is a guess of the answer (the previous
    call's, in an agent loop): the search gallops out from it, so an answer that
    moved by ``d`` units costs O(log d) estimates."""
    lo, hi = 0, cuts - 1  # the newest unit is never dropped
    if 0 < near < hi and after(near) <= limit:  # the answer is at or below near
        hi = near
        step = 1
        while near - step > 0 and after(near - step) <= limit:
            hi = near - step
            step *= 2
        lo = max(0, near - step)
    else:
        if after(hi) > limit:
            return hi
        if 0 < near < hi:  # the answer is above near
            lo = near + 1
            step = 1
            while near + step < hi and after(near + step) > limit:
                lo = near + step + 1
                step *= 2
            hi = min(hi, near + step)
    while lo < hi:  # smallest k in [lo, hi] with after(k) <= limit; after(lo - 1) > limit
        mid = (lo + hi) // 2
        if after(mid) <= limit:
            hi = mid
        else:
            lo = mid + 1
    return lo
