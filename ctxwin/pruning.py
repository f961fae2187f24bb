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
   output breaks no structural rule (``ctxwin.rules``; checked after the fit,
   the generic rules whenever an id links dropped and kept items);
4. the kept estimate is within the budget, or ``overflow_at_floor`` is set;
5. pruning the output again drops nothing.

Estimates come from per-item cost vectors summed once; dropping a unit
subtracts its items' vectors, so fitting is linear in the number of items.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, chain
from operator import attrgetter

from ctxwin.errors import PairingError
from ctxwin.estimate import SEED_CALIBRATION, Estimator, calibrated
from ctxwin.rules import ADVISORY_RULES, blocking, check, most_telling, summary
from ctxwin.rules import pairing_problems as pairing_problems  # re-exported (moved to rules)
from ctxwin.view import ASSISTANT, SYSTEM, USER, Item, Problem, View


@dataclass(frozen=True, slots=True)
class Segments:
    """The head, turns and drop units of a list of items."""

    head_end: int
    """Items ``[0, head_end)`` are the head."""
    turn_starts: list[int]
    """Index of the first item of each turn, ascending."""
    unit_starts: list[int]
    """Index (into ``turn_starts``) of the first turn of each drop unit, ascending."""

    def turn_count(self) -> int:
        return len(self.turn_starts)


def head_end(items: Sequence[Item]) -> int:
    """End of the head: leading system items plus everything through the first user item,
    extended through the results of any call the head makes (a call keeps its results)."""
    n = len(items)
    h = 0
    while h < n and items[h].role == SYSTEM:
        h += 1
    for j in range(h, n):
        if items[j].role == USER:
            h = j + 1
            break
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


def segment(items: Sequence[Item]) -> Segments:
    """Split ``items`` into head, turns and drop units."""
    h = head_end(items)
    n = len(items)
    turn_starts: list[int] = []
    owner: dict[str, int] = {}
    reach: list[int] = []
    turn = -1
    for i in range(h, n):
        item = items[i]
        if turn < 0 or (item.role == ASSISTANT and not item.joins):
            turn += 1
            turn_starts.append(i)
            reach.append(turn)
        for call_id in item.calls:
            owner[call_id] = turn
        for call_id in item.answers:
            made_in = owner.get(call_id)
            if made_in is not None and made_in < turn and reach[made_in] < turn:
                reach[made_in] = turn
    unit_starts: list[int] = []
    t = 0
    count = len(turn_starts)
    while t < count:
        unit_starts.append(t)
        end = reach[t]
        t += 1
        while t <= end:
            if reach[t] > end:
                end = reach[t]
            t += 1
    return Segments(h, turn_starts, unit_starts)


Rules = Callable[[View, Sequence[int]], list[Problem]]
"""A format's own structural rules: the problems among the items at the given indices."""


@dataclass(frozen=True, slots=True)
class FitResult:
    """What fitting a transcript to a budget did, or would do."""

    keep: list[int]
    """Indices of the kept items, ascending."""
    dropped: list[int]
    """Indices of the dropped items, ascending."""
    estimated_tokens: int
    """Estimate of the input as given."""
    estimated_tokens_after: int
    """Estimate of the kept items."""
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
    """False when the budget was not positive and nothing was checked."""
    raw_tokens: int = 0
    """Uncalibrated estimate of the input."""
    warnings: list[str] = field(default_factory=list)
    overhead: int = 0
    """Tokens the provider counts that the body does not show (learned from usage),
    included in the estimates above."""


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
    kept ones, so the generic rules (``ctxwin.rules``) find on the kept items
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
    broken = blocking(problems)
    if broken:
        first = most_telling(broken)
        more = f" (and {len(broken) - 1} more problems)" if len(broken) > 1 else ""
        raise PairingError(
            f"{first.message} [{first.rule}]{more}; refusing to prune a transcript that "
            "already breaks the provider's rules (list them with `ctxwin lint`)",
            first.where,
        )
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
    floor: int | None = None,
) -> FitResult:
    """Drop the oldest drop units of ``view`` until its estimate is within ``budget``.

    Raises :class:`~ctxwin.errors.PairingError` when pruning is needed but the
    input already breaks a structural rule (the generic ones of
    ``ctxwin.rules`` plus the format's ``rules``; a transcript that fits is
    never checked or changed), and when the output would break one. Never
    raises for an overflow at the floor: the result says ``overflow_at_floor``.
    With ``drop=False`` nothing is dropped: the whole transcript is the floor.

    The estimate after dropping the ``k`` oldest units is non-increasing in
    ``k`` (an estimator's ``raw`` is monotone in every slot), so the fewest
    units that fit are found by binary search over prefix sums of the items'
    cost vectors: C-speed passes over the items, then O(log units) estimates.
    ``overhead`` (tokens the provider adds that the body does not show) is
    added to every estimate; with ``floor``, an estimate is never below
    ``floor + raw`` (see :class:`~ctxwin.calibration.OverheadLearner`).
    """

    def estimate_of(raw: int) -> int:
        scaled = overhead + calibrated(raw, calibration)
        return scaled if floor is None else max(scaled, floor + raw)

    items = view.items
    n = len(items)
    columns = cost_columns(view)
    total = total_cost(view, columns)
    raw = estimator.raw(total)
    estimate = estimate_of(raw)
    if budget <= 0 or estimate <= budget:
        enforced = budget > 0
        return FitResult(
            keep=list(range(n)),
            dropped=[],
            estimated_tokens=estimate,
            estimated_tokens_after=estimate,
            budget=budget,
            calibration=calibration,
            fits=enforced,
            pruned=False,
            overflow_at_floor=False,
            dropped_turns=0,
            kept_turns=segment(items).turn_count(),
            enforced=enforced,
            raw_tokens=raw,
            warnings=[]
            if enforced
            else [f"budget is {budget} tokens (not positive): passing the transcript through"],
            overhead=overhead if floor is None else floor,
        )
    problems = refuse_broken(view, rules)
    seg = segment(items)
    turns = seg.turn_starts
    # cuts[k]: first kept item after the head when the k oldest units are dropped
    cuts = [seg.head_end] + [turns[u] for u in seg.unit_starts[1:]] if drop else [seg.head_end]
    # prefix[slot][i]: cost of items [0, i); dropping the k oldest units removes
    # items [head_end, cuts[k]).
    prefix = [[0, *accumulate(col)] for col in columns]
    start = seg.head_end

    def after(k: int) -> int:
        c = cuts[k]
        kept = [t - p[c] + p[start] for t, p in zip(total, prefix, strict=True)]
        return estimate_of(estimator.raw(kept))

    lo, hi = 0, len(cuts) - 1  # the newest unit is never dropped
    if after(hi) > budget:
        lo = hi
    else:
        while lo < hi:  # smallest k with after(k) <= budget; after(0) > budget
            mid = (lo + hi) // 2
            if after(mid) <= budget:
                hi = mid
            else:
                lo = mid + 1
    k = lo
    cut = cuts[k]
    estimate_after = after(k)
    dropped_turns = seg.unit_starts[k] if k < len(seg.unit_starts) else len(turns)
    keep = [*range(seg.head_end), *range(cut, n)]
    dropped = list(range(seg.head_end, cut))
    if dropped:
        known = {(p.index, p.rule) for p in problems}  # advisory ones, kept as they were
        if _shares_ids(items, start, cut):
            found = check(view, rules, keep)
        else:  # the generic rules cannot find anything new (see _shares_ids)
            found = rules(view, keep) if rules is not None else []
        guard = [p for p in found if p.rule not in ADVISORY_RULES or (p.index, p.rule) not in known]
        if guard:
            first = most_telling(guard)
            raise PairingError(f"pruned transcript would break a rule: {first}", first.where)
    return FitResult(
        keep=keep,
        dropped=dropped,
        estimated_tokens=estimate,
        estimated_tokens_after=estimate_after,
        budget=budget,
        calibration=calibration,
        fits=False,
        pruned=bool(dropped),
        overflow_at_floor=estimate_after > budget,
        dropped_turns=dropped_turns,
        kept_turns=len(turns) - dropped_turns,
        raw_tokens=raw,
        warnings=[f"{summary(problems)}; kept as it was (see `ctxwin lint`)"] if problems else [],
        overhead=overhead if floor is None else floor,
    )
