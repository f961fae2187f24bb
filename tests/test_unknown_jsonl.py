"""JSON Lines that no reader recognises is one error, never "invalid JSON": it names the
first record's keys, the readers, and (on the command line) the file and ``--run-format``.
A folder of such files is one invalid row per file, and the error is written once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxwin.runs import UNKNOWN_RECORDS, read_runs, read_session
from ctxwin.sessions import names
from tests.conftest import Cli


def jsonl(*lines: Any) -> bytes:
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


UNKNOWN = jsonl(
    {"kind": "start", "at": 1, "agent": "x"},
    {"kind": "turn", "text": "hello"},
    {"kind": "turn", "text": "world"},
)
EXPECTED = (
    f"{UNKNOWN_RECORDS} (first record's keys: kind, at, agent); readers: {', '.join(names())}"
)


def test_one_invalid_run_names_the_first_records_keys_and_the_readers() -> None:
    runs = read_runs(UNKNOWN)
    assert [(r.name, r.shape, r.error) for r in runs] == [("", "invalid", EXPECTED)]
    [session] = read_session(UNKNOWN) or []
    assert session.error == EXPECTED


def test_a_record_that_is_not_an_object_is_named() -> None:
    [run] = read_runs(b'"text"\n"more"\n')
    assert run.error is not None and run.error.startswith(f"{UNKNOWN_RECORDS} (first record: str)")


def test_many_keys_are_cut_and_counted() -> None:
    first = {f"k{i}": i for i in range(15)}
    [run] = read_runs(jsonl(first, {"k0": 1}))
    assert run.error is not None
    assert "first record's keys: k0, k1, k2, k3, k4, k5, k6, k7, k8, k9, k10, k11, … (15 keys)" in (
        run.error
    )


@pytest.mark.parametrize(
    "line",
    [
        {"messages": [{"role": "user", "content": "hi"}]},
        {"request": {"messages": [{"role": "user", "content": "hi"}]}, "response": {}},
        [{"role": "user", "content": "hi"}],
        {"input": "hi"},
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    ],
)
def test_jsonl_of_shapes_read_line_by_line_is_not_unknown(line: Any) -> None:
    runs = read_runs(jsonl(line, line))
    assert len(runs) == 2
    assert all(r.error is None or not r.error.startswith(UNKNOWN_RECORDS) for r in runs)
    assert read_session(jsonl(line, line)) is None


def test_a_line_that_is_not_json_stays_a_line_error() -> None:
    runs = read_runs(UNKNOWN + b"{not json\n" + UNKNOWN)
    assert not any(r.error and r.error.startswith(UNKNOWN_RECORDS) for r in runs)


@pytest.fixture
def unknown(tmp_path: Path) -> Path:
    path = tmp_path / "events.jsonl"
    path.write_bytes(UNKNOWN)
    return path


@pytest.mark.parametrize("command", ["estimate", "replay"])
def test_estimate_and_replay_exit_1_with_one_line_naming_the_file(
    command: str, unknown: Path, cli: Cli
) -> None:
    result = cli.process(command, str(unknown))
    assert result.returncode == 1
    assert result.stdout == b""
    assert result.stderr.decode() == f"ctxwin: error: {unknown}: {EXPECTED}; --run-format NAME\n"


def test_prune_writes_nothing(unknown: Path, tmp_path: Path, cli: Cli) -> None:
    out = tmp_path / "out.json"
    result = cli.process("prune", str(unknown), str(out))
    assert result.returncode == 1
    assert result.stderr.decode() == f"ctxwin: error: {unknown}: {EXPECTED}; --run-format NAME\n"
    assert not out.exists()


def test_stdin_is_named(cli: Cli) -> None:
    result = cli.process("estimate", "-", stdin=UNKNOWN)
    assert result.returncode == 1
    assert result.stderr.decode() == f"ctxwin: error: stdin: {EXPECTED}; --run-format NAME\n"


def test_lint_reports_it_as_bad_input(unknown: Path, cli: Cli) -> None:
    result = cli.process("lint", str(unknown), "--json")
    assert result.returncode == 1
    [record] = orjson.loads(result.stdout)["files"]
    [problem] = record["problems"]
    assert problem["rule"] == "bad-input"
    assert problem["message"] == f"{unknown}: {EXPECTED}; --run-format NAME"


def test_calibrate_names_it_among_the_skipped(unknown: Path, cli: Cli) -> None:
    result = cli.process("calibrate", str(unknown))
    assert result.returncode == 1
    assert f"{EXPECTED}; --run-format NAME" in result.stderr.decode()
    assert "invalid JSON" not in result.stderr.decode()


def test_check_of_a_folder_counts_files_not_lines_and_says_the_error_once(
    tmp_path: Path, cli: Cli
) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    for n in range(3):
        (folder / f"events-{n}.jsonl").write_bytes(UNKNOWN)
    result = cli.process("check", str(folder), "--json")
    assert result.returncode == 1
    report = orjson.loads(result.stdout)
    assert report["summary"]["transcripts"] == 3
    assert report["summary"]["counts"]["invalid"] == 3
    assert {r["error"] for r in report["rows"]} == {f"{EXPECTED}; --run-format NAME"}
    table = cli("check", str(folder), terminal_width=200)
    assert table.exit_code == 1
    assert table.stdout.count(UNKNOWN_RECORDS) == 1
    assert table.stdout.count("the error of events-0.jsonl") == 2


def test_jsonl_of_request_bodies_to_estimate_is_not_called_invalid_json(
    tmp_path: Path, cli: Cli
) -> None:
    path = tmp_path / "bodies.jsonl"
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    path.write_bytes(jsonl(body, body))
    result = cli.process("estimate", str(path))
    assert result.returncode == 1
    said = result.stderr.decode()
    assert "invalid JSON" not in said
    assert "JSON Lines of request bodies or recorded calls" in said
