"""Output safety: OUT is replaced atomically, devices and FIFOs are written in place,
and a failure of any kind leaves OUT as it was and IN untouched."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxwin.cli import streams as _io
from ctxwin.cli.streams import OutputError, write_output
from tests.conftest import Cli
from tests.hostile_util import assert_one_line_error, deny, dump, transcript

PRUNE_HARD = ["-c", "4000", "--max-tokens", "0", "-q"]
DATA = dump(transcript())


@pytest.fixture
def src(tmp_path: Path) -> Path:
    path = tmp_path / "in.json"
    path.write_bytes(DATA)
    return path


def leftovers(folder: Path, *keep: str) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


def test_new_out_is_complete_and_alone(src: Path, tmp_path: Path, cli: Cli) -> None:
    out = tmp_path / "out.json"
    run = cli("prune", str(src), str(out), *PRUNE_HARD)
    assert run.exit_code == 0, run.stderr
    body = orjson.loads(out.read_bytes())
    assert len(body["messages"]) < len(transcript()["messages"])
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask
    assert leftovers(tmp_path, "in.json", "out.json") == []


def test_out_equal_to_in_is_replaced_atomically(src: Path, tmp_path: Path, cli: Cli) -> None:
    inode = src.stat().st_ino
    run = cli("prune", str(src), str(src), *PRUNE_HARD)
    assert run.exit_code == 0, run.stderr
    assert src.stat().st_ino != inode  # a new file was renamed over it, not rewritten in place
    assert len(orjson.loads(src.read_bytes())["messages"]) < len(transcript()["messages"])
    assert leftovers(tmp_path, "in.json") == []


def test_existing_out_keeps_its_mode(src: Path, tmp_path: Path, cli: Cli) -> None:
    out = tmp_path / "out.json"
    out.write_bytes(b"old")
    out.chmod(0o640)
    assert cli("prune", str(src), str(out), *PRUNE_HARD).exit_code == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o640


def test_symlinked_out_stays_a_link(src: Path, tmp_path: Path, cli: Cli) -> None:
    target = tmp_path / "real.json"
    target.write_bytes(b"old")
    link = tmp_path / "link.json"
    link.symlink_to(target.name)
    assert cli("prune", str(src), str(link), *PRUNE_HARD).exit_code == 0
    assert link.is_symlink()
    assert orjson.loads(target.read_bytes())["model"] == "gpt-4o"


def test_dev_full_is_a_clear_error_and_stays_a_device(src: Path, cli: Cli) -> None:
    run = cli("prune", str(src), "/dev/full", *PRUNE_HARD)
    assert_one_line_error(run, 1, "/dev/full: cannot write: no space left on device")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_dev_null_is_written_in_place(src: Path, cli: Cli) -> None:
    run = cli("prune", str(src), "/dev/null", *PRUNE_HARD)
    assert run.exit_code == 0, run.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_no_new_files_in_dev() -> None:
    name = "/dev/ctxwin-should-not-exist.json"
    with pytest.raises(OutputError, match="ctxwin never creates files in /dev"):
        write_output(name, b"{}")
    assert not os.path.exists(name)


def test_fifo_is_written_in_place(src: Path, tmp_path: Path, cli: Cli) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []

    def read() -> None:
        with fifo.open("rb") as fh:
            received.append(fh.read())

    reader = threading.Thread(target=read)
    reader.start()
    run = cli("prune", str(src), str(fifo), *PRUNE_HARD)
    reader.join(timeout=30)
    assert run.exit_code == 0, run.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert orjson.loads(received[0])["model"] == "gpt-4o"


def test_dev_fd_path_writes_to_that_descriptor(src: Path, cli: Cli) -> None:
    read_end, write_end = os.pipe()
    try:
        run = cli("prune", str(src), f"/dev/fd/{write_end}", *PRUNE_HARD)
        os.close(write_end)
        chunks = []
        while chunk := os.read(read_end, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(read_end)
    assert run.exit_code == 0, run.stderr
    assert orjson.loads(b"".join(chunks))["model"] == "gpt-4o"


def test_dev_stdout_appends_to_a_redirected_file_and_is_never_replaced(
    src: Path, tmp_path: Path
) -> None:
    """`ctxwin prune IN /dev/stdout >> log`: the log keeps its lines, /dev/stdout is untouched.

    A temp-and-rename onto /dev/stdout would (as root) replace the system's
    symlink with a plain file; writing to descriptor 1 never can.
    """
    log = tmp_path / "log.txt"
    log.write_bytes(b"earlier line\n")
    before = os.lstat("/dev/stdout")
    with log.open("ab") as out:
        proc = subprocess.run(
            [sys.executable, "-m", "ctxwin", "prune", str(src), "/dev/stdout", *PRUNE_HARD],
            stdout=out,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr
    data = log.read_bytes()
    assert data.startswith(b"earlier line\n")
    assert orjson.loads(data[len(b"earlier line\n") :])["model"] == "gpt-4o"
    after = os.lstat("/dev/stdout")
    assert (after.st_ino, after.st_mode, after.st_mtime_ns) == (
        before.st_ino,
        before.st_mode,
        before.st_mtime_ns,
    )


def test_full_disk_leaves_the_old_out(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    out = tmp_path / "out.json"
    out.write_bytes(b"old contents")

    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", no_space)
    run = cli("prune", str(src), str(out), *PRUNE_HARD)
    assert_one_line_error(run, 1, "out.json: cannot write: no space left on device")
    assert out.read_bytes() == b"old contents"
    assert leftovers(tmp_path, "in.json", "out.json") == []


def test_full_disk_without_o_tmpfile(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    """The named-temporary fallback cleans up after itself too."""
    out = tmp_path / "out.json"
    out.write_bytes(b"old contents")
    real_fsync = os.fsync

    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(_io, "_open_anonymous", lambda folder: None)
    monkeypatch.setattr(os, "fsync", no_space)
    run = cli("prune", str(src), str(out), *PRUNE_HARD)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert_one_line_error(run, 1, "no space left on device")
    assert out.read_bytes() == b"old contents"
    assert leftovers(tmp_path, "in.json", "out.json") == []
    assert cli("prune", str(src), str(out), *PRUNE_HARD).exit_code == 0
    assert orjson.loads(out.read_bytes())["model"] == "gpt-4o"
    assert leftovers(tmp_path, "in.json", "out.json") == []


def test_read_only_file_system(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    def read_only(folder: str) -> int:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), folder)

    monkeypatch.setattr(_io, "_open_anonymous", read_only)
    out = tmp_path / "out.json"
    run = cli("prune", str(src), str(out), *PRUNE_HARD)
    assert_one_line_error(run, 1, "out.json: cannot write: Read-only file system")
    assert not out.exists()


def test_read_only_folder(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    deny(monkeypatch, folder, "write")  # root: made to refuse as the mode refuses others
    try:
        run = cli("prune", str(src), str(folder / "out.json"), *PRUNE_HARD)
    finally:
        folder.chmod(0o755)
    assert_one_line_error(run, 1, "cannot write: Permission denied")
    assert leftovers(folder) == []


def test_read_only_out_is_not_replaced(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    out = tmp_path / "out.json"
    out.write_bytes(b"keep me")
    out.chmod(0o444)
    deny(monkeypatch, out, "write")
    run = cli("prune", str(src), str(out), *PRUNE_HARD)
    assert_one_line_error(run, 1, "out.json: cannot write: permission denied")
    assert out.read_bytes() == b"keep me"


def test_out_is_a_folder(src: Path, tmp_path: Path, cli: Cli) -> None:
    run = cli("prune", str(src), str(tmp_path), *PRUNE_HARD)
    assert_one_line_error(run, 1, "is a folder, expected a file path")


def test_out_in_a_missing_folder(src: Path, tmp_path: Path, cli: Cli) -> None:
    run = cli("prune", str(src), str(tmp_path / "nope" / "out.json"), *PRUNE_HARD)
    assert_one_line_error(run, 1, "cannot write: No such file or directory")


def test_a_failed_prune_writes_nothing(src: Path, tmp_path: Path, cli: Cli) -> None:
    out = tmp_path / "out.json"
    out.write_bytes(b"previous")
    run = cli("prune", str(src), str(out), "-c", "5", "--max-tokens", "0")
    assert run.exit_code == 3, run.stderr
    assert out.read_bytes() == b"previous"
    assert src.read_bytes() == DATA


def test_report_to_dev_full(src: Path, tmp_path: Path, cli: Cli) -> None:
    run = cli("prune", str(src), str(tmp_path / "o.json"), "--report", "/dev/full", *PRUNE_HARD)
    assert_one_line_error(run, 1, "/dev/full: cannot write: no space left on device")


def _closed_pipe(args: list[str]) -> tuple[int, str]:
    """Run ctxwin with stdout read for 10 bytes then closed (`... | head -c 10`)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxwin", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    return proc.wait(timeout=60), err


def test_closed_pipe_on_prune(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(dump(transcript(turns=300)))  # ~1 MB, far over a pipe's buffer
    code, err = _closed_pipe(["prune", str(big), "-", "-c", "1000000"])
    assert code == 1, err
    assert err == "ctxwin: error: output closed before all data was written (broken pipe)\n"


def test_closed_pipe_on_a_rich_table(tmp_path: Path) -> None:
    body: dict[str, Any] = transcript(turns=2)
    body["messages"] += [
        {"role": "tool", "tool_call_id": f"x{i}", "content": ""} for i in range(3000)
    ]
    src = tmp_path / "many.json"
    src.write_bytes(dump(body))
    code, err = _closed_pipe(["lint", str(src)])
    assert code == 1, err
    assert "Traceback" not in err
    assert "ctxwin: error: output closed before all data was written (broken pipe)" in err
