"""The window an agent tool ran a session at, and when it compacts by itself
(``ctxwin.fitting.windows``): Claude Code's 200,000 unless its 1M variant shows, a Codex
rollout's own window named ``session``, ``auto_compact_at`` for both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxwin.fitting.budget import resolve_spec
from ctxwin.fitting.windows import (
    CLAUDE_CODE_WINDOW,
    auto_compact,
    session_window,
)
from ctxwin.runs import read_runs
from ctxwin.runs.simulate import current_run, next_plan, replay_run
from ctxwin.settings import Settings
from fidelity.corpus import corpus_path
from tests.conftest import Cli
from tests.test_sessions import cc_line, codex_line, jsonl, token_count, tool_result, tool_use

CORPUS = corpus_path()
CODEX = CORPUS / "agent_tools" / "codex"


def claude_session(model: str, reports: tuple[int, ...]) -> bytes:
    """A Claude Code session on ``model`` whose calls report ``reports``."""
    lines: list[Any] = [cc_line("user", "u0", None, "go")]
    parent = "u0"
    for k, usage in enumerate(reports):
        call = f"t{k}"
        lines.append(
            cc_line("assistant", f"a{k}", parent, tool_use(call), usage=usage, model=model)
        )
        lines.append(cc_line("user", f"r{k}", f"a{k}", tool_result(call)))
        parent = f"r{k}"
    return jsonl(*lines)


def _estimate(cli: Cli, path: Path, *flags: str, codes: tuple[int, ...] = (0,)) -> dict[str, Any]:
    result = cli("estimate", str(path), "--json", *flags)
    assert result.exit_code in codes, result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_claude_code_runs_a_1m_model_at_200k_unless_a_report_shows_more(
    cli: Cli, tmp_path: Path
) -> None:
    """claude-opus-4-6 is a 1M model in the table; Claude Code ran it at 200,000 unless
    the 1M variant was chosen, which a report above 200,000 shows."""
    small = tmp_path / "small.jsonl"
    small.write_bytes(claude_session("claude-opus-4-6", (20_000, 40_000, 150_000)))
    report = _estimate(cli, small)
    assert report["context_length"] == CLAUDE_CODE_WINDOW
    assert report["context_length_source"] == "tool"
    assert report["auto_compact_at"] == 167_000 and report["auto_compact_source"] == "claude-code"
    summary = cli("estimate", str(small), terminal_width=120).stdout
    assert "window 200,000 (tool)" in summary and "compacts at  167,000 tokens" in summary

    large = tmp_path / "large.jsonl"
    large.write_bytes(claude_session("claude-opus-4-6", (20_000, 250_000)))
    report = _estimate(cli, large)
    assert report["context_length"] == 1_000_000
    assert report["context_length_source"] == "session"
    assert report["auto_compact_at"] == 967_000

    # the 1M variant named: its window, whatever the reports
    named = _estimate(cli, small, "-m", "claude-opus-4-6[1m]")
    assert named["context_length"] == 1_000_000 and named["context_length_source"] == "name"
    assert named["model_table_row"] == "claude-opus-4-6"
    # a window given wins; the compaction point follows it, and the flag overrides that
    given = _estimate(cli, small, "-c", "500000")
    assert given["context_length_source"] == "flag" and given["auto_compact_at"] == 467_000
    flagged = _estimate(cli, small, "--auto-compact-at", "120000")
    assert flagged["auto_compact_at"] == 120_000 and flagged["auto_compact_source"] == "flag"


def test_a_200k_model_keeps_the_tables_window(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(claude_session("claude-sonnet-4-5-20250929", (20_000, 30_000)))
    run = current_run(read_runs(path.read_bytes()))
    assert run is not None
    spec = next_plan(run, Settings()).budget.spec
    assert (spec.context_length, spec.context_length_source) == (200_000, "table")


def test_claude_codes_window_holds_in_replay_and_check_too(tmp_path: Path, cli: Cli) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(claude_session("claude-opus-4-6", (20_000, 40_000)))
    run = current_run(read_runs(path.read_bytes()))
    assert run is not None
    report = replay_run(run, Settings())
    assert report["context_length"] == CLAUDE_CODE_WINDOW
    check = json.loads(cli("check", "--json", "-j", "1", str(path)).stdout)
    assert check["rows"][0]["context_length"] == CLAUDE_CODE_WINDOW


def test_session_window_rules() -> None:
    # a window the session names is its own, unless --model names another model
    assert session_window("codex", "gpt-5.5", 258_400, []) == (258_400, "session")
    assert session_window("codex", "gpt-5.5", 258_400, [], model_given=True) is None
    assert session_window("codex", "gpt-5.5", None, [300_000]) is None
    # Claude Code: unknown models too run at 200,000; a [1m] id names its own window
    assert session_window("claude-code", "glm-4.6", None, [10]) == (200_000, "tool")
    assert session_window("claude-code", "claude-opus-4-6[1m]", None, []) is None
    assert session_window("claude-code", "claude-sonnet-4-5", None, [210_000]) == (
        1_000_000,
        "session",
    )
    assert session_window("gemini-cli", "gemini-2.5-pro", None, [10]) is None


def test_auto_compact_rules() -> None:
    spec = resolve_spec("claude-haiku-4-5", context_length=200_000)
    found = auto_compact("claude-code", spec)
    assert found is not None and found.tokens == 167_000 and "20,000 output" in found.rule
    small_output = resolve_spec("claude-3-5-haiku", context_length=200_000)
    found = auto_compact("claude-code", small_output)
    assert found is not None and found.tokens == 200_000 - 8_192 - 13_000
    codex = resolve_spec("gpt-5.5", context_length=258_400, context_length_source="session")
    found = auto_compact("codex", codex)
    assert found is not None and found.tokens == 244_800 and "272,000" in found.rule
    # a Codex window that is not the session's (a flag, the table): no rule to apply
    assert auto_compact("codex", resolve_spec("gpt-5.5", context_length=258_400)) is None
    assert auto_compact("gemini-cli", spec) is None


def test_a_codex_rollouts_window_is_named_session(tmp_path: Path, cli: Cli) -> None:
    """A rollout whose ``task_started`` names ``model_context_window``: no flag was given,
    and the report says so; ``auto_compact_at`` is Codex's 90 % of the model's window."""
    lines = [
        codex_line("session_meta", {"id": "r1", "instructions": "be brief"}),
        codex_line("turn_context", {"model": "gpt-5.5"}),
        codex_line("event_msg", {"type": "task_started", "model_context_window": 258_400}),
        codex_line(
            "response_item",
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        ),
        codex_line(
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "yo"}],
            },
        ),
        token_count(5_000, 5_000),
    ]
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(jsonl(*lines))
    report = _estimate(cli, path)
    assert report["context_length"] == 258_400
    assert report["context_length_source"] == "session"
    assert report["auto_compact_at"] == 244_800 and report["auto_compact_source"] == "codex"
    summary = cli("estimate", str(path), terminal_width=120).stdout
    assert "window 258,400 (session)" in summary
    # --model names another model: its table window, and no Codex rule for it
    other = _estimate(cli, path, "-m", "gpt-4o")
    assert other["context_length_source"] == "table" and "auto_compact_at" not in other


@pytest.mark.skipif(not CODEX.is_dir(), reason="the corpus is absent")
def test_the_codex_samples_that_name_their_window(cli: Cli) -> None:
    named = 0
    for path in sorted(CODEX.glob("*.jsonl")):
        report = _estimate(cli, path, codes=(0, 3))  # one names no model: 8,192
        if b'"type":"task_started"' in path.read_bytes():
            assert report["context_length_source"] == "session", path.name
            assert report["auto_compact_at"] == report["context_length"] * 100 // 95 * 9 // 10
            named += 1
        else:
            assert report["context_length_source"] != "session", path.name
    assert named >= 2


def test_a_plain_body_gets_auto_compact_only_from_the_flag(cli: Cli) -> None:
    path = Path(__file__).resolve().parents[1] / "examples" / "agent-run.json"
    plain = _estimate(cli, path)
    assert "auto_compact_at" not in plain
    flagged = _estimate(cli, path, "--auto-compact-at", "9000")
    assert flagged["auto_compact_at"] == 9000 and flagged["auto_compact_source"] == "flag"
