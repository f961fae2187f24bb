"""Turn-atomic pruning: drop the oldest whole turns until the transcript fits.

Vocabulary, on the items of a :class:`~ctxwin.view.View`:

* **head**: the leading run of system messages plus everything up to and
  including the first user message — extended through the results of any
  call made in it, since a call never loses its results. Never dropped.
* **turn**: after the head, each model item that does not ``join`` the one
  before it opens a turn; every other item joins the open turn (items after
  the head and before any model item form a turn of their own).
* **drop unit**: the smallest run of consecutive turns that no tool result
  outside it refers into, so ``[a1(c1), a2(c2), t1, t2]`` is one unit.

Promises, each guarded by a property test:

1. the output is an ordered subsequence of the input;
2. the head and the unit holding the newest turn are always kept;
3. a call and its results are never split, since only whole units go, and the
   output breaks no structural rule (``ctxwin.fitting.rules``; checked after the fit,
   the generic rules whenever an id links dropped and kept items);
4. the kept estimate is within the budget, or ``overflow_at_floor`` is set;
5. pruning the output again drops nothing.

Estimates come from per-item cost vectors summed once; dropping a unit
subtracts its items' vectors, so fitting is linear in the number of items.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple

from ctxwin.errors import PairingError
from ctxwin.fitting.rules import ADVISORY_RULES, blocking, check, most_telling, summary
from ctxwin.fitting.rules import (
    pairing_problems as pairing_problems,  # re-exported (moved to rules)
)
from ctxwin.tokens.base import SEED_CALIBRATION, Estimator, exact_decimal, scaled
from ctxwin.view import ASSISTANT, SYSTEM, USER, Item, Problem, View

if TYPE_CHECKING:  # re-exported when asked for (moved to ctxwin.fitting.cut, not imported at start)
    from ctxwin.fitting.cut import Kept as Kept
    from ctxwin.fitting.cut import fewest_units as fewest_units
    from ctxwin.fitting.cut import prefix_sums as prefix_sums

_MOVED = frozenset({"Kept", "fewest_units", "prefix_sums"})


def __getattr__(name: str) -> Any:
    """``Kept``, ``fewest_units`` and ``prefix_sums``, from :mod:`ctxwin.fitting.cut`."""
    if name in _MOVED:
        from ctxwin.fitting import cut

        return getattr(cut, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Segments(NamedTuple):
    """The head, turns and drop units of a list of items.

    A NamedTuple: a dataclass would compile its methods at every start.
    """

    head_end: int
    """Items ``[0, head_end)`` are the head."""
    turn_starts: list[int]
    """Index of the first item of each turn, ascending."""
    unit_starts: list[int]
    """Index (into ``turn_starts``) of the first turn of each drop unit, ascending."""

    def turn_count(self) -> int:
        return len(self.turn_starts)


def head_end(items: Sequence[Item], pinned: int = 0) -> int:
    """End of the head: leading system items plus everything through the first user item,
    and at least the first ``pinned`` items (:attr:`~ctxwin.view.View.pinned`), extended
    through the results of any call the head makes (a call keeps its results)."""
    n = len(items)
    h = 0
    while h < n and items[h].role == SYSTEM:
        h += 1
    for j in range(h, n):
        if items[j].role == USER:
            h = j + 1
            break
    h = max(h, min(pinned, n))
    calls = {c for item in items[:h] for c in item.calls}
    if not calls:
        return h
    end = h
    for j in range(h, n):
        if any(c in calls for c in items[j].answers):
            for item in items[end : j + 1]:
                calls.update(item.calls)
            end = j + 1
    return end


def segment(items: Sequence[Item], pinned: int = 0) -> Segments:
    """Split ``items`` into head, turns and drop units (the first ``pinned`` in the head)."""
    h = head_end(items, pinned)
    turn_starts: list[int] = []
    unit_starts: list[int] = []
    scan_turns(items, h, len(items), turn_starts, unit_starts, {}, [])
    return Segments(h, turn_starts, unit_starts)


def scan_turns(
    items: Sequence[Item],
    start: int,
    n: int,
    turn_starts: list[int],
    unit_starts: list[int],
    owner: dict[str, int],
    reach: list[int],
) -> None:
    """Extend a segmentation of the items after the head with ``items[start:n]``.

    A turn starts at an assistant message that does not join the one before it;
    ``turn_starts`` and ``unit_starts`` are :class:`Segments`' lists, ``owner`` maps
    each call id to the turn that made it and ``reach[t]`` is the last turn holding
    a result of a call turn ``t`` made. A result answering an earlier turn merges
    the drop units from that turn's on into one. Empty lists start a segmentation;
    :class:`ctxwin.fitting.incremental.Segmenter` keeps them to extend it as items come.
    """
    turn = len(turn_starts) - 1
    for i in range(start, n):
        item = items[i]
        if turn < 0 or (item.role == ASSISTANT and not item.joins):
            turn += 1
            turn_starts.append(i)
            reach.append(turn)
            unit_starts.append(turn)
        for call_id in item.calls:
            owner[call_id] = turn
        for call_id in item.answers:
            made_in = owner.get(call_id)
            if made_in is not None and made_in < turn and reach[made_in] < turn:
                reach[made_in] = turn
                while unit_starts[-1] > made_in:  # the units in between merge
                    unit_starts.pop()


Rules = Callable[[View, Sequence[int]], list[Problem]]
"""A format's own structural rules: the problems among the items at the given indices."""


_UNPRICED = "the input's estimate is not known: the fit left dropped items unpriced"


@dataclass(frozen=True, slots=True)
class FitResult:
    """What fitting a transcript to a budget did, or would do.

    A fit keeps the head and the newest items: of ``items`` items it keeps
    ``[0, head)`` and ``[cut, items)`` and drops ``[head, cut)``; :attr:`keep`
    and :attr:`dropped` list them (built when read, so a result is O(1) to make).
    """

    head: int
    """Items ``[0, head)`` are kept as the head (0 when nothing is dropped)."""
    cut: int
    """Items ``[head, cut)`` are dropped (``cut == head`` when none is)."""
    items: int
    """Number of items of the input."""
    known_tokens: int | None
    """The input's estimate (:attr:`estimated_tokens`), or ``None`` when it is not known:
    a fit of a lazily read view (``load(..., lazy=True)``, what ``prune`` does) dropped
    items it never priced at the estimator's own price (:attr:`at_least` then bounds it
    from below), or was told not to price a view that fits (``price_input=False``)."""
    estimated_tokens_after: int
    """Estimate of the kept items (only for a lazy fit told not to price what fits,
    ``fit(..., price_input=False)``, that keeps every item: an upper bound of it, with
    :attr:`known_tokens` ``None``)."""
    budget: int
    calibration: float
    fits: bool
    """The input as given is within the budget."""
    pruned: bool
    """Some items were dropped."""
    overflow_at_floor: bool
    """Even head + newest unit exceed the budget."""
    dropped_turns: int
    kept_turns: int
    enforced: bool = True
    """False when the budget was not positive: no prompt fits, :attr:`overflow_at_floor`
    is set and nothing may be sent."""
    known_raw: int | None = 0
    """The input's uncalibrated estimate (:attr:`raw_tokens`), ``None`` when
    :attr:`known_tokens` is."""
    warnings: list[str] = field(default_factory=list)
    overhead: int = 0
    """Tokens the provider counts that the body does not show (learned from usage),
    included in the estimates above."""
    gap: tuple[int, int] | None = None
    """Items ``[start, end)`` inside the head that are dropped too: the block a view marks
    :attr:`~ctxwin.view.View.superseded` (before the latest OpenAI ``compaction`` item)."""
    at_least: int | None = None
    """When :attr:`known_tokens` is ``None`` after a cut: a lower bound of the input's
    estimate (the estimate of the items the fit priced, kept or not)."""

    @property
    def priced(self) -> bool:
        """Whether the input's estimate is known (every fit but a lazy one that left items
        unpriced: see :attr:`known_tokens`)."""
        return self.known_tokens is not None

    @property
    def estimated_tokens(self) -> int:
        """Estimate of the input as given: the same number whichever command or entry
        point fits it. :class:`ValueError` when it is not known (:attr:`priced` is false:
        only for a lazily read view, see :attr:`known_tokens`)."""
        if self.known_tokens is None:
            raise ValueError(_UNPRICED)
        return self.known_tokens

    @property
    def raw_tokens(self) -> int:
        """Uncalibrated estimate of the input (:class:`ValueError` as
        :attr:`estimated_tokens`)."""
        if self.known_raw is None:
            raise ValueError(_UNPRICED)
        return self.known_raw

    @property
    def dropped_at_least(self) -> int:
        """How much lower the estimate of the kept items is than the input's, at least:
        ``estimated_tokens − estimated_tokens_after`` when the input's estimate is known,
        else its lower bound :attr:`at_least` less the kept estimate (0 when neither is)."""
        total = self.known_tokens if self.known_tokens is not None else self.at_least
        return 0 if total is None else total - self.estimated_tokens_after

    @property
    def keep(self) -> list[int]:
        """Indices of the kept items, ascending."""
        if self.gap is not None:
            a, b = self.gap
            return [*range(a), *range(b, self.head), *range(self.cut, self.items)]
        return [*range(self.head), *range(self.cut, self.items)]

    @property
    def dropped(self) -> list[int]:
        """Indices of the dropped items, ascending."""
        if self.gap is not None:
            return [*range(*self.gap), *range(self.head, self.cut)]
        return list(range(self.head, self.cut))

    @property
    def kept_count(self) -> int:
        """How many items are kept."""
        gap = self.gap[1] - self.gap[0] if self.gap is not None else 0
        return self.head - gap + self.items - self.cut


def cost_columns(view: View) -> list[list[int]]:
    """The items' cost vectors as columns: ``columns[k][i]`` is slot ``k`` of item ``i``."""
    items = view.items
    return [[item.cost[k] for item in items] for k in range(len(view.base))]


def total_cost(view: View, columns: list[list[int]] | None = None) -> list[int]:
    """The summed cost vector of the whole request."""
    cols = cost_columns(view) if columns is None else columns
    return [b + sum(col) for b, col in zip(view.base, cols, strict=True)]


def _shares_ids(items: Sequence[Item], start: int, cut: int) -> bool:
    """Whether a call id made or answered in ``items[start:cut]`` is also used outside it.

    When none is, no call, result or repeated id links the dropped items to the
    kept ones, so the generic rules (``ctxwin.fitting.rules``) find on the kept items
    exactly what they found there on the input, which passed them: the guard
    after a fit then only needs the format's own rules. Ids are gathered at C
    speed (``map`` over the items' id tuples).
    """
    dropped = items[start:cut]
    ids = set(chain.from_iterable(map(_calls, dropped)))
    ids.update(chain.from_iterable(map(_answers, dropped)))
    if not ids:
        return False
    for part in (items[:start], items[cut:]):
        if not ids.isdisjoint(chain.from_iterable(map(_calls, part))):
            return True
        if not ids.isdisjoint(chain.from_iterable(map(_answers, part))):
            return True
    return False


_calls = attrgetter("calls")
_answers = attrgetter("answers")


def refuse_broken(view: View, rules: Rules | None) -> list[Problem]:
    """The structural problems of ``view``; :class:`~ctxwin.errors.PairingError` when
    one of them blocks fitting (the input already breaks a provider rule)."""
    problems = check(view, rules)
    refuse(problems)
    return problems


def fit(
    view: View,
    budget: int,
    estimator: Estimator,
    calibration: float = SEED_CALIBRATION,
    rules: Rules | None = None,
    *,
    drop: bool = True,
    overhead: int = 0,
    learned: bool = False,
    block: float = 0.0,
    price_input: bool = True,
) -> FitResult:
    """Drop the oldest drop units of ``view`` until its estimate is within ``budget``.

    A lazily read view (:attr:`~ctxwin.view.View.tighten`) is priced at the estimator's
    own price only where the fit needs it: what it may keep, walking back from the
    newest; dropped items the walk never reached stay unpriced, and the result's
    :attr:`~FitResult.known_tokens` is then ``None`` (:attr:`~FitResult.at_least`
    bounds it). A view that fits at the cheap tier is priced in full, so its estimate is
    known, unless ``price_input`` is false: then nothing more is priced, its
    ``known_tokens`` is ``None`` and ``estimated_tokens_after`` is the cheap upper
    bound (for a caller that reports neither, and only needs the verdict and the cut).

    Raises :class:`~ctxwin.errors.PairingError` when pruning is needed but the
    input already breaks a structural rule (the generic ones of
    ``ctxwin.fitting.rules`` plus the format's ``rules``; a transcript that fits is
    never checked or changed), and when the output would break one. Never
    raises for an overflow at the floor: the result says ``overflow_at_floor``.
    With ``drop=False`` nothing is dropped: the whole transcript is the floor.

    The estimate after dropping the ``k`` oldest units is non-increasing in
    ``k`` (an estimator's ``raw`` is monotone in every slot), so the fewest
    units that fit are found by binary search over prefix sums of the items'
    cost vectors: C-speed passes over the items, then O(log units) estimates.
    ``overhead`` (tokens the provider adds that the body does not show) is
    added to every estimate; with ``learned``, ``calibration`` is a factor learned
    from usage and applies as it is, below 1 too (see
    :class:`~ctxwin.fitting.calibration.OverheadLearner`).
    (``ctxwin.fitting.incremental`` gives the same results for every prefix of a
    growing transcript at O(new items) each.)
    """
    scale = Scale(calibration, overhead, learned)
    items = view.items
    n = len(items)
    columns = cost_columns(view)
    total = total_cost(view, columns)
    raw = estimator.raw(total)
    estimate = scale.estimate(raw)
    seg: Segments | None = None
    unpriced: tuple[int, int] | None = None
    if view.tighten is not None:  # read at a cheap upper bound (a lazy view)
        if budget > 0 and estimate > budget:  # over the budget: price what the fit may keep
            seg = segment(items, view.pinned)
            options = drop_options(view, seg, drop)
            start = seg.head_end
            end = tighten_kept(view, options, start, scale.raw_limit(budget), estimator)
            if end > start:
                unpriced = (start, end)
        elif not price_input and budget > 0:  # it fits, and the caller needs no figure
            turns = segment(items, view.pinned).turn_count()
            fits = passed(n, estimate, budget, scale, turns, raw)
            return replace(fits, known_tokens=None, known_raw=None)
        else:  # it fits: its estimate is the bound's price of every item
            view.tighten(range(n))
        columns = cost_columns(view)
        total = total_cost(view, columns)
        raw = estimator.raw(total)
        estimate = scale.estimate(raw)
    if budget <= 0 or estimate <= budget:
        turns = (seg or segment(items, view.pinned)).turn_count()
        return passed(n, estimate, budget, scale, turns, raw)
    from ctxwin.fitting.cut import Kept, prefix_sums  # here: only a fit that drops needs them

    problems = refuse_broken(view, rules)
    if seg is None:
        seg = segment(items, view.pinned)
        options = drop_options(view, seg, drop)
    start = seg.head_end
    gap = view.superseded
    kept = Kept(total, prefix_sums(columns), start, options, estimator, gap)
    k = kept.stable(scale.raw_limit(budget), block)
    dropped_gap, cut = options[k]
    units = k - 1 if k and options[-1][0] else k  # option 1 drops the superseded block
    result = pruned(
        seg,
        units,
        n,
        scale.estimate(kept.raw(k)),
        estimate,
        budget,
        scale,
        raw,
        problems,
        gap=gap if dropped_gap else None,
        gap_turns=superseded_turns(view) if dropped_gap else 0,
    )
    if unpriced is not None:
        result = _unpriced(result, view, columns, unpriced, estimator, scale)
    if result.pruned:
        if result.gap is not None or _shares_ids(items, start, cut):
            found = check(view, rules, result.keep)
        else:  # the generic rules cannot find anything new (see _shares_ids)
            found = rules(view, result.keep) if rules is not None else []
        guard(found, problems)
    return result


def tighten_kept(
    view: View, options: Sequence[tuple[bool, int]], start: int, limit: int, estimator: Estimator
) -> int:
    """Price at the estimator's own price (:attr:`~ctxwin.view.View.tighten`) the items
    a fit to ``limit`` (a raw estimate) may keep: the head, then the items of each option
    of ``options`` (:func:`drop_options`) walking back from the newest, until what the
    option keeps (with the smallest head any option keeps) is over ``limit``, or all are.
    Returns the first item after the head it priced: the items ``[start, end)`` are left
    at the cheap tier (none when it returns ``start``).

    The cut is then the one pricing every item would give: every option that keeps an
    item still at the cheap price keeps all that the last option walked does, which is
    over ``limit`` at the exact price, and the cheap price is never below it; the options
    that keep less are priced exactly. (What a fit drops is measured for its blocks on
    the cheap tier either way: :meth:`ctxwin.fitting.cut.Kept.dropped`.)"""
    tighten = view.tighten
    if tighten is None:
        return start
    items = view.items
    tighten(range(start))
    gap = view.superseded if options[-1][0] else None
    kept = list(view.base)
    width = len(kept)
    for i in range(start):
        if gap is None or not gap[0] <= i < gap[1]:
            cost = items[i].cost
            for s in range(width):
                kept[s] += cost[s]
    end = len(items)
    for k in range(len(options) - 1, -1, -1):
        c = options[k][1]
        if c < end:
            tighten(range(c, end))
            for i in range(c, end):
                cost = items[i].cost
                for s in range(width):
                    kept[s] += cost[s]
            end = c
        if estimator.raw(kept) > limit:
            return end
    return end


def _unpriced(
    result: FitResult,
    view: View,
    columns: list[list[int]],
    unpriced: tuple[int, int],
    estimator: Estimator,
    scale: Scale,
) -> FitResult:
    """``result`` of a lazy fit that left the items ``[a, b)`` (all of them dropped) at the
    cheap tier: the input's estimate is not known (``known_tokens`` is ``None``); it is at
    least the estimate of the items the fit priced (the head and ``[b, n)``, each at the
    estimator's own price), since an estimator's ``raw`` is monotone in every slot
    (:attr:`FitResult.at_least`)."""
    a, b = unpriced
    priced = [
        base + sum(col[:a]) + sum(col[b:]) for base, col in zip(view.base, columns, strict=True)
    ]
    at_least = scale.estimate(estimator.raw(priced))
    return replace(result, known_tokens=None, known_raw=None, at_least=at_least)


def drop_options(view: View, seg: Segments, drop: bool = True) -> list[tuple[bool, int]]:
    """What a fit may drop, least first: per option, whether the view's superseded block
    goes and the first kept item after the head (the oldest units go first; the
    superseded block, when there is one, goes before any unit)."""
    turns = seg.turn_starts
    cuts = [seg.head_end] + [turns[u] for u in seg.unit_starts[1:]] if drop else [seg.head_end]
    if view.superseded is None or not drop:
        return [(False, c) for c in cuts]
    return [(False, seg.head_end)] + [(True, c) for c in cuts]


def superseded_turns(view: View) -> int:
    """How many turns the superseded block holds (as the items before it would split)."""
    if view.superseded is None:
        return 0
    a, b = view.superseded
    return sum(1 for t in segment(view.items[:b]).turn_starts if t >= a)


class Scale:
    """How a raw estimate becomes the estimate a budget is checked against:
    ``overhead + ceil(raw × calibration)``.

    A calibration from settings below 1 counts as 1 (``calibration`` holds the
    factor applied); a ``learned`` one (the line
    :class:`~ctxwin.fitting.calibration.OverheadLearner` fitted to usage) applies as it is.
    (A plain class, read-only by convention: a dataclass would cost its generated
    code at every start.)
    """

    __slots__ = ("calibration", "fresh", "learned", "overhead")

    def __init__(
        self,
        calibration: float,
        overhead: int = 0,
        learned: bool = False,
        fresh: float | None = None,
    ) -> None:
        self.calibration = calibration if learned or calibration >= 1 else 1.0
        self.overhead = overhead
        self.learned = learned
        self.fresh = max(1.0, self.calibration) if fresh is None else fresh
        """The factor on the bound of content no report has counted, in an estimate
        anchored on a report (:mod:`ctxwin.fitting.anchor`): never below 1 (the bound is
        an upper bound of text)."""

    def estimate(self, raw: int) -> int:
        return self.overhead + scaled(raw, self.calibration)

    def raw_limit(self, budget: int) -> int:
        """The largest raw estimate whose estimate is within ``budget`` (the estimate
        is non-decreasing in the raw one, so ``estimate(raw) <= budget`` exactly
        when ``raw <= raw_limit(budget)``)."""
        room = budget - self.overhead
        numerator, denominator = exact_decimal(self.calibration)
        if numerator == 0:
            return room if room < 0 else 1 << 62
        return (room * denominator) // numerator

    @property
    def reported_overhead(self) -> int:
        """What a result reports as its overhead."""
        return self.overhead


def passed(n: int, estimate: int, budget: int, scale: Scale, turns: int, raw: int) -> FitResult:
    """The result for a transcript of ``n`` items that is kept whole: it fits, or the
    budget is not positive, when no prompt fits and it is an overflow at the floor that
    is not enforced (the caller refuses to send: :class:`~ctxwin.errors.NoBudget`)."""
    return _result(n, estimate, estimate, budget, scale, raw, kept_turns=turns)


def _result(
    n: int,
    estimate: int,
    after: int,
    budget: int,
    scale: Scale,
    raw: int,
    *,
    kept_turns: int,
    head: int = 0,
    cut: int = 0,
    dropped_turns: int = 0,
    problems: Sequence[Problem] = (),
    gap: tuple[int, int] | None = None,
) -> FitResult:
    """The one place a :class:`FitResult` is made (:func:`passed`, :func:`pruned`): of
    ``n`` items estimated at ``estimate``, keeping ``[0, head)`` and ``[cut, n)`` (all
    of them when both are 0), estimated at ``after``. A budget that is not positive is
    not enforced and is an overflow at the floor."""
    enforced = budget > 0
    return FitResult(
        head=head,
        cut=cut,
        items=n,
        known_tokens=estimate,
        estimated_tokens_after=after,
        budget=budget,
        calibration=scale.calibration,
        fits=enforced and estimate <= budget,
        pruned=cut > head or gap is not None,
        overflow_at_floor=not enforced or after > budget,
        dropped_turns=dropped_turns,
        kept_turns=kept_turns,
        enforced=enforced,
        known_raw=raw,
        warnings=[f"{summary(problems)}; kept as it was (see `ctxwin lint`)"] if problems else [],
        overhead=scale.reported_overhead,
        gap=gap,
    )


def refuse(problems: Sequence[Problem]) -> None:
    """Raise :class:`PairingError` when ``problems`` (of an input that must be pruned)
    holds one that blocks fitting."""
    broken = blocking(problems)
    if broken:
        from ctxwin.words import and_more  # a message's wording: loaded when one is worded

        first = most_telling(broken)
        more = and_more(len(broken) - 1)
        raise PairingError(
            f"{first.message} [{first.rule}]{more}; refusing to prune a transcript that "
            "already breaks the provider's rules (list them with `ctxwin lint`)",
            first.where,
        )


def guard(found: Sequence[Problem], problems: Sequence[Problem]) -> None:
    """Raise when the output has a problem (``found``) the input (``problems``) did not."""
    known = {(p.index, p.rule) for p in problems}  # advisory ones, kept as they were
    bad = [p for p in found if p.rule not in ADVISORY_RULES or (p.index, p.rule) not in known]
    if bad:
        first = most_telling(bad)
        raise PairingError(f"pruned transcript would break a rule: {first}", first.where)


def pruned(
    seg: Segments,
    k: int,
    n: int,
    estimate_after: int,
    estimate: int,
    budget: int,
    scale: Scale,
    raw: int,
    problems: Sequence[Problem],
    *,
    gap: tuple[int, int] | None = None,
    gap_turns: int = 0,
) -> FitResult:
    """The result of dropping the ``k`` oldest units of ``seg`` from ``n`` items (and
    the superseded block ``gap`` of ``gap_turns`` turns, when given)."""
    turns = seg.turn_starts
    start = seg.head_end
    cut = turns[seg.unit_starts[k]] if k else start
    dropped_turns = seg.unit_starts[k] if k < len(seg.unit_starts) else len(turns)
    return _result(
        n,
        estimate,
        estimate_after,
        budget,
        scale,
        raw,
        kept_turns=len(turns) - dropped_turns,
        head=start,
        cut=cut,
        dropped_turns=dropped_turns + gap_turns,
        problems=problems,
        gap=gap,
    )
