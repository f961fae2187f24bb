"""Shared helpers of the hostile-input, output-safety, lint and fuzz tests."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from typer.testing import CliRunner

from ctxwin.cli.app import app

EXIT_CODES = {0, 1, 2, 3, 4}
"""Every exit code ctxwin documents."""


def call(i: int, name: str = "read_file", args: str = '{"path": "a.py"}') -> dict[str, Any]:
    return {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}


def transcript(turns: int = 6, result_size: int = 400) -> dict[str, Any]:
    """A valid Chat Completions body: system, user, then ``turns`` tool-call turns."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful engineer."},
        {"role": "user", "content": "Fix the failing test in parser.py."},
    ]
    for t in range(turns):
        messages.append({"role": "assistant", "content": None, "tool_calls": [call(t)]})
        messages.append(
            {"role": "tool", "tool_call_id": f"call_{t}", "content": f"result {t} " * result_size}
        )
    messages.append({"role": "assistant", "content": "Done: the parser accepts spaces now."})
    return {"model": "gpt-4o", "messages": messages}


def dump(body: Any) -> bytes:
    return orjson.dumps(body)


@dataclass
class Run:
    exit_code: int
    stdout: bytes
    stderr: str


_runner = CliRunner()


def cli(args: list[str], stdin: bytes | None = None) -> Run:
    """Run the CLI in-process (fast); uncaught exceptions propagate to the test."""
    result = _runner.invoke(app, args, input=stdin, catch_exceptions=False)
    return Run(result.exit_code, result.stdout_bytes, result.stderr)


def cli_subprocess(
    args: list[str],
    stdin: bytes | int | None = None,
    cwd: Path | None = None,
    timeout: float = 60,
) -> Run:
    """Run ``python -m ctxwin`` as a real process (for tracebacks and exit codes)."""
    kwargs: dict[str, Any] = {}
    if isinstance(stdin, int):
        kwargs["stdin"] = stdin
    else:
        kwargs["input"] = stdin if stdin is not None else b""
    env = dict(os.environ, COLUMNS="200")
    proc = subprocess.run(
        [sys.executable, "-m", "ctxwin", *args],
        capture_output=True,
        cwd=cwd,
        timeout=timeout,
        env=env,
        check=False,
        **kwargs,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr.decode("utf-8", "replace"))


def assert_one_line_error(run: Run, code: int, needle: str) -> None:
    """Exit ``code``, no traceback, exactly one line on stderr, containing ``needle``."""
    assert run.exit_code == code, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    prefix = "ctxwin: usage error: " if code == 2 else "ctxwin: error: "
    assert lines[0].startswith(prefix), run.stderr
    assert needle in lines[0], run.stderr
