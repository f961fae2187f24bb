"""The console entry point registers only the command it runs, or all of them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ctxwin.cli.main import command_in


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["estimate", "x.json"], "estimate"),
        (["--debug", "prune", "a", "b"], "prune"),
        (["models", "--json"], "models"),
        (["--help"], None),
        ([], None),
        (["replay", "run.jsonl"], None),
        (["frobnicate"], None),
    ],
)
def test_command_in(argv: list[str], command: str | None) -> None:
    assert command_in(argv) == command


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxwin", *args], capture_output=True, text=True, check=False
    )


def test_help_lists_every_command_and_a_lean_command_still_runs() -> None:
    text = run("--help").stdout
    for name in ("estimate", "prune", "models", "lint", "replay", "check", "calibrate"):
        assert name in text
    proc = run("models", "--json")
    assert proc.returncode == 0 and proc.stdout.startswith("[")
    proc = run("estimate", "--help")
    assert proc.returncode == 0 and "--context-length" in proc.stdout


def test_unknown_command_is_one_usage_line() -> None:
    proc = run("frobnicate")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "ctxwin: usage error: No such command 'frobnicate'. (see `ctxwin --help`)"
    ]
