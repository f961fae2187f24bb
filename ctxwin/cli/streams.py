"""Reading input and writing output safely (used by the CLI, not the core).

Output files are replaced atomically: the data goes to a temporary file in
the destination's folder, is flushed and fsynced, then renamed over the
destination, so a reader (or a crash) sees the old file or the new one,
never a part. A destination that exists and is not a regular file (a FIFO,
``/dev/null``, ``/dev/stdout``) is written in place and never renamed over.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import sys

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
    """Write all of ``data`` to stdout; a closed pipe becomes an :class:`OutputError`.

    A buffered write to a pipe may return after part of the data (when the
    reader goes away, or a signal interrupts it) without raising: loop until
    everything is written, so nothing is ever cut short silently.
    """
    out = sys.stdout.buffer
    view = memoryview(data)
    try:
        while view:
            written = out.write(view)
            if not written:
                raise OutputError("stdout: cannot write: the stream accepts no more data")
            view = view[written:]
        out.flush()
    except BrokenPipeError:
        # Keep the interpreter from complaining again when it flushes at exit.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        raise OutputError("output closed before all data was written (broken pipe)") from None


_FD_PATH = r"/dev/(stdout|stderr|fd/(\d+))|/proc/(?:self|thread-self|\d+)/fd/(\d+)"
# a pattern, compiled (and cached by re) on first use: compiling costs every start
_NO_NEW_FILES = ("/dev", "/proc", "/sys")
"""Folders where a new OUT is never created (only existing devices are written)."""


def _fd_of(path: str) -> int | None:
    """The descriptor ``path`` names (``/dev/stdout``, ``/dev/fd/3``...), or ``None``."""
    match = re.fullmatch(_FD_PATH, os.path.normpath(os.path.abspath(path)))
    if match is None:
        return None
    name, fd, proc_fd = match.groups()
    if proc_fd is not None:
        return int(proc_fd) if os.path.abspath(path).startswith("/proc/self/") else None
    if name == "stdout":
        return 1
    if name == "stderr":
        return 2
    return int(fd)


def _fail(path: str, exc: OSError) -> OutputError:
    if exc.errno == errno.EPIPE:
        return OutputError(f"{path}: closed before all data was written (broken pipe)")
    if exc.errno == errno.ENOSPC:
        return OutputError(f"{path}: cannot write: no space left on device")
    return OutputError(f"{path}: cannot write: {exc.strerror or exc}")


def write_output(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (``-`` for stdout).

    * ``-``, ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``: written to that
      descriptor as it is (its offset and append mode are kept);
    * an existing non-regular file (FIFO, ``/dev/null``, ``/dev/full``...):
      written in place, never replaced;
    * anything else: a temporary file in the destination's folder (through
      symlinks, which stay links), flushed and fsynced, then renamed over it.
      A failure or a kill at any point leaves the destination as it was.
    """
    if path == STDIO:
        write_stdout(data)
        return
    fd = _fd_of(path)
    if fd is not None:
        if fd == 1:
            write_stdout(data)
        else:
            _write_fd(path, fd, data)
        return
    real = os.path.realpath(path)
    try:
        st: os.stat_result | None = os.stat(real)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise _fail(path, exc) from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{path}: is a folder, expected a file path")
    if st is not None and not stat.S_ISREG(st.st_mode):
        _write_in_place(path, real, data)
        return
    folder = os.path.dirname(real)
    if st is None and (folder in _NO_NEW_FILES or folder.startswith(("/proc/", "/sys/"))):
        raise OutputError(f"{path}: no such device (ctxwin never creates files in {folder})")
    if st is not None and not os.access(real, os.W_OK):
        raise OutputError(f"{path}: cannot write: permission denied")
    _replace(path, real, folder, st, data)


def _open_anonymous(folder: str) -> int | None:
    """An unnamed file in ``folder`` (``O_TMPFILE``): nothing is left if the process dies."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        return os.open(folder, flag | os.O_WRONLY | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOTSUP):
            return None  # the file system has no O_TMPFILE
        raise


def _replace(path: str, real: str, folder: str, st: os.stat_result | None, data: bytes) -> None:
    base = os.path.basename(real)
    tmp: str | None = None
    try:
        fd = _open_anonymous(folder)
        if fd is None:
            import tempfile  # only when a file is written: keeps start-up light

            fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            if st is not None:
                os.fchmod(fh.fileno(), stat.S_IMODE(st.st_mode))
                with contextlib.suppress(OSError):
                    os.fchown(fh.fileno(), st.st_uid, st.st_gid)
            else:
                umask = os.umask(0)
                os.umask(umask)
                os.fchmod(fh.fileno(), 0o666 & ~umask)
            if tmp is None:
                tmp = _link_anonymous(fh.fileno(), folder, base)
        os.replace(tmp, real)
    except OSError as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise _fail(path, exc) from None
    except BaseException:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _link_anonymous(fd: int, folder: str, base: str) -> str:
    """Give the unnamed file ``fd`` a temporary name in ``folder`` (to rename it over OUT)."""
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for _ in range(100):
            name = f".{base}.{os.urandom(4).hex()}.tmp"
            try:
                # linkat(AT_SYMLINK_FOLLOW) through /proc names an O_TMPFILE file.
                os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=dir_fd, follow_symlinks=True)
            except FileExistsError:
                continue
            return os.path.join(folder, name)
    finally:
        os.close(dir_fd)
    raise FileExistsError(errno.EEXIST, "no free temporary name", folder)


def _write_fd(path: str, fd: int, data: bytes) -> None:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        raise _fail(path, exc) from None


def _write_in_place(path: str, real: str, data: bytes) -> None:
    """Write into an existing FIFO or device: no create, no truncate, no rename."""
    try:
        fd = os.open(real, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise _fail(path, exc) from None
    try:
        _write_fd(path, fd, data)
    finally:
        os.close(fd)
