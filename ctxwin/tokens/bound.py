"""The bound estimator: pieces cut as the tokenizers cut text, priced by their worst case
(``--estimator bound``)."""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING
from zlib import adler32

from ctxwin.tokens.base import Kind
from ctxwin.tokens.content import _ADLER_MOD, _SHORT, SCALE, ContentEstimator, _memoize
from ctxwin.tokens.seeds import BOUND_MODEL_CALIBRATION, family_seed
from ctxwin.tokens.vocabulary import (
    bound_vocabulary,
    fixed_cents,
    lacking_cents,
    letter_spans_of,
    prefixed_count,
    run_cap,
)

if TYPE_CHECKING:
    pass

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

BOUND_BYTE_CENTS = (0, 0, 0, 0, 0, 0, 0, 0, 51, 61, 109, 100)
"""u: what a byte of each class costs, in 1/100 token (by class code), unless it
follows a word byte and is one itself (then :data:`BOUND_WORD_CENTS` applies)."""

BOUND_RUN_CENTS = (0, 80, 47, 62, 72, 73, 0, 101, 132, 63, 0, 0)
"""s: what a byte costs on top of u when it starts a run of its class (the byte
before it is of another class, or it opens the string)."""

BOUND_WORD = (0, 1, 2, 3, 4, 5, 7)
"""Class codes of the *word* classes (the five lower-case letter groups, upper, space):
between two of them a pair price applies in place of u and s."""

BOUND_WORD_CENTS = (
    (37, 77, 94, 87, 113, 0, 0),
    (53, 62, 28, 11, 60, 0, 0),
    (0, 70, 61, 51, 75, 0, 0),
    (0, 81, 69, 63, 68, 0, 0),
    (0, 57, 60, 63, 81, 0, 0),
    (60, 66, 79, 72, 100, 73, 0),
    (0, 0, 0, 0, 0, 0, 0),
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


_USEGMENT = rb"" + _PREFIX + rb"?(?:[A-Za-z]*[\x80-\xff])+[A-Za-z]*|" + _SEGMENT
""":data:`_SEGMENT` for text that holds non-ASCII bytes: first, a *word* of ASCII letters
and non-ASCII characters with the one ASCII byte before it that may open a letter run
(`` naïve``, `` Привет``, ``→import``, `` ├──``): such a run is one piece, cut further by
:func:`unicode_subpieces` as the tokenizers cut non-ASCII letters, marks and symbols. Text
without non-ASCII bytes is cut by :data:`_SEGMENT` alone (that path is unchanged)."""


def _category(cp: int) -> str:
    """The class :func:`unicode_subpieces` cuts by: ``a`` a letter (``L*``), ``m`` a mark
    (``M*``), ``0`` a number (``N*``), ``\\n`` a line break, `` `` other whitespace, ``!``
    anything else (punctuation, symbols, controls)."""
    import unicodedata

    char = chr(cp)
    if char in "\r\n":
        return "\n"
    major = unicodedata.category(char)[0]
    if major in "LMN":
        return {"L": "a", "M": "m", "N": "0"}[major]
    return " " if char.isspace() else "!"


class _Categories(dict[int, str]):
    """Code point → :func:`_category`, computed on first sight (a ``str.translate`` table)."""

    def __missing__(self, cp: int) -> str:
        c = self[cp] = _category(cp)
        return c


_CATEGORIES = _Categories()

_UCUT = r"[! m]?[am]+|0+| ?!+\n*|\n+| +"
"""The cut of a non-ASCII word (:data:`_USEGMENT`) over its classes (:func:`_category`),
after the grammar the four pre-tokenizers share (``[^\\r\\n\\p{L}\\p{N}]?\\p{L}+``, a
number run, `` ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*``, whitespace): a letter run with its marks and
the one symbol, mark or space before it (`` Привет``, ``→import``, ``，мир``), a number
run, a symbol run with the space before it (`` ├──``), whitespace. Marks stay with the
letters as o200k_base keeps them; the others cut letters from marks, so such a piece is
several of their pre-tokens, and its count alone is the sum of theirs."""


@lru_cache(maxsize=1)
def _uregex() -> re.Pattern[str]:
    return re.compile(_UCUT)


def unicode_subpieces(text: str) -> list[str]:
    """``text`` (one :data:`_USEGMENT` word, decoded) cut by :data:`_UCUT`."""
    classes = text.translate(_CATEGORIES)
    return [text[m.start() : m.end()] for m in _uregex().finditer(classes)]


_LOOSE = rb" +(?= |\Z)"
"""Spaces that no run takes: all but the last of a run of spaces before something
else, and every space at the end of the string."""


@lru_cache(maxsize=4)
def _regex(pattern: bytes) -> re.Pattern[bytes]:
    """``pattern`` compiled on first use (``ctxwin`` starts without compiling it)."""
    return re.compile(pattern)


def bound_pieces(data: bytes) -> Iterator[bytes]:
    """The pieces :class:`BoundEstimator` prices, in no particular order: the text
        between single spaces, each with the space before it, cut by :data:`_SEGMENT`
    (:data:`_USEGMENT` where it holds non-ASCII bytes),
        and the loose spaces (:data:`_LOOSE`). A space followed by anything but
        whitespace opens a piece under :data:`_SEGMENT` too, so this is its cut of the
        whole text, except that a whitespace run mixing spaces with tabs or line breaks
        is cut finer (``\t \t`` is two pieces, ``  \n`` is `` `` and `` \n``)."""
    chunks = data.split(b" ")
    if chunks[0]:
        yield from _cut(chunks[0])
    for chunk in chunks[1:]:
        if chunk:
            yield from _cut(b" " + chunk)
    yield from _regex(_LOOSE).findall(data)


def _cut(chunk: bytes) -> list[bytes]:
    """``chunk`` cut by :data:`_SEGMENT`, or :data:`_USEGMENT` if it holds non-ASCII bytes."""
    return _regex(_SEGMENT if chunk.isascii() else _USEGMENT).findall(chunk)


_MEMO_SIZE = 1 << 16
"""Chunks a :class:`_ChunkPrices` remembers (up to 64 bytes each) before it is cleared."""

_PIECE_MEMO_SIZE = 1 << 18
"""Pieces :class:`_PiecePrices` remembers (up to 64 bytes each) before it is cleared: a
100,000-message run holds about 210,000 distinct pieces the memo must price (``bench/gen.py``;
345,000 misses with 65,536 kept, 208,000 with this many)."""


def bound_parts(piece: bytes, vocab: Mapping[bytes, int]) -> Iterator[bytes]:
    """The parts ``piece`` is priced by, each at :func:`fixed_cents` if that knows it, else
    at its pair price: ``piece`` itself if the vocabulary holds it; a run of spaces or of
    tabs the vocabulary lacks (a long indentation) as the longest runs it has, from the
    left (the tokenizers count such a run in as few tokens or fewer; not so for mixed line
    breaks, which keep their pair price); a piece holding non-ASCII bytes (a word of
    :data:`_USEGMENT`) as its :func:`unicode_subpieces`, each whole if the vocabulary holds
    it or its letters' any-prefix record (:func:`prefixed_count`), else a run of non-ASCII
    letters as :func:`_letter_parts` cuts it (its vocabulary parts and cuts, or its
    characters' caps), any other as :func:`_fine_parts` (a non-ASCII symbol or mark before
    letters apart)."""
    if piece in vocab:
        yield piece
        return
    yield from _lacking_parts(piece, vocab)


def _lacking_parts(piece: bytes, vocab: Mapping[bytes, int]) -> Iterator[bytes]:
    """:func:`bound_parts` of a piece the vocabulary lacks."""
    if piece.isascii():
        yield from _ascii_parts(piece, vocab)
        return
    try:
        text = piece.decode("utf-8")
    except UnicodeDecodeError:
        yield from _fine_parts(piece, vocab)
        return
    for sub in unicode_subpieces(text):
        data = sub.encode("utf-8")
        if data in vocab or prefixed_count(data, vocab) is not None:
            yield data
        elif len(sub) > 1 and sub[0] >= "\x80" and _CATEGORIES[ord(sub[0])] in "! ":
            head, rest = sub[0].encode("utf-8"), data[len(sub[0].encode("utf-8")) :]
            yield from _fine_parts(head, vocab)
            known = rest in vocab or prefixed_count(rest, vocab) is not None
            yield from [rest] if known else _letter_parts(sub[1:], vocab)
        elif sub[0] == " " and len(sub) > 1 and _CATEGORIES[ord(sub[1])] == "!":
            yield from _symbol_parts(sub, vocab)
        else:
            yield from _letter_parts(sub, vocab)


_LETTER_SPAN = 24
"""The most bytes of a part :func:`_letter_run_parts` looks up (8 Hangul, Thai or CJK
characters, 12 Cyrillic letters: longer parts are rare, and each length tried costs
lookups)."""

_CUT_TOKENS = 2
"""What :func:`_letter_parts` adds for each cut it makes inside a run of non-ASCII letters,
in tokens: a tokenizer may count a run one token or so more than the sum of its parts
alone (a merge across the cut can block others), never a whole token a cut in the
texts it is tested on (``tests/test_estimator_bound.py``)."""


def _letter_parts(text: str, vocab: Mapping[bytes, int]) -> Iterator[bytes]:
    """A :func:`unicode_subpieces` piece the vocabulary lacks (``text``, decoded): if it is
    a run of non-ASCII letters and marks, with or without the one ASCII byte before it that
    may open it (`` 스태시에``, ``ภาษาไทย``), :func:`_letter_run_parts`; else (a word mixing
    ASCII letters with others, ``naïve``, or symbols, ``───``) :func:`_fine_parts`."""
    body = text[1:] if text[0] < "\x80" and not text[0].isalnum() else text
    if body and all(c >= "\x80" and _CATEGORIES[ord(c)] in "am" for c in body):
        yield from _letter_run_parts(text, vocab)
    else:
        yield from _fine_parts(text.encode("utf-8"), vocab)


_RUN_MEMO: dict[str, tuple[Mapping[bytes, int], list[bytes]]] = {}
""":func:`_letter_run_parts` of the runs seen lately, with the vocabulary they were cut by
(the chunk memo of :class:`BoundEstimator` keeps no chunk over 64 bytes, and a run's cut
tries every part length at every character: a run read again, as a file read twice in a
session, is cut once)."""

_RUN_MEMO_SIZE = 4096
"""Runs :data:`_RUN_MEMO` keeps before it is cleared."""


def _letter_run_parts(text: str, vocab: Mapping[bytes, int]) -> list[bytes]:
    """:func:`_cut_letter_run`, remembered (:data:`_RUN_MEMO`); the list is not to be
    changed."""
    known = _RUN_MEMO.get(text)
    if known is not None and known[0] is vocab:
        return known[1]
    if len(_RUN_MEMO) >= _RUN_MEMO_SIZE:
        _RUN_MEMO.clear()
    parts = _cut_letter_run(text, vocab)
    _RUN_MEMO[text] = (vocab, parts)
    return parts


def _cut_letter_run(text: str, vocab: Mapping[bytes, int]) -> list[bytes]:
    """A run of non-ASCII characters, the ASCII byte before it that opens it included if
    any, as the cheaper of two cuts. *By caps*: the byte before it alone (its pair price)
    and the characters at their caps (:func:`run_cap`: no tokenizer starts more tokens in
    them, whatever the vocabulary). *By parts*: the longest parts the vocabulary holds (or
    holds an any-prefix record of), from the left, :data:`_LETTER_SPAN` bytes at most and
    no longer than the vocabulary's longest key starting with the part's first letter
    (:func:`~ctxwin.tokens.vocabulary.letter_spans`: the lookups spared would all miss), the
    first holding the byte before the run if there is one; a character no part covers, and
    the byte before the run with the first character if no part starts with both, one token
    a byte; and :data:`_CUT_TOKENS` more for each cut between such units. That the parts
    and cuts bound the run is tested, not proven (BPE is not sub-additive: a merge across a
    cut can block merges on either side). The tokens counted apart from vocabulary parts
    (caps, loose bytes, cuts) are one part of as many :data:`_CUT_BYTE` bytes."""
    import unicodedata

    data = text.encode("utf-8")
    lead = 1 if text[0] < "\x80" else 0
    head = list(_fine_parts(data[:lead], vocab))
    caps = run_cap(data[lead:])
    by_caps = [*head, _CUT_BYTE * caps]
    if not unicodedata.is_normalized("NFC", text):  # Qwen 3 counts the NFC form: caps only
        return by_caps
    ends = list(itertools.accumulate(len(c.encode("utf-8")) for c in text))
    starts = [0, *ends[:-1]]
    spans = letter_spans_of(vocab)
    parts: list[bytes] = []
    tokens = loose = units = 0  # tokens of the vocabulary parts, loose bytes, units
    in_loose = False
    i, n = 0, len(text)
    while i < n:
        low = i + 1 if i or not lead else i + 2  # the byte before the run never alone
        j = bisect.bisect_right(ends, starts[i] + _LETTER_SPAN, i, n)  # parts end before j
        if spans is not None:  # no key starting with the part's first letter is longer
            first = low - 1
            j = min(j, first + spans[ord(text[first])])
        count = None
        while j >= low:
            part = data[starts[i] : ends[j - 1]]
            count = vocab.get(part)
            if count is None:
                count = prefixed_count(part, vocab)
            if count is not None:
                break
            j -= 1
        if count is None:  # no part starts here: its bytes, a token each
            step = min(n - i, 1 if i or not lead else 2)
            units += not in_loose  # a run of loose characters is one unit
            in_loose = True
            loose += ends[i + step - 1] - starts[i]
            i += step
            continue
        parts.append(part)
        tokens += count
        units += 1
        in_loose = False
        i = j
    filler = loose + _CUT_TOKENS * (units - 1)
    if 100 * (tokens + filler) < _parts_cents(head, vocab) + 100 * caps:
        return [*parts, _CUT_BYTE * filler] if filler else parts
    return by_caps


_CUT_BYTE = b"\xff"
"""A byte that is never UTF-8: a part of k of them costs k tokens (:func:`run_cap` prices
such bytes a token each), what :func:`_letter_run_parts` counts apart from vocabulary
parts."""


def _parts_cents(parts: list[bytes], vocab: Mapping[bytes, int]) -> int:
    """The price of ``parts`` (each at :func:`fixed_cents`, else its pair price)."""
    total = 0
    for part in parts:
        exact = fixed_cents(part, vocab)
        total += _pair_cents(part) if exact is None else exact
    return total


def _symbol_parts(text: str, vocab: Mapping[bytes, int]) -> Iterator[bytes]:
    """``text`` (a run of symbols, the space before it included) cut into the longest runs
    the vocabulary holds, from the left, a character at a time where it holds none."""
    i = 0
    while i < len(text):
        j = min(len(text), i + _SYMBOL_SPAN)
        while j > i + 1 and text[i:j].encode("utf-8") not in vocab:
            j -= 1
        yield text[i:j].encode("utf-8")
        i = j


def _ascii_parts(piece: bytes, vocab: Mapping[bytes, int]) -> Iterator[bytes]:
    """An ASCII piece, or a run of spaces, of tabs or of one punctuation byte (``=====``,
    `` -----``) cut into the longest runs the vocabulary holds, from the left (see
    :func:`bound_parts`; it holds every such run up to :data:`RUN_SPAN` long, so a longer
    run is cut every :data:`RUN_SPAN` bytes), and a token more for each cut: a byte of the
    run, one token (BPE need not cut a run where the vocabulary's longest runs end: 38
    tabs are 3 tokens, 20 and 18 tabs 1 each)."""
    if not _one_byte_run(piece) or piece in vocab:
        yield piece
        return
    i = cuts = 0
    while i < len(piece):
        j = min(len(piece), i + RUN_SPAN)
        while j > i + 1 and piece[i:j] not in vocab:
            j -= 1
        yield piece[i:j]
        i = j
        cuts += 1
    yield from itertools.repeat(piece[-1:], cuts - 1)


RUN_SPAN = 128
"""The longest run of one byte of :data:`_RUNS` the vocabulary holds (with the space before
it or not: ``python -m fidelity.bound --vocab`` puts in every one up to this length)."""


def _one_byte_run(piece: bytes) -> bool:
    """Whether ASCII ``piece`` is a run of one byte of :data:`_RUNS`, the space before it
    apart (what :func:`_ascii_parts` cuts into vocabulary runs)."""
    body = piece[1:] if piece[:1] == b" " and piece[-1:] not in b" \t" else piece
    return len(set(body)) == 1 and body[0] in _RUNS


_RUNS = frozenset(b" \t!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
"""The bytes a run of which :func:`_ascii_parts` cuts into vocabulary runs (not line breaks:
a long run of mixed ``\r`` and ``\n`` tokenizes worse than its vocabulary pieces)."""

_SYMBOL_SPAN = 16
"""The most characters of a symbol run :func:`_fine_parts` looks up at once."""


def _fine_parts(data: bytes, vocab: Mapping[bytes, int]) -> Iterator[bytes]:
    """``data`` cut by :data:`_SEGMENT` (ASCII pieces as :func:`_ascii_parts`, non-ASCII
    bytes as whole runs), and a run of non-ASCII symbols the vocabulary lacks (``├────``)
    cut into the longest runs it holds, from the left, a character at a time where it holds
    none (such a character costs its :func:`run_cap`). That a symbol run costs no more
    than those parts is tested, not proven (``tests/test_estimator_bound.py``: box
    drawing, arrows, bullets, runs of one symbol up to 400 long)."""
    for piece in _regex(_SEGMENT).findall(data):
        if piece.isascii():
            yield from _ascii_parts(piece, vocab)
            continue
        if piece in vocab:
            yield piece
            continue
        try:
            text = piece.decode("utf-8")
        except UnicodeDecodeError:
            yield piece
            continue
        if any(_CATEGORIES[ord(c)] != "!" for c in text):
            yield piece
            continue
        yield from _symbol_parts(text, vocab)


class _PiecePrices(dict[bytes, int]):
    """Piece → its price: the sum over :func:`bound_parts` of the exact price
    (:func:`fixed_cents`), else the pair price; computed on a miss, remembered when
    short (words repeat). The piece is looked up in the vocabulary once (a run of digits
    not at all: :func:`vocab_file` refuses pieces that hold one), and a part that is the
    piece itself not again; an ASCII piece the vocabulary lacks that :func:`_ascii_parts`
    would leave whole goes straight to its pair price."""

    def __missing__(self, piece: bytes) -> int:
        if piece.isdigit():  # the vocabulary holds no digit
            price = 100 * len(piece)
        else:
            vocab = bound_vocabulary()
            count = vocab.get(piece)
            if count is not None:
                price = 100 * count
            elif piece.isascii() and not _one_byte_run(piece):
                count = prefixed_count(piece, vocab)
                price = _pair_cents(piece) if count is None else 100 * count
            else:
                price = 0
                for part in _lacking_parts(piece, vocab):
                    exact = lacking_cents(part) if part is piece else fixed_cents(part, vocab)
                    price += _pair_cents(part) if exact is None else exact
        if len(piece) <= _SHORT:
            if len(self) >= _PIECE_MEMO_SIZE:
                self.clear()
            self[piece] = price
        return price


_PIECE = _PiecePrices()
_piece_cents = _PIECE.__getitem__


_LONG_CHUNK = 4096
"""The longest chunk :class:`_ChunkPrices` remembers (a line of a file read again, a hash,
a run of CJK text)."""

_LONG_MEMO_BYTES = 8 << 20
"""The bytes of chunks over :data:`~ctxwin.tokens.content._SHORT` bytes a
:class:`_ChunkPrices` keeps before it forgets them all."""


class _ChunkPrices(dict[bytes, int]):
    """Chunk (text between single spaces) → the price of its pieces, with a space
    before it or not; computed on a miss, remembered: a short chunk here (up to
    :data:`_MEMO_SIZE` of them), a longer one up to :data:`_LONG_CHUNK` bytes in
    :attr:`long` (up to :data:`_LONG_MEMO_BYTES` of them), looked at only on a miss."""

    def __init__(self, lead: bytes) -> None:
        super().__init__({b"": 0})
        self.lead = lead
        self.long: dict[bytes, int] = {}
        self.long_bytes = 0

    def __missing__(self, chunk: bytes) -> int:
        size = len(chunk)
        if size > _SHORT:
            known = self.long.get(chunk)
            if known is not None:
                return known
        price = sum(map(_piece_cents, _cut(self.lead + chunk)))
        if size <= _SHORT:
            if len(self) >= _MEMO_SIZE:
                self.clear()
                self[b""] = 0
            self[chunk] = price
        elif size <= _LONG_CHUNK:
            if self.long_bytes + size > _LONG_MEMO_BYTES:
                self.long.clear()
                self.long_bytes = 0
            self.long[chunk] = price
            self.long_bytes += size
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

    The text is cut into pieces (:func:`bound_pieces`, :data:`_SEGMENT`,
    :data:`_USEGMENT`) where o200k_base, cl100k_base, Llama 3 and Qwen 3 cut text
    before they tokenize it: a word of ASCII letters and non-ASCII characters with the
    byte before it (`` naïve``, `` Привет，мир``, ``→import``, `` ├──``), whose parts are
    cut by Unicode category as the pre-tokenizers cut letters, marks and symbols
    (:func:`unicode_subpieces`), each priced exactly when the vocabulary holds it and
    as before when not (a symbol run by its longest vocabulary runs, tested not
    proven); a run of ASCII letters (upper-case ones, then lower-case ones —
    ``getValue`` is two, as o200k cuts it) with the one space, tab or punctuation
    byte before it (`` the``, ``_id``, ``.get``); a contraction (``'s``); a run of
    digits; a run of punctuation with the space before it and the line breaks
    after it (``):\\n``); whitespace up to its last line break; other whitespace,
    its last character apart when something else follows; a run of non-ASCII
    bytes. A piece costs

    - its exact count if that is known (:func:`fixed_cents`): the pieces of the
      *vocabulary* (:func:`bound_vocabulary`), each with the largest of the four
      counts: the tokens of the four vocabularies that are one whole piece and count 1
      or 2, forms of common English words, and the pieces of code and paths; a word
      (ASCII letters, or letters and marks of another script) alone or after any one
      ASCII byte that may open it, at the most tokens the four give it alone or after
      any such byte (its *any-prefix* record, :func:`prefixed_count`: ``+credential``,
      `` файлов``); a run of digits, one token a digit (Qwen 3 splits every digit; the
      others group up to three);
    - a run of non-ASCII bytes: the most tokens the four can start in it
      (:func:`run_cap`): one a byte, fewer for characters no tokenizer can split
      that far (kana: 2 of 3 bytes), of its NFC form if that is more; a run of
      non-ASCII letters and marks the vocabulary lacks whole (a Korean word no list
      holds, Thai between spaces), if that is less: its longest vocabulary parts,
      a token a byte for characters no part covers, and 2 tokens a cut
      (:func:`_letter_run_parts`; tested, not proven);
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
    when it cuts it itself. A non-ASCII run priced at its caps needs no such
    argument (one priced by its vocabulary parts and cuts does, and is tested on
    text the vocabulary never read, ``python -m fidelity.scripts``): a token
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

    def seed(self, model: str | None = None) -> float:
        """1.0, or the seed of the model's family in
        :data:`~ctxwin.tokens.seeds.BOUND_MODEL_CALIBRATION`: the bound sits closer to the
        four tokenizers than ``content`` and cannot borrow its seeds."""
        return family_seed(model, BOUND_MODEL_CALIBRATION)
