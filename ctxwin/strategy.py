"""Strategies: the steps taken, in order, until a request fits its budget.

A strategy is a comma-separated list of steps (``--strategy``):

* ``clear-results``: replace the content of the oldest tool results with a
  placeholder that says how big they were (:data:`PLACEHOLDER`). Never the
  head's results, the newest turn's, the newest ``keep_results`` results,
  those of the tools in ``exclude_tools``, or a result its placeholder is not
  cheaper than: the placeholder must cost fewer estimated tokens *and* hold
  fewer UTF-8 bytes than the text it replaces. The estimate is an upper bound
  that prices a digit at 1.75 tokens (Qwen 3 gives each its own), so by the
  estimate alone ``20260212165422`` (25 tokens; 5 in o200k_base, 14 in Qwen 3)
  would make way for a placeholder it puts at 12 (14 in o200k_base, 15 in Qwen 3).
  Once it clears anything it clears at least ``clear_at_least`` tokens (fewer
  edits that break a prompt cache).
* ``clear-thinking``: remove thinking of earlier turns (never the head's or
  the newest turn's) where the provider lets a client leave it out (each
  adapter's :meth:`~ctxwin.formats.base.Adapter.parts` says where).
* ``drop-turns``: drop the oldest whole turns (:func:`ctxwin.pruning.fit`).
* ``truncate-results``: when the floor still overflows, cut the middle of the
  largest remaining results (the newest turn's too), keeping each one's head
  and tail and a marker saying how much was cut. It must be the last step.

The default, ``drop-turns``, is what ctxwin always did, byte for byte.

Steps before ``drop-turns`` are preferred to dropping: the fewest turns are
dropped such that the steps before it, applied to what is kept, make the
request fit; they then edit only the kept items, oldest first, no more than
needed. Steps after it run only when even the floor overflows. Editing never
adds, removes or reorders entries, so call ids, pairing and turns stay as
they were; an edited body is read again and fitted by :func:`ctxwin.pruning.fit`,
whose estimate and rule checks are the ones reported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

from ctxwin.errors import UsageError
from ctxwin.formats.base import RESULT, THINKING, Adapter, Part, Path
from ctxwin.pruning import Rules, cost_columns, drop_options, refuse_broken, segment, total_cost
from ctxwin.tokens.base import Estimator, Kind, calibrated
from ctxwin.view import View

CLEAR_RESULTS = "clear-results"
CLEAR_THINKING = "clear-thinking"
DROP_TURNS = "drop-turns"
TRUNCATE_RESULTS = "truncate-results"
STEPS = (CLEAR_RESULTS, CLEAR_THINKING, DROP_TURNS, TRUNCATE_RESULTS)
"""Every step, in the order a full strategy would list them."""
DEFAULT_STEPS = (DROP_TURNS,)
DEFAULT_KEEP_RESULTS = 3

PLACEHOLDER = "[cleared by ctxwin: {tokens:,} tokens of tool output]"
"""What a cleared result's content becomes."""
CLEARED_PREFIX = "[cleared by ctxwin: "
MARKER = "\n[... {tokens:,} tokens cut by ctxwin ...]\n"
"""What replaces the middle of a truncated result."""


def parse_steps(text: str) -> tuple[str, ...]:
    """The steps of ``--strategy STEPS``; :class:`UsageError` names what is wrong."""
    steps = tuple(s.strip() for s in text.split(","))
    for s in steps:
        if s not in STEPS:
            raise UsageError(f"unknown strategy step {s!r} (choose from: {', '.join(STEPS)})")
    if len(set(steps)) != len(steps):
        raise UsageError(f"a strategy step is listed twice in {text!r}")
    if TRUNCATE_RESULTS in steps[:-1]:
        raise UsageError(f"{TRUNCATE_RESULTS} must be the last strategy step")
    return steps


class _StrategyFields(NamedTuple):
    steps: tuple[str, ...] = DEFAULT_STEPS
    keep_results: int = DEFAULT_KEEP_RESULTS
    """The newest results ``clear-results`` never touches."""
    exclude_tools: frozenset[str] = frozenset()
    """Tools whose results are never cleared or cut."""
    clear_at_least: int = 0
    """Once ``clear-results`` clears anything, it clears at least this many tokens."""


class Strategy(_StrategyFields):
    """Which steps to take, in order, and the options of the clearing steps.

    Immutable (a NamedTuple: a dataclass would compile its methods at every start);
    making one checks the steps and options (:class:`~ctxwin.errors.UsageError`).
    """

    __slots__ = ()

    def __new__(
        cls,
        steps: tuple[str, ...] = DEFAULT_STEPS,
        keep_results: int = DEFAULT_KEEP_RESULTS,
        exclude_tools: frozenset[str] = frozenset(),
        clear_at_least: int = 0,
    ) -> Strategy:
        parse_steps(",".join(steps))
        if keep_results < 0 or clear_at_least < 0:
            raise UsageError("keep_results and clear_at_least must not be negative")
        return super().__new__(cls, steps, keep_results, exclude_tools, clear_at_least)

    @property
    def edits(self) -> bool:
        """Whether any step edits content (any but ``drop-turns``)."""
        return self.steps != DEFAULT_STEPS and any(s != DROP_TURNS for s in self.steps)

    @property
    def name(self) -> str:
        return ",".join(self.steps)


class Applied(NamedTuple):
    """What the editing steps did to the kept items.

    A NamedTuple: a dataclass would compile its methods at every start.
    """

    strategy: Strategy = Strategy()
    cleared_results: int = 0
    cleared_tokens: int = 0
    """The size of the cleared results (the sum their placeholders state)."""
    cleared_thinking: int = 0
    truncated_results: int = 0
    truncated_tokens: int = 0
    """The size of the cut middles (the sum their markers state)."""
    edits: Mapping[tuple[int, Path], str | None] = MappingProxyType({})
    """New content per ``(entry, path)``; ``None`` removes a thinking part."""


def _sub(a: Sequence[int], b: Sequence[int]) -> list[int]:
    return [x - y for x, y in zip(a, b, strict=True)]


def _add(a: Sequence[int], b: Sequence[int]) -> list[int]:
    return [x + y for x, y in zip(a, b, strict=True)]


def _size(text: str) -> int:
    """UTF-8 bytes of ``text``."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


class _Edit:
    # A plain class: a dataclass here would cost its generated code at every start.
    __slots__ = ("part", "saving", "text", "tokens")

    def __init__(self, part: Part, text: str | None, saving: list[int], tokens: int) -> None:
        self.part = part
        self.text = text
        self.saving = saving
        self.tokens = tokens


class _Planner:
    def __init__(
        self,
        body: Any,
        view: View,
        adapter: Adapter,
        estimator: Estimator,
        budget: int,
        calibration: float,
        strategy: Strategy,
    ) -> None:
        self.adapter = adapter
        self.estimator = estimator
        self.budget = budget
        self.calibration = calibration
        self.strategy = strategy
        self.view = view
        self.seg = segment(view.items, view.pinned)
        self.parts = adapter.parts(body, view, estimator)

    def tokens(self, cost: Sequence[int]) -> int:
        return calibrated(self.estimator.raw(cost), self.calibration)

    def fits(self, cost: Sequence[int]) -> bool:
        return self.tokens(cost) <= self.budget

    def newest_turn(self) -> int:
        turns = self.seg.turn_starts
        return turns[-1] if turns else len(self.view.items)

    def clearable(self) -> list[_Edit]:
        """The results ``clear-results`` may clear, oldest first."""
        s = self.strategy
        results = [p for p in self.parts if p.kind == RESULT]
        newest = (
            {id(p) for p in results[len(results) - s.keep_results :]} if s.keep_results else set()
        )
        last = self.newest_turn()
        out: list[_Edit] = []
        for p in results:
            if not self.seg.head_end <= p.index < last or id(p) in newest:
                continue
            if p.tool in s.exclude_tools or (p.text or "").startswith(CLEARED_PREFIX):
                continue
            tokens = self.tokens(p.cost)
            text = PLACEHOLDER.format(tokens=tokens)
            if p.text is not None and _size(text) >= _size(p.text):
                continue  # a placeholder as long as the result saves nothing real
            replaced = self.adapter.replaced_cost(p, text, self.estimator)
            if self.estimator.raw(replaced) < self.estimator.raw(p.cost):
                out.append(_Edit(p, text, _sub(p.cost, replaced), tokens))
        return out

    def thinking(self) -> list[_Edit]:
        """The thinking ``clear-thinking`` may remove, oldest first."""
        return [
            _Edit(p, None, list(p.cost), self.tokens(p.cost))
            for p in self.parts
            if p.kind == THINKING and self.seg.head_end <= p.index < self.newest_turn()
        ]

    def truncated(self, p: Part, keep: int) -> tuple[str, list[int], int]:
        """``p``'s text keeping ``keep`` characters (its head and tail), its cost,
        and the size of the cut middle in tokens."""
        text = p.text or ""
        head = (keep + 1) // 2
        tail = len(text) - keep // 2
        middle = [0] * self.estimator.width
        self.estimator.add_text(middle, text[head:tail], Kind.DENSE)
        cut = self.tokens(middle)
        new = text[:head] + MARKER.format(tokens=cut) + text[tail:]
        return new, self.adapter.replaced_cost(p, new, self.estimator), cut


def clearable(
    body: Any,
    view: View,
    adapter: Adapter,
    estimator: Estimator,
    calibration: float,
    strategy: Strategy,
    kind: str = RESULT,
) -> list[Part]:
    """What a clearing step may clear in ``body``, oldest first, whatever the budget:
    the results of ``clear-results`` (``kind`` :data:`RESULT`), or the thinking of
    ``clear-thinking`` (:data:`THINKING`)."""
    planner = _Planner(body, view, adapter, estimator, 0, calibration, strategy)
    found = planner.clearable() if kind == RESULT else planner.thinking()
    return [e.part for e in found]


def plan_edits(
    body: Any,
    view: View,
    adapter: Adapter,
    estimator: Estimator,
    budget: int,
    calibration: float,
    strategy: Strategy,
    rules: Rules | None = None,
) -> Applied:
    """The content edits ``strategy`` makes so that ``body`` (read into ``view``) fits.

    Nothing is edited when the body fits, the budget is not positive, or the
    strategy only drops turns. Raises :class:`~ctxwin.errors.PairingError`,
    as :func:`~ctxwin.pruning.fit` does, when the body needs fitting but already
    breaks a structural rule.
    """
    if not strategy.edits:
        return Applied(strategy)
    items = view.items
    columns = cost_columns(view)
    total = total_cost(view, columns)
    pl = _Planner(body, view, adapter, estimator, budget, calibration, strategy)
    if budget <= 0 or pl.fits(total):
        return Applied(strategy)
    refuse_broken(view, rules)
    seg = pl.seg
    steps = strategy.steps
    candidates: dict[str, list[_Edit]] = {
        CLEAR_RESULTS: pl.clearable() if CLEAR_RESULTS in steps else [],
        CLEAR_THINKING: pl.thinking() if CLEAR_THINKING in steps else [],
    }
    options = drop_options(view, seg)
    cuts = [c for _, c in options]
    gap = view.superseded
    prefix = [[0] * len(total)]
    for i in range(len(items)):
        prefix.append(_add(prefix[-1], items[i].cost))
    head = prefix[seg.head_end]

    def kept(k: int) -> list[int]:
        cost = _add(_sub(total, prefix[cuts[k]]), head)
        if options[k][0] and gap is not None:  # the superseded block goes too
            cost = _add(_sub(cost, prefix[gap[1]]), prefix[gap[0]])
        return cost

    k = 0
    if DROP_TURNS in steps:
        from bisect import bisect_left

        before = steps[: steps.index(DROP_TURNS)]
        ahead = sorted(
            (e for s in before for e in candidates.get(s, [])), key=lambda e: e.part.index
        )
        starts = [e.part.index for e in ahead]
        suffix = [[0] * len(total)]
        for e in reversed(ahead):
            suffix.append(_add(suffix[-1], e.saving))
        suffix.reverse()  # suffix[j]: savings of ahead[j:]

        def at_most(k: int) -> list[int]:
            return _sub(kept(k), suffix[bisect_left(starts, cuts[k])])

        lo, hi = 0, len(cuts) - 1
        if not pl.fits(at_most(hi)):
            lo = hi
        while lo < hi:
            mid = (lo + hi) // 2
            if pl.fits(at_most(mid)):
                hi = mid
            else:
                lo = mid + 1
        k = lo
    cut = cuts[k]
    current = kept(k)
    done: dict[tuple[int, Path], _Edit] = {}
    for step in steps:
        if pl.fits(current):
            break
        if step == TRUNCATE_RESULTS:
            current = _truncate(pl, current, cut, done)
            continue
        cleared = 0
        for e in candidates.get(step, []):
            if e.part.index < cut:
                continue
            if pl.fits(current) and (
                step != CLEAR_RESULTS or not cleared or cleared >= strategy.clear_at_least
            ):
                break
            current = _sub(current, e.saving)
            done[(e.part.index, e.part.path)] = e
            cleared += e.tokens
    results = [e for e in done.values() if e.part.kind == RESULT]
    cut_ones = [e for e in results if e.text is not None and not e.text.startswith(CLEARED_PREFIX)]
    return Applied(
        strategy,
        cleared_results=len(results) - len(cut_ones),
        cleared_tokens=sum(e.tokens for e in results if e not in cut_ones),
        cleared_thinking=len(done) - len(results),
        truncated_results=len(cut_ones),
        truncated_tokens=sum(e.tokens for e in cut_ones),
        edits={key: e.text for key, e in sorted(done.items(), key=lambda kv: kv[0][0])},
    )


def _truncate(
    pl: _Planner, current: list[int], cut: int, done: dict[tuple[int, Path], _Edit]
) -> list[int]:
    """Cut the middle of the largest kept results until ``current`` fits."""
    s = pl.strategy
    last = pl.seg.head_end
    pool = [
        p
        for p in pl.parts
        if p.kind == RESULT
        and p.index >= max(cut, last)
        and p.text
        and p.tool not in s.exclude_tools
        and (p.index, p.path) not in done
    ]
    pool.sort(key=lambda p: pl.tokens(p.cost), reverse=True)
    for p in pool:
        if pl.fits(current):
            break
        text = p.text or ""
        rest = _sub(current, p.cost)
        new, cost, middle = pl.truncated(p, 0)
        if pl.estimator.raw(cost) >= pl.estimator.raw(p.cost):
            continue  # too small to gain anything by cutting
        lo, hi = 0, len(text) - 1  # the most characters kept that still fit
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if pl.fits(_add(rest, pl.truncated(p, mid)[1])):
                lo = mid
            else:
                hi = mid - 1
        if lo:
            new, cost, middle = pl.truncated(p, lo)
        current = _add(rest, cost)
        done[(p.index, p.path)] = _Edit(p, new, _sub(p.cost, cost), middle)
    return current


__all__ = [
    "CLEAR_RESULTS",
    "CLEAR_THINKING",
    "DEFAULT_STEPS",
    "DROP_TURNS",
    "PLACEHOLDER",
    "STEPS",
    "TRUNCATE_RESULTS",
    "Applied",
    "Strategy",
    "clearable",
    "parse_steps",
    "plan_edits",
]
