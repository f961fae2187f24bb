"""Shared helpers of the hostile-input, output-safety, lint and fuzz tests."""

from __future__ import annotations

import builtins
import errno
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest

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


ROOT = os.geteuid() == 0
"""Whether the tests run as root, whom file modes do not stop."""


def deny(monkeypatch: pytest.MonkeyPatch, target: Path, access: str) -> None:
    """Make ``target`` refuse ``access`` (``"read"`` or ``"write"``) with ``EACCES``.

    For a user whom its mode stops, after ``chmod``, nothing is needed and nothing is
    done: the kernel refuses. Root's access is never refused, so for root the calls
    that the kernel would refuse are made to raise the same ``PermissionError``
    (``os.access`` answers ``False``): reading the file (``open``), writing it
    (``os.open`` for writing, ``os.access(W_OK)``), or creating a file in the folder
    (``os.open`` of the folder with ``O_TMPFILE`` or of a path in it with ``O_CREAT``).
    The code under test takes the same error path either way.
    """
    if not ROOT:
        return
    denied = os.path.realpath(target)

    def refused(path: Any, writing: bool) -> bool:
        real = os.path.realpath(os.fspath(path))
        if access == "read":
            return real == denied and not writing
        return writing and (real == denied or os.path.dirname(real) == denied)

    def error(path: Any) -> PermissionError:
        return PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))

    real_open, real_os_open, real_access = builtins.open, os.open, os.access

    def open_(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, str | Path) and refused(file, any(c in mode for c in "wax+")):
            raise error(file)
        return real_open(file, mode, *args, **kwargs)

    def os_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        writing = bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
        if dir_fd is None and refused(path, writing):
            raise error(path)
        return real_os_open(path, flags, mode, dir_fd=dir_fd)

    def os_access(path: Any, mode: int, **kwargs: Any) -> bool:
        writing = bool(mode & os.W_OK)
        if refused(path, writing) or (access == "read" and mode & os.R_OK and refused(path, False)):
            return False
        return real_access(path, mode, **kwargs)

    monkeypatch.setattr(builtins, "open", open_)
    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(os, "access", os_access)
