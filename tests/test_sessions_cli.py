"""Session files on the command line: estimate and prune take one directly,
--run-format forces a reader, replay/check/calibrate report what the sessions learned."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import Cli
from tests.test_sessions import AGENT_TOOLS, cc_line, corpus, jsonl, tool_result, tool_use


def session_lines() -> list[dict[str, Any]]:
    return [
        {"type": "queue-operation", "operation": "enqueue", "sessionId": "s1"},
        cc_line("user", "u1", None, "fix the failing test"),
        cc_line("assistant", "a1", "u1", tool_use("t1"), usage=21000),
        cc_line("user", "r1", "a1", tool_result("t1")),
        cc_line("assistant", "a2", "r1", [{"type": "text", "text": "Fixed."}], usage=21050),
        cc_line("user", "u2", "a2", "thanks, now run the suite"),
    ]


@pytest.fixture
def session(tmp_path: Path) -> Path:
    path = tmp_path / "s1.jsonl"
    path.write_bytes(jsonl(*session_lines()))
    return path


def test_estimate_a_session_counts_the_overhead_its_usage_proves(session: Path, cli: Cli) -> None:
    for result in (cli.process("estimate", str(session), "--json"), None):
        if result is None:
            out = cli("estimate", str(session), "--json")
            assert out.exit_code == 0, out.output
            report = orjson.loads(out.stdout)
        else:
            assert result.returncode == 0, result.stderr
            report = orjson.loads(result.stdout)
        assert report["session"] == {"run": "main", "shape": "claude-code"}
        assert report["format"] == "anthropic"
        assert report["messages_in"] == 5
        # the last call reported 21,050 for four of these messages: the next request is more
        assert report["overhead"] + report["calibration"] * report["raw_tokens"] > 21050
        assert report["estimated_tokens"] > 21050


def test_prune_writes_the_next_request_as_a_body(session: Path, tmp_path: Path, cli: Cli) -> None:
    out = tmp_path / "next.json"
    result = cli.process("prune", str(session), str(out))
    assert result.returncode == 0, result.stderr
    body = orjson.loads(out.read_bytes())
    assert set(body) == {"model", "messages"}
    assert [m["role"] for m in body["messages"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]


def test_prune_a_session_over_its_window_drops_old_turns(tmp_path: Path, cli: Cli) -> None:
    lines = [cc_line("user", "u0", None, "start")]
    parent = "u0"
    for k in range(8):
        lines += [
            cc_line("assistant", f"a{k}", parent, tool_use(f"t{k}"), usage=20000 + 3000 * k),
            cc_line("user", f"r{k}", f"a{k}", [{**tool_result(f"t{k}")[0], "content": "x" * 8000}]),
        ]
        parent = f"r{k}"
    path = tmp_path / "big.jsonl"
    path.write_bytes(jsonl(*lines))
    out = tmp_path / "next.json"
    result = cli("prune", str(path), str(out), "--context-length", "40000", "--max-tokens", "1000")
    assert result.exit_code == 0, result.output
    body = orjson.loads(out.read_bytes())
    assert 1 < len(body["messages"]) < 17


def test_cut_off_session_warns_and_reads_the_complete_lines(session: Path, cli: Cli) -> None:
    data = session.read_bytes() + b'{"type": "assistant", "uuid": "a3", "mess'
    session.write_bytes(data)
    result = cli.process("estimate", str(session), "--json")
    assert result.returncode == 0, result.stderr
    assert b"line 7 is cut off" in result.stderr
    assert orjson.loads(result.stdout)["messages_in"] == 5


def test_empty_session_exits_1_with_one_line(tmp_path: Path, cli: Cli) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    result = cli.process("estimate", str(path), "--run-format", "claude-code")
    assert result.returncode == 1
    assert result.stderr.count(b"\n") == 1 and b"empty" in result.stderr
    assert b"Traceback" not in result.stderr


def test_run_format_unknown_is_a_usage_error(session: Path, cli: Cli) -> None:
    result = cli("estimate", str(session), "--run-format", "nope")
    assert result.exit_code == 2
    assert "--run-format: unknown run format 'nope'" in result.output
    assert cli("check", str(session), "--run-format", "nope").exit_code == 2


def test_run_format_forces_a_reader(session: Path, cli: Cli) -> None:
    result = cli("estimate", str(session), "--run-format", "codex")
    assert result.exit_code == 1
    ok = cli("replay", str(session), "--run-format", "claude-code", "--json")
    assert ok.exit_code == 0, ok.output
    [rep] = orjson.loads(ok.stdout)["runs"]
    assert rep["shape"] == "claude-code" and rep["calls"] == 2


def test_replay_reports_peak_overhead_and_next_request(session: Path, cli: Cli) -> None:
    result = cli("replay", str(session), "--json")
    assert result.exit_code == 0, result.output
    [rep] = orjson.loads(result.stdout)["runs"]
    assert rep["learn_overhead"] is True
    assert rep["final_overhead"] > 0
    # the fullest prompt is the next request (the call after the last), at what was learned
    nxt = rep["next_request"]
    assert rep["peak_call"] == 3 and nxt["estimated_tokens"] >= 21050
    assert rep["peak_context_use"] == round(nxt["estimated_tokens"] / rep["context_length"], 4)
    assert nxt["messages"] == 5
    # the second call is predicted before its usage is seen, anchored on the first's
    # report (21,000) plus the bound of the two messages added since; the 50 tokens the
    # fixture says they cost are 2 more than their bound (48), within the safety margin
    second = rep["rows"][1]
    assert second["reported_tokens"] == 21050
    assert 21000 < second["estimated_tokens"] < 21300
    assert 21050 - second["estimated_tokens"] < 0.03 * rep["context_length"]


@corpus
@pytest.mark.corpus
def test_check_reads_every_agent_tools_sample(cli: Cli) -> None:
    result = cli("check", str(AGENT_TOOLS), "--jsonl", "-j", "1", "--fail-on", "never")
    assert result.exit_code == 0, result.output
    rows = [orjson.loads(line) for line in result.stdout.splitlines()]
    # each sample holds one run
    assert len(rows) == len(list(AGENT_TOOLS.rglob("*.json*"))) >= 21
    assert not [r for r in rows if r["status"] == "invalid"]
    claude = next(r for r in rows if r["path"].endswith("drmaciver-coverage-test-fix.jsonl"))
    # the fullest prompt is the next request (call 15), what estimate reports
    assert claude["calls"] == 14 and claude["peak_call"] == 15
    assert claude["where"] == "next request"
    assert claude["peak_context_use"] == round(claude["estimated_tokens"] / 200_000, 4)
    assert claude["overhead"] > 18000  # Claude Code's system prompt and tools, never logged


@corpus
@pytest.mark.corpus
def test_check_reads_every_agent_tools_next_sample(cli: Cli) -> None:
    folder = AGENT_TOOLS.parent / "agent_tools_next"
    result = cli("check", str(folder), "--jsonl", "-j", "1", "--fail-on", "never")
    assert result.exit_code == 0, result.output
    rows = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert not [r for r in rows if r["status"] == "invalid"]
    files = {Path(r["path"]).name for r in rows}
    assert files == {p.name for p in folder.rglob("*.json*")}
    pi = [r for r in rows if r["path"].endswith("pi-mono-large-session.jsonl")]
    assert sorted(r["run"] for r in pi) == ["main", "main aborted", "main gpt-5.1-codex aborted"]


@corpus
@pytest.mark.corpus
def test_calibrate_fits_overhead_and_factor_per_run(cli: Cli) -> None:
    path = AGENT_TOOLS / "claude-code" / "drmaciver-coverage-test-fix.jsonl"
    result = cli("calibrate", str(path), "--json")
    assert result.exit_code == 0, result.output
    [fit] = orjson.loads(result.stdout)["by_run"]
    assert (fit["run"], fit["calls"]) == ("main", 14)
    # 14 calls from 18,549 to 22,899 reported tokens over a conversation of a few thousand
    assert 15000 < fit["overhead"] < 18549
    assert fit["median_ratio"] <= 1.10


def _long_session() -> list[dict[str, Any]]:
    """A session whose first call logs almost nothing (a hidden prompt of ~20,000 tokens),
    then turns of large tool results and a growing usage."""
    lines = [cc_line("user", "u0", None, "go")]
    parent, reported = "u0", 20_000
    for k in range(8):
        lines.append(cc_line("assistant", f"a{k}", parent, tool_use(f"t{k}"), usage=reported))
        result = [{"type": "tool_result", "tool_use_id": f"t{k}", "content": "x y " * 3000}]
        lines.append(cc_line("user", f"r{k}", f"a{k}", result))
        lines.append(cc_line("user", f"u{k + 1}", f"r{k}", f"next step {k}"))
        parent, reported = f"u{k + 1}", reported + 3_200
    return lines


def test_explain_of_a_session_adds_up_to_its_estimate(tmp_path: Path, cli: Cli) -> None:
    """outside the messages (with the learned overhead) + head + turns = the estimate,
    exactly; no step saves more than the request holds beyond what it keeps."""
    path = tmp_path / "long.jsonl"
    path.write_bytes(jsonl(*_long_session()))
    out = cli("estimate", str(path), "--explain", "--json")
    assert out.exit_code == 0, out.output
    report = orjson.loads(out.stdout)
    e = report["explain"]
    parts = e["outside_messages"] + e["head"]["tokens"] + sum(t["tokens"] for t in e["turns"])
    assert parts == report["estimated_tokens"] == e["estimated_tokens"]
    assert e["overhead"] == report["overhead"] > 0
    assert e["outside_messages"] >= e["overhead"]
    removable = report["estimated_tokens"] - e["outside_messages"] - e["head"]["tokens"]
    for step in e["steps"]:
        kept = e["turns"][-1]["tokens"] if step["step"] == "drop-turns" else 0
        assert 0 <= step["tokens"] <= removable - kept, step
    text = cli("estimate", str(path), "--explain")
    assert text.exit_code == 0, text.output
    assert f"overhead {report['overhead']:,}" in text.stdout


def test_calibrate_headlines_the_overhead_line_for_sessions(tmp_path: Path, cli: Cli) -> None:
    """A session whose first call logs almost nothing (reported ÷ raw in the thousands):
    no "safe factor" is made of it; the headline is its overhead + factor line."""
    path = tmp_path / "long.jsonl"
    path.write_bytes(jsonl(*_long_session()))
    out = cli("calibrate", str(path), "--json")
    assert out.exit_code == 0, out.output
    payload = orjson.loads(out.stdout)
    summary = payload["summary"]
    assert summary["safe_calibration"] is None and summary["calls"] == 0
    lines = summary["sessions"]
    assert lines["calls"] == 8 and lines["runs"] == 1
    assert 1.0 <= lines["median_ratio"] <= 1.10
    (fit,) = payload["by_run"]
    assert 18_000 <= fit["overhead"] <= 20_000 and fit["factor"] < 2
    text = cli("calibrate", str(path))
    assert text.exit_code == 0, text.output
    assert "median prediction ÷ reported" in text.stdout
    assert "safe factor" not in text.stdout


def test_a_session_reporting_zero_prompt_tokens_is_taken_as_unreported(
    tmp_path: Path, cli: Cli
) -> None:
    """A gateway that counts nothing (usage of 0): estimate says so on stderr, and learns
    nothing from it (no overhead, no anchor)."""
    lines = session_lines()
    zero = {"input_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    for k in (2, 4):
        lines[k]["message"]["usage"] = {**zero, "output_tokens": 0}
    path = tmp_path / "zero.jsonl"
    path.write_bytes(jsonl(*lines))
    result = cli.process("estimate", str(path), "--json")
    assert result.returncode == 0, result.stderr
    assert b"2 of the session's calls reported 0 prompt tokens" in result.stderr
    report = orjson.loads(result.stdout)
    assert report["overhead"] == 0
    assert report["estimated_tokens"] < 21_000  # nothing counted 21,000
    replayed = orjson.loads(cli("replay", str(path), "--json").stdout)["runs"][0]
    assert replayed["zero_reports"] == 2


def test_zero_usage_is_no_report_in_every_command(tmp_path: Path, cli: Cli) -> None:
    """Every call reporting 0 prompt tokens: the estimate is the one of the same session
    with no usage at all; replay counts no call with usage; check and calibrate warn, and
    calibrate exits 1 (no call has usable usage)."""
    zero = {"input_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    zeroed = session_lines()
    bare = session_lines()
    calls = 0
    for k, line in enumerate(zeroed):
        if "usage" in line.get("message", {}):
            zeroed[k]["message"]["usage"] = {**zero, "output_tokens": 0}
            del bare[k]["message"]["usage"]
            calls += 1
    assert calls >= 2
    path = tmp_path / "zero.jsonl"
    path.write_bytes(jsonl(*zeroed))
    without = tmp_path / "bare.jsonl"
    without.write_bytes(jsonl(*bare))
    est = cli("estimate", str(path), "--json")
    assert est.exit_code == 0 and "reported 0 prompt tokens" in est.stderr
    plain = cli("estimate", str(without), "--json")
    assert (
        orjson.loads(est.stdout)["estimated_tokens"]
        == orjson.loads(plain.stdout)["estimated_tokens"]
    )
    replayed = cli("replay", str(path), "--json")
    run = orjson.loads(replayed.stdout)["runs"][0]
    assert run["calls_with_usage"] == 0 and run["zero_reports"] == calls
    assert run["under_estimates"] == run["under_estimates_after_first"] == 0
    assert "reported 0 prompt tokens" in replayed.stderr
    checked = cli("check", str(path), "--jsonl")
    (row,) = [orjson.loads(line) for line in checked.stdout.splitlines()]
    assert any("reported 0 prompt tokens" in w for w in row["warnings"])
    assert "reported 0 prompt tokens" in checked.stderr
    calibrated = cli("calibrate", str(path))
    assert calibrated.exit_code == 1
    assert f"{calls} calls reported 0 prompt tokens" in calibrated.stderr
    assert "no recorded calls with usable usage" in calibrated.stderr
    quiet = cli("calibrate", "-q", str(path))
    assert quiet.exit_code == 1 and "warning" not in quiet.stderr


def test_calibrate_reads_stdin(cli: Cli) -> None:
    data = jsonl(*session_lines())
    from_stdin = cli("calibrate", "-", "--json", input=data)
    assert from_stdin.exit_code == 0, from_stdin.output
    (fit,) = orjson.loads(from_stdin.stdout)["by_run"]
    assert fit["path"] == "-" and fit["calls"] >= 2
