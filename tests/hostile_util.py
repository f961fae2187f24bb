"""Shared helpers of the hostile-input, output-safety, lint and fuzz tests."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from typer.testing import Result

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


WIDE = {"COLUMNS": "200"}
"""Environment for ``cli.process``: a wide terminal, so no message is wrapped."""


def assert_one_line_error(
    run: Result | subprocess.CompletedProcess[bytes], code: int, needle: str
) -> None:
    """Exit ``code``, no traceback, exactly one line on stderr, containing ``needle``
    (``run`` from the ``cli`` fixture, in-process or ``cli.process``)."""
    if isinstance(run, subprocess.CompletedProcess):
        exit_code, stderr = run.returncode, run.stderr.decode("utf-8", "replace")
    else:
        exit_code, stderr = run.exit_code, run.stderr
    assert exit_code == code, stderr
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    prefix = "ctxwin: usage error: " if code == 2 else "ctxwin: error: "
    assert lines[0].startswith(prefix), stderr
    assert needle in lines[0], stderr
