"""Reading input and writing output safely (used by the CLI, not the core).

Output files are replaced atomically: the data goes to a temporary file in
the destination's folder, is flushed and fsynced, then renamed over the
destination, so a reader (or a crash) sees the old file or the new one,
never a part. A destination that exists and is not a regular file (a FIFO,
``/dev/null``, ``/dev/stdout``) is written in place and never renamed over.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile

from ctxwin.errors import InputError, UsageError

STDIO = "-"
DEFAULT_MAX_INPUT_BYTES = 1 << 30
"""Inputs larger than this (1 GiB) are refused unless the limit is raised."""


class OutputError(InputError):
    """The output could not be written (the destination is left as it was)."""


def _too_big(size: int, limit: int, name: str) -> InputError:
    return InputError(
        f"{name} is {size:,} bytes, over the {limit:,}-byte input limit "
        "(raise it with --max-input-bytes, 0 for no limit)"
    )


def read_input(path: str, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> bytes:
    """The bytes of ``path`` (``-`` for stdin), refusing more than ``max_bytes`` (0: no limit)."""
    if path == STDIO:
        stdin = sys.stdin
        if stdin is None or stdin.isatty():
            raise UsageError(
                "no input: give a transcript file, or pipe JSON to stdin "
                "(e.g. `ctxwin estimate - < run.json`)"
            )
        stream = stdin.buffer
        data = stream.read() if max_bytes <= 0 else stream.read(max_bytes + 1)
        if max_bytes > 0 and len(data) > max_bytes:
            raise _too_big(len(data), max_bytes, "stdin")
        return data
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if stat.S_ISDIR(st.st_mode):
                raise InputError(f"{path}: is a folder, expected a JSON file")
            if max_bytes > 0 and stat.S_ISREG(st.st_mode) and st.st_size > max_bytes:
                raise _too_big(st.st_size, max_bytes, path)
            data = fh.read() if max_bytes <= 0 else fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, expected a JSON file") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if max_bytes > 0 and len(data) > max_bytes:
        raise _too_big(len(data), max_bytes, path)
    return data


def write_stdout(data: bytes) -> None:
    """Write ``data`` to stdout; a closed pipe becomes an :class:`OutputError`."""
    try:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        # Keep the interpreter from complaining again when it flushes at exit.
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        raise OutputError("output closed before all data was written (broken pipe)") from None


def write_output(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (``-`` for stdout)."""
    if path == STDIO:
        write_stdout(data)
        return
    try:
        st: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError(f"{path}: cannot write: {exc.strerror or exc}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{path}: is a folder, expected a file path")
    if st is not None and not stat.S_ISREG(st.st_mode):
        _write_in_place(path, data)
        return
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if st is not None:
            os.chmod(tmp, stat.S_IMODE(st.st_mode))
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise OutputError(f"{path}: cannot write: {exc.strerror or exc}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _write_in_place(path: str, data: bytes) -> None:
    try:
        with open(path, "wb") as fh:
            fh.write(data)
            fh.flush()
    except BrokenPipeError:
        raise OutputError(f"{path}: closed before all data was written (broken pipe)") from None
    except OSError as exc:
        raise OutputError(f"{path}: cannot write: {exc.strerror or exc}") from None
