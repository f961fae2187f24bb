"""The recorded-run commands: replay, check (exit codes, parallel), calibrate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxwin.fitting.rows import CheckRow
from ctxwin.runs.checking import check_exit_code, check_paths, chunks, find_files
from ctxwin.settings import Settings
from fidelity.corpus import corpus_path
from tests.builders import adr_transcript, assistant, system, tool, user
from tests.conftest import Cli

SEED = ("--estimator", "seed")
CORPUS = corpus_path()
corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is absent")


def write(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(value))
    return path


def fitting() -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": adr_transcript()}


def needs_pruning() -> dict[str, Any]:
    messages = [system(), user()]
    for i in range(6):
        messages += [assistant(f"c{i}"), tool(f"c{i}", "x" * 3000)]
    return {"messages": messages}


def truncating() -> dict[str, Any]:
    return {"messages": [*adr_transcript(), assistant("big"), tool("big", "y" * 40_000)]}


SMALL = ("--context-length", "8000", "--max-tokens", "500", *SEED)


# check --------------------------------------------------------------------------------


def test_check_all_fit_exits_0(tmp_path: Path, cli: Cli) -> None:
    write(tmp_path / "a.json", fitting())
    write(tmp_path / "sub" / "b.json", fitting())
    result = cli("check", str(tmp_path), *SMALL, "-j", "1")
    assert result.exit_code == 0, result.output
    assert "fits" in result.stdout


def test_check_needs_pruning_exits_4(tmp_path: Path, cli: Cli) -> None:
    write(tmp_path / "a.json", fitting())
    write(tmp_path / "b.json", needs_pruning())
    result = cli("check", str(tmp_path), *SMALL, "-j", "1")
    assert result.exit_code == 4, result.output


def test_check_truncated_exits_3_and_fail_on_chooses(tmp_path: Path, cli: Cli) -> None:
    write(tmp_path / "b.json", needs_pruning())
    write(tmp_path / "c.json", truncating())
    assert cli("check", str(tmp_path), *SMALL, "-j", "1").exit_code == 3
    result = cli("check", str(tmp_path), *SMALL, "--fail-on", "never", "-j", "1")
    assert result.exit_code == 0
    (tmp_path / "c.json").unlink()
    result = cli("check", str(tmp_path), *SMALL, "--fail-on", "truncated", "-j", "1")
    assert result.exit_code == 0


def test_check_invalid_exits_1_with_a_row_not_a_traceback(tmp_path: Path, cli: Cli) -> None:
    write(tmp_path / "a.json", fitting())
    (tmp_path / "broken.json").write_bytes(b'{"messages": [')
    write(tmp_path / "weird.json", {"messages": [{"role": "wizard", "content": "x"}]})
    result = cli("check", str(tmp_path), *SMALL, "--jsonl", "-j", "1")
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    rows = [orjson.loads(line) for line in result.stdout.splitlines()]
    by_name = {Path(r["path"]).name: r for r in rows}
    assert by_name["a.json"]["status"] == "fits"
    assert by_name["broken.json"]["status"] == "invalid"
    assert "invalid JSON" in by_name["broken.json"]["error"]
    assert "wizard" in by_name["weird.json"]["error"]


def test_check_exit_code_table() -> None:
    counts = {"fits": 1, "needs_pruning": 0, "truncated": 0, "invalid": 0}
    assert check_exit_code(counts, "pruned") == 0
    assert check_exit_code({**counts, "needs_pruning": 2}, "pruned") == 4
    assert check_exit_code({**counts, "needs_pruning": 2}, "truncated") == 0
    assert check_exit_code({**counts, "truncated": 1, "needs_pruning": 2}, "pruned") == 3
    assert check_exit_code({**counts, "truncated": 1}, "truncated") == 3
    assert check_exit_code({**counts, "truncated": 1}, "never") == 0
    assert check_exit_code({**counts, "invalid": 1, "truncated": 1}, "never") == 1


def test_check_json_summary_and_rows(tmp_path: Path, cli: Cli) -> None:
    write(tmp_path / "a.json", fitting())
    write(tmp_path / "b.json", needs_pruning())
    lines = b"".join(orjson.dumps(b) + b"\n" for b in (fitting(), truncating(), fitting()))
    (tmp_path / "runs.jsonl").write_bytes(lines)
    (tmp_path / "notes.txt").write_text("skipped in a folder walk")
    result = cli("check", str(tmp_path), *SMALL, "--json", "-j", "1")
    assert result.exit_code == 3
    out = orjson.loads(result.stdout)
    summary = out["summary"]
    assert summary["files"] == 3 and summary["skipped_files"] == 1
    assert summary["transcripts"] == 5
    assert summary["counts"] == {
        "fits": 3,
        "needs_pruning": 1,
        "truncated": 1,
        "no_budget": 0,
        "invalid": 0,
    }
    assert summary["worst"][0]["status"] == "truncated"
    assert [r["run"] for r in out["rows"] if r["path"].endswith(".jsonl")] == [
        "line 1",
        "line 2",
        "line 3",
    ]


def test_check_globs_and_missing_paths(tmp_path: Path, cli: Cli) -> None:
    write(tmp_path / "a.json", fitting())
    write(tmp_path / "b.json", fitting())
    found = find_files([str(tmp_path / "*.json"), str(tmp_path / "nope.json")])
    assert [Path(p).name for p in found.files] == ["a.json", "b.json"]
    assert found.missing == [str(tmp_path / "nope.json")]
    result = cli("check", str(tmp_path / "nothing-*.json"), "--jsonl", *SEED)
    assert result.exit_code == 1
    [row] = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert row["status"] == "invalid" and "no such file" in row["error"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli("check", str(empty), *SEED).exit_code == 1


def test_check_reads_stdin(cli: Cli) -> None:
    data = orjson.dumps(truncating()) + b"\n" + orjson.dumps(fitting()) + b"\n"
    result = cli("check", "-", *SMALL, "--jsonl", input=data)
    assert result.exit_code == 3, result.output
    rows = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert [(r["path"], r["status"]) for r in rows] == [("-", "truncated"), ("-", "fits")]


def test_check_json_and_jsonl_are_exclusive(tmp_path: Path, cli: Cli) -> None:
    write(tmp_path / "a.json", fitting())
    assert cli("check", str(tmp_path), "--json", "--jsonl").exit_code == 2


def test_parallel_rows_equal_serial_rows(tmp_path: Path) -> None:
    for i in range(12):
        write(tmp_path / f"r{i:02}.json", (fitting, needs_pruning, truncating)[i % 3]())
    (tmp_path / "bad.json").write_bytes(b"nope")
    found = find_files([str(tmp_path)])
    options = Settings(context_length=8000, max_tokens=500, estimator="seed")

    def key(r: CheckRow) -> tuple[str, str]:
        return r["path"], r["run"]

    serial = sorted(check_paths(found.files, options, jobs=1), key=key)
    parallel = sorted(check_paths(found.files, options, jobs=2), key=key)
    assert parallel == serial
    assert len(serial) == 13


def test_chunks_cover_every_file_once(tmp_path: Path) -> None:
    paths = [str(write(tmp_path / f"{i}.json", fitting())) for i in range(10)]
    parts = chunks(paths, jobs=2)
    assert sorted(p for part in parts for p in part) == sorted(paths)
    assert len(parts) == 10  # up to 16 chunks per worker, never more than the files
    assert len(chunks(paths * 5, jobs=1)) == 16


# replay -------------------------------------------------------------------------------


def test_replay_json_rows_and_exit_3_when_a_call_truncates(tmp_path: Path, cli: Cli) -> None:
    messages = [*truncating()["messages"], assistant(content="done")]
    path = write(tmp_path / "run.json", {"model": "gpt-4o", "messages": messages})
    result = cli("replay", str(path), *SMALL, "--json")
    assert result.exit_code == 3, result.output
    [run] = orjson.loads(result.stdout)["runs"]
    assert [r["call"] for r in run["rows"]] == [1, 2, 3, 4, 5]
    assert run["first_truncated"] == 5
    assert "would stop at call 5" in result.stderr
    assert cli("replay", str(path), *SEED).exit_code == 0  # gpt-4o's own window


def test_replay_a_proxy_log_is_one_run_that_learns(tmp_path: Path, cli: Cli) -> None:
    messages = [system(), user("u" * 300)]
    lines = []
    for i in range(3):
        req = {"model": "gpt-4o", "messages": list(messages)}
        lines.append({"request": req, "response": {"usage": {"prompt_tokens": 200 * (i + 1)}}})
        messages += [assistant(f"c{i}"), tool(f"c{i}", "r" * 200)]
    log = tmp_path / "proxy.jsonl"
    log.write_bytes(b"".join(orjson.dumps(v) + b"\n" for v in lines))
    result = cli("replay", str(log), *SEED, "--json")
    assert result.exit_code == 0, result.output
    [run] = orjson.loads(result.stdout)["runs"]
    rows = run["rows"]
    assert [r["where"] for r in rows] == ["line 1 request", "line 2 request", "line 3 request"]
    assert rows[0]["calibration"] == pytest.approx(1.15)
    learned = max(1.15, 200 / rows[0]["raw_tokens"])
    assert rows[1]["calibration"] == pytest.approx(learned)
    # Per-call log files given together are one run too, in the order given.
    for i, line in enumerate(lines):
        write(tmp_path / "calls" / f"{i}.json", line)
    result = cli("replay", str(tmp_path / "calls"), *SEED, "--json")
    [joined] = orjson.loads(result.stdout)["runs"]
    assert [r["reported_tokens"] for r in joined["rows"]] == [200, 400, 600]
    assert [r["calibration"] for r in joined["rows"]] == [r["calibration"] for r in rows]


def test_replay_table_for_people(tmp_path: Path, cli: Cli) -> None:
    messages = [*needs_pruning()["messages"], assistant(content="done")]
    path = write(tmp_path / "run.json", {"messages": messages})
    result = cli("replay", str(path), *SMALL)
    assert result.exit_code == 0, result.output
    assert "first pruned at call" in result.stdout
    assert "█" not in result.stdout  # no chart when stdout is not a terminal


def test_replay_errors_are_one_line(tmp_path: Path, cli: Cli) -> None:
    assert cli("replay", str(tmp_path / "missing.json")).exit_code == 1
    path = write(tmp_path / "run.json", {"messages": [system(), user()]})
    result = cli("replay", str(path), *SEED)
    assert result.exit_code == 1 and "no provider calls" in result.stderr
    result = cli("replay", str(path), "--run", "nothing-like-this")
    assert result.exit_code == 1
    mixed = tmp_path / "mixed.jsonl"
    good = {"messages": [*adr_transcript(), assistant(content="done")]}
    mixed.write_bytes(orjson.dumps(good) + b"\n{broken\n")
    result = cli("replay", str(mixed), *SEED, "--json")
    assert result.exit_code == 0, result.output
    assert [r["run"] for r in orjson.loads(result.stdout)["runs"]] == ["line 1"]
    assert "skipped line 2" in result.stderr


def test_chart_renders_bars_and_the_budget_line() -> None:
    from rich.console import Console

    from ctxwin.cli.runs import _render_chart

    console = Console(width=60, record=True, force_terminal=True)
    rows: list[dict[str, Any]] = [
        {"call": 1, "estimated_tokens": 100, "reported_tokens": 80, "budget": 300}
        | {"status": "fits"},
        {"call": 2, "estimated_tokens": 400, "budget": 300, "status": "needs_pruning"},
    ]
    _render_chart(rows, console)
    text = console.export_text()
    bars = text.splitlines()[1:]
    assert [line.count("│") for line in bars] == [1, 1]
    assert "█" in bars[0] and "·" in bars[0]  # reported inside the estimate bar
    assert bars[1].index("│") < bars[1].rindex("█")  # over budget: the bar crosses the line


# calibrate ----------------------------------------------------------------------------


def test_calibrate_reports_the_safe_factor_and_waste(tmp_path: Path, cli: Cli) -> None:
    req = {"model": "gpt-4o", "messages": [system("s" * 700), user("u" * 700)]}
    lines = [{"request": req, "response": {"usage": {"prompt_tokens": n}}} for n in (300, 450, 600)]
    log = tmp_path / "calls.jsonl"
    log.write_bytes(b"".join(orjson.dumps(v) + b"\n" for v in lines))
    result = cli("calibrate", str(log), "--json", *SEED)
    assert result.exit_code == 0, result.output
    out = orjson.loads(result.stdout)
    rows = out["rows"]
    raw = rows[0]["raw_tokens"]
    assert [r["reported_tokens"] for r in rows] == [300, 450, 600]
    summary = out["summary"]
    assert summary["calls"] == 3
    assert summary["safe_calibration"] >= 600 / raw
    assert summary["safe_calibration"] - 600 / raw < 1e-4
    assert summary["under_estimates_at_seed"] == sum(
        1 for r in rows if r["estimated_tokens"] < r["reported_tokens"]
    )
    assert summary["waste_tokens"] >= 0
    assert list(out["by_model"]) == ["gpt-4o"]
    people = cli("calibrate", str(log), *SEED)
    assert people.exit_code == 0, people.output
    assert "safe calibration" in people.stdout and "gpt-4o" in people.stdout


def test_calibrate_without_usage_exits_1(tmp_path: Path, cli: Cli) -> None:
    path = write(tmp_path / "run.json", fitting())
    result = cli("calibrate", str(path), *SEED)
    assert result.exit_code == 1 and "no recorded calls" in result.stderr


# the corpus ---------------------------------------------------------------------------


@corpus
@pytest.mark.corpus
def test_check_the_corpus_processes_every_file(cli: Cli) -> None:
    result = cli("check", str(CORPUS), "--json", *SEED)
    out = orjson.loads(result.stdout)
    summary = out["summary"]
    listed = [p for p in CORPUS.rglob("*") if p.is_file()]
    assert summary["files"] + summary["skipped_files"] == len(listed)
    assert {r["path"] for r in out["rows"]} == {
        p for p in map(str, listed) if p.endswith((".json", ".jsonl", ".traj"))
    }
    expected = check_exit_code(summary["counts"], "pruned")
    assert result.exit_code == expected


@corpus
@pytest.mark.corpus
def test_replay_openhands_on_a_16k_window(cli: Cli) -> None:
    path = CORPUS / "openhands" / "multi_swe_bench_output.jsonl"
    result = cli("replay", str(path), "--context-length", "16000", "--json", *SEED)
    assert result.exit_code == 3
    runs = orjson.loads(result.stdout)["runs"]
    assert sum(len(r["rows"]) for r in runs) == 105
    assert all(r["first_pruned"] is not None for r in runs)


def test_replay_summary_line_says_1_estimate_and_1_call() -> None:
    """The replay summary read "1 estimates under the reported count" and "1 calls"."""
    from rich.console import Console

    from ctxwin.cli.replay import render_replay

    rep: Any = {
        "run": "r",
        "shape": "chat",
        "rows": [],
        "calls": 1,
        "calls_with_usage": 1,
        "model": "gpt-4o",
        "context_length": 128_000,
        "first_pruned": None,
        "first_truncated": None,
        "under_estimates": 1,
        "peak_context_use": None,
        "final_calibration": 1.15,
    }
    console = Console(record=True, width=200)
    render_replay(rep, console, chart=False)
    text = console.export_text()
    assert "1 call (1 with usage)" in text
    assert "1 estimate under the reported count" in text
