"""The bound in two tiers: a cheap upper bound on what it prices, and its price, on demand.

:class:`TieredBound` is the estimator ``bound`` names. It prices text exactly as
:class:`~ctxwin.tokens.bound.BoundEstimator` does (slot 1, the estimate), and in slot 2 as
:class:`~ctxwin.tokens.content.ContentEstimator` does: what the cut's blocks are measured on
(:meth:`TieredBound.block_raw`), never whether a request fits. A fit needs the bound's own
price only near the budget's edge: :meth:`TieredBound.lazy` reads a body with slot 1 at
:func:`cheap_cents`, the most the bound can price a string of its bytes, and remembers each
string, so :class:`Tightener` can price the items a fit keeps, and only those, at the bound
(:func:`ctxwin.fitting.pruning.fit`). Slot 2 is the same either way, so the blocks are too.

Why the cheap price is never below the bound's, string by string: the bound is K (2 tokens)
plus the prices of the parts the string is cut into, and the parts partition its bytes. A
part priced by pairs costs, for each byte, a pair price or the opening price of the byte's
class (:data:`~ctxwin.tokens.bound.BOUND_CLASSES`), each at most the largest such price of
that class, :data:`CHEAP_BYTE_CENTS`. A part priced exactly costs a count of tokens of a
byte-level BPE (the largest of four), a token a digit, or :func:`~ctxwin.tokens.vocabulary.run_cap`
— never more tokens than it has bytes, in the text as it is or, for Qwen 3, its NFC form
(a run of letters priced by its vocabulary parts and cuts, whose cuts are no bytes of it,
is priced so only when that costs less than its caps:
:func:`~ctxwin.tokens.bound._letter_run_parts`); and :data:`CHEAP_BYTE_CENTS` is at least a
token a byte. Text not in NFC may grow up to
three times when normalized, so such a string costs 2 tokens more a byte.
``tests/test_tiered.py`` checks the inequality on generated text, the corpus and every
piece of the vocabulary.
"""

from __future__ import annotations

import unicodedata
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from operator import attrgetter, gt, itemgetter
from typing import TYPE_CHECKING
from zlib import adler32

from ctxwin.tokens.base import Kind
from ctxwin.tokens.bound import (
    _BCHUNK,
    _BCLASS,
    _BOPEN,
    _BPAIR,
    BOUND_STRING_CENTS,
    BoundEstimator,
    _bound_units,
    _sum_prices,
)
from ctxwin.tokens.content import (
    _ADLER_MOD,
    _BYTE,
    _PLAIN,
    _SHORT,
    _SHORT_MEMO,
    _STEP,
    _SUM_SPAN,
    _WEIGHTS,
    SCALE,
    _cost,
)

if TYPE_CHECKING:
    from ctxwin.view import View


def _cheap_table() -> tuple[bytes, bytes, tuple[int, ...]]:
    """(byte → its cheap price over a token, in steps of :data:`CHEAP_STEP`; the bytes whose
    cheap price is a token; the cheap price of each byte in 1/100 token)."""
    most = [0] * 16
    for pair in range(256):
        most[pair & 15] = max(most[pair & 15], _BPAIR[pair])
    top = [max(100, most[_BCLASS[b]], _BOPEN[b]) for b in range(256)]
    steps = bytes(-(-(c - 100) // CHEAP_STEP) for c in top)
    cents = tuple(100 + CHEAP_STEP * k for k in steps)
    return steps, bytes(b for b in range(256) if not steps[b]), cents


CHEAP_STEP = 4
"""The cheap tier prices a byte in steps of this many 1/100 token over a token (rounded
up): the steps of a string add up in one Adler-32 for up to 3,119 bytes."""

_CHEAP_EXTRA, _CHEAP_PLAIN, CHEAP_BYTE_CENTS = _cheap_table()
"""What a byte costs at most in the bound (:func:`cheap_cents`): the largest pair or
opening price of its class, at least a token, rounded up to :data:`CHEAP_STEP` (1/100
token, by byte)."""

_UNIT = SCALE // 100
"""A cent of a token in :data:`~ctxwin.tokens.content.SCALE` units."""

_CHEAP_SPAN = (_ADLER_MOD - 2) // max(_CHEAP_EXTRA)
"""Longest run of :data:`_CHEAP_EXTRA` steps whose sum Adler-32 alone gives exactly."""


def cheap_cents(data: bytes, text: str | None = None) -> int:
    """The most :class:`~ctxwin.tokens.bound.BoundEstimator` prices UTF-8 ``data`` at (in
    1/100 token; see the module docstring): K plus :data:`CHEAP_BYTE_CENTS` of each byte,
    2 tokens more a byte for text not in NFC. ``text``: ``data`` decoded, when the caller
    has it. One ``bytes.translate`` and Adler-32 (no Python loop over the bytes)."""
    n = len(data)
    if not n:
        return 0
    extra = data.translate(_CHEAP_EXTRA, _CHEAP_PLAIN)
    if len(extra) <= _CHEAP_SPAN:
        steps = (adler32(extra) & 0xFFFF) - 1
    else:
        view = memoryview(extra)
        steps = sum(_sum_prices(view[i : i + _BCHUNK]) for i in range(0, len(extra), _BCHUNK))
    cents = BOUND_STRING_CENTS + 100 * n + CHEAP_STEP * steps
    if not data.isascii():
        if text is None:
            try:
                text = data.decode("utf-8", "surrogatepass")
            except UnicodeDecodeError:
                return cents  # not UTF-8: every byte one token at most, as it is
        if not unicodedata.is_normalized("NFC", text):
            cents += 200 * n
    return cents


class TieredBound(BoundEstimator):
    """``--estimator bound``: :class:`~ctxwin.tokens.bound.BoundEstimator`'s estimate
    (slots 0 and 1, every count the same), plus ``content``'s price in slot 2, the measure
    of the cut's blocks (:meth:`block_raw`). :meth:`lazy` gives the reader that prices
    slot 1 at the cheap tier."""

    width = 3

    def add_text(self, cost: list[int], text: str, kind: Kind) -> None:
        super().add_text(cost, text, kind)
        cost[2] += _cost(text.encode("utf-8", "surrogatepass"))

    def add_bytes(self, cost: list[int], data: bytes, kind: Kind) -> None:
        cost[1] += _bound_units(data)
        cost[2] += _cost(data)

    def block_raw(self, totals: Sequence[int]) -> int:
        """What the cut's blocks measure (:meth:`ctxwin.fitting.cut.Kept.dropped`):
        ``content``'s estimate of ``totals``. It costs a ``bytes.translate`` a string, is
        close to the bound's on most text (so a block is about the fraction of the budget
        it says), and is the same whether the items were priced at the bound or at the
        cheap tier: a block boundary is a function of the history alone, and a lazy fit
        finds the same cut. Only where the blocks fall rests on it; whether what is kept
        fits is always the bound's."""
        return totals[0] + -(-totals[2] // SCALE)

    def lazy(self) -> LazyBound:
        """A reader's estimator that prices at the cheap tier alone and remembers what it
        priced (:class:`LazyBound`)."""
        return LazyBound(self)


def _cheap_and_content(text: str) -> tuple[int, int]:
    """(:func:`cheap_cents` in :data:`~ctxwin.tokens.content.SCALE` units, ``content``'s
    price) of ``text``: one encoding, two ``bytes.translate`` and two Adler-32 for most
    strings (the common case of :func:`cheap_cents` and ``content``'s ``_cost`` inline)."""
    data = text.encode("utf-8", "surrogatepass")
    n = len(data)
    if not n:
        return 0, 0
    extra = data.translate(_CHEAP_EXTRA, _CHEAP_PLAIN)
    if len(extra) <= _CHEAP_SPAN:
        cents = BOUND_STRING_CENTS + 100 * n + CHEAP_STEP * ((adler32(extra) & 0xFFFF) - 1)
        if not text.isascii() and not unicodedata.is_normalized("NFC", text):
            cents += 200 * n
    else:
        cents = cheap_cents(data, text)
    weights = data.translate(_WEIGHTS, _PLAIN)
    if len(weights) <= _SUM_SPAN:
        content = _BYTE * n + _STEP * ((adler32(weights) & 0xFFFF) - 1)
    else:
        content = _cost(data)
    return _UNIT * cents, content


class LazyBound(TieredBound):
    """Prices every string at :func:`cheap_cents` in slot 1 (slot 2 as :class:`TieredBound`
    does), remembering the strings and, for each run of them priced into one cost vector,
    that vector, so :func:`tightener` can price an item at the bound later. A view read
    with it is an upper bound everywhere (slot 1 is never below the bound's price)."""

    def __init__(self, tight: TieredBound) -> None:
        super().__init__(
            per_message=tight.per_message, per_tool_call=tight.per_tool_call, name=tight.name
        )
        self.tight = tight
        self.values: list[str | bytes] = []
        """Every string priced, in order."""
        self.runs: list[tuple[list[int], int]] = []
        """(cost vector, index in :attr:`values` of the first of a run of strings priced
        into it)."""
        self._last: list[int] | None = None
        self._pairs: dict[str, tuple[int, int]] = {}
        """:func:`_cheap_and_content` of recent short strings (call ids, tool names)."""

    def add_text(self, cost: list[int], text: str, kind: Kind) -> None:
        if len(text) < _SHORT:
            pair = self._pairs.get(text)
            if pair is None:
                if len(self._pairs) >= _SHORT_MEMO:
                    self._pairs.clear()
                pair = self._pairs[text] = _cheap_and_content(text)
        else:
            pair = _cheap_and_content(text)
        cost[1] += pair[0]
        cost[2] += pair[1]
        if cost is not self._last:
            self._last = cost
            self.runs.append((cost, len(self.values)))
        self.values.append(text)

    def add_bytes(self, cost: list[int], data: bytes, kind: Kind) -> None:
        cost[1] += _UNIT * cheap_cents(data)
        cost[2] += _cost(data)
        if cost is not self._last:
            self._last = cost
            self.runs.append((cost, len(self.values)))
        self.values.append(data)


def _tight_less_cheap(est: BoundEstimator, values: Sequence[str | bytes]) -> int:
    """The bound's price of ``values`` less their cheap price (never above 0), in
    :data:`~ctxwin.tokens.content.SCALE` units."""
    cost = [0, 0]
    cheap = 0
    for value in values:
        if isinstance(value, bytes):
            cost[1] += _bound_units(value)
            cheap += cheap_cents(value)
        elif len(value) < _SHORT:  # the bound's memo of short strings
            BoundEstimator.add_text(est, cost, value, Kind.DENSE)
            cheap += cheap_cents(value.encode("utf-8", "surrogatepass"), value)
        else:
            data = value.encode("utf-8", "surrogatepass")
            cost[1] += _bound_units(data)
            cheap += cheap_cents(data, value)
    return cost[1] - _UNIT * cheap


class Tightener:
    """Prices items of a view read by a :class:`LazyBound` at the bound, in place: slot 1
    of each item's cost becomes the bound's price (never more than it was). Built by
    :func:`tightener`; the view's base is priced at once."""

    __slots__ = ("est", "owner", "priced", "starts", "values", "view")

    def __init__(
        self, view: View, est: BoundEstimator, values: list[str | bytes], owner: list[int],
        starts: list[int],
    ) -> None:  # fmt: skip
        self.view = view
        self.est = est
        self.values = values
        self.owner = owner
        """Per run of strings priced into an item's cost (in reading order), that item;
        ascending."""
        self.starts = starts
        """Per run, the index in :attr:`values` of its first string; one more entry, the
        end."""
        self.priced = bytearray(len(view.items))
        """Per item, 1 once it is priced at the bound."""

    def __call__(self, indices: Iterable[int]) -> None:
        """Price the items at ``indices`` at the bound (those already priced are skipped)."""
        items = self.view.items
        owner, starts, values, est, priced = (
            self.owner, self.starts, self.values, self.est, self.priced
        )  # fmt: skip
        n = len(owner)
        for i in indices:
            if priced[i]:
                continue
            priced[i] = 1
            r = bisect_left(owner, i)
            cost = items[i].cost
            while r < n and owner[r] == i:
                cost[1] += _tight_less_cheap(est, values[starts[r] : starts[r + 1]])
                r += 1

    def done(self) -> bool:
        """Whether every item that holds a string is priced at the bound."""
        return all(self.priced[i] for i in set(self.owner))


def tightener(view: View, reader: LazyBound) -> Tightener | None:
    """The :class:`Tightener` of ``view``, read by ``reader``, with its base priced at the
    bound; ``None`` when some string was priced into a cost vector that is neither an
    item's nor the base's (an adapter summing part costs), or the items' strings were not
    read in item order after the base's: the caller reads the body again at the bound.

    The runs are matched to the items at C speed (``map`` over their ids); pricing an item
    later finds its runs by bisection, so nothing here loops over the strings."""
    items = view.items
    index = dict(zip(map(id, map(_COST, items)), range(len(items)), strict=True))
    if len(index) != len(items):
        return None  # items sharing a cost vector
    index[id(view.base)] = -1
    runs = reader.runs
    reader.runs = []
    owner = list(map(index.get, map(id, map(_FIRST, runs))))
    if None in owner:
        return None
    starts = [*map(_SECOND, runs), len(reader.values)]
    first = next((r for r, o in enumerate(owner) if o != -1), len(owner))
    rest: list[int] = owner[first:]  # type: ignore[assignment]
    if -1 in rest or any(map(gt, rest, rest[1:])):
        return None
    est = reader.tight
    values = reader.values
    for r in range(first):  # the base's schemas and system text are read first
        view.base[1] += _tight_less_cheap(est, values[starts[r] : starts[r + 1]])
    return Tightener(view, est, values, rest, starts[first:])


_COST = attrgetter("cost")
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)
