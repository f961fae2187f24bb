"""Token estimation without a tokenizer.

An estimator turns text into a *cost vector*: a short list of integers, one
slot per content class it distinguishes. Slot 0 always holds whole tokens
(per-message overhead, media, framing); the other slots hold whatever the
estimator measures (UTF-8 bytes per class for :class:`SeedEstimator`).
Cost vectors add: the cost of a transcript is the element-wise sum of its
messages' vectors, and :meth:`Estimator.raw` maps a summed vector to tokens.
That is what lets the pruner drop turns by subtraction instead of
re-estimating the whole transcript per dropped turn.

The calibrated estimate is ``ceil(raw × max(1, calibration))``, computed in
exact decimal arithmetic so ``2503 × 1.15`` is ``2878.45`` and rounds up to
``2879`` on every platform.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from enum import IntEnum
from functools import lru_cache
from typing import Protocol, runtime_checkable
from zlib import adler32

from ctxwin.extras import install_hint

SEED_CALIBRATION = 1.15
"""The ADR's calibration seed: the estimate starts 15 % above the raw count."""


class Kind(IntEnum):
    """Content class of a piece of text, as the adapters see it."""

    PROSE = 0
    """Natural-language text: message content, function names."""
    DENSE = 1
    """Machine text: tool arguments and results, call ids, the tool schema block."""


@runtime_checkable
class Estimator(Protocol):
    """What the adapters and the pruner need from an estimator."""

    name: str
    width: int
    """Number of slots in a cost vector (slot 0 counts whole tokens)."""
    per_message: int
    """Tokens added for each message (role markers, separators)."""
    per_tool_call: int
    """Tokens added for each tool call (call framing)."""

    def add_text(self, cost: list[int], text: str, kind: Kind) -> None:
        """Add the cost of ``text`` of class ``kind`` into ``cost``."""

    def add_bytes(self, cost: list[int], data: bytes, kind: Kind) -> None:
        """Add the cost of UTF-8 ``data`` (e.g. a serialized schema) into ``cost``."""

    def raw(self, totals: Sequence[int]) -> int:
        """Uncalibrated tokens for a summed cost vector."""

    def framing(self, fmt: str, *, has_tools: bool, model: str | None = None) -> int:
        """Request-level tokens the provider adds that the body does not show (``model``:
        the body's, if it names one)."""


@lru_cache(maxsize=64)
def exact_decimal(value: float) -> tuple[int, int]:
    """``value`` as written (its shortest decimal form, ``repr``) as an exact fraction
    ``(numerator, denominator)``: 1.15 is 115/100, not the binary float's 1.149999….

    Raises ``ValueError`` for infinities and NaN.
    """
    text = repr(float(value))
    mantissa, _, exponent = text.partition("e")
    whole, _, digits = mantissa.partition(".")
    if not (whole.lstrip("-") + digits).isdigit():
        raise ValueError(f"expected a finite number, got {value!r}")
    numerator = int(whole + digits)
    denominator = 10 ** len(digits)
    shift = int(exponent) if exponent else 0
    if shift >= 0:
        numerator *= 10**shift
    else:
        denominator *= 10**-shift
    return numerator, denominator


def _ratio(value: float) -> tuple[int, int]:
    if value <= 0:
        raise ValueError(f"bytes per token must be positive, got {value!r}")
    return exact_decimal(value)


def _ceil_div(n: int, d: tuple[int, int]) -> int:
    """``ceil(n / d)`` exactly, for ``n >= 0`` and a positive fraction ``d``."""
    return -((-n * d[1]) // d[0])


class SeedEstimator:
    """The ADR's estimator: UTF-8 bytes ÷ 3.5 for prose, ÷ 2.5 for dense text.

    raw = ceil(prose ÷ 3.5) + ceil(dense ÷ 2.5) + 8 per message + 12 per tool call.
    Every constant is configurable.
    """

    width = 3

    def __init__(
        self,
        *,
        prose_bytes_per_token: float = 3.5,
        dense_bytes_per_token: float = 2.5,
        per_message: int = 8,
        per_tool_call: int = 12,
        name: str = "seed",
    ) -> None:
        self.name = name
        self.per_message = per_message
        self.per_tool_call = per_tool_call
        self._prose = _ratio(prose_bytes_per_token)
        self._dense = _ratio(dense_bytes_per_token)

    def add_text(self, cost: list[int], text: str, kind: Kind) -> None:
        n = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        cost[1 + kind] += n

    def add_bytes(self, cost: list[int], data: bytes, kind: Kind) -> None:
        cost[1 + kind] += len(data)

    def raw(self, totals: Sequence[int]) -> int:
        return totals[0] + _ceil_div(totals[1], self._prose) + _ceil_div(totals[2], self._dense)

    def framing(self, fmt: str, *, has_tools: bool, model: str | None = None) -> int:
        return TOOL_PROMPT_TOKENS.get(fmt, 0) if has_tools else 0


TOOL_PROMPT_TOKENS = {"anthropic": 346}
"""Tokens a provider adds to the prompt when the request has tools.

Anthropic documents a tool-use system prompt of 346 tokens (``tool_choice``
auto or none; 313 for any or tool) for its current models ("Tool use
pricing" in the tool-use overview); the larger figure is used.
"""


def calibrated(raw: int, calibration: float) -> int:
    """``ceil(raw × max(1, calibration))`` in exact decimal arithmetic
    (:func:`exact_decimal`); ``ValueError`` for a calibration that is not finite."""
    numerator, denominator = exact_decimal(calibration)
    if numerator <= denominator:
        return raw
    return -((-raw * numerator) // denominator)


def scaled(raw: int, factor: float) -> int:
    """``ceil(raw × factor)`` in exact decimal arithmetic, for any factor ``>= 0``: a
    factor learned from usage may be below 1 (the provider counted less than the raw
    estimate's upper bound), where :func:`calibrated` counts a setting below 1 as 1."""
    numerator, denominator = exact_decimal(factor)
    if numerator == denominator:
        return raw
    return -((-raw * numerator) // denominator)


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


def _weight_table() -> bytes:
    """Byte → its class's extra steps (0-20)."""
    classes = {
        **dict.fromkeys(range(ord("A"), ord("Z") + 1), "upper"),
        **dict.fromkeys(range(ord("0"), ord("9") + 1), "digit"),
        **dict.fromkeys(b"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", "punct"),
        **dict.fromkeys([*range(0x00, 0x20), 0x7F], "punct"),
        **dict.fromkeys(range(0x80, 0xC0), "cont"),
        **dict.fromkeys(range(0xC0, 0xE0), "lead2"),
        **dict.fromkeys(range(0xE0, 0xF0), "lead3"),
        **dict.fromkeys(range(0xF0, 0x100), "lead4"),
    }
    table = bytearray(256)
    for c, cls in classes.items():
        table[c] = EXTRA_STEPS[cls]
    return bytes(table)


_WEIGHTS = _weight_table()
_PLAIN = bytes(c for c in range(256) if _WEIGHTS[c] == 0)
"""Bytes with no extra cost (lower-case letters, space): deleted while translating."""

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
    every provider-reported prompt count there at the model family's seed
    (``python -m fidelity.fit --transcript-margin 1.0``); ``make fidelity``
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


BOUND_CLASSES = (
    ("e", b"e"),
    ("vowel", b"aoiu"),
    ("th", b"ths"),
    ("consonant", b"nrldcm"),
    ("rare letter", b"bfgjkpqvwxyz"),
    ("upper", bytes(range(0x41, 0x5B))),
    ("digit", bytes(range(0x30, 0x3A))),
    ("space", b" \t"),
    ("newline", b"\n\r\x0b\x0c"),
    ("punct", b".,:;'\"()[]{}-_/="),
    ("other ascii", bytes(range(0x80))),
    ("non-ascii", bytes(range(0x80, 0x100))),
)
"""The 12 byte classes of :class:`BoundEstimator`, by code. A byte takes the first
class that lists it (``other ascii`` is the rest of ASCII: other punctuation and
control characters). ``non-ascii`` bytes never reach a pair price (a run of them is
one piece, priced by :func:`fixed_cents`); their entries are 1 token a byte, the
most a byte-level BPE gives, should one ever be priced by pairs."""

BOUND_BYTE_CENTS = (0, 0, 0, 0, 0, 0, 0, 0, 51, 75, 107, 100)
"""u: what a byte of each class costs, in 1/100 token (by class code), unless it
follows a word byte and is one itself (then :data:`BOUND_WORD_CENTS` applies)."""

BOUND_RUN_CENTS = (105, 105, 104, 104, 105, 105, 0, 98, 132, 38, 6, 0)
"""s: what a byte costs on top of u when it starts a run of its class (the byte
before it is of another class, or it opens the string)."""

BOUND_WORD = (0, 1, 2, 3, 4, 5, 7)
"""Class codes of the *word* classes (the five lower-case letter groups, upper, space):
between two of them a pair price applies in place of u and s."""

BOUND_WORD_CENTS = (
    (36, 111, 97, 90, 111, 0, 0),
    (21, 60, 0, 0, 68, 0, 0),
    (0, 94, 55, 92, 97, 0, 0),
    (0, 91, 45, 61, 83, 0, 0),
    (0, 43, 24, 41, 84, 0, 0),
    (107, 104, 110, 108, 111, 73, 0),
    (33, 21, 0, 3, 0, 0, 0),
)
"""w[x][y]: what a byte of word class y costs after one of word class x (by the
order of :data:`BOUND_WORD`)."""

BOUND_STRING_CENTS = 200
"""K: what every non-empty string costs on top of its bytes (2 tokens)."""


def _bound_tables() -> tuple[bytes, bytes, bytes, bytes]:
    """(byte → class code, pair code → price, byte → opening price, byte → tail price).

    The pair code of two adjacent bytes is ``16 × class(first) + class(second)``;
    its price is that of the second byte in the context of the first.
    """
    code = bytearray(256)
    seen: set[int] = set()
    for c, (_, members) in enumerate(BOUND_CLASSES):
        for b in members:
            if b not in seen:
                seen.add(b)
                code[b] = c
    word = {c: i for i, c in enumerate(BOUND_WORD)}
    pair = bytearray(256)
    classes = range(len(BOUND_CLASSES))
    for x in classes:
        for y in classes:
            if x in word and y in word:
                price = BOUND_WORD_CENTS[word[x]][word[y]]
            else:
                price = BOUND_BYTE_CENTS[y] + (BOUND_RUN_CENTS[y] if x != y else 0)
            pair[16 * x + y] = price
    opening = bytes(BOUND_BYTE_CENTS[code[b]] + BOUND_RUN_CENTS[code[b]] for b in range(256))
    tail = bytes(pair[16 * code[b]] for b in range(256))
    return bytes(code), bytes(pair), opening, tail


_BCLASS, _BPAIR, _BOPEN, _BTAIL = _bound_tables()
_BSPAN = (_ADLER_MOD - 2) // max(_BPAIR)
"""Longest run of pair prices whose sum Adler-32 alone gives exactly."""

_BCHUNK = _ADLER_MOD - 1
"""Longest run of pair prices summed in one go: their sum is below 255 × 65,521,
so it is fixed by its remainders modulo 65,521 (Adler-32) and 255."""

_BINV = pow(_ADLER_MOD % 255, -1, 255)
"""65,521's inverse modulo 255, to combine the two remainders."""


def _sum_prices(prices: bytes | memoryview) -> int:
    """The sum of the bytes of ``prices`` (at most :data:`_BCHUNK` of them), at C speed.

    Adler-32's low half is one plus the sum modulo 65,521; the integer whose
    base-256 digits are the bytes is the sum modulo 255 (256 ≡ 1); the sum
    is below 255 × 65,521, so the two remainders fix it (Chinese remainder
    theorem). Runs up to :data:`_BSPAN` bytes need only the first.
    """
    low = ((adler32(prices) & 0xFFFF) - 1) % _ADLER_MOD
    if len(prices) <= _BSPAN:
        return low
    high = int.from_bytes(prices, "little") % 255
    return low + _ADLER_MOD * (((high - low) * _BINV) % 255)


def _pair_cents(data: bytes) -> int:
    """Pair price of UTF-8 ``data`` in 1/100 token, its first byte at its opening price
    (no string price K); see :class:`BoundEstimator`.

    Classes are translated to 4-bit codes; one big-integer shift-and-add puts
    ``16 × code[i] + code[i+1]`` in byte ``i`` (no carries: each sum is at most
    255), a second translate maps those pair codes to prices, and
    :func:`_sum_prices` adds them up. The last byte's code is paired with code
    0 (nothing follows it): that price is taken off again.
    """
    n = len(data)
    if not n:
        return 0
    a = int.from_bytes(data.translate(_BCLASS), "little")
    prices = ((a << 4) + (a >> 8)).to_bytes(n, "little").translate(_BPAIR)
    total = _BOPEN[data[0]] - _BTAIL[data[-1]]
    if n <= _BCHUNK:
        return total + _sum_prices(prices)
    view = memoryview(prices)
    return total + sum(_sum_prices(view[i : i + _BCHUNK]) for i in range(0, n, _BCHUNK))


_PREFIX = rb"[\x00-\t\x0b\x0c\x0e-/:-@\[-`{-\x7f]"
"""One ASCII byte that is neither a letter, a digit nor a line break: it may open a
letter run (the ``[^\\r\\n\\p{L}\\p{N}]?`` of the tokenizers' patterns)."""

_MARK = rb"[\x00-\x08\x0e-\x1f!-/:-@\[-`{-~\x7f]"
"""An ASCII byte that is neither whitespace, a letter nor a digit."""

_SEGMENT = (
    rb"'(?:[sdmtSDMT]|[lL][lL]|[vV][eE]|[rR][eE])"
    rb"|" + _PREFIX + rb"?[A-Z]*[a-z]+|" + _PREFIX + rb"?[A-Z]+"
    rb"|[0-9]+| ?" + _MARK + rb"+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+|[\x80-\xff]+"
)
"""The pieces :class:`BoundEstimator` prices one by one, cut as o200k_base,
cl100k_base, Llama 3 and Qwen 3 cut ASCII text before they tokenize it: a
contraction (``'s``, ``'ll``); a run of letters (upper-case ones, then lower-case
ones) with the one space, tab or punctuation byte before it (`` the``, ``_id``,
``.get``); a run of digits; a run of punctuation with the space before it and the
line breaks after it (``.\n\n``); whitespace up to its last line break; a run of
whitespace, its last character apart when something else follows it (it joins that
instead); a run of non-ASCII bytes."""


@lru_cache(maxsize=1)
def bound_vocabulary() -> dict[bytes, int]:
    """Piece → its exact count: the largest number of tokens o200k_base, cl100k_base,
    Llama 3 and Qwen 3 give it (``ctxwin/data/bound-vocab.bin.gz``: each record is the
    count byte, the piece and NUL; written by ``python -m fidelity.bound --vocab``).
    261,793 pieces, each ASCII without digits and one whole piece of
    :func:`bound_pieces`: the 131,456 tokens of the four vocabularies that count 1 or
    2 in all four (`` the``, ``_id``, ``.get``, ``'s``, ``.\n\n``, eight spaces), and
    130,337 more forms of the 20,000 commonest English words (lower-case, capitalized,
    upper-case; alone, after a space, after ``_``), which count 2 to 8 (`` economy``,
    ``_baggages``, ``JFK``)."""
    import gzip
    from pathlib import Path

    path = Path(__file__).parent / "data" / "bound-vocab.bin.gz"
    records = gzip.decompress(path.read_bytes()).split(b"\0")[:-1]
    return {r[1:]: r[0] for r in records}


def fixed_cents(piece: bytes, vocab: dict[bytes, int]) -> int | None:
    """What ``piece`` costs, in 1/100 token, when a count is known for it: its count in
    ``vocab``; one token per digit for a run of ASCII digits (Qwen 3 gives every digit
    its own token; the others group up to three, one token or more each); for a run of
    non-ASCII bytes, :func:`run_cap`. ``None`` for any other piece (it is priced by
    pairs)."""
    count = vocab.get(piece)
    if count is not None:
        return 100 * count
    if piece[:1] >= b"\x80":
        return 100 * run_cap(piece)
    if piece.isdigit():
        return 100 * len(piece)
    return None


@lru_cache(maxsize=1)
def char_caps() -> bytes:
    """Code point → the most tokens o200k_base, cl100k_base, Llama 3 or Qwen 3 can start
    inside that character, wherever it stands (``ctxwin/data/char-caps.bin.gz``, written
    by ``python -m fidelity.bound --chars``: the characters whose cap is below their UTF-8
    length, each as three bytes of code point and one of cap).

    Every token holds at least one byte, so a character can start no more tokens than it
    has bytes; all four tokenizers are byte-level BPE. Fewer where their vocabularies rule
    a split out: a token starts at byte k > 0 of a character only if bytes k-1 and k end
    in different tokens. If both would be tokens of one byte each and the two bytes
    together are a token, that split is not final: BPE stops only when no two
    neighbouring tokens make a token, and a two-byte token is made from its two bytes
    alone. ``--chars`` tries every split of every character that obeys this rule, with
    every part a token of the vocabulary, the first part allowed to be the tail of a
    longer token reaching in from the left and the last the head of one running on to the
    right (and there the rule is waived); the cap is the most parts over the four
    tokenizers. The 192 code points of the Hiragana and Katakana blocks and 512 CJK
    ideographs cannot be split in three (2 tokens, not 3), nor 7,640 four-byte
    characters in four (3, not 4); every other character keeps one token a byte."""
    import gzip
    from pathlib import Path

    table = bytearray(
        b"\x01" * 0x80 + b"\x02" * 0x780 + b"\x03" * 0xF800 + b"\x04" * (0x110000 - 0x10000)
    )
    path = Path(__file__).parent / "data" / "char-caps.bin.gz"
    raw = gzip.decompress(path.read_bytes())
    for i in range(0, len(raw), 4):
        table[int.from_bytes(raw[i : i + 3], "big")] = raw[i + 3]
    return bytes(table)


def run_cap(run: bytes) -> int:
    """The most tokens any of the four tokenizers can start in ``run``, UTF-8 text of
    non-ASCII characters: the sum of their :func:`char_caps`, over the text as it is or
    over its NFC form if that sum is larger (Qwen 3 normalizes to NFC before it tokenizes,
    and some characters grow: U+0F76 from 3 bytes to 6, U+1D160 from 4 to 12). Bytes that
    are not UTF-8 cost one token each."""
    import unicodedata

    try:
        text = run.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return len(run)
    caps = char_caps()
    price = sum(text.translate(caps).encode("latin-1"))
    if unicodedata.is_normalized("NFC", text):
        return price
    nfc = unicodedata.normalize("NFC", text)
    return max(price, sum(nfc.translate(caps).encode("latin-1")))


_LOOSE = rb" +(?= |\Z)"
"""Spaces that no run takes: all but the last of a run of spaces before something
else, and every space at the end of the string."""


@lru_cache(maxsize=2)
def _regex(pattern: bytes) -> re.Pattern[bytes]:
    """``pattern`` compiled on first use (``ctxwin`` starts without compiling it)."""
    return re.compile(pattern)


def bound_pieces(data: bytes) -> Iterator[bytes]:
    """The pieces :class:`BoundEstimator` prices, in no particular order: the text
    between single spaces, each with the space before it, cut by :data:`_SEGMENT`,
    and the loose spaces (:data:`_LOOSE`). A space followed by anything but
    whitespace opens a piece under :data:`_SEGMENT` too, so this is its cut of the
    whole text, except that a whitespace run mixing spaces with tabs or line breaks
    is cut finer (``\t \t`` is two pieces, ``  \n`` is `` `` and `` \n``)."""
    chunks = data.split(b" ")
    if chunks[0]:
        yield from _regex(_SEGMENT).findall(chunks[0])
    for chunk in chunks[1:]:
        if chunk:
            yield from _regex(_SEGMENT).findall(b" " + chunk)
    yield from _regex(_LOOSE).findall(data)


_MEMO_SIZE = 1 << 16


def bound_parts(piece: bytes, vocab: dict[bytes, int]) -> Iterator[bytes]:
    """``piece`` itself, or for a run of spaces or of tabs the vocabulary lacks (a long
    indentation) the longest runs it has, from the left: the tokenizers count such a
    run in as few tokens or fewer (not so for mixed line breaks, which keep their
    pair price)."""
    if piece in vocab or len(set(piece)) != 1 or piece[0] not in b" \t":
        yield piece
        return
    i = 0
    while i < len(piece):
        j = min(len(piece), i + 128)
        while j > i + 1 and piece[i:j] not in vocab:
            j -= 1
        yield piece[i:j]
        i = j


class _PiecePrices(dict[bytes, int]):
    """Piece → its price: the sum over :func:`bound_parts` of the exact price
    (:func:`fixed_cents`), else the pair price; computed on a miss, remembered when
    short (words repeat)."""

    def __missing__(self, piece: bytes) -> int:
        vocab = bound_vocabulary()
        price = fixed_cents(piece, vocab)
        if price is None:
            price = 0
            for part in bound_parts(piece, vocab):
                exact = fixed_cents(part, vocab)
                price += _pair_cents(part) if exact is None else exact
        if len(piece) <= _SHORT:
            if len(self) >= _MEMO_SIZE:
                self.clear()
            self[piece] = price
        return price


_PIECE = _PiecePrices()
_piece_cents = _PIECE.__getitem__


class _ChunkPrices(dict[bytes, int]):
    """Chunk (text between single spaces) → the price of its pieces, with a space
    before it or not; computed on a miss, remembered when short."""

    def __init__(self, lead: bytes) -> None:
        super().__init__({b"": 0})
        self.lead = lead

    def __missing__(self, chunk: bytes) -> int:
        price = sum(map(_piece_cents, _regex(_SEGMENT).findall(self.lead + chunk)))
        if len(chunk) <= _SHORT:
            if len(self) >= _MEMO_SIZE:
                self.clear()
                self[b""] = 0
            self[chunk] = price
        return price


_OPENING_CHUNK = _ChunkPrices(b"")
_SPACED_CHUNK = _ChunkPrices(b" ")


def _bound_cents(data: bytes) -> int:
    """Price of UTF-8 ``data`` in 1/100 token: K plus the price of each piece of
    :func:`bound_pieces`; see :class:`BoundEstimator`.

    ``bytes.split`` cuts the text at single spaces (in C); each chunk's price is
    looked up (``map`` over a dict, in C), so the regex only runs on chunks not seen
    lately; loose spaces are looked for only when two spaces meet or one ends the text.
    """
    if not data:
        return 0
    chunks = data.split(b" ")
    total = BOUND_STRING_CENTS + _OPENING_CHUNK[chunks[0]]
    if len(chunks) > 1:
        total += sum(map(_SPACED_CHUNK.__getitem__, chunks[1:]))
        if data[-1] == 0x20 or b"  " in data:
            total += sum(map(_piece_cents, _regex(_LOOSE).findall(data)))
    return total


_BOUND_UNIT = SCALE // 100
"""Slot 1 holds :data:`SCALE` units; a cent of a token is this many."""


def _bound_units(data: bytes) -> int:
    """:func:`_bound_cents` in :data:`SCALE` units."""
    return _BOUND_UNIT * _bound_cents(data)


class BoundEstimator(ContentEstimator):
    """Upper bound on BPE tokens for text of any mix of byte classes (``--estimator bound``).

    The text is cut into pieces (:func:`bound_pieces`, :data:`_SEGMENT`) where
    o200k_base, cl100k_base, Llama 3 and Qwen 3 cut ASCII text before they
    tokenize it: a run of ASCII letters (upper-case ones, then lower-case ones —
    ``getValue`` is two, as o200k cuts it) with the one space, tab or punctuation
    byte before it (`` the``, ``_id``, ``.get``); a contraction (``'s``); a run of
    digits; a run of punctuation with the space before it and the line breaks
    after it (``):\\n``); whitespace up to its last line break; other whitespace,
    its last character apart when something else follows; a run of non-ASCII
    bytes. A piece costs

    - its exact count if that is known (:func:`fixed_cents`): the pieces of the
      *vocabulary* (:func:`bound_vocabulary`), each with the largest of the four
      counts: 131,456 tokens of the vocabularies of o200k_base, cl100k_base, Llama 3
      and Qwen 3 that are one whole ASCII piece and count 1 or 2 (`` the``,
      ``_id``, ``":"``, ``.\\n\\n``, eight spaces), and 130,337 forms of the commonest
      English words, which count up to 8 (`` economy``, ``_Flights``); a run of digits, one
      token a digit (Qwen 3 splits every digit; the others group up to three);
    - a run of non-ASCII bytes: the most tokens the four can start in it
      (:func:`run_cap`): one a byte, fewer for characters no tokenizer can split
      that far (kana: 2 of 3 bytes), of its NFC form if that is more;
    - a run of spaces or tabs the vocabulary lacks: its longest vocabulary pieces;
    - any other (ASCII) piece: its *pair price*, each byte priced by its class and
      the class of the byte before it, in 1/100 token (:data:`BOUND_CLASSES` lists
      the classes): between two *word* bytes (five lower-case letter groups,
      upper-case, space or tab) a price per ordered pair of word classes, w
      (:data:`BOUND_WORD_CENTS`); otherwise u, the class's price per byte
      (:data:`BOUND_BYTE_CENTS`), plus s (:data:`BOUND_RUN_CENTS`) when the
      byte starts a run of its class or the piece;

    plus K (:data:`BOUND_STRING_CENTS`, 2 tokens) per non-empty string.

    Why that bounds any mixture: each of the four tokenizers first cuts text
    into pre-tokens by a regular expression and never makes a token across a
    cut, so it counts a text as the sum over its pre-tokens. On ASCII the pieces
    follow the grammar those expressions share. Where they are finer than one
    tokenizer's pre-tokens (for example at a change of case, which only o200k cuts; a
    contraction, which o200k keeps with its word; an ASCII letter run next to a
    non-ASCII letter; a whitespace run mixing spaces with tabs or line breaks),
    the pre-token is several pieces, and cutting finer only adds tokens — in
    practice: BPE is not guaranteed sub-additive (a long run of mixed ``\\r``
    and ``\\n`` tokenizes worse than its vocabulary pieces, so such runs keep
    their pair price). Where a piece is coarser, its price covers the cut it
    skips: a digit run costs a token per digit, the worst any of the four
    gives it, and a vocabulary count is what each tokenizer gives the piece
    when it cuts it itself. A non-ASCII run needs no such argument: a token
    holds at least one byte, so no byte-level BPE (all four are) starts more
    tokens in a run than it has bytes in the text it tokenizes — the run itself
    for three of them, its NFC form for Qwen 3, which normalizes first and
    makes some characters longer (one Tibetan vowel sign 6 tokens from 3 bytes);
    and fewer in a character that no split into that many tokens can survive BPE
    (:func:`char_caps`, derived from the four vocabularies).
    Every pair price is the worst case of the text it
    dominates, solved for by a linear program (``python -m fidelity.bound``)
    over texts cut the same way: random runs of every character class,
    alternations of every pair of classes at run lengths 1-8, random strings
    over unions of classes, 68,000 random words of 1-40 letters (over every
    union of the lower-case groups, upper-case and mixed case, with and
    without a space before them), and the *fit* half of the generated
    adversarial classes (:func:`fidelity.adversarial.split`) must each be
    priced at 1.1 × the largest of the four counts or more — the margin on the
    tokens not given a fixed price (:func:`fixed_cents`) — cheapest on the fit half's natural-text
    classes; the recorded corpus is never used.

    K pays for what pieces cannot see, once per string: the tokens a
    tokenizer spends on a string beyond the sum of its pieces (BPE across a
    cut made finer here) and the rounding of the pair prices up to whole
    tokens; the linear program takes it as given. It stays 2 tokens for
    strings whose pieces are all priced exactly too: nothing ties such a
    string's count to the sum of its exact pieces (``python -m
    fidelity.oracle`` finds recorded strings one token over it).

    On ASCII it is a bound on what was tried, not a proof: besides sub-additivity, a
    letter string outside the vocabulary is priced by its letter pairs alone,
    so w is only as good as the random words it was derived on. Of random
    words drawn apart from them (``python -m fidelity.bound --words``), 0 of
    20,000 of 1-20 lower-case letters are under (lowest 1.000), nor any of
    100,000 more, 50,000 of 21-40 letters, 50,000 after a space or 100,000 at
    English letter frequencies. The held-out half of the adversarial classes
    and a hypothesis test over arbitrary mixtures of class runs check the
    rest (fidelity/results.md).

    Monotonic or sub-additive it is not (``th`` costs more than ``the``): costs
    of whole strings are added, never of pieces of one string.

    Speed: ``bytes.split`` at single spaces, then a dict lookup per chunk
    (``map``, in C); only a chunk not seen lately is cut by a compiled regex and
    priced (vocabulary lookup, or two ``bytes.translate`` calls, a big-integer
    shift-and-add and Adler-32, :func:`_pair_cents`) — no per-character Python
    loop, but about 15 times the time of ``content`` (``python -m
    fidelity.speed``). Whole tokens, the memo of short strings, ``raw`` and the
    framing are :class:`ContentEstimator`'s.
    """

    def __init__(self, *, per_message: int = 3, per_tool_call: int = 3, name: str = "bound"):
        super().__init__(per_message=per_message, per_tool_call=per_tool_call, name=name)

    def add_text(self, cost: list[int], text: str, kind: Kind) -> None:
        if len(text) < _SHORT:
            known = self._short.get(text)
            cost[1] += _memoize(self._short, text, _bound_units) if known is None else known
            return
        cost[1] += _bound_units(text.encode("utf-8", "surrogatepass"))

    def add_bytes(self, cost: list[int], data: bytes, kind: Kind) -> None:
        cost[1] += _bound_units(data)


ANTHROPIC_TOOL_PROMPT = TOOL_PROMPT_TOKENS["anthropic"]
"""Anthropic's hidden tool-use system prompt (see :data:`TOOL_PROMPT_TOKENS`):
its tool-use pricing table lists 346 tokens for ``tool_choice`` auto/none and
313 for any/tool on Claude Opus 4.x, Sonnet 4.x, Sonnet 3.7 and Haiku 4.5
(older models fewer); the body never shows them."""

OPENAI_REPLY_PRIMING = 3
"""``<|start|>assistant<|message|>``: every Chat Completions prompt ends with
it (OpenAI cookbook, "How to count tokens with tiktoken")."""

OPENAI_TOOLS_PREAMBLE = 16
"""OpenAI renders ``tools`` inside the system message under a
``# Tools`` / ``namespace functions`` header the body does not show. Its size
is not published; 16 keeps every recorded gpt-4o, gpt-4o-mini and
gpt-5.4-mini request with tools in the corpus from being under-counted (the
tightest was 1 token short with 12 and 14)."""


OPENAI_REASONING_PREAMBLE = 13
"""OpenAI's reasoning models (GPT-5 and 5.x, o1, o3, o4-mini) put a header of their own
before the conversation (the reasoning effort, the channels a reply may use) that the
body does not show. Its size is not published. Counted exactly with o200k_base, every
recorded gpt-5.4-mini request of one user message and two tools was reported 13 tokens
over the body and the rest of this framing (265 against 252); 13 keeps all eight
recorded gpt-5.4-mini requests covered. The o-series share the header format and get
it too; no call of theirs is recorded."""

REASONING_FAMILIES = ("gpt-5", "o1", "o3", "o4")
"""Name prefixes of OpenAI's reasoning models (:func:`reasoning_model`)."""


def name_family(model: str, prefixes: Iterable[str], ends: str = "-:@_") -> str | None:
    """The first of ``prefixes`` that ``model``'s name (lower case, after any
    ``provider/`` part) is, or starts with followed by one of ``ends``; else ``None``."""
    name = model.strip().lower().rpartition("/")[2]
    for prefix in prefixes:
        if name == prefix or (name.startswith(prefix) and name[len(prefix)] in ends):
            return prefix
    return None


@lru_cache(maxsize=256)
def reasoning_model(model: str | None) -> bool:
    """Whether ``model`` is one of OpenAI's reasoning models: its name, after any
    ``provider/`` part, is one of :data:`REASONING_FAMILIES` or starts with one followed
    by ``-``, ``.``, ``:``, ``@`` or ``_`` (``gpt-5.4-mini``, ``o3-pro``, ``openai/o1``).
    Remembered: every body of a run names the same model, and ``replay`` reads
    thousands."""
    if not model:
        return False
    return name_family(model, REASONING_FAMILIES, "-.:@_") is not None


def provider_framing(fmt: str, *, has_tools: bool, model: str | None = None) -> int:
    """Request-level tokens a provider adds around the body (documented above).

    ``fmt`` is an adapter name. Every format gets the reply priming;
    ``anthropic*`` formats with tools add Anthropic's tool-use system prompt,
    ``openai*`` formats with tools OpenAI's tools header, and ``openai*`` formats for
    a reasoning ``model`` (:func:`reasoning_model`) its header.
    """
    tokens = OPENAI_REPLY_PRIMING
    if has_tools:
        if fmt.startswith("anthropic"):
            tokens += ANTHROPIC_TOOL_PROMPT
        elif fmt.startswith("openai"):
            tokens += OPENAI_TOOLS_PREAMBLE
    if fmt.startswith("openai") and reasoning_model(model):
        tokens += OPENAI_REASONING_PREAMBLE
    return tokens


DEFAULT_CALIBRATION = {"seed": SEED_CALIBRATION, "content": 1.0, "bound": 1.0}
"""Calibration seed per estimator: the ADR's 1.15 for its formula, which can
under-count; 1.0 for :class:`ContentEstimator`, whose weights already bound
the four open tokenizer families from above (README, "Estimator fidelity")."""

MODEL_CALIBRATION: tuple[tuple[str, float], ...] = (
    ("claude", 1.35),
    ("anthropic", 1.35),
    ("deepseek", 1.2),
    ("llama-4", 1.3),
    ("llama4", 1.3),
)
"""Seeds for :class:`ContentEstimator` on model families whose own tokenizers
count more than the four it bounds, matched as substrings of the lower-cased
model name. Measured on the provider-reported prompt tokens in the recorded
corpus (``make fidelity``, provider rows): Claude Sonnet 4/4.5 and Haiku 4.5
reported up to 1/0.76 ≈ 1.31× the uncalibrated estimate (tool-search requests
excepted, see README), DeepSeek-V3 1.15×, Llama 4 Maverick 1.26×. A Claude model
on the newer tokenizer takes :data:`CLAUDE_NEXT_SEED` instead (:func:`claude_seed`)."""

BOUND_MODEL_CALIBRATION: tuple[tuple[str, float], ...] = (
    ("claude", 1.4),
    ("anthropic", 1.4),
    ("deepseek", 1.4),
    ("llama-4", 1.45),
    ("llama4", 1.45),
)
"""Seeds for :class:`BoundEstimator` on the model families of :data:`MODEL_CALIBRATION`.
It sits closer to the four tokenizers than ``content``, so it cannot borrow their seeds,
which rest on ``content``'s slack. Each is the provider-reported prompt count ÷ the
largest of the four exact counts of the same body (with the estimators' framing), worst
call of the recorded corpus, rounded up to 0.05: Claude Sonnet 4.5 1.353, DeepSeek-V3
1.366, Llama 4 Maverick 1.418 (``make fidelity``, provider rows). The bound is never
below the largest of the four, so the bound times its seed is not below those calls'
reported counts either. Claude on the newer tokenizer takes :data:`CLAUDE_NEXT_SEED`
too (1.353 × 1.47 = 1.99)."""

CLAUDE_TOKENIZER_GROWTH = 1.35
"""Anthropic documents that the tokenizer of Claude Opus 4.7 and later models
"may use roughly 1× to 1.35× as many tokens when processing text compared to
previous models" (platform.claude.com, "What's new in Claude Opus 4.7" and the
migration guide). The model table marks those models ``tokenizer_generation`` 2."""

CLAUDE_NEXT_SEED = 2.0
"""The seed of a Claude model on the generation-2 tokenizer (Opus 4.7 and later).

It rests on two figures: the generation-1 worst case measured in the recorded
corpus (1.31× the uncalibrated estimate, :data:`MODEL_CALIBRATION`) times
Anthropic's documented growth of up to 1.35× (:data:`CLAUDE_TOKENIZER_GROWTH`)
is 1.77; independent ``count_tokens`` comparisons of Opus 4.6 and 4.7 published
after the release measured up to 1.45-1.47× on English prose and technical
documents, and 1.31 × 1.47 = 1.93. 2.0 covers both. The corpus holds no call to
such a model, so this seed is not measured here; pathological text (one letter
repeated) grows ~3× and is not covered. Usage teaches the real factor after
the first call (``ctxwin proxy``, :class:`~ctxwin.ContextWindowManager`)."""


@lru_cache(maxsize=256)
def claude_seed(model: str, first: float = MODEL_CALIBRATION[0][1]) -> float:
    """The seed of Claude ``model``: ``first`` (the generation-1 seed, 1.35 for
    ``content``) when the model table puts it on the generation-1 tokenizer, else
    :data:`CLAUDE_NEXT_SEED` (a Claude model the table does not know is taken to be
    newer)."""
    from ctxwin.budget import lookup_model

    row = lookup_model(model)
    if row is not None and row.tokenizer == "claude" and row.tokenizer_generation == 1:
        return first
    return CLAUDE_NEXT_SEED


def default_calibration(name: str, model: str | None = None) -> float:
    """The calibration seed for estimator ``name`` used with ``model``.

    The seed formula always starts at the ADR's 1.15; the content and bound
    estimators start at 1.0, or at their model family's measured seed
    (:data:`MODEL_CALIBRATION`, :data:`BOUND_MODEL_CALIBRATION`; Claude by the
    generation of its tokenizer, :func:`claude_seed`).
    """
    if name.startswith("tokenizer:"):
        return 1.0  # exact counts; the framing is added on top
    if name not in ("content", "bound"):
        return DEFAULT_CALIBRATION.get(name, SEED_CALIBRATION)
    if model:
        lowered = model.lower()
        table = BOUND_MODEL_CALIBRATION if name == "bound" else MODEL_CALIBRATION
        for needle, seed in table:
            if needle in lowered:
                return claude_seed(model, seed) if needle in ("claude", "anthropic") else seed
    return DEFAULT_CALIBRATION[name]


def default_estimator() -> Estimator:
    """The estimator used when none is named."""
    return ContentEstimator()


ESTIMATORS: dict[str, Callable[[], Estimator]] = {
    "seed": SeedEstimator,
    "content": ContentEstimator,
    "bound": BoundEstimator,
}
"""Estimators selectable by name (``--estimator``)."""


def get_estimator(name: str) -> Estimator:
    """Build the estimator called ``name``; ``ValueError`` names the choices."""
    try:
        factory = ESTIMATORS[name]
    except KeyError:
        choices = ", ".join(sorted(ESTIMATORS))
        raise ValueError(f"unknown estimator {name!r} (choose from: {choices})") from None
    return factory()


TOKENIZERS = ("o200k_base", "cl100k_base", "llama3", "qwen3")
"""BPE encodings ``--tokenizer`` accepts (all ship with the ``bpe`` extra)."""

AUTO_TOKENIZER = "auto"
"""``--tokenizer auto``: count exactly when the model's tokenizer is one of
:data:`TOKENIZERS` and the ``bpe`` extra is installed, else use the estimator
(:func:`auto_estimator`)."""

OPEN_FAMILIES: tuple[tuple[str, str], ...] = (
    ("chatgpt-4o", "o200k_base"),
    ("gpt-4o", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4-mini", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5-turbo", "cl100k_base"),
    ("meta-llama-3", "llama3"),
    ("meta-llama-3.1", "llama3"),
    ("llama-3", "llama3"),
    ("llama-3.1", "llama3"),
    ("llama-3.2", "llama3"),
    ("llama-3.3", "llama3"),
    ("llama3", "llama3"),
    ("qwen2.5", "qwen3"),
    ("qwen3", "qwen3"),
)
"""Name prefixes → encoding, for models the table does not list (a Hugging Face id
such as ``Qwen/Qwen2.5-7B-Instruct``): the prefix must be the whole name or end at
``-``, ``:``, ``@`` or ``_``, and the longest wins. Qwen 2.5 and 3 share one
vocabulary (``qwen3``), as do Llama 3, 3.1, 3.2 and 3.3 (``llama3``)."""

_FAMILY_ENCODING = dict(OPEN_FAMILIES)
_FAMILY_ORDER = sorted(_FAMILY_ENCODING, key=lambda prefix: -len(prefix))


def exact_encoding(model: str | None) -> str | None:
    """The encoding of :data:`TOKENIZERS` that ``model`` uses, or ``None``.

    The model table decides when it lists the model (its ``tokenizer`` column);
    otherwise :data:`OPEN_FAMILIES`, after any ``provider/`` prefix.
    """
    if not model:
        return None
    from ctxwin.budget import lookup_model

    row = lookup_model(model)
    if row is not None:
        return row.tokenizer if row.tokenizer in TOKENIZERS else None
    family = name_family(model, _FAMILY_ORDER)
    return None if family is None else _FAMILY_ENCODING[family]


def auto_estimator(model: str | None, fallback: Estimator) -> Estimator:
    """``--tokenizer auto``: exact counts in ``model``'s encoding
    (:func:`exact_encoding`) when the ``bpe`` extra is installed, else ``fallback``.
    The estimator's ``name`` (the report's ``estimator``) says which it is."""
    encoding = exact_encoding(model)
    if encoding is None:
        return fallback
    try:
        import quicktok  # noqa: F401
    except ImportError:
        return fallback
    return TokenizerEstimator(encoding)


BPE_MISSING = (
    f"--tokenizer needs the optional BPE tokenizer: {install_hint('bpe')} "
    "(or leave --tokenizer out to use the built-in estimator)"
)


class TokenizerEstimator:
    """Exact BPE token counts (``quicktok``) plus OpenAI's chat framing.

    raw = Σ tokens of every counted string + 3 per message + 3 per tool call
    + :func:`provider_framing`. The tokenizer is imported on first use, so the
    core never needs it; a missing install raises :class:`UsageError` naming
    ``pip install 'ctxwin[bpe]'``.
    """

    width = 1

    def __init__(self, encoding: str, *, per_message: int = 3, per_tool_call: int = 3) -> None:
        from ctxwin.errors import UsageError

        if encoding not in TOKENIZERS:
            raise UsageError(
                f"--tokenizer: unknown encoding {encoding!r} "
                f"(choose from: {AUTO_TOKENIZER}, {', '.join(TOKENIZERS)})"
            )
        try:
            import quicktok
        except ImportError:
            raise UsageError(BPE_MISSING) from None
        self.name = f"tokenizer:{encoding}"
        self.encoding = encoding
        self.per_message = per_message
        self.per_tool_call = per_tool_call
        self._count: Callable[[str], int] = quicktok.get_encoding(encoding).count

    def add_text(self, cost: list[int], text: str, kind: Kind) -> None:
        if text:
            cost[0] += self._count(text)

    def add_bytes(self, cost: list[int], data: bytes, kind: Kind) -> None:
        if data:
            cost[0] += self._count(data.decode("utf-8", "replace"))

    def raw(self, totals: Sequence[int]) -> int:
        return totals[0]

    def framing(self, fmt: str, *, has_tools: bool, model: str | None = None) -> int:
        return provider_framing(fmt, has_tools=has_tools, model=model)
