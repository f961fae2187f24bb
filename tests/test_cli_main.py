"""The console entry point registers only the command it runs, or all of them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ctxwin.cli.main import command_in
from tests.conftest import Cli


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


def test_help_lists_every_command_and_a_lean_command_still_runs(cli: Cli) -> None:
    text = cli.process("--help").stdout.decode()
    for name in ("estimate", "prune", "models", "lint", "replay", "check", "calibrate"):
        assert name in text
    proc = cli.process("models", "--json")
    assert proc.returncode == 0 and proc.stdout.startswith(b"[")
    proc = cli.process("estimate", "--help")
    assert proc.returncode == 0 and b"--context-length" in proc.stdout


def test_unknown_command_is_one_usage_line(cli: Cli) -> None:
    proc = cli.process("frobnicate")
    assert proc.returncode == 2
    assert proc.stderr.decode().strip().splitlines() == [
        "ctxwin: usage error: No such command 'frobnicate'. (see `ctxwin --help`)"
    ]


READ_SYSCALL = {"x86_64": "0", "aarch64": "63"}.get(os.uname().machine)


def _wait_until_reading_stdin(pid: int, timeout: float = 120.0) -> None:
    """Wait until process ``pid`` is blocked in read(0, ...) (Linux), else a few seconds."""
    import time

    path = Path(f"/proc/{pid}/syscall")
    if READ_SYSCALL is None or not path.exists():
        time.sleep(5.0)
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            fields = path.read_text().split()
        except OSError:  # it ended
            return
        if fields[:2] == [READ_SYSCALL, "0x0"]:
            time.sleep(0.1)  # still there a moment later: not a read of its own start-up
            if path.read_text().split()[:2] == [READ_SYSCALL, "0x0"]:
                return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} never blocked reading stdin")


def _reading_stdin(*args: str) -> subprocess.Popen[str]:
    """Start ctxwin on ``args``, blocked reading a stdin that never ends."""
    return subprocess.Popen(
        [sys.executable, "-m", "ctxwin", *args],
        # A background job (`make test &`, nohup) starts with SIGINT ignored, and the
        # child would inherit that: give it the default a terminal's process has.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize(
    "args",
    [
        ("estimate", "-"),  # the Typer-free fast path
        ("estimate", "-", "--model", "gpt-4o", "--model", "gpt-4o"),  # repeated: Typer reads it
        ("lint", "-"),  # a command only Typer runs
    ],
)
def test_ctrl_c_is_one_line_and_exit_130(args: tuple[str, ...]) -> None:
    proc = _reading_stdin(*args)
    assert proc.stdin is not None
    proc.stdin.write("[")
    proc.stdin.flush()
    _wait_until_reading_stdin(proc.pid)  # past its imports: the command itself is running
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert out == ""
    assert err.strip().splitlines()[-1] == "ctxwin: aborted"
    assert "Traceback" not in err
