"""docs/recorded-runs.md and the CI examples document the recorded-run commands as they are."""

from __future__ import annotations

import re
from pathlib import Path

from ctxwin.runs.checking import SUFFIXES
from tests.conftest import Cli

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "recorded-runs.md").read_text("utf-8")


def test_page_documents_the_commands_shapes_and_exit_codes(cli: Cli) -> None:
    for command in ("replay", "check", "calibrate"):
        assert f"## `{command} " in PAGE
        result = cli(command, "--help")
        assert result.exit_code == 0
    for shape in ('{"request": body, "response": body}', "tau-bench", "SWE-agent", "OpenHands"):
        assert shape in PAGE
    for code, words in (("4", "need pruning"), ("3", "truncated"), ("1", "invalid")):
        assert re.search(rf"\| {code} \| [^\n]*{words}", PAGE), code
    assert "--fail-on truncated" in PAGE


def test_documented_check_flags_exist(cli: Cli) -> None:
    help_text = cli("check", "--help", terminal_width=200).stdout
    for flag in ("--jobs", "--fail-on", "--json", "--jsonl", "--model", "--context-length"):
        assert flag in help_text
        assert flag in PAGE


def test_pre_commit_hook_runs_check_on_the_files_check_reads() -> None:
    hooks = (ROOT / ".pre-commit-hooks.yaml").read_text("utf-8")
    assert "entry: ctxwin check" in hooks
    pattern = re.search(r"^  files: (\S+)", hooks, re.MULTILINE)
    assert pattern is not None
    for suffix in SUFFIXES:
        assert re.search(pattern.group(1), f"runs/a{suffix}")
    assert not re.search(pattern.group(1), "README.md")


def test_ci_workflow_uses_real_flags(cli: Cli) -> None:
    workflow = (ROOT / "examples" / "ci" / "ctxwin-check.yml").read_text("utf-8")
    assert "ctxwin check fixtures/runs" in workflow
    for flag in re.findall(r"ctxwin \w+ [^\n]*", workflow):
        for option in re.findall(r"(--[a-z-]+)", flag):
            command = flag.split()[1]
            help_text = cli(command, "--help", terminal_width=200).stdout
            assert option in help_text, (command, option)
