"""The bound estimator's data: the vocabulary of pieces with exact counts
(``ctxwin/data/bound-vocab.bin``, mapped into memory and read in place), the most
tokens a character can start (``ctxwin/data/char-caps.bin.gz``), and the longest key of the
vocabulary that starts with a character (``ctxwin/data/letter-spans.bin.gz``).

They are derived from the four tokenizers' vocabularies by ``python -m fidelity.bound``
(``--vocab`` writes the first and the last, ``--chars`` the second);
:mod:`ctxwin.tokens.bound` prices text with them.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING
from zlib import crc32

if TYPE_CHECKING:
    import mmap


VOCAB_MAGIC = b"ctxwin-bound-vocab-1\n\0\0\0"
"""The first 24 bytes of ``ctxwin/data/bound-vocab.bin`` (:class:`BoundVocabulary`)."""

_VOCAB_HEADER = len(VOCAB_MAGIC) + 12
"""Bytes before the records: the magic, then the number of pieces, the number of index
slots and where the index starts, each a 4-byte little-endian integer."""


def vocab_slot(piece: bytes, mask: int) -> int:
    """The home slot of ``piece`` in the index of :class:`BoundVocabulary` (``mask`` is
    the number of slots less one): its CRC-32, masked."""
    return crc32(piece) & mask


_NOT_IN_VOCAB = frozenset(b"\x000123456789")
"""Bytes no vocabulary piece holds: NUL ends a record, and a digit run is priced exactly
without it (:func:`fixed_cents`), so :class:`_PiecePrices` looks no digit run up."""


def _vocab_tags(start: int) -> int:
    """The bits of an index entry that hold a CRC-32's bits, not the offset: those above
    the width of ``start`` (where the index starts, beyond every offset)."""
    return ~((1 << start.bit_length()) - 1) & 0xFFFFFFFF


def vocab_file(records: list[tuple[bytes, int]]) -> bytes:
    """The bytes of ``ctxwin/data/bound-vocab.bin`` holding ``records`` (piece, count; no
    piece holds NUL or an ASCII digit, every count is 1-255; ``python -m fidelity.bound
    --vocab`` gives them sorted by piece), in their order (see :class:`BoundVocabulary`)."""
    from array import array

    body = bytearray()
    offsets = []
    for piece, count in records:
        if not 0 < count < 256 or any(c in _NOT_IN_VOCAB for c in piece):
            raise ValueError(f"not a vocabulary record: {piece!r}, {count}")
        body.append(count)
        offsets.append(_VOCAB_HEADER + len(body))
        body += piece + b"\0"
    body += bytes(-(_VOCAB_HEADER + len(body)) % 4)
    start = _VOCAB_HEADER + len(body)
    if start >= 1 << 32:
        raise ValueError("the vocabulary's records pass 4 GiB")
    tags = _vocab_tags(start)
    slots = 1 << (3 * len(records) // 2).bit_length()
    mask = slots - 1
    index = array("I", bytes(4 * slots))
    for (piece, _), offset in zip(records, offsets, strict=True):
        hashed = crc32(piece)
        slot = hashed & mask
        while index[slot]:
            slot = (slot + 1) & mask
        index[slot] = offset | (hashed & tags)
    if sys.byteorder != "little":
        index.byteswap()
    head = VOCAB_MAGIC + b"".join(n.to_bytes(4, "little") for n in (len(records), slots, start))
    return head + bytes(body) + index.tobytes()


class BoundVocabulary(Mapping[bytes, int]):
    """Piece → its count, read in place from the bytes of ``bound-vocab.bin``
    (:func:`vocab_file`): opening it costs a file mapping, not a dict of a million pieces.

    The file is :data:`VOCAB_MAGIC`; the number of pieces, of index slots (the smallest
    power of two above 1.5 times the pieces: at most two thirds of them taken) and the
    offset of the index (4-byte little-endian integers); the records, each the count
    byte, the piece and NUL, sorted by piece; NUL padding to a multiple of 4; and the
    index, one 4-byte little-endian integer per slot: 0 for an empty slot, else the
    offset of a record's piece in the low bits and, in the bits above the offsets' width
    (:func:`_vocab_tags`; 8 of them for the shipped file), the same bits of the piece's
    CRC-32. A piece lives in its home slot (:func:`vocab_slot`) or, if that is taken,
    the next free one after it (linear probing, wrapping round). A lookup hashes the
    piece once (C speed) and walks the slots from its home slot to the first empty one
    (1.6 slots on average for a piece the vocabulary holds, 2.8 for one it lacks, at
    53 % of the slots taken); at a slot whose CRC-32 bits are the piece's it compares
    the piece and a NUL with the bytes at the offset, so a slot of another piece is
    passed over without reading the records, mostly.
    """

    __slots__ = ("_data", "_index", "_mask", "_size", "_start", "_tags")

    def __init__(self, data: bytes | mmap.mmap) -> None:
        head = bytes(data[:_VOCAB_HEADER])
        if len(head) < _VOCAB_HEADER or not head.startswith(VOCAB_MAGIC):
            raise ValueError("not a ctxwin bound vocabulary")
        size, slots, start = (
            int.from_bytes(head[i : i + 4], "little")
            for i in range(len(VOCAB_MAGIC), _VOCAB_HEADER, 4)
        )
        if not slots or slots & (slots - 1) or start % 4 or start + 4 * slots != len(data):
            raise ValueError("not a ctxwin bound vocabulary")
        view = memoryview(data)[start:]
        index: Sequence[int] = view.cast("I")
        if sys.byteorder != "little":
            from array import array

            swapped = array("I")
            swapped.frombytes(view)
            swapped.byteswap()
            index = swapped
        self._data = data
        self._index = index
        self._mask = slots - 1
        self._size = size
        self._start = start
        self._tags = _vocab_tags(start)

    def get(self, piece: bytes, default: int | None = None) -> int | None:  # type: ignore[override]
        data, index, mask, start = self._data, self._index, self._mask, self._start
        hashed = crc32(piece)
        slot = hashed & mask
        tag = hashed & self._tags
        entry = index[slot]
        while entry:
            offset = entry ^ tag  # below start only if the entry's tag is the piece's
            if offset < start:
                end = offset + len(piece)
                if data[offset:end] == piece and data[end : end + 1] == b"\0":
                    return data[offset - 1] if 0 not in piece else default  # NUL ends a record
            slot = (slot + 1) & mask
            entry = index[slot]
        return default

    def __contains__(self, piece: object) -> bool:
        try:
            return self.get(piece) is not None  # type: ignore[arg-type]
        except TypeError:  # not bytes
            return False

    def __getitem__(self, piece: bytes) -> int:
        count = self.get(piece)
        if count is None:
            raise KeyError(piece)
        return count

    def __len__(self) -> int:
        return self._size

    def records(self) -> Iterator[tuple[bytes, int]]:
        """(piece, count) in the order of the file, read straight from the records."""
        body = bytes(self._data[_VOCAB_HEADER : self._start]).rstrip(b"\0")
        for record in body.split(b"\0") if body else ():
            yield record[1:], record[0]

    def __iter__(self) -> Iterator[bytes]:
        return (piece for piece, _ in self.records())


@lru_cache(maxsize=1)
def bound_vocabulary() -> BoundVocabulary:
    """Piece → its exact count: the largest number of tokens o200k_base, cl100k_base,
    Llama 3 and Qwen 3 give it (``ctxwin/data/bound-vocab.bin``, 23.6 MB, 9.8 MB
    compressed: a :class:`BoundVocabulary` mapped into memory, so opening it takes under a
    millisecond, where a dict of it took about 0.5 s, and a lookup a CRC-32 and a slice
    comparison; written by ``python -m fidelity.bound --vocab``).
    1,231,581 pieces without digits, each the shape
    :func:`bound_parts` looks up (an ASCII piece of :func:`bound_pieces`, or one
    :func:`unicode_subpieces` piece): the tokens of the four vocabularies that count 1 or 2
    in all four (`` the``, ``_id``, ``.\n\n``, ``→``, `` ├``); the forms of the 20,000
    commonest English words (lower-case, capitalized, upper-case; alone, after a space,
    ``_``, ``/``, ``-`` or ``.``: `` economy``, ``/Contents``); the ASCII pieces of the
    code, documents and paths on the machine that built it (the standard library's and
    installed packages' ``.py`` files, the other text files under them and ``/usr`` — other
    languages' code, documentation, configuration, never a gettext catalog —, each also
    JSON-escaped once and twice, and the paths under ``/usr``: ``/site``, ``-packages``,
    ``_dtype``, `` },\\``) found in 8 files or more; every run of one space, tab or
    punctuation byte up to 128 long (:data:`~ctxwin.tokens.bound.RUN_SPAN`), alone and, for
    punctuation, after a space; and the any-prefix records
    (:data:`ANY_PREFIX`) of words: the letter runs of all those pieces, the forms of the
    60,000 commonest English words, and the commonest 10,000 words of 38 other languages
    that hold a non-ASCII letter (60,000 Russian, 30,000 Ukrainian and Bulgarian, 20,000
    Korean, 15,000 Macedonian; as written and capitalized; ``wordfreq``), each the most
    tokens the four give the word alone or after any one ASCII byte that may open it.
    None comes from the recorded corpus."""
    import mmap
    from pathlib import Path

    path = Path(__file__).parent.parent / "data" / "bound-vocab.bin"
    with path.open("rb") as f:
        try:
            data: bytes | mmap.mmap = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # no mapping here: read it whole
            data = f.read()
    return BoundVocabulary(data)


ANY_PREFIX = b"\x7f"
"""What the key of a word's *any-prefix* record starts with: ``ANY_PREFIX + word`` (a run
of ASCII letters as :func:`~ctxwin.tokens.bound.bound_pieces` cuts it, lower-case,
capitalized or upper-case, or letters and marks of other scripts as
:func:`~ctxwin.tokens.bound.unicode_subpieces` cuts them) holds the most tokens
o200k_base, cl100k_base, Llama 3 or Qwen 3 give the word alone or after any one of
:data:`PREFIX_BYTES` (``+credential``, ``<output``, ``[REDACTED``, `` файлов``), so a piece
of those letters is priced exactly whatever ASCII byte opens it (:func:`prefixed_count`).
DEL is itself one of those bytes, so the key is a piece too and its record a bound on it."""

PREFIX_BYTES = bytes(b for b in range(0x80) if not chr(b).isalnum() and b not in b"\r\n")
"""The bytes that may open a letter run's piece: ASCII but for letters, digits and line
breaks (the ``[^\\r\\n\\p{L}\\p{N}]?`` of the tokenizers' patterns)."""


def prefixed_count(piece: bytes, vocab: Mapping[bytes, int]) -> int | None:
    """The any-prefix count (:data:`ANY_PREFIX`) of a piece the vocabulary lacks: that of
    its letters after the one of :data:`PREFIX_BYTES` that opens it, if one does, else of
    the whole piece, unless that is more than its bytes (a record may count a token for the
    byte before the letters; a piece of the letters alone would then cost more than a token
    a byte, which no byte-level BPE gives it and ``tiered.cheap_cents`` assumes it never
    does); ``None`` if the vocabulary has no such record, or the piece is ASCII
    and its letters are not a letter run that is lower-case, capitalized or upper-case (the
    only ASCII shapes with records: a mixed run of a base64 blob, ``AAAAABoy``, is not
    looked up, so its miss costs nothing)."""
    letters = piece[1:] if piece[:1] in PREFIX_BYTES else piece
    if letters.isascii() and not (
        letters.isalpha() and (letters.islower() or letters.istitle() or letters.isupper())
    ):  # ASCII: a letter run of one of the three shapes the records are kept for
        return None
    count = vocab.get(ANY_PREFIX + letters)
    if count is not None and letters is piece and count > len(piece):
        return None  # letters alone: never more tokens than bytes (a byte before them may add one)
    return count


def fixed_cents(piece: bytes, vocab: Mapping[bytes, int]) -> int | None:
    """What ``piece`` costs, in 1/100 token, when a count is known for it: its count in
    ``vocab``; for a letter run, alone or after one byte, whose letters the vocabulary
    knows after any byte, that count (:func:`prefixed_count`); one token per digit for a
    run of ASCII digits (Qwen 3 gives every digit its own token; the others group up to
    three, one token or more each); for a run of non-ASCII bytes, :func:`run_cap`.
    ``None`` for any other piece (it is priced by pairs)."""
    count = vocab.get(piece)
    if count is None:
        count = prefixed_count(piece, vocab)
    if count is not None:
        return 100 * count
    return lacking_cents(piece)


def lacking_cents(piece: bytes) -> int | None:
    """:func:`fixed_cents` of a piece the vocabulary lacks."""
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
    table = bytearray(
        b"\x01" * 0x80 + b"\x02" * 0x780 + b"\x03" * 0xF800 + b"\x04" * (0x110000 - 0x10000)
    )
    return _code_point_table("char-caps.bin.gz", table)


def code_point_file(table: Iterable[tuple[int, int]]) -> bytes:
    """The bytes of a table of code points (``ctxwin/data/*.bin.gz``): each entry three
    bytes of code point and one of value, gzip-compressed."""
    import gzip

    raw = b"".join(cp.to_bytes(3, "big") + bytes([value]) for cp, value in table)
    return gzip.compress(raw, 9, mtime=0)


def _code_point_table(name: str, table: bytearray) -> bytes:
    """``table`` (a byte per code point) with the entries of ``ctxwin/data/NAME``
    (:func:`code_point_file`) written in."""
    from pathlib import Path

    packed = (Path(__file__).parent.parent / "data" / name).read_bytes()
    raw = zlib.decompress(packed, wbits=31)  # gzip's framing (zlib is loaded; gzip is not)
    for i in range(0, len(raw), 4):
        table[int.from_bytes(raw[i : i + 3], "big")] = raw[i + 3]
    return bytes(table)


def letter_spans(records: Iterable[tuple[bytes, int]]) -> dict[int, int]:
    """Code point → the most characters of a vocabulary key that starts with it (at most
    255): the key as it is, without :data:`ANY_PREFIX`, without the one ASCII byte before
    its letters, or without both. A part of a run of non-ASCII letters that starts with a
    character is looked up (as a piece or an any-prefix record, :func:`prefixed_count`)
    only up to that many characters: no longer key starts with it
    (:func:`~ctxwin.tokens.bound._letter_run_parts`)."""
    spans: dict[int, int] = {}
    for key, _ in records:
        keys = [key, key[1:]] if key[:1] == ANY_PREFIX else [key]
        keys += [k[1:] for k in keys if k[:1].isascii() and k]
        for k in keys:
            if k[:1] >= b"\x80":
                try:
                    text = k.decode("utf-8")
                except UnicodeDecodeError:
                    continue
                cp = ord(text[0])
                if spans.get(cp, 0) < len(text):
                    spans[cp] = min(len(text), 255)
    return spans


@lru_cache(maxsize=1)
def _shipped_letter_spans() -> bytes:
    return _code_point_table("letter-spans.bin.gz", bytearray(b"\x01") * 0x110000)


def letter_spans_of(vocab: Mapping[bytes, int]) -> bytes | None:
    """:func:`letter_spans` of ``vocab`` as a byte per code point, if it is the shipped
    vocabulary; else ``None``: nothing is known of its keys. The file
    (``ctxwin/data/letter-spans.bin.gz``, written with the vocabulary by ``python -m
    fidelity.bound --vocab``) holds the spans over 1 alone, so it loads in a few
    milliseconds: every other character reads 1, which is its span or more (a character
    no key starts with is looked up once, in vain)."""
    return _shipped_letter_spans() if vocab is bound_vocabulary() else None


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
