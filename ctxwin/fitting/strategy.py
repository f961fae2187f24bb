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
  edits that break a prompt cache). Under a block strategy it clears in batches
  (:attr:`Step.batched`), so the cleared set changes only when what must be saved
  crosses the next block.
* ``clear-thinking``: remove thinking of earlier turns (never the head's or
  the newest turn's) where the provider lets a client leave it out (each
  adapter's :meth:`~ctxwin.formats.base.Adapter.parts` says where).
* ``drop-turns``: drop the oldest whole turns (:func:`ctxwin.fitting.pruning.fit`).
* ``truncate-results``: when the floor still overflows, cut the middle of the
  largest remaining results (the newest turn's too), keeping each one's head
  and tail and a marker saying how much was cut. It must be the last step.

The default steps, ``drop-turns`` alone, drop the oldest whole turns. By default the cut
moves in blocks of :data:`DEFAULT_BLOCK` of the budget (:attr:`Strategy.block`, see
:meth:`ctxwin.fitting.pruning.Kept.stable`), so a growing run keeps its prompt prefix, and the
provider's cache, between moves; ``block=0`` drops the fewest turns that fit (just fit).

Steps before ``drop-turns`` are preferred to dropping: the fewest turns are
dropped such that the steps before it, applied to what is kept, make the
request fit; they then edit only the kept items, oldest first, no more than
needed (at ``block=0``) or up to the end of a batch (:attr:`Step.batched`).
Steps after it run only when even the floor overflows. Editing never adds,
removes or reorders entries, so call ids, pairing and turns stay as
they were; an edited body is read again and fitted by :func:`ctxwin.fitting.pruning.fit`,
whose estimate and rule checks are the ones reported.

Each step is an object (:class:`Step`, by name in :data:`STEP_OF`) that offers its
candidates (:class:`Offer`: what it can remove or replace, with the cost each saves);
:func:`plan_edits` applies them in one pass, on the fewest-units search
(:class:`ctxwin.fitting.cut.Kept`) that fitting and incremental fitting use too. A step
declares whether it can be fitted incrementally (:attr:`Step.incremental`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

from ctxwin.errors import UsageError
from ctxwin.fitting.pruning import (
    Rules,
    Scale,
    cost_columns,
    drop_options,
    refuse_broken,
    segment,
    total_cost,
)
from ctxwin.fitting.transcript import Transcript
from ctxwin.formats.base import RESULT, THINKING, Adapter, Part, Path
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
DEFAULT_BLOCK = 0.45
"""The default :attr:`Strategy.block`. In a 100-call OpenAI Chat loop at a 6,000-token
window (``tests/test_cache_loop.py``) it bills 0.24x the input of just fitting with
OpenAI's prompt cache, sending 0.81x the tokens on average (docs/strategies.md has the
measurements it was chosen on)."""

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
    block: float = DEFAULT_BLOCK
    """The cut moves in blocks of this share of the budget (0: the fewest turns, just
    fit): see :meth:`ctxwin.fitting.cut.Kept.stable`; the clearing steps clear in batches
    of it (:attr:`Step.batched`; 0: no more than needed)."""


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
        block: float = DEFAULT_BLOCK,
    ) -> Strategy:
        parse_steps(",".join(steps))
        if keep_results < 0 or clear_at_least < 0:
            raise UsageError("keep_results and clear_at_least must not be negative")
        if not 0 <= block <= 1:  # also refuses NaN
            raise UsageError(
                f"expected a share of the budget from 0 to 1, got {block!r}", setting="block"
            )
        return super().__new__(cls, steps, keep_results, exclude_tools, clear_at_least, block)

    @property
    def actions(self) -> tuple[Step, ...]:
        """The steps' objects (:class:`Step`), in order."""
        return tuple(STEP_OF[s] for s in self.steps)

    @property
    def edits(self) -> bool:
        """Whether any step edits content (any but ``drop-turns``)."""
        return any(STEP_OF[s].edits for s in self.steps)

    @property
    def incremental(self) -> bool:
        """Whether every step is :attr:`Step.incremental`."""
        return all(STEP_OF[s].incremental for s in self.steps)

    @property
    def name(self) -> str:
        return ",".join(self.steps)


DEFAULT_STRATEGY = Strategy()
"""``drop-turns`` alone, the cut moving in blocks of :data:`DEFAULT_BLOCK` of the budget."""


class Applied(NamedTuple):
    """What the editing steps did to the kept items.

    A NamedTuple: a dataclass would compile its methods at every start.
    """

    strategy: Strategy = DEFAULT_STRATEGY
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


class Offer:
    """One thing a step can remove or replace: the part, its new content (``None``:
    removed), the cost vector it saves and its size in tokens (what a placeholder or
    marker states).

    A plain class: a dataclass here would cost its generated code at every start.
    """

    __slots__ = ("part", "saving", "step", "text", "tokens")

    def __init__(
        self, step: str, part: Part, text: str | None, saving: list[int], tokens: int
    ) -> None:
        self.step = step
        self.part = part
        self.text = text
        self.saving = saving
        self.tokens = tokens


def _nothing(pl: _Planner) -> list[Offer]:
    return []


def _none_at_least(strategy: Strategy) -> int:
    return 0


def _all_of(pl: _Planner, offer: Offer, current: list[int]) -> Offer:
    return offer


class Step:
    """One step of a strategy: what it offers to remove or replace, and how it takes an offer.

    :func:`plan_edits` asks every step the same things: its :attr:`candidates` (each an
    :class:`Offer` with the cost it saves), how much it takes once it takes anything
    (:attr:`at_least`), and the offer it takes when it needs less than all of one
    (:attr:`take`). ``drop-turns`` offers nothing here: it is the search for the fewest
    units to drop (:class:`ctxwin.fitting.cut.Kept`), which counts the offers of the steps
    listed before it as savings on what it keeps.

    One class whose instances (:data:`STEP_OF`) hold their behaviour: a subclass per
    step would cost its creation at every start. Read-only by convention.
    """

    __slots__ = ("at_least", "batched", "candidates", "edits", "incremental", "name", "take")

    def __init__(
        self,
        name: str,
        candidates: Callable[[_Planner], Iterable[Offer]] = _nothing,
        *,
        edits: bool = True,
        incremental: bool = False,
        at_least: Callable[[Strategy], int] = _none_at_least,
        take: Callable[[_Planner, Offer, list[int]], Offer] = _all_of,
        batched: bool = False,
    ) -> None:
        self.name = name
        self.candidates = candidates
        """What the step can remove or replace, in the order it takes them (oldest first
        unless it says otherwise), each with the cost it saves. Clearing steps offer the
        same whatever the cut; a step listed after ``drop-turns`` may read the cut
        (``pl.cut``) and what is already edited (``pl.done``) to offer less."""
        self.edits = edits
        """Whether the step edits content (``drop-turns`` only drops whole turns)."""
        self.incremental = incremental
        """Whether a request over its budget is fitted from running state at O(new
        items) (:class:`ctxwin.fitting.incremental.Prefixes`). A step that is not finds its
        candidates in the whole body (:meth:`~ctxwin.formats.base.Adapter.parts`: a
        result's tool is named by a call in another message, and its text lives in the
        body, not the view), and an edited body is read again; so the manager (and
        ``replay``) reads only new messages and settles a request within budget
        incrementally, but plans one over budget over the whole request."""
        self.at_least = at_least
        """Once the step takes anything, the tokens it takes at least (its offers' ``tokens``)."""
        self.take = take
        """What the step takes of an offer when the kept items cost ``current``: all of
        it unless the step can take part."""
        self.batched = batched
        """Whether the step takes its offers in batches, as the cut drops turns in blocks
        (:meth:`ctxwin.fitting.cut.Kept.stable`): under a strategy whose ``block`` is
        positive it takes, oldest first, at least the next multiple of ``block × budget``
        (raw tokens saved, counted from the cut) at or above what it must save, so the
        set of edited items, and the prompt prefix a provider caches, stays the same over
        consecutive requests of a growing run until what must be saved crosses the next
        multiple (:func:`_batch`)."""


def _clearable_results(pl: _Planner) -> list[Offer]:
    """``clear-results``: the oldest results become a placeholder (see the module docstring)."""
    s = pl.strategy
    results = [p for p in pl.parts if p.kind == RESULT]
    newest = {id(p) for p in results[len(results) - s.keep_results :]} if s.keep_results else set()
    last = pl.newest_turn()
    out: list[Offer] = []
    for p in results:
        if not pl.seg.head_end <= p.index < last or id(p) in newest:
            continue
        if p.tool in s.exclude_tools or (p.text or "").startswith(CLEARED_PREFIX):
            continue
        tokens = pl.tokens(p.cost)
        text = PLACEHOLDER.format(tokens=tokens)
        if p.text is not None and _size(text) >= _size(p.text):
            continue  # a placeholder as long as the result saves nothing real
        replaced = pl.adapter.replaced_cost(p, text, pl.estimator)
        if pl.estimator.raw(replaced) < pl.estimator.raw(p.cost):
            out.append(Offer(CLEAR_RESULTS, p, text, _sub(p.cost, replaced), tokens))
    return out


def _clear_at_least(strategy: Strategy) -> int:
    return strategy.clear_at_least


def _removable_thinking(pl: _Planner) -> list[Offer]:
    """``clear-thinking``: earlier turns' thinking is removed, oldest first."""
    return [
        Offer(CLEAR_THINKING, p, None, list(p.cost), pl.tokens(p.cost))
        for p in pl.parts
        if p.kind == THINKING and pl.seg.head_end <= p.index < pl.newest_turn()
    ]


def _cuttable_results(pl: _Planner) -> Iterator[Offer]:
    """``truncate-results``: the largest kept results, largest first, each offered cut
    whole (:func:`_cut_no_more_than_needed` keeps the most characters that still fit)."""
    s = pl.strategy
    pool = [
        p
        for p in pl.parts
        if p.kind == RESULT
        and p.index >= max(pl.cut, pl.seg.head_end)
        and p.text
        and p.tool not in s.exclude_tools
        and (p.index, p.path) not in pl.done
    ]
    pool.sort(key=lambda p: pl.tokens(p.cost), reverse=True)
    raw = pl.estimator.raw
    for p in pool:  # lazily: each is cut only when the one before it was not enough
        new, cost, middle = pl.truncated(p, 0)
        if raw(cost) < raw(p.cost):  # else too small to gain anything by cutting
            yield Offer(TRUNCATE_RESULTS, p, new, _sub(p.cost, cost), middle)


def _cut_no_more_than_needed(pl: _Planner, offer: Offer, current: list[int]) -> Offer:
    p = offer.part
    rest = _sub(current, p.cost)
    lo, hi = 0, len(p.text or "") - 1  # the most characters kept that still fit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if pl.fits(_add(rest, pl.truncated(p, mid)[1])):
            lo = mid
        else:
            hi = mid - 1
    if not lo:
        return offer
    new, cost, middle = pl.truncated(p, lo)
    return Offer(TRUNCATE_RESULTS, p, new, _sub(p.cost, cost), middle)


STEP_OF: Mapping[str, Step] = MappingProxyType(
    {
        CLEAR_RESULTS: Step(
            CLEAR_RESULTS, _clearable_results, at_least=_clear_at_least, batched=True
        ),
        CLEAR_THINKING: Step(CLEAR_THINKING, _removable_thinking, batched=True),
        DROP_TURNS: Step(DROP_TURNS, edits=False, incremental=True),
        TRUNCATE_RESULTS: Step(TRUNCATE_RESULTS, _cuttable_results, take=_cut_no_more_than_needed),
    }
)
"""Each step's object, by name."""


class _Planner:
    """What the steps read: the body's parts, the segmentation, the budget, and as the
    plan goes, the cut (the first kept item after the head) and the offers taken."""

    def __init__(
        self,
        transcript: Transcript,
        budget: int,
        calibration: float,
        strategy: Strategy,
        scale: Scale | None = None,
    ) -> None:
        body, adapter, view, estimator = transcript
        self.adapter = adapter
        self.estimator = estimator
        self.calibration = calibration
        self.limit = (scale or Scale(calibration)).raw_limit(budget)
        """The largest raw estimate within the budget (as the fit counts it)."""
        self.strategy = strategy
        self.view = view
        self.seg = segment(view.items, view.pinned)
        self.parts = adapter.parts(body, view, estimator)
        self.cut = self.seg.head_end
        self.done: dict[tuple[int, Path], Offer] = {}

    def tokens(self, cost: Sequence[int]) -> int:
        return calibrated(self.estimator.raw(cost), self.calibration)

    def fits(self, cost: Sequence[int]) -> bool:
        return self.estimator.raw(cost) <= self.limit

    def newest_turn(self) -> int:
        turns = self.seg.turn_starts
        return turns[-1] if turns else len(self.view.items)

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
    planner = _Planner(Transcript(body, adapter, view, estimator), 0, calibration, strategy)
    step = STEP_OF[CLEAR_RESULTS if kind == RESULT else CLEAR_THINKING]
    return [o.part for o in step.candidates(planner)]


def plan_edits(
    transcript: Transcript,
    budget: int,
    calibration: float,
    strategy: Strategy,
    rules: Rules | None = None,
    *,
    overhead: int = 0,
    learned: bool = False,
) -> Applied:
    """The content edits ``strategy`` makes so that ``transcript``'s body fits.

    ``overhead`` and ``learned`` are :func:`~ctxwin.fitting.pruning.fit`'s: the plan checks
    the estimate the fit checks.

    Nothing is edited when the body fits, the budget is not positive, or the
    strategy only drops turns. Raises :class:`~ctxwin.errors.PairingError`,
    as :func:`~ctxwin.fitting.pruning.fit` does, when the body needs fitting but already
    breaks a structural rule.

    One pass: with ``drop-turns``, the fewest units are dropped such that the offers of
    the steps before it, on the kept items, would make the request fit (the search of
    :class:`~ctxwin.fitting.cut.Kept`); then each step in turn takes its offers on the kept
    items until the request fits.
    """
    if not strategy.edits or budget <= 0:
        return Applied(strategy)
    view, estimator = transcript.view, transcript.estimator
    columns = cost_columns(view)
    total = total_cost(view, columns)
    scale = Scale(calibration, overhead, learned)
    if estimator.raw(total) <= scale.raw_limit(budget):
        return Applied(strategy)
    from ctxwin.fitting.cut import Kept, prefix_sums  # here: not imported at start

    pl = _Planner(transcript, budget, calibration, strategy, scale)
    refuse_broken(view, rules)
    steps = strategy.actions
    offered = {}  # the offers of the steps before drop-turns, found once
    options = drop_options(view, pl.seg)
    kept = Kept(total, prefix_sums(columns), pl.seg.head_end, options, estimator, view.superseded)
    k = 0
    if DROP_TURNS in strategy.steps:
        from bisect import bisect_left  # here: not imported at start

        before = steps[: strategy.steps.index(DROP_TURNS)]
        offered = {s.name: list(s.candidates(pl)) for s in before}
        ahead = sorted((o for found in offered.values() for o in found), key=_index)
        starts = [o.part.index for o in ahead]
        suffix = [[0] * len(total)]
        for o in reversed(ahead):
            suffix.append(_add(suffix[-1], o.saving))
        suffix.reverse()  # suffix[j]: savings of ahead[j:]
        kept.less = lambda cut: suffix[bisect_left(starts, cut)]
        k = kept.stable(pl.limit, strategy.block)
    pl.cut = options[k][1]
    current = kept.cost(k)
    done = pl.done
    for step in steps:
        if pl.fits(current):
            break
        at_least = step.at_least(strategy)
        taken = 0
        offers: Iterable[Offer] = (
            offered[step.name] if step.name in offered else step.candidates(pl)
        )
        batch: int | None = None  # a batched step: how many of its kept offers it takes
        if step.batched and strategy.block > 0:
            offers = [o for o in offers if o.part.index >= pl.cut]
            batch = _batch(pl, offers, current, at_least, strategy.block)
        for j, offer in enumerate(offers):
            part = offer.part
            if part.index < pl.cut:
                continue
            if batch is not None:
                if j >= batch:
                    break
            elif pl.fits(current) and (not taken or taken >= at_least):
                break
            offer = step.take(pl, offer, current)
            current = _sub(current, offer.saving)
            done[(part.index, part.path)] = offer
            taken += offer.tokens
    by_step: dict[str, list[Offer]] = {CLEAR_RESULTS: [], CLEAR_THINKING: [], TRUNCATE_RESULTS: []}
    for offer in done.values():
        by_step[offer.step].append(offer)
    cleared, cut = by_step[CLEAR_RESULTS], by_step[TRUNCATE_RESULTS]
    return Applied(
        strategy,
        cleared_results=len(cleared),
        cleared_tokens=sum(o.tokens for o in cleared),
        cleared_thinking=len(by_step[CLEAR_THINKING]),
        truncated_results=len(cut),
        truncated_tokens=sum(o.tokens for o in cut),
        edits={key: o.text for key, o in sorted(done.items(), key=lambda kv: kv[0][0])},
    )


def _batch(
    pl: _Planner, offers: Sequence[Offer], current: list[int], at_least: int, block: float
) -> int:
    """How many of ``offers`` (a batched step's, on the kept items, oldest first) it takes
    when the kept items cost ``current``: the fewest that fit and take ``at_least``
    tokens, rounded up to the first count whose raw saving reaches the next multiple of
    ``block × budget`` at or above theirs. The savings are counted from the cut over the
    offers' own costs, which appending items never changes. When no count reaches that
    multiple, the fewest (a batch never takes every offer to reach a multiple); when even
    all of them do not fit, all of them."""
    raw = pl.estimator.raw
    saved = [0] * len(current)
    sums: list[int] = []  # raw saving of the first j + 1 offers
    need: int | None = None
    taken = 0
    for j, offer in enumerate(offers):
        saved = _add(saved, offer.saving)
        sums.append(raw(saved))
        taken += offer.tokens
        if need is None and pl.fits(_sub(current, saved)) and taken >= at_least:
            need = j + 1
    if need is None:
        return len(offers)
    size = max(1, int(block * pl.limit))
    target = -(-sums[need - 1] // size) * size
    for j in range(need - 1, len(offers)):
        if sums[j] >= target:
            return j + 1
    return need


def _index(offer: Offer) -> int:
    return offer.part.index


__all__ = [
    "CLEAR_RESULTS",
    "CLEAR_THINKING",
    "DEFAULT_BLOCK",
    "DEFAULT_STEPS",
    "DEFAULT_STRATEGY",
    "DROP_TURNS",
    "PLACEHOLDER",
    "STEPS",
    "STEP_OF",
    "TRUNCATE_RESULTS",
    "Applied",
    "Offer",
    "Step",
    "Strategy",
    "clearable",
    "parse_steps",
    "plan_edits",
]
