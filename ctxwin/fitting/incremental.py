"""Fit every prefix of a growing transcript at O(new items) each.

An agent run is one transcript that grows: call ``k`` sends the messages
before the ``k``-th model message. Fitting each request from scratch
(:func:`ctxwin.fitting.pruning.fit`) re-reads the whole transcript every call, so a
run of ``n`` calls costs O(n²). :class:`Prefixes` keeps what a fit needs as
running state over one growing item list and answers, for the prefix of the
first ``i`` items, exactly the :class:`~ctxwin.fitting.pruning.FitResult` (or the
:class:`~ctxwin.errors.PairingError`) that ``fit`` gives on a view of those
items:

* per-slot prefix sums of the items' cost vectors (the estimate of any
  prefix, and of any prefix with a run of oldest units cut out, is O(width));
* the segmentation (head, turns, drop units), extended item by item
  (:class:`Segmenter`): a later result that answers an earlier call merges
  units, which only ever removes the newest unit boundaries;
* the generic rules as one resumable pass (:class:`~ctxwin.fitting.rules.PairingScan`);
* the format's own rules, when the adapter declares them local
  (``local_rules``: a problem at item ``j`` depends on items ``j - 1 .. j + 1``
  only, and on whether ``j`` is the last item), one window per item;
* which items share a call id with an item in another place: a Fenwick tree
  counts, for every boundary, the call ids whose occurrences span it, so the
  pruner's "do the dropped items share ids with the kept ones" test is
  O(log n) (when it may be true, the exact test runs).

The prefix asked for must not shrink between calls (``fit(i)`` after
``fit(j)`` needs ``i >= j``); items are only ever appended.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from operator import is_
from typing import Any

from ctxwin.errors import CtxwinError
from ctxwin.fitting.anchor import ADDITIVE_FORMATS, Anchor, new_cost
from ctxwin.fitting.cut import Kept, prefix_sums
from ctxwin.fitting.pruning import (
    FitResult,
    Rules,
    Scale,
    Segments,
    _shares_ids,
    cost_columns,
    guard,
    passed,
    pruned,
    refuse,
    scan_turns,
)
from ctxwin.fitting.rules import PairingScan, check
from ctxwin.fitting.transcript import Transcript, load
from ctxwin.formats import AUTO, get_adapter
from ctxwin.formats._util import replace_key
from ctxwin.formats.base import Adapter
from ctxwin.tokens.base import Estimator
from ctxwin.view import SYSTEM, USER, Item, Problem, View


class Segmenter:
    """:func:`ctxwin.fitting.pruning.segment` of ``items[:n]``, for a growing ``n``."""

    __slots__ = (
        "_calls",
        "_h",
        "_owner",
        "_reach",
        "_scanned",
        "_user",
        "head_end",
        "items",
        "n",
        "turn_starts",
        "unit_starts",
    )

    def __init__(self, items: Sequence[Item]) -> None:
        self.items = items
        self.n = 0
        self._user = False
        """Whether a user item has been read (the head then runs through the first)."""
        self._h = 0
        """The head before its extension: leading system items, through the first user."""
        self._calls: set[str] = set()
        self._scanned = 0
        self.head_end = 0
        self._restart()

    def _restart(self) -> None:
        self.turn_starts: list[int] = []
        self.unit_starts: list[int] = []
        self._owner: dict[str, int] = {}
        self._reach: list[int] = []

    def advance(self, n: int) -> None:
        """Read the items up to ``n`` (``n >= self.n``)."""
        items = self.items
        old_head = self.head_end
        turns_from = self.n
        for i in range(self.n, n):
            role = items[i].role
            if not self._user and (role == USER or (role == SYSTEM and i == self._h)):
                self._user = role == USER
                self._h = i + 1
                self._calls = {c for item in items[: self._h] for c in item.calls}
                self.head_end = self._h
                self._scanned = self._h
        self.n = n
        calls = self._calls
        if calls:
            end = self.head_end
            for j in range(self._scanned, n):
                if any(c in calls for c in items[j].answers):
                    for item in items[end : j + 1]:
                        calls.update(item.calls)
                    end = j + 1
            self.head_end = end
        self._scanned = n
        if self.head_end != old_head:
            self._restart()
            turns_from = self.head_end
        start = max(turns_from, self.head_end)
        scan_turns(items, start, n, self.turn_starts, self.unit_starts, self._owner, self._reach)

    def segments(self) -> Segments:
        """The segmentation of the items read so far (a snapshot)."""
        return Segments(self.head_end, list(self.turn_starts), list(self.unit_starts))


class _Cover:
    """How many call ids span each item boundary (some item before it and some item
    at or after it name the id).

    An id's span only grows at its end as items are read, so each occurrence adds
    one range to a difference array; :meth:`spanned` keeps a running sum per
    cursor, moved to the boundary asked about, and the pruner asks about the same
    boundaries call after call (the head's end, and a cut that moves a little):
    O(1) per occurrence, O(distance moved) per question.
    """

    __slots__ = ("cursors", "diff", "last")

    def __init__(self) -> None:
        self.diff: list[int] = [0]
        self.last: dict[str, int] = {}
        self.cursors: list[list[int]] = [[0, 0], [0, 0]]
        """``[position, sum of diff[0 .. position]]``, one per boundary being followed."""

    def grow(self, n: int) -> None:
        """Make room for boundaries up to ``n``."""
        diff = self.diff
        if len(diff) <= n + 1:
            diff.extend([0] * (n + 2 - len(diff)))

    def _add(self, pos: int, delta: int) -> None:
        self.diff[pos] += delta
        for cursor in self.cursors:
            if pos <= cursor[0]:
                cursor[1] += delta

    def add(self, call_id: str, at: int) -> None:
        """Item ``at`` names ``call_id``: the id now spans the boundaries up to ``at``."""
        last = self.last.get(call_id)
        if last is None:
            self.last[call_id] = at
        elif at > last:
            self.span(last, at)
            self.last[call_id] = at

    def span(self, last: int, at: int) -> None:
        """An id named at ``last`` is named again at ``at``: boundaries ``b`` with
        ``last < b <= at`` are spanned once more."""
        self._add(last + 1, 1)
        self._add(at + 1, -1)

    def spanned(self, boundary: int, which: int) -> bool:
        """Whether some id is named both before ``boundary`` and at or after it
        (``which`` names the cursor to move: 0 for the head's end, 1 for the cut)."""
        cursor = self.cursors[which]
        pos, total = cursor
        diff = self.diff
        while pos < boundary:
            pos += 1
            total += diff[pos]
        while pos > boundary:
            total -= diff[pos]
            pos -= 1
        cursor[0] = pos
        cursor[1] = total
        return total > 0


class _Options:
    """:func:`ctxwin.fitting.pruning.drop_options` of a growing segmentation, read in place
    (O(1) each, where the list would cost O(units) per fit)."""

    __slots__ = ("seg",)

    def __init__(self, seg: Segmenter) -> None:
        self.seg = seg

    def __len__(self) -> int:
        return max(1, len(self.seg.unit_starts))

    def __getitem__(self, k: int, /) -> tuple[bool, int]:
        seg = self.seg
        return False, seg.turn_starts[seg.unit_starts[k]] if k else seg.head_end


class Prefixes:
    """Fits of the growing prefixes of ``view``'s items (see the module docstring).

    ``view.items`` may grow between calls (append only); ``fit(i)`` answers
    for a view of ``view.items[:i]`` with ``view``'s base, model and notes.
    """

    def __init__(
        self,
        view: View,
        estimator: Estimator,
        rules: Rules | None = None,
        *,
        complete: bool = False,
    ) -> None:
        """``complete``: ``view.items`` will not grow (a recorded transcript), so the
        running sums and the pairing pass are made once, at C speed where they can be,
        and each prefix reads its share of them."""
        self.view = view
        self.estimator = estimator
        adapter = getattr(rules, "__self__", None)
        if adapter is not None and not adapter.format_rules:
            rules = None  # the adapter's rules never find anything
        self.rules = rules
        self.local_rules = rules is not None and adapter is not None and adapter.local_rules
        width = len(view.base)
        self.n = 0
        self.prefix: list[list[int]] = [[0] for _ in range(width)]
        self.seg = Segmenter(view.items)
        self.scan = PairingScan(view)
        self.cover = _Cover()
        self.stable: list[Problem] = []
        """Format problems at items that are not the last one read (they no longer change)."""
        self._stable_index: list[int] = []
        self._near = 0
        """The units the last fit dropped: where the next search starts."""
        self._scale = Scale(1.0)
        self._scale_key: tuple[float, int, bool, float | None] = (1.0, 0, False, None)
        """The last call's scale (a loop's calibration changes rarely)."""
        self._marks: list[int] | None = None
        """For a complete view: how many pairing problems the first ``i`` items have."""
        self._block: float | None = None
        """Cheap-tier units per counted token, measured at the first anchored cut."""
        self.anchor: Anchor | None = None
        """The provider's last report on a request of these items (:mod:`ctxwin.fitting.anchor`):
        requests that extend it are estimated from it."""
        if complete:
            self.prefix = prefix_sums(cost_columns(view))
            self._marks = [0]
            self.scan.feed(range(len(view.items)), self._marks)
            self.cover.grow(len(view.items))

    def advance(self, n: int) -> None:
        """Read items up to ``n``."""
        if n < self.n:
            raise ValueError(f"prefixes only grow: asked for {n} after {self.n}")
        if n == self.n:
            return
        items = self.view.items
        start = self.n
        complete = self._marks is not None
        if not complete:
            for k, column in enumerate(self.prefix):
                running = column[-1]
                for item in items[start:n]:
                    running += item.cost[k]
                    column.append(running)
            self.scan.feed(range(start, n))
            self.cover.grow(n)
        cover = self.cover
        last = cover.last
        for i in range(start, n):
            item = items[i]
            calls, answers = item.calls, item.answers
            if not (calls or answers):
                continue
            for call_id in (*calls, *answers) if calls and answers else calls or answers:
                seen = last.get(call_id)
                if seen is None:
                    last[call_id] = i
                elif i > seen:
                    cover.span(seen, i)
                    last[call_id] = i
        self.seg.advance(n)
        if self.local_rules and self.rules is not None:
            # item j's problems are final once item j + 1 exists
            for j in range(max(0, start - 1), n - 1):
                window = [j, j + 1] if j == 0 else [j - 1, j, j + 1]
                for p in self.rules(self.view, window):
                    if p.index == j:
                        self.stable.append(p)
                        self._stable_index.append(j)
        self.n = n

    def total(self, i: int) -> list[int]:
        """The summed cost vector of a request holding ``items[:i]``."""
        return [b + column[i] for b, column in zip(self.view.base, self.prefix, strict=True)]

    def raw(self, i: int) -> int:
        """Uncalibrated estimate of a request holding ``items[:i]``."""
        return self.estimator.raw(self.total(i))

    def raw_kept(self, result: FitResult) -> int:
        """Uncalibrated estimate of what ``result`` (a fit of a prefix) keeps."""
        start, cut, i = result.head, result.cut, result.items
        return self.estimator.raw(
            [
                b + column[i] - column[cut] + column[start]
                for b, column in zip(self.view.base, self.prefix, strict=True)
            ]
        )

    def problems(self, i: int) -> list[Problem]:
        """``check`` on ``items[:i]``: the format's rules, then the generic ones, by item."""
        view = self._view_for(i)
        rules = self.rules
        marks = self._marks
        generic = self.scan.problems[: marks[i]] if marks is not None else list(self.scan.problems)
        found: list[Problem]
        if rules is None:
            found = generic
        elif self.local_rules:
            found = self.local_problems([(0, i)] if i else []) + generic
        else:
            found = rules(view, range(i)) + generic
        found.sort(key=_index)
        return found

    def local_problems(self, spans: list[tuple[int, int]]) -> list[Problem]:
        """The format's problems on the items kept in ``spans`` (ascending, disjoint,
        not touching, each ``(start, end)`` non-empty, within the items read), for
        rules declared local: an item inside a span whose neighbours are kept too
        has the problems found when it was read (:attr:`stable`); the items at the
        edges of the spans are checked in a window of their kept neighbours."""
        rules = self.rules
        if rules is None:
            return []
        view = self.view
        index = self._stable_index
        stable = self.stable
        out: list[Problem] = []
        last_span = len(spans) - 1
        for s, (a, b) in enumerate(spans):
            before = [spans[s - 1][1] - 1] if s else []
            after = [spans[s + 1][0]] if s < last_span else []
            inner_from = a
            if not (s == 0 and a == 0 and b - a > 1):  # the span's first item is an edge
                window = [*before, a, a + 1] if b - a > 1 else [*before, a, *after]
                out += [p for p in rules(view, window) if p.index == a]
                inner_from = a + 1
            if b - 1 > inner_from:
                out += stable[bisect_left(index, inner_from) : bisect_left(index, b - 1)]
            if b - 1 >= inner_from:  # the span's last item: an edge
                window = [b - 2, b - 1, *after] if b - 1 > a else [*before, b - 1, *after]
                out += [p for p in rules(view, window) if p.index == b - 1]
        return out

    def scale(
        self,
        calibration: float,
        overhead: int = 0,
        learned: bool = False,
        fresh: float | None = None,
    ) -> Scale:
        """The :class:`~ctxwin.fitting.pruning.Scale` of these figures (the last one made is kept
        while they stay the same)."""
        key = (calibration, overhead, learned, fresh)
        if self._scale_key != key:
            self._scale = Scale(calibration, overhead, learned, fresh)
            self._scale_key = key
        return self._scale

    def report(self, head: int, cut: int, end: int, reported: int) -> None:
        """The provider counted ``reported`` tokens for the request of ``items[:head]`` and
        ``items[cut:end]``: requests that extend it are anchored on it."""
        anchor = self.anchor
        if anchor is None:
            anchor = self.anchor = Anchor(self.view.format in ADDITIVE_FORMATS)
        anchor.record(head, cut, end, reported)

    def anchored(self, i: int, cut: int, scale: Scale) -> int | None:
        """The estimate of the request of ``items[:head]`` and ``items[cut:i]`` anchored on
        the last report (:mod:`ctxwin.fitting.anchor`), ``None`` when none bounds it."""
        anchor = self.anchor
        if anchor is None or i < anchor.end or self.seg.head_end != anchor.head:
            return None
        end = anchor.end
        new = self.estimator.raw([column[i] - column[end] for column in self.prefix])
        return anchor.estimate(cut, new_cost(scale.fresh, new) if i > end else 0)

    def whole(self, i: int, budget: int, scale: Scale) -> FitResult | None:
        """The fit of ``items[:i]`` when they are kept whole, as every strategy keeps a
        request within its budget (or, when the budget is not positive, reports it an
        overflow that is not enforced); ``None`` when they must be fitted. O(new items)."""
        self.advance(i)
        raw = self.raw(i)
        estimate = self._estimate(i, raw, scale)
        if budget <= 0 or estimate <= budget:
            return passed(i, estimate, budget, scale, len(self.seg.turn_starts), raw)
        return None

    def fit(
        self,
        i: int,
        budget: int,
        calibration: float,
        *,
        overhead: int = 0,
        learned: bool = False,
        block: float = 0.0,
        fresh: float | None = None,
    ) -> FitResult:
        """What :func:`ctxwin.fitting.pruning.fit` gives on a view of ``items[:i]`` (with
        no report to anchor on; ``fresh``: :attr:`~ctxwin.fitting.pruning.Scale.fresh`)."""
        scale = self.scale(calibration, overhead, learned, fresh)
        whole = self.whole(i, budget, scale)
        if whole is not None:
            return whole
        estimator = self.estimator
        total = self.total(i)
        raw = estimator.raw(total)
        estimate = self._estimate(i, raw, scale)
        seg = self.seg
        rules = self.rules
        problems = self.problems(i)
        refuse(problems)
        start = seg.head_end
        options = _Options(seg)
        kept = Kept(total, self.prefix, start, options, estimator)
        price = None
        if self.anchor is not None and self.anchored(i, start, scale) is not None:

            def price(k: int) -> int:
                cut = options[k][1]
                anchored = self.anchored(i, cut, scale)
                if anchored is not None and self.anchor is not None and cut == self.anchor.cut:
                    return anchored  # the reported request, extended
                plain = scale.estimate(kept.raw(k))
                return plain if anchored is None else min(anchored, plain)

        size = 0
        if price is not None and block > 0:
            if self._block is None:
                # the block, block × budget in the tokens the reports count, in the units
                # the cut measures what it drops (the cheap tier), at the ratio the history
                # shows; fixed for this item list, so the blocks stay where they are
                self._block = kept.block_raw(total) / max(1, estimate)
            size = max(1, int(block * budget * self._block))
        k = kept.stable(scale.raw_limit(budget), block, self._near, price, budget, size)
        self._near = k
        cut = options[k][1]
        if cut > start:
            view = self._view_for(i)
            cover = self.cover
            if (cover.spanned(start, 0) or cover.spanned(cut, 1)) and _shares_ids(
                view.items[:i], start, cut
            ):
                found = check(view, rules, [*range(start), *range(cut, i)])
            elif rules is None:
                found = []
            elif self.local_rules:
                found = self.local_problems([(0, start), (cut, i)] if start else [(cut, i)])
            else:
                found = rules(view, [*range(start), *range(cut, i)])
            guard(found, problems)
        after_k = scale.estimate(kept.raw(k)) if price is None else price(k)
        return pruned(self.segments(), k, i, after_k, estimate, budget, scale, raw, problems)

    def _estimate(self, i: int, raw: int, scale: Scale) -> int:
        """The estimate of ``items[:i]`` (raw estimate ``raw``): anchored on the last
        report when one bounds it, else the calibrated bound."""
        anchored = self.anchored(i, self.seg.head_end, scale) if self.anchor is not None else None
        return scale.estimate(raw) if anchored is None else anchored

    def segments(self) -> Segments:
        seg = self.seg
        return Segments(seg.head_end, seg.turn_starts, seg.unit_starts)

    def _view_for(self, i: int) -> View:
        """The view to check rules on: the whole one when the rules are local (they
        read only the kept items), else a view of exactly ``items[:i]``."""
        if self.local_rules or self.rules is None or i == len(self.view.items):
            return self.view
        return self.view_of(i)

    def view_of(self, i: int) -> View:
        """A view of ``items[:i]`` (for code that needs one; the fit does not)."""
        view = self.view
        return view._replace(items=view.items[:i], notes=list(view.notes))


def _index(p: Problem) -> int:
    return p.index


class Reader:
    """Reads the requests of one agent loop, estimating only the messages that are new.

    A request whose message list starts with the very objects (``is``) of the
    previous request's list, or of the list the previous fit kept, and whose
    other fields are equal, reuses their items: only the new messages are read.
    Anything else is read whole. The adapter must say a message reads the same
    alone as in its list (``reads_alone``), or put right what differs when it
    appends the messages read alone to the whole history (``extend_view``: the
    Responses format, whose model items join the ones before them); a read that
    fails, adds notes or changes the request's base cost is redone whole, so the
    result is always what reading the whole request gives. Messages already sent must not be
    changed in place (build new ones; every SDK's message objects are
    replaced, not edited).
    """

    def __init__(self, estimator: Estimator, fmt: str = AUTO, *, equal: bool = False) -> None:
        self.estimator = estimator
        self.fmt = fmt
        self.equal = equal
        """Also take a request whose first messages *equal* the last one's (not only are
        the same objects) as extending it: requests parsed one by one (a run's recorded
        calls) cost a comparison each, the reading they cost already."""
        self._adapter: Adapter | None = None
        self._rest: Any = None
        self._messages: list[Any] = []
        self._kept: list[Any] = []
        self._keep: list[int] = []
        self._kept_view: View | None = None
        self._view: View | None = None
        self._prefixes: Prefixes | None = None
        self.messages_read = 0
        """How many messages this reader has estimated (each new one once, when it can)."""

    def read(self, body: Any) -> tuple[Transcript, Prefixes]:
        """The request read (its view holds exactly its items) and the prefixes to fit
        it with (``prefixes.fit(len(transcript.view.items), ...)``)."""
        adapter = get_adapter(body, self.fmt)
        if isinstance(body, dict):
            messages = body.get(adapter.items_key)
            rest: Any = {k: v for k, v in body.items() if k != adapter.items_key}
        else:
            messages, rest = body, None
        prefixes = None
        if isinstance(messages, list) and adapter is self._adapter and rest == self._rest:
            prefixes = self._extend(body, adapter, messages)
        if prefixes is None:
            t = load(body, self.fmt, self.estimator)
            self.messages_read += len(t.view.items)
            view = t.view._replace(items=list(t.view.items), notes=list(t.view.notes))
            prefixes = Prefixes(view, self.estimator, adapter.problems)
        self._adapter = adapter
        self._rest = rest
        self._messages = list(messages) if isinstance(messages, list) else []
        self._kept = []
        self._kept_view = None
        self._view = prefixes.view
        self._prefixes = prefixes
        n = len(prefixes.view.items)
        view = prefixes.view
        snapshot = view._replace(items=view.items[:n], notes=list(view.notes))
        return Transcript(body, adapter, snapshot, self.estimator), prefixes

    def sent(self, messages: list[Any], keep: list[int], view: View | None = None) -> None:
        """The last request was sent with only ``messages``: its items at ``keep``, of
        ``view`` when that is not the request as read (a body a strategy edited, read
        again)."""
        self._kept = messages
        self._keep = keep
        self._kept_view = view

    def _extend(self, body: Any, adapter: Adapter, messages: list[Any]) -> Prefixes | None:
        view = self._view
        prefixes = self._prefixes
        if view is None or prefixes is None:
            return None
        old = self._messages
        kept = self._kept
        if len(messages) >= len(old) and (
            all(map(is_, old, messages)) or (self.equal and old == messages[: len(old)])
        ):
            start = len(old)
            items = None
        elif kept and len(messages) >= len(kept) and all(map(is_, kept, messages)):
            start = len(kept)
            if self._kept_view is not None:
                view = self._kept_view
            items = [view.items[k] for k in self._keep]
        else:
            return None
        new = messages[start:]
        if not all(map(adapter.reads_alone, new)):
            return None
        # a view that holds more than its items (the Responses format: ``joins``,
        # reasoning indices) is extended on the whole history only, never on a kept part
        if items is not None and type(view) is not View:
            return None
        part: View | None = None
        if new:
            sub = replace_key(body, adapter.items_key, new) if isinstance(body, dict) else new
            try:
                part = adapter.read(sub, self.estimator)
            except CtxwinError:
                return None
            if part.notes or view.notes or part.base != view.base:
                return None
        target = view if items is None else view._replace(items=items, notes=[])
        if part is not None:
            if not adapter.extend_view(target, part):
                return None
            self.messages_read += len(part.items)
        if items is None:
            return prefixes
        out = Prefixes(target, self.estimator, adapter.problems)
        if prefixes.anchor is not None and self._kept_view is None:
            out.anchor = prefixes.anchor.moved(self._keep)
        return out
