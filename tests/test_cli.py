"""The command line: every exit code, streams, --json, --report, atomic writes."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxwin.cli.report import REPORT_KEYS
from tests.builders import adr_transcript, assistant, system, tool, user
from tests.conftest import Cli
from tests.hostile_util import deny

SEED = ("--estimator", "seed")


@pytest.fixture
def run_file(tmp_path: Path) -> Path:
    path = tmp_path / "run.json"
    body = {"model": "gpt-4o", "messages": adr_transcript(), "x": [1], "max_tokens": 1000}
    path.write_bytes(orjson.dumps(body))
    return path


# exit 0 ---------------------------------------------------------------------------------


def test_estimate_summary_for_people(run_file: Path, cli: Cli) -> None:
    result = cli("estimate", str(run_file), *SEED)
    assert result.exit_code == 0, result.stderr
    assert "gpt-4o" in result.stdout and "fits" in result.stdout
    assert result.stderr == ""


def test_estimate_json_has_every_stable_key_in_order(run_file: Path, cli: Cli) -> None:
    result = cli("estimate", str(run_file), "--json", *SEED)
    assert result.exit_code == 0, result.stderr
    report = orjson.loads(result.stdout)
    assert list(report)[: len(REPORT_KEYS)] == list(REPORT_KEYS)
    assert report["format"] == "openai-chat"
    assert report["model"] == "gpt-4o"
    assert report["context_length_source"] == "table"
    assert report["fits"] is True and report["pruned"] is False
    assert report["messages_in"] == report["messages_out"] == 8


def test_prune_that_fits_writes_input_bytes_unchanged(
    run_file: Path, tmp_path: Path, cli: Cli
) -> None:
    raw = b'{ "messages" : [ {"role":"user","content":"hi"} ] ,"model":"gpt-4o"}\n'
    run_file.write_bytes(raw)
    out = tmp_path / "out.json"
    result = cli("prune", str(run_file), str(out), *SEED)
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes() == raw
    assert result.stderr == ""


def test_prune_stdin_to_stdout_keeps_body_and_key_order(cli: Cli) -> None:
    messages = adr_transcript()
    messages[4]["extra"] = {"kept": True}
    body = {"z": 1, "messages": messages, "tools": [], "a": {"b": None}}
    result = cli("prune", "-c", "4000", *SEED, input=orjson.dumps(body))
    assert result.exit_code == 0, result.stderr
    out = orjson.loads(result.stdout)
    assert list(out) == ["z", "messages", "tools", "a"]
    assert out["a"] == {"b": None} and out["z"] == 1
    assert out["messages"] == messages[:2] + messages[4:]
    assert out["messages"][2]["extra"] == {"kept": True}
    assert "dropped 1 turn" in result.stderr


def test_prune_quiet_says_nothing(cli: Cli) -> None:
    result = cli("prune", "-c", "4000", "-q", *SEED, input=orjson.dumps(adr_transcript()))
    assert result.exit_code == 0
    assert result.stderr == ""


def test_prune_report_file(tmp_path: Path, run_file: Path, cli: Cli) -> None:
    out, rep = tmp_path / "out.json", tmp_path / "report.json"
    result = cli("prune", str(run_file), str(out), "-c", "4000", "--report", str(rep), *SEED)
    assert result.exit_code == 0, result.stderr
    report = orjson.loads(rep.read_bytes())
    assert report["dropped_messages"] == [2, 3]
    assert report["messages_out"] == len(orjson.loads(out.read_bytes())["messages"])


def test_prune_keeps_pretty_printing(tmp_path: Path, cli: Cli) -> None:
    src = tmp_path / "in.json"
    src.write_text(orjson.dumps(adr_transcript(), option=orjson.OPT_INDENT_2).decode() + "\n")
    out = tmp_path / "out.json"
    assert cli("prune", str(src), str(out), "-c", "4000", *SEED).exit_code == 0
    text = out.read_text()
    assert text.startswith("[\n  {") and text.endswith("}\n]\n")


def test_model_flag_and_fallback_warning(cli: Cli) -> None:
    body = orjson.dumps(adr_transcript())
    result = cli("estimate", "--json", *SEED, input=body)
    assert "unknown context length" in result.stderr
    assert "8,192" in result.stderr
    result = cli("estimate", "--json", "-m", "claude-sonnet-4-20250514", *SEED, input=body)
    report = orjson.loads(result.stdout)
    assert report["context_length_source"] == "table"
    assert report["model_table_row"] == "claude-sonnet-4"
    assert result.stderr == ""


def test_model_spec_file(tmp_path: Path, cli: Cli) -> None:
    spec = tmp_path / "spec.json"
    spec.write_bytes(orjson.dumps({"max_input_tokens": 4000, "max_tokens": 500}))
    result = cli(
        "estimate",
        "--json",
        "--model-spec",
        str(spec),
        *SEED,
        input=orjson.dumps(adr_transcript()),
    )
    report = orjson.loads(result.stdout)
    assert (report["context_length"], report["context_length_source"]) == (4000, "spec")
    assert (report["reserve"], report["budget"]) == (500, 4000 - 500 - 120)


def test_body_max_tokens_is_the_reserve(cli: Cli) -> None:
    body = {"messages": adr_transcript(), "max_completion_tokens": 777}
    result = cli("estimate", "--json", "-c", "20000", *SEED, input=orjson.dumps(body))
    assert orjson.loads(result.stdout)["reserve"] == 777


@pytest.mark.parametrize("command", ["prune", "estimate"])
def test_non_positive_budget_exits_3_and_writes_nothing(cli: Cli, command: str) -> None:
    """A window of 1,000 leaves nothing after the 1,000-token default reserve and the
    30-token safety: no prompt fits, so nothing is written (it used to pass through)."""
    body = orjson.dumps(adr_transcript())
    result = cli(command, "-c", "1000", *SEED, input=body)
    assert result.exit_code == 3
    assert result.stdout == ""
    line = result.stderr.strip()
    assert "\n" not in line
    assert "1,000-token window (--context-length)" in line
    assert "1,000-token reserve (the default for the window)" in line
    assert "30 tokens of safety" in line and "-30 for the prompt" in line
    assert "--context-length" in line


def _claude_body(max_tokens: int | None) -> bytes:
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "messages": [{"role": "user", "content": "Summarise the repository, please."}],
    }
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return orjson.dumps(body)


def test_no_budget_on_a_one_message_claude_body(cli: Cli, tmp_path: Path) -> None:
    """``-c 20000`` with the body's ``max_tokens: 32000``: prune, estimate and check all
    exit 3, prune writes no OUT and estimate prints no report."""
    src = tmp_path / "req.json"
    src.write_bytes(_claude_body(32_000))
    out = tmp_path / "out.json"
    report = tmp_path / "report.json"
    result = cli("prune", str(src), str(out), "-c", "20000", "--report", str(report))
    assert result.exit_code == 3
    assert not out.exists() and not report.exists()
    assert "32,000-token reserve (the body's max_tokens)" in result.stderr
    assert "--max-tokens" in result.stderr
    result = cli("estimate", str(src), "-c", "20000", "--json")
    assert (result.exit_code, result.stdout) == (3, "")
    for fail_on in ("pruned", "truncated", "never"):
        result = cli("check", str(src), "-c", "20000", "--jsonl", "--fail-on", fail_on)
        assert result.exit_code == 3, fail_on
        row = orjson.loads(result.stdout)
        assert (row["status"], row["enforced"], row["budget"]) == ("no_budget", False, -12_600)
        assert "no budget" in result.stderr


def test_a_smaller_window_scales_the_table_output_cap(cli: Cli) -> None:
    """Without max_tokens, the table's 64,000-token cap of claude-sonnet-4-5 (window
    200,000) is scaled to a 20,000-token window: 6,400 reserved, 13,000 for the prompt."""
    result = cli("estimate", "-", "-c", "20000", "--json", input=_claude_body(None))
    assert result.exit_code == 0
    report = orjson.loads(result.stdout)
    assert (report["reserve"], report["reserve_source"]) == (6_400, "scaled")
    assert report["budget"] == 20_000 - 6_400 - 600
    assert report["enforced"] and report["fits"]


def test_models_lists_the_table(cli: Cli) -> None:
    result = cli("models", "--json")
    assert result.exit_code == 0
    rows = orjson.loads(result.stdout)
    assert len(rows) >= 30
    assert {"name", "provider", "context_length", "max_output_tokens", "source", "date"} <= set(
        rows[0]
    )
    result = cli("models", "gpt-4o-2024-08-06")
    assert result.exit_code == 0 and "gpt-4o" in result.stdout


def test_models_json_gives_prices_and_cache_rules(cli: Cli) -> None:
    result = cli("models", "claude-sonnet-4-5-20250929", "--json")
    assert result.exit_code == 0
    (row,) = orjson.loads(result.stdout)
    price = row["price"]
    assert price["cache_write"] == price["input"] * 1.25
    assert price["cache_write_1h"] == price["input"] * 2
    assert price["cache_read"] == price["input"] / 10
    assert price["above"]["tokens"] == 200_000 and price["above"]["input"] > price["input"]
    assert row["cache"] == {
        "kind": "breakpoints",
        "min_prefix": 1024,
        "ttl_seconds": 300,
        "max_breakpoints": 4,
    }
    assert row["price_source"].startswith("https://") and row["price_date"] == row["date"]
    unknown = orjson.loads(cli("models", "qwen2.5-72b-instruct", "--json").stdout)[0]
    assert unknown["price"] is None and unknown["cache"] is None  # keys kept, value unknown


# exit 1 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"", "empty input"),
        (b"{", "invalid JSON"),
        (b'{"messages": {}}', "messages: expected a list"),
        (b'{"messages": [1]}', "messages[0]: expected a message object"),
        (b'{"messages": [{"content": "x"}]}', 'messages[0].role: missing "role"'),
        (b'{"messages": [{"role": "wizard"}]}', "unknown role 'wizard'"),
        (
            b'{"messages": [{"role": "assistant", "tool_calls": [{"id": 5}]}]}',
            "messages[0].tool_calls[0].id: expected a string",
        ),
        (b'{"prompt": "hi"}', "not a transcript"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(payload: bytes, message: str, cli: Cli) -> None:
    result = cli("estimate", "-c", "4000", input=payload)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert message in result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("ctxwin: error: ")


def test_missing_file_and_folder(tmp_path: Path, cli: Cli) -> None:
    result = cli("estimate", str(tmp_path / "nope.json"))
    assert result.exit_code == 1 and "no such file" in result.stderr
    result = cli("estimate", str(tmp_path))
    assert result.exit_code == 1 and "is a folder" in result.stderr


def test_broken_pairing_refused_when_pruning_needed(tmp_path: Path, cli: Cli) -> None:
    msgs = [*adr_transcript(), tool("ghost", "boo")]
    out = tmp_path / "out.json"
    result = cli("prune", "-", str(out), "-c", "4000", *SEED, input=orjson.dumps(msgs))
    assert result.exit_code == 1
    assert "messages[8]" in result.stderr and "'ghost'" in result.stderr
    assert not out.exists()
    # ... but a transcript that fits passes through as is
    result = cli("prune", "-", "-", "-c", "100000", *SEED, input=orjson.dumps(msgs))
    assert result.exit_code == 0
    assert orjson.loads(result.stdout) == msgs


def test_unwritable_output_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    deny(monkeypatch, folder, "write")  # root: made to refuse as the mode refuses others
    result = cli("prune", "-", str(folder / "out.json"), input=orjson.dumps([user()]))
    assert result.exit_code == 1 and "cannot write" in result.stderr
    assert list(folder.iterdir()) == []


def test_output_to_a_missing_folder(tmp_path: Path, cli: Cli) -> None:
    result = cli("prune", "-", str(tmp_path / "no" / "out.json"), input=orjson.dumps([user()]))
    assert result.exit_code == 1 and "cannot write" in result.stderr


# exit 2 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["estimate", "-c", "-5"],
        ["estimate", "--no-such-flag"],
        ["prune", "--calibration", "lots"],
        ["estimate", "--format", "nope"],
        ["estimate", "--estimator", "nope"],
        ["frobnicate"],
    ],
)
def test_usage_errors_exit_2_with_one_line(args: list[str], cli: Cli) -> None:
    proc = cli.process(*args, stdin=b"[]")
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == b""
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ctxwin: usage error: "), lines


def test_stdin_terminal_is_a_usage_error_not_a_hang(cli: Cli) -> None:
    import pty

    primary, secondary = pty.openpty()
    try:
        proc = cli.process("estimate", stdin=secondary, timeout=60)
    finally:
        os.close(primary)
        os.close(secondary)
    assert proc.returncode == 2
    assert b"no input" in proc.stderr


def test_help_documents_exit_codes(cli: Cli) -> None:
    proc = cli.process("--help")
    assert proc.returncode == 0
    text = proc.stdout.decode()
    for fragment in ("Exit codes", "context truncated", "estimate", "prune", "models"):
        assert fragment in text


# exit 3 ---------------------------------------------------------------------------------


def test_truncated_prune_writes_nothing(tmp_path: Path, cli: Cli) -> None:
    out = tmp_path / "out.json"
    out.write_bytes(b"old")
    rep = tmp_path / "rep.json"
    body = orjson.dumps(adr_transcript())
    result = cli("prune", "-", str(out), "-c", "1100", "--report", str(rep), *SEED, input=body)
    assert result.exit_code == 3, result.stderr
    assert out.read_bytes() == b"old"
    assert "context truncated" in result.stderr
    assert orjson.loads(rep.read_bytes())["overflow_at_floor"] is True


def test_truncated_prune_to_stdout_prints_nothing(cli: Cli) -> None:
    result = cli("prune", "-c", "1100", *SEED, input=orjson.dumps(adr_transcript()))
    assert result.exit_code == 3
    assert result.stdout == ""


def test_truncated_estimate_exits_3_with_report(cli: Cli) -> None:
    result = cli("estimate", "--json", "-c", "1100", *SEED, input=orjson.dumps(adr_transcript()))
    assert result.exit_code == 3
    report = orjson.loads(result.stdout)
    assert report["overflow_at_floor"] is True
    assert report["estimated_tokens_after"] > report["budget"]


# atomic writes ----------------------------------------------------------------------------


def test_out_replaced_atomically_and_mode_kept(tmp_path: Path, run_file: Path, cli: Cli) -> None:
    out = tmp_path / "out.json"
    out.write_bytes(b"old")
    out.chmod(0o640)
    result = cli("prune", str(run_file), str(out), "-c", "4000", *SEED)
    assert result.exit_code == 0, result.stderr
    assert orjson.loads(out.read_bytes())["messages"][2]["tool_calls"][0]["id"] == "call_2"
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "run.json"]


def test_out_equal_to_in(tmp_path: Path, run_file: Path, cli: Cli) -> None:
    result = cli("prune", str(run_file), str(run_file), "-c", "4000", *SEED)
    assert result.exit_code == 0, result.stderr
    assert len(orjson.loads(run_file.read_bytes())["messages"]) == 6


def test_input_never_modified(tmp_path: Path, run_file: Path, cli: Cli) -> None:
    before = run_file.read_bytes()
    cli("prune", str(run_file), str(tmp_path / "o.json"), "-c", "4000", *SEED)
    assert run_file.read_bytes() == before


def test_special_file_out_is_written_in_place(cli: Cli) -> None:
    result = cli(
        "prune", "-", "/dev/null", "-c", "4000", *SEED, input=orjson.dumps(adr_transcript())
    )
    assert result.exit_code == 0
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_fifo_out_is_written_in_place(tmp_path: Path, cli: Cli) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    result = cli(
        "prune", "-", str(fifo), "-c", "4000", *SEED, input=orjson.dumps([system(), user()])
    )
    data, _ = proc.communicate(timeout=30)
    assert result.exit_code == 0
    assert orjson.loads(data) == [system(), user()]
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_full_disk_exits_1_without_traceback(cli: Cli) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    proc = cli.process(
        "prune", "-", "/dev/full", "-c", "4000", *SEED, stdin=orjson.dumps(adr_transcript())
    )
    assert proc.returncode == 1
    assert b"Traceback" not in proc.stderr and b"cannot write" in proc.stderr
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_parallel_calls_round_trip(cli: Cli) -> None:
    msgs = [
        system(),
        user(),
        assistant("a", "b"),
        tool("a", "x" * 5000),
        tool("b"),
        assistant("c"),
        tool("c"),
    ]
    result = cli("prune", "-c", "3500", *SEED, input=orjson.dumps(msgs))
    assert result.exit_code == 0, result.stderr
    assert orjson.loads(result.stdout) == msgs[:2] + msgs[5:]


def test_a_300k_prompt_for_gpt5_does_not_fit(cli: Cli) -> None:
    """GPT-5's input cap is 272,000: with max_completion_tokens 16,000 the budget used to
    be 372,000 - 12,000 and a 300k-token prompt was said to fit."""
    text = "the quick brown fox jumps over the lazy dog " * 40_000
    body = {"model": "gpt-5", "messages": [{"role": "user", "content": text}]}
    result = cli("estimate", "-", "--max-tokens", "16000", "--json", input=orjson.dumps(body))
    report = orjson.loads(result.stdout)
    assert report["estimated_tokens"] > 300_000
    assert report["budget"] == 272_000 - 12_000
    assert not report["fits"] and report["overflow_at_floor"] and result.exit_code == 3


def test_models_is_readable_at_80_columns(cli: Cli) -> None:
    result = cli.process("models", env={"COLUMNS": "80"})
    assert result.returncode == 0
    lines = result.stdout.decode().splitlines()
    assert max(map(len, lines)) <= 80
    names = [line.split()[0] for line in lines[1:] if line.strip()]
    from ctxwin.tokens.models import model_table

    assert names == [r.name for r in model_table()]  # every name whole, none cut
    assert "input cap" in lines[0]
    assert "$/M" not in lines[0]  # prices only where there is room
    wide = cli.process("models", env={"COLUMNS": "140"})
    wide_lines = wide.stdout.decode().splitlines()
    assert "provider" in wide_lines[0] and "$/M in / out" in wide_lines[0]
    assert max(map(len, wide_lines)) <= 140
    assert any(line.split()[0] == "gpt-4o" and line.endswith("2.5 / 10") for line in wide_lines)


HELP_COMMANDS = ("estimate", "prune", "replay", "check", "calibrate", "lint", "repair", "proxy")


@pytest.mark.parametrize("command", HELP_COMMANDS)
def test_help_reads_whole_at_80_columns(command: str, cli: Cli) -> None:
    """At 80 columns no help text is cut (rich ends a word too long for its column with
    "…") and no option's help runs past 12 lines."""
    result = cli.process(command, "--help", env={"COLUMNS": "80", "TERM": "dumb"})
    assert result.returncode == 0, result.stderr
    text = result.stdout.decode()
    assert "…" not in text
    lines: dict[str, int] = {}
    current = None
    for line in text.splitlines():
        inner = line.strip("│ ").lstrip()
        if not line.startswith("│"):
            current = None
        elif inner.startswith("--"):
            current = inner.split()[0]
            lines[current] = 1
        elif current is not None and inner:
            lines[current] += 1
    assert lines and max(lines.values()) <= 12, lines
