"""JSON bytes in and out: strict parsing with errors that say where and why, and
writing back that keeps what it can (orjson, with a stdlib fallback for what orjson
cannot write). Nothing here knows about transcripts.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from ctxwin.errors import InputError

BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte order mark: ignored at the start of the input (RFC 8259 §8.1 allows it)."""

MAX_DEPTH = 1024
"""orjson's nesting limit: deeper input is refused."""

_INT64_MIN = -(1 << 63)
_UINT64_MAX = (1 << 64) - 1
_DIGIT_MAP = bytes(0x30 if 0x30 <= b <= 0x39 else 0x78 for b in range(256))
_LONG_RUN = b"0" * 19


_NOT_UTF8 = (
    (b"\xff\xfe\x00\x00", "UTF-32 (it starts with a UTF-32 byte order mark); save it as UTF-8"),
    (b"\x00\x00\xfe\xff", "UTF-32 (it starts with a UTF-32 byte order mark); save it as UTF-8"),
    (b"\xff\xfe", "UTF-16 (it starts with a UTF-16 byte order mark); save it as UTF-8"),
    (b"\xfe\xff", "UTF-16 (it starts with a UTF-16 byte order mark); save it as UTF-8"),
    (
        b"\x1f\x8b",
        "gzip-compressed; decompress it first (e.g. `gunzip -c run.json.gz | ctxwin ...`)",
    ),
)
"""Leading bytes of inputs that are JSON in another encoding, or compressed."""


def _at(data: bytes | str, pos: int) -> str:
    """``line L column C`` of character ``pos`` (orjson's own positions are characters)."""
    # orjson counts characters, so count lines in the decoded text.
    text = data if isinstance(data, str) else data.decode("utf-8", "replace")
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"line {line} column {column}"


def _byte_at(data: bytes, offset: int) -> str:
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"line {line} column {column} (byte {offset:,})"


def explain_error(data: bytes | str, exc: orjson.JSONDecodeError) -> str:
    """One line saying what is wrong with ``data`` and where, from orjson's error: the
    one wording of every reader's parse errors (:func:`parse`, and the recorded-run and
    session readers' :func:`ctxwin.runs.parse_values`)."""
    msg = exc.msg
    pos = exc.pos
    if isinstance(data, bytes):
        for magic, what in _NOT_UTF8:
            if data.startswith(magic):
                return f"the input is {what}, not UTF-8 JSON"
    if "not valid UTF-8" in msg and not isinstance(data, str):
        try:
            bytes(data).decode("utf-8")
        except UnicodeDecodeError as bad:
            byte = bytes(data)[bad.start]
            return f"invalid UTF-8: byte 0x{byte:02x} at {_byte_at(bytes(data), bad.start)}"
        return f"invalid UTF-8 ({msg})"
    if "not valid UTF-8" in msg:
        return "a lone surrogate character in the input text (not valid UTF-8)"
    if "surrogate" in msg:
        return (
            f"a lone surrogate in a \\u escape at {_at(data, pos)}: a \\ud800-\\udfff "
            "escape without its pair is not valid Unicode text"
        )
    if "depth limit" in msg:
        return f"invalid JSON: nested deeper than {MAX_DEPTH} levels at {_at(data, pos)}"
    if "infinity when parsed" in msg:
        return f"invalid JSON: number too large for a 64-bit float at {_at(data, pos)}"
    window = data[max(0, pos - 1) : pos + 9]
    token = window if isinstance(window, str) else bytes(window).decode("utf-8", "replace")
    if any(word in token for word in ("NaN", "Infinity")):
        return f"invalid JSON: NaN and Infinity are not JSON values (at {_at(data, pos)})"
    if "end of data" in msg:
        return f"invalid JSON: truncated (unexpected end of data at {_at(data, pos)})"
    return f"invalid JSON: {msg} at {_at(data, pos)}"


def parse(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON; :class:`InputError` says what is wrong and where (line and column).

    A leading UTF-8 byte order mark is skipped. NaN, Infinity, nesting deeper
    than :data:`MAX_DEPTH`, invalid UTF-8 and lone surrogates are refused.
    """
    if isinstance(data, str):
        if data.startswith("\ufeff"):
            data = data[1:]
    elif bytes(data[:3]) == BOM:
        data = memoryview(data)[3:]
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        head = data[:4096]
        text = head if isinstance(head, str) else bytes(head)
        if len(data) <= 4096 and not text.strip():
            raise InputError(
                "empty input (expected a JSON request body or messages array)"
            ) from None
        raise InputError(
            explain_error(data if isinstance(data, str) else bytes(data), exc)
        ) from None


def _unescaped_quotes(raw: bytes, start: int, end: int) -> int:
    """The number of ``"`` in ``raw[start:end]`` that are not escaped by a backslash.

    A quote is escaped when an odd number of backslashes precede it. Deleting
    every ``\\\\`` pair, left to right, leaves each run of backslashes one
    backslash long if it was odd and empty if it was even, so the escaped quotes
    are the ``\\"`` left. This is done a slice of :data:`_SLICE` bytes at a
    time (a slice ending in a backslash is stretched past the end of its run and
    the byte that run escapes): linear in ``end - start`` and at C speed, whatever the runs.
    ``raw[start]`` must not be inside a run of backslashes (the callers start at
    0 or at a digit).
    """
    total = raw.count(b'"', start, end)
    escaped = 0
    while start < end:
        stop = min(end, start + _SLICE)
        if stop < end and raw[stop - 1] == 0x5C:  # "\\": stretch past the run's end
            found = _NOT_BACKSLASH.search(raw, stop, end)
            stop = found.start() + 1 if found is not None else end
        escaped += raw[start:stop].replace(b"\\\\", b"").count(b'\\"')
        start = stop
    return total - escaped


_SLICE = 1 << 20
_NOT_BACKSLASH = re.compile(rb"[^\\]")


def find_big_integer(data: bytes | bytearray | memoryview) -> str | None:
    """Where valid JSON ``data`` has an integer beyond 64 bits, or ``None``.

    orjson reads such an integer as a float, so writing the body back would
    change it; a pruned output must never silently rewrite a value. Runs of
    19 or more digits are found at C speed, a chunk at a time. A run is a
    number token only if the byte before it (past a minus sign and
    whitespace) is ``:``, ``[`` or ``,`` — most runs, inside strings, fail
    that test at once — and an even number of unescaped quotes precede it
    (outside every string); quotes are counted only for the runs that pass.
    """
    raw = bytes(data)
    size = len(raw)
    quotes = 0
    counted = 0
    chunk = 1 << 24
    start = 0
    while start < size:
        stop = min(size, start + chunk)
        digits = raw[start : stop + len(_LONG_RUN) - 1].translate(_DIGIT_MAP)
        pos = digits.find(_LONG_RUN)
        while pos >= 0 and start + pos < stop:
            at = start + pos
            if at == 0 or raw[at - 1] not in _DIGITS:  # a run's start, not a chunk-split middle
                found, quotes, counted = _number_at(raw, at, quotes, counted)
                if found is not None:
                    return found
            run_end = digits.find(b"x", pos)  # every non-digit reads as "x"
            if run_end < 0:
                break
            pos = digits.find(_LONG_RUN, run_end)
        start = stop
    return None


def may_hold_big_number(out: bytes) -> bool:
    """False when JSON ``out``, as :func:`dumps` writes it, holds no number of
    magnitude 10¹⁶ or more; True when it may.

    Both writers (orjson and the standard library) put every float from 10¹⁶
    up in exponent form, ``1.8446744073709552e+19``, and an integer beyond 64
    bits is read as such a float. So where ``out`` has no digit, ``e+``, digit
    sequence, no value in it was rewritten, and the input need not be scanned
    (:func:`find_big_integer`): one C-speed search of the output instead. Text
    inside strings can hold ``e+`` too: each is checked, and past
    :data:`_E_PLUS_LIMIT` of them this gives up and answers True.
    """
    at = out.find(b"e+")
    seen = 0
    while at >= 0:
        if at and out[at - 1] in _DIGITS and out[at + 2 : at + 3].isdigit():
            return True
        seen += 1
        if seen > _E_PLUS_LIMIT:
            return True
        at = out.find(b"e+", at + 2)
    return False


_E_PLUS_LIMIT = 10_000
_DIGITS = frozenset(b"0123456789")
_TOKEN_BEFORE = frozenset(b":[,")
_SPACE = b" \t\r\n"
_NOT_DIGIT = re.compile(rb"[^0-9]")


def _before_space(raw: bytes, j: int) -> int:
    """The index of the last byte at or before ``j`` that is not JSON whitespace (-1:
    none). Whitespace runs are skipped a window at a time, at C speed."""
    window = 64
    while j >= 0:
        low = max(0, j + 1 - window)
        kept = len(raw[low : j + 1].rstrip(_SPACE))
        if kept:
            return low + kept - 1
        j = low - 1
        window = min(window * 2, _SLICE)
    return -1


def _number_at(raw: bytes, pos: int, quotes: int, counted: int) -> tuple[str | None, int, int]:
    """Check the digit run at ``pos``: ``(message or None, quotes, counted)``."""
    j = pos - 1
    negative = j >= 0 and raw[j] == 0x2D  # "-"
    if negative:
        j -= 1
    j = _before_space(raw, j)
    if j >= 0 and raw[j] not in _TOKEN_BEFORE:
        return None, quotes, counted  # inside a string, a fraction or an exponent
    quotes += _unescaped_quotes(raw, counted, pos)
    counted = pos
    if quotes % 2:
        return None, quotes, counted  # inside a string
    found = _NOT_DIGIT.search(raw, pos)
    end = found.start() if found is not None else len(raw)
    if raw[end : end + 1] in (b".", b"e", b"E"):
        return None, quotes, counted  # a float
    begin = pos - 1 if negative else pos
    # more than 20 digits never fit (and int() refuses thousands of them)
    if end - pos <= 20 and _INT64_MIN <= int(raw[begin:end]) <= _UINT64_MAX:
        return None, quotes, counted
    token = raw[begin:end].decode()
    shown = token if len(token) <= 30 else f"{token[:27]}..."
    return f"integer {shown} at {_byte_at(raw, begin)}", quotes, counted


ORJSON_DEPTH = 200
"""Values nested deeper than this are written by the standard library, not orjson.

orjson refuses to write nesting deeper than 254 levels although it reads up to
:data:`MAX_DEPTH`; and orjson 3.13 corrupts its heap (the process aborts with
``realloc(): invalid next size``) writing arrays nested 243 to 253 deep, e.g. 300
arrays each 243 deep. Either would let one request body take the process down."""


def deeper_than(value: Any, limit: int) -> bool:
    """Whether JSON-like ``value`` (dicts, lists, tuples, scalars) nests containers
    more than ``limit`` levels deep. Iterative: one pass over the containers, whatever
    the depth."""
    if not isinstance(value, dict | list | tuple):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, dict | list | tuple):
                push((child, depth + 1))
    return False


def dumps(
    body: Any, *, indent: bool = False, newline: bool = False, sort_keys: bool = False
) -> bytes:
    """Serialize ``body`` as compact (or 2-space indented) UTF-8 JSON, keys sorted
    with ``sort_keys``.

    A body nested deeper than :data:`ORJSON_DEPTH` levels (up to :data:`MAX_DEPTH`,
    what :func:`parse` reads) is written by the standard library instead of orjson.
    """
    option = (orjson.OPT_INDENT_2 if indent else 0) | (orjson.OPT_APPEND_NEWLINE if newline else 0)
    if sort_keys:
        option |= orjson.OPT_SORT_KEYS
    if not deeper_than(body, ORJSON_DEPTH):
        return orjson.dumps(body, option=option)
    import json
    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * MAX_DEPTH + 1000))
    try:
        text = json.dumps(
            body,
            ensure_ascii=False,
            allow_nan=False,
            indent=2 if indent else None,
            separators=(",", ": ") if indent else (",", ":"),
            sort_keys=sort_keys,
        )
    finally:
        sys.setrecursionlimit(limit)
    return (text + "\n" if newline else text).encode("utf-8")


_NON_SPACE_AFTER = re.compile(rb"\S")


def looks_like_jsonl(data: bytes) -> bool:
    """Whether ``data`` starts with a whole JSON value on its first line and has more
    after it: JSONL, not one document (checked without copying ``data``)."""
    start = 3 if data[:3] == b"\xef\xbb\xbf" else 0
    end = data.find(b"\n", start)
    if end < 0 or _NON_SPACE_AFTER.search(data, end) is None:
        return False
    try:
        first = orjson.loads(memoryview(data)[start:end])
    except orjson.JSONDecodeError:
        return False
    return isinstance(first, dict | list)
