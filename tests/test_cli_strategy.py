"""``--strategy``, ``--keep-results``, ``--exclude-tools``, ``--clear-at-least`` on
estimate, prune, replay and check; the report's strategy keys."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.builders import assistant, system, tool, user
from tests.conftest import Cli

SMALL = ("--context-length", "8000", "--max-tokens", "500", "--estimator", "seed")
CLEAR = ("--strategy", "clear-results,drop-turns")


def needs_pruning(n: int = 6, size: int = 3000) -> dict[str, Any]:
    messages = [system(), user()]
    for i in range(n):
        messages += [assistant(f"c{i}"), tool(f"c{i}", "x" * size)]
    return {"model": "gpt-4o", "messages": messages}


def write(path: Path, value: Any) -> Path:
    path.write_bytes(orjson.dumps(value))
    return path


def test_estimate_report_says_what_the_strategy_does(tmp_path: Path, cli: Cli) -> None:
    path = write(tmp_path / "in.json", needs_pruning())
    plain = orjson.loads(cli("estimate", str(path), *SMALL, "--json").stdout)
    assert plain["strategy"] == "drop-turns" and plain["cleared_results"] == 0
    assert plain["cleared_tokens"] == plain["truncated_results"] == 0
    assert plain["dropped_turns"] > 0
    result = cli("estimate", str(path), *SMALL, *CLEAR, "--json")
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.stdout)
    assert report["strategy"] == "clear-results,drop-turns"
    assert report["cleared_results"] >= 1 and report["cleared_tokens"] > 500
    assert report["messages_out"] > plain["messages_out"]
    assert report["estimated_tokens"] == plain["estimated_tokens"]
    assert report["estimated_tokens_after"] <= report["budget"]
    # every key of the default report is still there, in the same order
    assert list(report)[: len(plain)] == list(plain)
    summary = cli("estimate", str(path), *SMALL, *CLEAR)
    assert "clear" in summary.stdout and "tool result" in summary.stdout


def test_prune_writes_placeholders_and_keeps_the_newest(tmp_path: Path, cli: Cli) -> None:
    path = write(tmp_path / "in.json", needs_pruning())
    out = tmp_path / "out.json"
    result = cli("prune", str(path), str(out), *SMALL, *CLEAR, "--keep-results", "2")
    assert result.exit_code == 0, result.output
    assert "cleared" in result.stderr and "tool result" in result.stderr
    body = orjson.loads(out.read_bytes())
    contents = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    assert contents[-2:] == ["x" * 3000] * 2
    assert contents[0].startswith("[cleared by ctxwin: ")
    # pairing untouched: every kept tool message still answers a kept call
    made = {c["id"] for m in body["messages"] for c in m.get("tool_calls") or []}
    assert all(m["tool_call_id"] in made for m in body["messages"] if m["role"] == "tool")


def test_exclude_tools_and_clear_at_least(tmp_path: Path, cli: Cli) -> None:
    path = write(tmp_path / "in.json", needs_pruning())
    excluded = cli("estimate", str(path), *SMALL, *CLEAR, "--exclude-tools", "fetch", "--json")
    assert orjson.loads(excluded.stdout)["cleared_results"] == 0
    # at the fewest edits (--block 0): the default block rounds clearing up to a batch
    just = ("--block", "0")
    few = orjson.loads(cli("estimate", str(path), *SMALL, *CLEAR, *just, "--json").stdout)
    many = cli("estimate", str(path), *SMALL, *CLEAR, *just, "--clear-at-least", "2500", "--json")
    report = orjson.loads(many.stdout)
    assert report["cleared_tokens"] >= 2500 and report["cleared_results"] > few["cleared_results"]


def test_default_strategy_output_is_byte_identical(tmp_path: Path, cli: Cli) -> None:
    path = write(tmp_path / "in.json", needs_pruning())
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert cli("prune", str(path), str(a), *SMALL).exit_code == 0
    assert cli("prune", str(path), str(b), *SMALL, "--strategy", "drop-turns").exit_code == 0
    assert a.read_bytes() == b.read_bytes()


def test_truncate_results_instead_of_exit_3(tmp_path: Path, cli: Cli) -> None:
    body = needs_pruning(n=2)
    body["messages"][-1]["content"] = "y" * 60_000
    path = write(tmp_path / "in.json", body)
    out = tmp_path / "out.json"
    plain = cli("prune", str(path), str(out), *SMALL)
    assert plain.exit_code == 3 and not out.exists()
    steps = ("--strategy", "drop-turns,truncate-results", "--report", str(tmp_path / "r.json"))
    result = cli("prune", str(path), str(out), *SMALL, *steps)
    assert result.exit_code == 0, result.output
    report = orjson.loads((tmp_path / "r.json").read_bytes())
    assert report["truncated_results"] == 1 and not report["overflow_at_floor"]
    last = orjson.loads(out.read_bytes())["messages"][-1]["content"]
    assert last.startswith("yyy") and last.endswith("yyy") and "tokens cut by ctxwin" in last


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--strategy", "drop-turns,bogus"), "unknown strategy step 'bogus'"),
        (("--strategy", "truncate-results,drop-turns"), "must be the last"),
        (("--keep-results", "-1"), "--keep-results"),
    ],
)
def test_bad_strategy_flags_are_usage_errors(
    tmp_path: Path, flags: tuple[str, ...], says: str, cli: Cli
) -> None:
    path = write(tmp_path / "in.json", needs_pruning())
    out = tmp_path / "out.json"
    for command in (("estimate", str(path)), ("prune", str(path), str(out))):
        result = cli.process(*command, *flags)
        stderr = result.stderr.decode()
        assert result.returncode == 2 and says in stderr
        assert "Traceback" not in stderr and not out.exists()


def test_check_and_replay_take_the_strategy(tmp_path: Path, cli: Cli) -> None:
    path = write(tmp_path / "in.json", needs_pruning())
    result = cli("check", str(path), *SMALL, *CLEAR, "--json", "-j", "1")
    assert result.exit_code == 4, result.output
    [row] = orjson.loads(result.stdout)["rows"]
    assert row["status"] == "needs_pruning" and row["cleared_results"] >= 1
    plain = orjson.loads(cli("check", str(path), *SMALL, "--json", "-j", "1").stdout)
    assert plain["rows"][0]["cleared_results"] == 0
    body = needs_pruning()
    body["messages"].append(assistant(content="done"))
    run = write(tmp_path / "run.json", body)
    replay = cli("replay", str(run), *SMALL, *CLEAR, "--json")
    assert replay.exit_code == 0, replay.output
    rows = orjson.loads(replay.stdout)["runs"][0]["rows"]
    assert any(r["cleared_results"] for r in rows)
    assert cli("replay", str(run), *SMALL, "--strategy", "nope").exit_code == 2
