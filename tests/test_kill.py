"""SIGKILL in the middle of writing a 200 MB prune: OUT is absent or the old file, intact.

Slow (a 200 MB input is generated and parsed three times): runs with
``make slow`` (``CTXWIN_SLOW=1``), not in ``make test``.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

pytestmark = pytest.mark.skipif(
    not os.environ.get("CTXWIN_SLOW"), reason="slow: run with `make slow` (CTXWIN_SLOW=1)"
)

TARGET_BYTES = 200 * 1024 * 1024


def make_input(path: Path) -> int:
    """A valid ~200 MB Chat Completions body, streamed to ``path``; returns its message count."""
    result = "x" * 2000
    count = 2
    with path.open("wb") as fh:
        fh.write(b'{"model": "gpt-4o", "messages": [')
        fh.write(orjson.dumps({"role": "system", "content": "s"}) + b",")
        fh.write(orjson.dumps({"role": "user", "content": "u"}))
        turn = 0
        while fh.tell() < TARGET_BYTES:
            cid = f"call_{turn}"
            call = {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}
            fh.write(b"," + orjson.dumps({"role": "assistant", "tool_calls": [call]}))
            fh.write(b"," + orjson.dumps({"role": "tool", "tool_call_id": cid, "content": result}))
            turn += 1
            count += 2
        fh.write(b"]}")
    return count


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / "in.json"
    make_input(path)
    assert path.stat().st_size >= TARGET_BYTES
    return path


def digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def writing_into(pid: int, folder: Path) -> bool:
    """Whether process ``pid`` has a file open for its output in ``folder`` (its temporary)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        # O_TMPFILE shows as "<folder>/#<inode> (deleted)"; the fallback as ".<name>.*.tmp".
        if target.startswith(str(folder) + "/") and (".tmp" in target or "/#" in target):
            return True
    return False


def kill_mid_write(src: Path, out: Path) -> None:
    """Prune ``src`` (keeping about half) into ``out`` and SIGKILL it while it writes."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxwin", "prune", str(src), str(out), "-c", "40000000", "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if writing_into(proc.pid, out.parent):
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.001)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == -signal.SIGKILL, "the process ended before it could be killed mid-write"


def test_kill_mid_write_new_out(big: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    kill_mid_write(big, out)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a temporary was left behind"


def test_kill_mid_write_existing_out(big: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    out.write_bytes(b'{"messages": []}\n')
    kill_mid_write(big, out)
    assert out.read_bytes() == b'{"messages": []}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_kill_mid_write_out_is_in(big: Path, tmp_path: Path) -> None:
    src = tmp_path / "in.json"
    os.link(big, src)  # same data, no copy: the rename would replace this name only
    before = digest(src)
    kill_mid_write(src, src)
    assert digest(src) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.json"]
