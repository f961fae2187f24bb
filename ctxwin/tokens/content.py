"""The content estimator: byte-class weights at C speed (``--estimator content``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from zlib import adler32

from ctxwin.tokens.base import Kind
from ctxwin.tokens.framing import provider_framing
from ctxwin.tokens.seeds import MODEL_CALIBRATION, family_seed

SCALE = 10_000
"""Fixed-point unit of :class:`ContentEstimator`'s slot 1: 1/10,000 of a token."""

_BYTE = 1776
"""What every UTF-8 byte costs, in :data:`SCALE` units (0.18 token)."""

_STEP = 985
"""One step of extra cost (0.0985 token); a byte class costs 0-20 steps extra."""

EXTRA_STEPS = {
    "upper": 9,  # A-Z
    "digit": 16,  # 0-9
    "punct": 2,  # ASCII punctuation, control characters, tab, CR, LF
    "cont": 3,  # UTF-8 continuation byte 80-BF
    "lead2": 4,  # lead byte of a 2-byte character
    "lead3": 4,  # lead byte of a 3-byte character
    "lead4": 16,  # lead byte of a 4-byte character
}
"""Extra cost of each byte class over :data:`_BYTE`, in steps of :data:`_STEP`."""


_CLASSES: tuple[tuple[str, bytes], ...] = (
    ("upper", bytes(range(ord("A"), ord("Z") + 1))),
    ("digit", bytes(range(ord("0"), ord("9") + 1))),
    ("punct", b"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~" + bytes([*range(0x00, 0x20), 0x7F])),
    ("cont", bytes(range(0x80, 0xC0))),
    ("lead2", bytes(range(0xC0, 0xE0))),
    ("lead3", bytes(range(0xE0, 0xF0))),
    ("lead4", bytes(range(0xF0, 0x100))),
)
"""The bytes of each class of :data:`EXTRA_STEPS`."""

_CLASSED = b"".join(members for _, members in _CLASSES)
_PLAIN = bytes(range(256)).translate(None, _CLASSED)
"""Bytes of no class, with no extra cost (lower-case letters, space): deleted while
translating."""


def _weight_table() -> bytes:
    """Byte → its class's extra steps (0-20), 0 for :data:`_PLAIN`.

    Built by translation, at C speed: a loop over the 256 bytes took some 0.5 M
    instructions of every start-up that estimates."""
    steps = b"".join(bytes([EXTRA_STEPS[cls]]) * len(members) for cls, members in _CLASSES)
    table = bytes.maketrans(_CLASSED + _PLAIN, steps + bytes(len(_PLAIN)))
    return bytes(range(256)).translate(table)


_WEIGHTS = _weight_table()

_ADLER_MOD = 65521
"""Adler-32 sums bytes modulo this prime."""

_SUM_SPAN = (_ADLER_MOD - 2) // max(_WEIGHTS)
"""Longest run of weights whose sum Adler-32 gives exactly (4,094 bytes)."""

_SHORT = 64
_SHORT_MEMO = 4096


def _steps(weights: bytes) -> int:
    """The sum of the byte values of ``weights`` (each at most ``max(_WEIGHTS)``), at C speed.

    Adler-32's low half is ``(1 + sum of the bytes) mod 65521``; for up to
    :data:`_SUM_SPAN` bytes the sum cannot wrap, so it is read off exactly.
    Longer input is summed a span at a time.
    """
    n = len(weights)
    if n <= _SUM_SPAN:
        return (adler32(weights) & 0xFFFF) - 1
    view = memoryview(weights)
    return sum((adler32(view[i : i + _SUM_SPAN]) & 0xFFFF) - 1 for i in range(0, n, _SUM_SPAN))


def _cost(data: bytes) -> int:
    """Cost of UTF-8 ``data`` in :data:`SCALE` units; see :class:`ContentEstimator`."""
    return _BYTE * len(data) + _STEP * _steps(data.translate(_WEIGHTS, _PLAIN))


def _memoize(memo: dict[str, int], text: str, price: Callable[[bytes], int]) -> int:
    """``price`` of ``text``'s UTF-8, remembered in ``memo`` (cleared when full). Callers
    look ``text`` up in ``memo`` themselves first: a hit costs no call."""
    known = price(text.encode("utf-8", "surrogatepass"))
    if len(memo) >= _SHORT_MEMO:
        memo.clear()
    memo[text] = known
    return known


class ContentEstimator:
    """Content-aware upper bound on BPE tokens, at C speed.

    Every UTF-8 byte costs 0.178 token, and each byte class costs extra
    (:data:`EXTRA_STEPS` steps of 0.0985 token)::

        upper-case letter +0.886   digit +1.576   punctuation, tab, line break +0.197
        continuation byte +0.296   lead byte of a 2-, 3-, 4-byte character
                                   +0.394, +0.394, +1.576

    so lower-case words and spaces cost 0.18 token a byte, a digit 1.75 (Qwen 3
    gives every digit its own token, and hex runs split at every digit), an
    upper-case letter 1.06 (base64 and identifiers break at case changes), a
    2-byte character (accented Latin, Cyrillic, Greek) 1.05, a CJK character
    1.52 and an emoji 3.17. Whole tokens: 3 per message and 3 per tool call,
    plus :func:`provider_framing`. The weights are the smallest on a grid of
    steps that bound o200k_base, cl100k_base, Llama 3 and Qwen 3 from above on
    every stress class (by 5 %) and every transcript of the recorded corpus, and
    every provider-reported prompt count of the fit part of its provider calls at the
    model family's seed (``python -m fidelity.fit --transcript-margin 1.0``; the
    held-out part is not fitted on, and none of it is under); ``make fidelity``
    re-measures them (README, "Estimator fidelity").

    Speed: one ``bytes.translate`` maps each byte to its extra steps and drops
    the plain bytes (lower-case letters, space); the low half of
    ``zlib.adler32`` of the result is one plus the sum of its bytes, exact up to
    4,094 bytes (:func:`_steps`) — no per-character Python loop. Short strings
    (call ids, tool names) are memoized.

    Costs add: the cost of two strings is the sum of their costs, so a string
    that mixes prose and a base64 blob is costed as both parts would be.
    Slot 0 holds whole tokens, slot 1 :data:`SCALE` units (1/10,000 token).
    """

    width = 2

    def __init__(self, *, per_message: int = 3, per_tool_call: int = 3, name: str = "content"):
        self.name = name
        self.per_message = per_message
        self.per_tool_call = per_tool_call
        self._short: dict[str, int] = {}
        """Costs of recent short strings: call ids come twice (call and result),
        tool names again and again, and a lookup is cheaper than pricing."""

    def add_text(self, cost: list[int], text: str, kind: Kind) -> None:
        if len(text) < _SHORT:
            known = self._short.get(text)
            cost[1] += _memoize(self._short, text, _cost) if known is None else known
            return
        data = text.encode("utf-8", "surrogatepass")
        t = data.translate(_WEIGHTS, _PLAIN)
        if len(t) <= _SUM_SPAN:  # inline of _cost's common case: this is the hot path
            cost[1] += _BYTE * len(data) + _STEP * ((adler32(t) & 0xFFFF) - 1)
        else:
            cost[1] += _BYTE * len(data) + _STEP * _steps(t)

    def add_bytes(self, cost: list[int], data: bytes, kind: Kind) -> None:
        cost[1] += _cost(data)

    def raw(self, totals: Sequence[int]) -> int:
        return totals[0] + -(-totals[1] // SCALE)

    def framing(self, fmt: str, *, has_tools: bool, model: str | None = None) -> int:
        return provider_framing(fmt, has_tools=has_tools, model=model)

    def seed(self, model: str | None = None) -> float:
        """1.0: the weights bound the four open tokenizer families from above; more for
        the families of :data:`~ctxwin.tokens.seeds.MODEL_CALIBRATION`, whose tokenizers
        count more."""
        return family_seed(model, MODEL_CALIBRATION)
