"""The catalogue of bad inputs: each gives its documented exit code and one clear line.

Every case runs ``ctxwin prune IN OUT`` with a budget that forces pruning (so
the structural checks run), in-process; a sample also runs as a real process
to prove there is no traceback. In every case IN is unchanged and OUT is not
created.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import pty
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwin import codec
from ctxwin.cli.streams import read_input
from ctxwin.errors import InputError, UsageError
from tests.conftest import Cli
from tests.hostile_util import (
    WIDE,
    assert_one_line_error,
    call,
    deny,
    dump,
    transcript,
)

PRUNE_HARD = ["-c", "4000", "--max-tokens", "0"]
"""Flags that make the test transcript need pruning."""


def mutated(change: Callable[[dict[str, Any]], Any]) -> bytes:
    body = copy.deepcopy(transcript())
    change(body)
    return dump(body)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change that sets ``messages[i].key...`` (dotted, with [n] indices) to ``value``."""

    def change(body: dict[str, Any]) -> None:
        target: Any = body
        parts = path.replace("[", ".").replace("]", "").split(".")
        for part in parts[:-1]:
            target = target[int(part)] if part.isdigit() else target[part]
        last = parts[-1]
        if value is _DELETE:
            del target[int(last) if last.isdigit() else last]
        elif last.isdigit():
            target[int(last)] = value
        else:
            target[last] = value

    return change


_DELETE = object()


def _insert(index: int, message: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        body["messages"].insert(index, message)

    return change


def _deep(levels: int) -> bytes:
    nested = b"[" * levels + b"]" * levels
    return VALID.replace(b'"model"', b'"metadata": ' + nested + b', "model"', 1)


@dataclass(frozen=True)
class Case:
    name: str
    data: bytes
    code: int
    needle: str


VALID = dump(transcript())

CATALOGUE = [
    Case("empty file", b"", 1, "empty input"),
    Case("only whitespace", b" \n\t\n", 1, "empty input"),
    Case("not JSON", b"hello, world\n", 1, "invalid JSON: unexpected character"),
    Case(
        "truncated JSON",
        VALID[: len(VALID) // 2],
        1,
        "invalid JSON: truncated (unexpected end of data at line 1 column",
    ),
    Case("two documents", VALID + b" []", 1, "unexpected content after document"),
    Case("a number", b"42", 1, "not a transcript this tool knows"),
    Case("an object without messages", b'{"model": "gpt-4o"}', 1, "not a transcript"),
    Case(
        "messages not a list",
        mutated(_set("messages", {"role": "user"})),
        1,
        "messages: expected a list, got an object",
    ),
    Case(
        "a message not an object",
        mutated(_set("messages[3]", "tool says hi")),
        1,
        "messages[3]: expected a message object, got a string",
    ),
    Case(
        "bare list item not an object",
        b'[{"role": "user", "content": "x"}, 7]',
        1,
        "[1]: expected a message object, got a number",
    ),
    Case(
        "role missing",
        mutated(_set("messages[4].role", _DELETE)),
        1,
        'messages[4].role: missing "role"',
    ),
    Case(
        "role unknown",
        mutated(_set("messages[4].role", "robot")),
        1,
        "messages[4].role: unknown role 'robot'",
    ),
    Case(
        "role not a string",
        mutated(_set("messages[4].role", 3)),
        1,
        "messages[4].role: unknown role 3",
    ),
    Case(
        "content a number",
        mutated(_set("messages[1].content", 12)),
        1,
        "messages[1].content: expected a list, got a number",
    ),
    Case(
        "content part not an object",
        mutated(_set("messages[1].content", ["text"])),
        1,
        "messages[1].content[0]: expected an object, got a string",
    ),
    Case(
        "content part without type",
        mutated(_set("messages[1].content", [{"text": "x"}])),
        1,
        'messages[1].content[0].type: content part without a string "type"',
    ),
    Case(
        "tool_calls not a list",
        mutated(_set("messages[2].tool_calls", call(0))),
        1,
        "messages[2].tool_calls: expected a list, got an object",
    ),
    Case(
        "a tool call not an object",
        mutated(_set("messages[2].tool_calls[0]", "call_0")),
        1,
        "messages[2].tool_calls[0]: expected an object, got a string",
    ),
    Case(
        "function missing",
        mutated(_set("messages[2].tool_calls[0].function", _DELETE)),
        1,
        "messages[2].tool_calls[0].function: expected an object, got null",
    ),
    Case(
        "arguments not a string",
        mutated(_set("messages[2].tool_calls[0].function.arguments", {"path": "a.py"})),
        1,
        "messages[2].tool_calls[0].function.arguments: expected a string, got an object",
    ),
    Case(
        "function name not a string",
        mutated(_set("messages[2].tool_calls[0].function.name", None)),
        1,
        "messages[2].tool_calls[0].function.name: expected a string, got null",
    ),
    Case(
        "call id not a string",
        mutated(_set("messages[12].tool_calls[0].id", 5)),
        1,
        "messages[12].tool_calls[0].id: expected a string, got a number",
    ),
    Case(
        "tool_call_id not a string",
        mutated(_set("messages[3].tool_call_id", ["call_0"])),
        1,
        "messages[3].tool_call_id: expected a string, got a list",
    ),
    Case(
        "tool_call_id missing",
        mutated(_set("messages[3].tool_call_id", _DELETE)),
        1,
        'messages[3].tool_call_id: missing "tool_call_id" on a tool message',
    ),
    Case(
        "tools not a list", mutated(_set("tools", {})), 1, "tools: expected a list, got an object"
    ),
    Case(
        "max_tokens negative",
        mutated(_set("max_tokens", -1)),
        1,
        "max_tokens: expected a non-negative integer",
    ),
    Case("model not a string", mutated(_set("model", 4)), 1, "model: expected a string"),
    Case(
        "duplicate tool-call ids",
        mutated(_set("messages[4].tool_calls", [call(1), call(1)])),
        1,
        "messages[4]: call id 'call_1' was already made by messages[4], which has no result "
        "yet [duplicate-call-id]",
    ),
    Case(
        "a tool result with no call",
        mutated(_insert(6, {"role": "tool", "tool_call_id": "call_404", "content": "?"})),
        1,
        "messages[6]: tool result answers call id 'call_404', which no earlier message made "
        "[orphan-result]",
    ),
    Case(
        "NaN",
        VALID.replace(b'"model"', b'"temperature": NaN, "model"'),
        1,
        "invalid JSON: NaN and Infinity are not JSON values",
    ),
    Case(
        "Infinity",
        VALID.replace(b'"model"', b'"top_p": Infinity, "model"'),
        1,
        "invalid JSON: NaN and Infinity are not JSON values",
    ),
    Case(
        "-Infinity",
        VALID.replace(b'"model"', b'"top_p": -Infinity, "model"'),
        1,
        "invalid JSON: NaN and Infinity are not JSON values",
    ),
    Case(
        "a float beyond 64 bits",
        VALID.replace(b'"model"', b'"seed": 1e400, "model"'),
        1,
        "invalid JSON: number too large for a 64-bit float at line 1 column 10",
    ),
    Case(
        "an integer beyond 64 bits",
        VALID.replace(b'"model"', b'"seed": 123456789012345678901234567890, "model"'),
        1,
        "integer 123456789012345678901234567890 at line 1 column 10 (byte 9) is beyond 64 bits",
    ),
    Case(
        "nesting deeper than 1024",
        _deep(1100),
        1,
        "invalid JSON: nested deeper than 1024 levels at line 1 column",
    ),
    Case(
        "invalid UTF-8",
        VALID.replace(b"careful", b"care\xfful"),
        1,
        "invalid UTF-8: byte 0xff at line 1 column",
    ),
    Case(
        "a lone high surrogate",
        VALID.replace(b"careful", b"care\\ud800ful"),
        1,
        "a lone surrogate in a \\u escape at line 1 column",
    ),
    Case(
        "a lone low surrogate",
        VALID.replace(b"careful", b"care\\udc00ful"),
        1,
        "a lone surrogate in a \\u escape",
    ),
    Case(
        "an encoded surrogate (CESU-8 bytes)",
        VALID.replace(b"careful", b"care\xed\xa0\x80ful"),
        1,
        "invalid UTF-8: byte 0xed",
    ),
    Case("a NUL byte after the document", VALID + b"\x00", 1, "unexpected content after document"),
    Case(
        "UTF-16 (as PowerShell writes it)",
        VALID.decode().encode("utf-16"),
        1,
        "the input is UTF-16 (it starts with a UTF-16 byte order mark); save it as UTF-8",
    ),
    Case("gzip-compressed", gzip.compress(VALID), 1, "the input is gzip-compressed"),
]


@pytest.mark.parametrize("case", CATALOGUE, ids=[c.name for c in CATALOGUE])
def test_catalogue(case: Case, tmp_path: Path, cli: Cli) -> None:
    src = tmp_path / "in.json"
    src.write_bytes(case.data)
    out = tmp_path / "out.json"
    run = cli("prune", str(src), str(out), *PRUNE_HARD)
    assert_one_line_error(run, case.code, case.needle)
    assert run.stdout_bytes == b""
    assert not out.exists()
    assert src.read_bytes() == case.data
    assert [p.name for p in tmp_path.iterdir()] == ["in.json"]  # no temporary left behind


@pytest.mark.parametrize("case", CATALOGUE, ids=[c.name for c in CATALOGUE])
def test_catalogue_lint_reports_it(case: Case, cli: Cli) -> None:
    """lint finds every catalogue problem too (exit 1), and names the same rule or place."""
    run = cli("lint", "--json", "-", input=case.data)
    assert run.exit_code == 1, run.stderr
    report = orjson.loads(run.stdout_bytes)
    assert report["clean"] is False
    found = report["files"][0]["problems"]
    assert found
    if "[" in case.needle and case.needle.endswith("]"):
        rule = case.needle.rsplit("[", 1)[1].rstrip("]")
        assert rule in {p["rule"] for p in found}


SUBPROCESS_SAMPLE = ("empty file", "truncated JSON", "call id not a string", "NaN", "invalid UTF-8")


@pytest.mark.parametrize("name", SUBPROCESS_SAMPLE)
def test_catalogue_real_process(name: str, tmp_path: Path, cli: Cli) -> None:
    case = next(c for c in CATALOGUE if c.name == name)
    src = tmp_path / "in.json"
    src.write_bytes(case.data)
    run = cli.process(
        "prune", str(src), str(tmp_path / "out.json"), *PRUNE_HARD, stdin=b"", env=WIDE
    )
    assert_one_line_error(run, case.code, case.needle)
    assert not (tmp_path / "out.json").exists()


def test_debug_shows_a_traceback(tmp_path: Path, cli: Cli) -> None:
    src = tmp_path / "in.json"
    src.write_bytes(b"{")
    run = cli.process("--debug", "estimate", str(src), stdin=b"", env=WIDE)
    stderr = run.stderr.decode("utf-8", "replace")
    assert run.returncode == 1
    assert "Traceback" in stderr
    assert "InputError: invalid JSON: truncated" in stderr


# --- inputs that are accepted ------------------------------------------------------------


def test_pairing_problems_pass_through_when_nothing_is_dropped(tmp_path: Path, cli: Cli) -> None:
    """A transcript that fits is passed through untouched, with a warning naming the problem."""
    data = mutated(_insert(6, {"role": "tool", "tool_call_id": "call_404", "content": "?"}))
    src = tmp_path / "in.json"
    src.write_bytes(data)
    run = cli("prune", str(src), str(tmp_path / "out.json"), "-c", "128000")
    assert run.exit_code == 0, run.stderr
    assert (tmp_path / "out.json").read_bytes() == data
    assert "warning: messages[6]: tool result answers call id 'call_404'" in run.stderr
    assert "[orphan-result]" in run.stderr


@pytest.mark.parametrize(
    ("change", "where", "rule"),
    [
        (
            _set("messages[5]", {"role": "user", "content": "stop"}),
            "messages[4]",
            "unanswered-call",
        ),
        (
            _insert(4, {"role": "tool", "tool_call_id": "call_0", "content": "again"}),
            "messages[4]",
            "duplicate-result",
        ),
    ],
    ids=["a call with no result in the middle", "a result answered twice"],
)
def test_advisory_problems_are_pruned_with_a_warning(
    change: Callable[[dict[str, Any]], Any], where: str, rule: str, tmp_path: Path, cli: Cli
) -> None:
    """Decision: prune goes on (a drop unit keeps a call with all its results, so pruning
    never makes these worse) and warns; lint reports them and exits 1."""
    data = mutated(change)
    src = tmp_path / "in.json"
    src.write_bytes(data)
    run = cli("prune", str(src), "-", *PRUNE_HARD)
    assert run.exit_code == 0, run.stderr
    assert f"warning: {where}: " in run.stderr
    assert f"[{rule}]" in run.stderr
    assert "kept as it was (see `ctxwin lint`)" in run.stderr
    out = orjson.loads(run.stdout_bytes)
    assert len(out["messages"]) < len(orjson.loads(data)["messages"])
    lint = cli("lint", "--json", str(src))
    assert lint.exit_code == 1
    assert (where, rule) in {
        (p["where"], p["rule"]) for p in orjson.loads(lint.stdout_bytes)["files"][0]["problems"]
    }


def test_big_integer_is_fine_when_nothing_is_rewritten(tmp_path: Path, cli: Cli) -> None:
    data = VALID.replace(b'"model"', b'"seed": 123456789012345678901234567890, "model"')
    src = tmp_path / "in.json"
    src.write_bytes(data)
    assert cli("estimate", str(src), *PRUNE_HARD).exit_code == 0
    run = cli("prune", str(src), str(tmp_path / "out.json"), "-c", "128000")
    assert run.exit_code == 0, run.stderr
    assert (tmp_path / "out.json").read_bytes() == data


def test_integers_within_64_bits_are_pruned(tmp_path: Path, cli: Cli) -> None:
    data = VALID.replace(
        b'"model"', b'"a": 18446744073709551615, "b": -9223372036854775808, "model"'
    )
    src = tmp_path / "in.json"
    src.write_bytes(data)
    run = cli("prune", str(src), "-", *PRUNE_HARD)
    assert run.exit_code == 0, run.stderr
    body = orjson.loads(run.stdout_bytes)
    assert body["a"] == 18446744073709551615
    assert body["b"] == -9223372036854775808
    assert len(body["messages"]) < len(transcript()["messages"])


def test_digits_inside_strings_are_not_big_integers() -> None:
    assert codec.find_big_integer(b'{"a": "123456789012345678901234567890"}') is None
    assert codec.find_big_integer(b'{"a": "x\\"12345678901234567890123"}') is None
    assert codec.find_big_integer(b"[0.123456789012345678901234, 1e-12345678901234567890]") is None
    assert codec.find_big_integer(b'{"a": 1, "b": -12345678901234567890123}') == (
        "integer -12345678901234567890123 at line 1 column 15 (byte 14)"
    )


def test_utf8_bom_is_skipped_with_a_warning(tmp_path: Path, cli: Cli) -> None:
    """Decision: a leading UTF-8 BOM is ignored (RFC 8259 allows it), with a warning."""
    src = tmp_path / "in.json"
    src.write_bytes(b"\xef\xbb\xbf" + VALID)
    run = cli("prune", str(src), "-", *PRUNE_HARD)
    assert run.exit_code == 0, run.stderr
    assert "warning: ignoring the UTF-8 byte order mark" in run.stderr
    assert not run.stdout_bytes.startswith(b"\xef\xbb\xbf")  # the pruned output has none
    assert orjson.loads(run.stdout_bytes)["messages"][0]["role"] == "system"
    fits = cli("prune", str(src), "-", "-c", "128000", "-q")
    assert fits.exit_code == 0
    assert fits.stdout_bytes == src.read_bytes()  # passed through untouched, BOM included


def test_deep_nesting_within_the_parser_limit_is_pruned(tmp_path: Path, cli: Cli) -> None:
    """orjson reads 1024 levels but writes only 254: the standard library writes the rest."""
    src = tmp_path / "in.json"
    src.write_bytes(_deep(1000))
    run = cli("prune", str(src), "-", *PRUNE_HARD, "-q")
    assert run.exit_code == 0, run.stderr
    assert b'"metadata":' + b"[" * 1000 + b"]" * 1000 in run.stdout_bytes
    assert len(orjson.loads(run.stdout_bytes)["messages"]) < len(transcript()["messages"])


def test_parse_positions_count_characters_not_bytes() -> None:
    with pytest.raises(InputError, match="line 2 column 8"):
        codec.parse('["é€€",\n "ab", x]'.encode())


# --- files, folders, sizes, stdin --------------------------------------------------------


def test_missing_file(tmp_path: Path, cli: Cli) -> None:
    run = cli("estimate", str(tmp_path / "nope.json"))
    assert_one_line_error(run, 1, "nope.json: no such file")


def test_a_folder(tmp_path: Path, cli: Cli) -> None:
    run = cli("estimate", str(tmp_path))
    assert_one_line_error(run, 1, "is a folder, expected a JSON file")


def test_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli) -> None:
    src = tmp_path / "in.json"
    src.write_bytes(VALID)
    src.chmod(0)
    deny(monkeypatch, src, "read")  # root: made to refuse as the mode refuses others
    run = cli("estimate", str(src))
    assert_one_line_error(run, 1, "in.json: permission denied")


def test_two_gigabyte_file_is_refused_without_reading_it(tmp_path: Path, cli: Cli) -> None:
    src = tmp_path / "huge.json"
    with src.open("wb") as fh:
        fh.truncate(2 * 1024**3)  # sparse: takes no disk space
    run = cli("estimate", str(src))
    assert_one_line_error(run, 1, "huge.json is 2,147,483,648 bytes, over the 1,073,741,824-byte")
    assert "--max-input-bytes" in run.stderr


def test_max_input_bytes_on_a_file_and_on_stdin(tmp_path: Path, cli: Cli) -> None:
    src = tmp_path / "in.json"
    src.write_bytes(VALID)
    limit = str(len(VALID) - 1)
    run = cli("estimate", str(src), "--max-input-bytes", limit)
    assert_one_line_error(run, 1, f"over the {len(VALID) - 1:,}-byte input limit")
    run = cli("estimate", "-", "--max-input-bytes", limit, input=VALID)
    assert_one_line_error(run, 1, "stdin is")
    assert cli("estimate", "-", "--max-input-bytes", str(len(VALID)), input=VALID).exit_code == 0
    assert cli("estimate", str(src), "--max-input-bytes", "0").exit_code == 0


def test_stdin_that_is_a_terminal_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal:
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal())
    with pytest.raises(UsageError, match="no input: give a transcript file"):
        read_input("-")


@pytest.mark.parametrize("command", ["estimate", "prune", "lint"])
def test_stdin_that_is_a_terminal_real_process(command: str, cli: Cli) -> None:
    """No hang: a real pseudo-terminal on stdin gives exit 2 at once."""
    leader, follower = pty.openpty()
    try:
        run = cli.process(command, stdin=follower, timeout=30, env=WIDE)
    finally:
        os.close(follower)
        os.close(leader)
    assert_one_line_error(run, 2, "no input: give a transcript file, or pipe JSON to stdin")


def test_unknown_format_is_a_usage_error(cli: Cli) -> None:
    run = cli("estimate", "-", "--format", "yaml", input=VALID)
    assert_one_line_error(run, 2, "--format: unknown format 'yaml'")


def test_input_is_never_modified(tmp_path: Path, cli: Cli) -> None:
    src = tmp_path / "in.json"
    src.write_bytes(VALID)
    before = src.stat()
    run = cli("prune", str(src), str(tmp_path / "out.json"), *PRUNE_HARD, "-q")
    assert run.exit_code == 0, run.stderr
    after = src.stat()
    assert src.read_bytes() == VALID
    assert (after.st_mtime_ns, after.st_ino) == (before.st_mtime_ns, before.st_ino)
    assert stat.S_IMODE(after.st_mode) == stat.S_IMODE(before.st_mode)


_REFERENCE_TOKENS = re.compile(
    rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"|(?<![0-9.eE+-])-?[0-9]{19,}(?![0-9.eE])'
)


def _reference_big_integer(data: bytes) -> int | None:
    """Byte offset of the first integer beyond 64 bits, by a slow full tokenization."""
    for match in _REFERENCE_TOKENS.finditer(data):
        token = match.group()
        if token[:1] != b'"' and not -(2**63) <= int(token) <= 2**64 - 1:
            return match.start()
    return None


_TRICKY_TEXT = st.text(
    alphabet=st.sampled_from(['"', "\\", "1", "9", "-", "e", ".", " ", ":", ",", "x"]),
    max_size=60,
)
_JSON = st.recursive(
    st.one_of(
        st.integers(-(10**25), 10**25),
        st.floats(allow_nan=False, allow_infinity=False),
        _TRICKY_TEXT,
        st.just("12345678901234567890123"),
    ),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TRICKY_TEXT, inner, max_size=4),
    max_leaves=12,
)


@given(value=_JSON)
@settings(max_examples=300, deadline=None)
def test_find_big_integer_agrees_with_a_full_tokenizer(value: Any) -> None:
    data = json.dumps(value).encode()
    expected = _reference_big_integer(data)
    found = codec.find_big_integer(data)
    if expected is None:
        assert found is None, data
    else:
        assert found is not None and f"(byte {expected:,})" in found, (data, found)


@given(
    value=_JSON,
    space=st.sampled_from(["", " ", "\n" + " " * 70, "\t" * 200]),
    slice_=st.integers(1, 8),
)
@settings(max_examples=300, deadline=None)
def test_find_big_integer_agrees_across_slices_and_whitespace(
    value: Any, space: str, slice_: int
) -> None:
    """Quotes are counted a slice at a time and whitespace skipped a window at a time:
    with slices of a few bytes (runs of backslashes cross every boundary) and long
    whitespace between tokens, the answer is the full tokenizer's still."""
    data = json.dumps(value, separators=("," + space, ":" + space)).encode()
    expected = _reference_big_integer(data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(codec, "_SLICE", slice_)
        found = codec.find_big_integer(data)
    if expected is None:
        assert found is None, data
    else:
        assert found is not None and f"(byte {expected:,})" in found, (data, found)


_ODD_BACKSLASHES_QUOTE = re.compile(rb'(?<!\\)(?:\\\\)*\\"')


@given(
    data=st.lists(st.sampled_from([b"\\", b'"', b"a", b"\\" * 7, b"\\" * 8]), max_size=40),
    slice_=st.integers(1, 6),
)
@settings(max_examples=300, deadline=None)
def test_unescaped_quotes_agrees_with_a_regex(data: list[bytes], slice_: int) -> None:
    raw = b"a" + b"".join(data)
    expected = raw.count(b'"') - len(_ODD_BACKSLASHES_QUOTE.findall(raw))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(codec, "_SLICE", slice_)
        assert codec._unescaped_quotes(raw, 0, len(raw)) == expected
        assert codec._unescaped_quotes(raw, 1, len(raw)) == expected


def test_a_refused_prune_writes_no_report_either(tmp_path: Path, cli: Cli) -> None:
    src = tmp_path / "in.json"
    src.write_bytes(VALID.replace(b'"model"', b'"seed": 123456789012345678901234567890, "model"'))
    report = tmp_path / "report.json"
    run = cli("prune", str(src), str(tmp_path / "out.json"), "--report", str(report), *PRUNE_HARD)
    assert_one_line_error(run, 1, "is beyond 64 bits")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.json"]


def test_a_list_where_a_type_name_belongs_is_bad_input_not_a_crash(cli: Cli) -> None:
    """Found by `make fuzz`: an unhashable "type" once crashed format detection."""
    run = cli("estimate", "-c", "100000", "-", input=b'[{"type": ["x"]}, {"role": "user"}]')
    assert run.exit_code == 1, run.stderr
    assert "internal error" not in run.stderr


BIG = 123456789012345678901234567890


@pytest.mark.parametrize(
    ("index", "text", "refused"),
    [
        (3, "ok", False),  # in the oldest turn, which is dropped: nothing is rewritten
        (-1, "ok", True),  # in the newest turn, which is kept
        # Kept text that looks like a big float sends ctxwin to the full input scan,
        # which cannot tell kept from dropped: refused, to be safe.
        (3, "overflow at 1.5e+20 bytes", True),
    ],
    ids=["dropped", "kept", "dropped-but-kept-text-has-e+"],
)
def test_big_integer_matters_only_if_written_back(
    index: int, text: str, refused: bool, tmp_path: Path, cli: Cli
) -> None:
    def change(body: dict[str, Any]) -> None:
        body["messages"][index]["seq"] = "BIG"
        body["messages"][-1]["content"] = text

    src = tmp_path / "in.json"
    src.write_bytes(mutated(change).replace(b'"BIG"', str(BIG).encode()))
    out = tmp_path / "out.json"
    run = cli("prune", str(src), str(out), *PRUNE_HARD)
    if refused:
        assert_one_line_error(run, 1, "is beyond 64 bits")
        assert not out.exists()
    else:
        assert run.exit_code == 0, run.stderr
        kept = orjson.loads(out.read_bytes())["messages"]
        assert len(kept) < len(transcript()["messages"])
        assert all("seq" not in m for m in kept)


@given(value=_JSON)
@settings(max_examples=300, deadline=None)
def test_output_without_e_plus_holds_no_big_number(value: Any) -> None:
    """``may_hold_big_number`` may say True needlessly, never False when a float of
    10**16 or more (as every integer beyond 64 bits becomes) is in the output."""
    parsed = orjson.loads(json.dumps(value))  # big integers come back as floats
    out = codec.dumps(parsed)
    if not codec.may_hold_big_number(out):
        numbers: list[float] = []

        def walk(v: Any) -> None:
            if isinstance(v, dict):
                for x in v.values():
                    walk(x)
            elif isinstance(v, list):
                for x in v:
                    walk(x)
            elif isinstance(v, float):
                numbers.append(abs(v))

        walk(parsed)
        # Every integer beyond 64 bits was read as a float of at least 2**63.
        assert all(n < 1e16 for n in numbers), out


# A list or an object where a reader looks a name up in a set (a type, a role, an
# operation name): ``[] in {"a"}`` raises TypeError, which must never escape as an
# internal error. Found by the fuzzer (a Gemini CLI history) and by looking for the same
# lookup in every reader.
UNHASHABLE_NAMES = {
    "gemini-cli role": b'[{"role":[],"content":"","parts":null}]',
    "anthropic block type": (
        b'{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":[{"type":[]}]}]}'
    ),
    "codex line type": b'{"type":[],"payload":{}}\n{"type":"session_meta","payload":{}}\n',
    "codex item type": (
        b'{"type":"session_meta","payload":{"id":"x"}}\n'
        b'{"type":"response_item","payload":{"type":[]}}\n'
    ),
    "claude-code line type": (
        b'{"type":[],"uuid":"u","message":{},"sessionId":"s"}\n'
        b'{"type":"user","uuid":"v","message":{"role":"user","content":"hi"},"sessionId":"s"}\n'
    ),
    "openhands action": b'[{"id":1,"action":[],"observation":{},"tool_call_metadata":{}}]',
    "otel operation (OTLP)": (
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x","attributes":'
        b'[{"key":"gen_ai.operation.name","value":{"arrayValue":{"values":[]}}}]}]}]}]}'
    ),
    "otel operation (SDK dump)": b'[{"attributes":{"gen_ai.operation.name":["chat"]},"name":"x"}]',
}


@pytest.mark.parametrize("name", sorted(UNHASHABLE_NAMES))
@pytest.mark.parametrize("command", ["estimate", "prune", "replay", "lint", "check"])
def test_unhashable_names_are_bad_input_not_a_crash(
    name: str, command: str, tmp_path: Path, cli: Cli
) -> None:
    src = tmp_path / ("in.jsonl" if b"\n{" in UNHASHABLE_NAMES[name] else "in.json")
    src.write_bytes(UNHASHABLE_NAMES[name])
    args = [command, str(src)]
    if command == "prune":
        args.append(str(tmp_path / "out.json"))
    if command != "lint":
        args += ["-c", "1000"]
    run = cli(*args)
    assert "internal error" not in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    assert run.exit_code in (0, 1, 3, 4), run.stderr


@pytest.mark.parametrize(
    "data",
    [b"\x7fELF\x02\x01\x01\x00" + bytes(range(128, 256)) * 3, b'{"a": "\xff\xfe"}'],
    ids=["binary", "a bad byte"],
)
def test_bytes_that_are_not_utf8_get_one_message_in_every_command(
    data: bytes, cli: Cli, tmp_path: Path
) -> None:
    """estimate, prune, replay, check, calibrate and lint word the same bad byte the same
    way (the recorded-run readers said "str is not valid UTF-8: surrogates not allowed")."""
    path = tmp_path / "input.json"
    path.write_bytes(data)
    said = {
        "estimate": cli("estimate", str(path)).stderr,
        "prune": cli("prune", str(path), str(tmp_path / "out.json")).stderr,
        "replay": cli("replay", str(path)).stderr,
        "check": cli("check", str(path), "--jsonl").stdout,
        "calibrate": cli("calibrate", str(path)).stderr,
        "lint": cli("lint", str(path)).stdout,
    }
    found = {
        name: re.search(r"invalid UTF-8: byte 0x[0-9a-f]{2} at [^\n\"(]*\(byte \d+\)", text)
        for name, text in said.items()
    }
    assert all(found.values()), said
    assert len({m.group() for m in found.values() if m}) == 1
    assert not any("surrogates not allowed" in text for text in said.values())
