"""``check`` on a real local Dask cluster: the same rows, order and exit code as locally.

One cluster for the module: ``dask scheduler`` and two ``dask worker`` processes (with
their nannies) on 127.0.0.1. The scheduler runs with ``allowed-failures`` 0, so a lost
worker surfaces at once as ``KilledWorker`` and ctxwin's own retry is what is tested.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxwin.errors import CtxwinError, ExitCode, UsageError
from ctxwin.runs.checking import Checked, check_bytes, check_files
from ctxwin.settings import Settings
from tests.conftest import Cli
from tests.dask_cluster import LocalDaskCluster, local_cluster
from tests.test_cli_runs import CORPUS, corpus, fitting, needs_pruning, truncating, write

pytest.importorskip("distributed")

SETTINGS = Settings(context_length=8000, max_tokens=500, estimator="seed")
FAIL_ON = ("pruned", "truncated", "never")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalDaskCluster, Any]]:
    directory = tmp_path_factory.mktemp("dask")
    env = {"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}
    with local_cluster(directory, workers=2, env=env) as running:
        client = running.client(workers=2)
        try:
            yield running, client
        finally:
            client.close()


def mixed_files(root: Path) -> list[str]:
    for i in range(9):
        write(root / f"d{i % 2}" / f"r{i}.json", (fitting, needs_pruning, truncating)[i % 3]())
    (root / "bad.json").write_bytes(b"nope")
    lines = b"\n".join(orjson.dumps(fitting()) for _ in range(3))
    (root / "three.jsonl").write_bytes(lines)
    return [str(root), str(root / "absent.json")]


def same(local: Checked, remote: Checked) -> None:
    assert remote.rows == local.rows  # same verdicts, figures and order
    assert remote.summary() == local.summary()
    for fail_on in FAIL_ON:
        assert remote.exit_code(fail_on) == local.exit_code(fail_on)


def test_cluster_rows_equal_local_rows(
    cluster: tuple[LocalDaskCluster, Any], tmp_path: Path
) -> None:
    running, _ = cluster
    paths = mixed_files(tmp_path)
    local = check_files(paths, SETTINGS, jobs=1)
    done: list[int] = []
    remote = check_files(
        paths, SETTINGS, engine="dask", scheduler=running.address, on_file_done=done.append
    )
    same(local, remote)
    assert remote.engine == "dask"
    assert sum(done) == len(local.found.files) == 11
    assert len(done) > 1  # results came back chunk by chunk
    statuses = {r["status"] for r in remote.rows}
    assert statuses == {"fits", "needs_pruning", "truncated", "invalid"}
    assert remote.rows[-1]["path"].endswith("absent.json")
    assert remote.exit_code() == ExitCode.BAD_INPUT


def test_scheduler_file_and_client_are_accepted(
    cluster: tuple[LocalDaskCluster, Any], tmp_path: Path
) -> None:
    running, client = cluster
    write(tmp_path / "a.json", needs_pruning())
    write(tmp_path / "b.json", fitting())
    local = check_files([str(tmp_path)], SETTINGS)
    by_file = check_files(
        [str(tmp_path)], SETTINGS, engine="dask", scheduler=str(running.scheduler_file)
    )
    by_client = check_files([str(tmp_path)], SETTINGS, engine="dask", scheduler=client)
    same(local, by_file)
    same(local, by_client)
    assert local.exit_code() == ExitCode.NEEDS_PRUNING
    assert client.status == "running"  # a client passed in is left open


@corpus
@pytest.mark.corpus
def test_corpus_same_verdicts_and_exit_code_on_the_cluster(
    cluster: tuple[LocalDaskCluster, Any],
    cli: Cli,
) -> None:
    running, _ = cluster
    local_lib = check_files([str(CORPUS)], estimator="seed")
    remote_lib = check_files(
        [str(CORPUS)], estimator="seed", engine="dask", scheduler=running.address
    )
    same(local_lib, remote_lib)
    assert len(local_lib.found.files) > 20
    assert len(local_lib.rows) >= len(local_lib.found.files)
    for flags in ((), ("--fail-on", "truncated"), ("--context-length", "16000")):
        local = cli("check", str(CORPUS), "--json", "--estimator", "seed", *flags)
        remote = cli(
            "check",
            str(CORPUS),
            "--json",
            "--estimator",
            "seed",
            *flags,
            "--engine",
            "dask",
            "--scheduler",
            running.address,
        )
        assert remote.exit_code == local.exit_code, remote.stderr
        assert remote.stdout == local.stdout
        assert orjson.loads(remote.stdout)["summary"]["files"] > 20


def test_check_command_engine_flags(
    cluster: tuple[LocalDaskCluster, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Cli
) -> None:
    running, _ = cluster
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    paths = mixed_files(tmp_path)
    local = cli("check", *paths, "--jsonl", "--estimator", "seed", "-j", "1")
    remote = cli(
        "check", *paths, "--jsonl", "--estimator", "seed", "--engine", "dask",
        "--scheduler", str(running.scheduler_file),
    )  # fmt: skip
    assert (remote.exit_code, remote.stdout) == (local.exit_code, local.stdout)
    assert local.exit_code == ExitCode.BAD_INPUT
    assert "--jobs" not in remote.stderr
    with_jobs = cli(
        "check", *paths, "--jsonl", "--estimator", "seed", "--engine", "dask", "-j", "3",
        "--scheduler", running.address,
    )  # fmt: skip
    assert with_jobs.stdout == local.stdout
    assert "warning: --jobs is for --engine local" in with_jobs.stderr
    lonely = cli("check", *paths, "--scheduler", running.address)
    assert lonely.exit_code == 2 and "--scheduler needs --engine dask" in lonely.stderr
    nowhere = cli("check", *paths, "--engine", "dask")
    assert nowhere.exit_code == 2 and "--scheduler: engine 'dask' needs" in nowhere.stderr
    assert "Traceback" not in lonely.stderr + nowhere.stderr


def test_fsspec_urls_give_the_rows_of_the_paths(
    cluster: tuple[LocalDaskCluster, Any], tmp_path: Path
) -> None:
    running, _ = cluster
    mixed_files(tmp_path)
    url = f"file://{tmp_path}"
    by_path = check_files([str(tmp_path)], SETTINGS, jobs=1)
    local = check_files([url], SETTINGS, jobs=1)
    remote = check_files([url], SETTINGS, engine="dask", scheduler=running.address)
    same(local, remote)  # the workers read the URLs themselves

    def keyed(checked: Checked, prefix: str) -> list[tuple[Any, ...]]:
        rows = [{**r, "path": prefix + r["path"]} for r in checked.rows]
        return sorted((r["path"], r["run"], r["status"], r.get("over_by")) for r in rows)

    assert keyed(local, "") == keyed(by_path, "file://")
    assert len(local.rows) == 13


def test_fsspec_urls_locally() -> None:
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    fs.pipe(
        {
            "/ctxwin-test/a.json": orjson.dumps(needs_pruning()),
            "/ctxwin-test/sub/b.jsonl": orjson.dumps(fitting()),
            "/ctxwin-test/notes.txt": b"not a run",
            "/ctxwin-test/.hidden/c.json": b"{}",
        }
    )
    try:
        checked = check_files(
            ["memory://ctxwin-test", "memory://ctxwin-test/none.json", "nosuch://x"],
            SETTINGS,
            jobs=1,
        )
    finally:
        fs.rm("/ctxwin-test", recursive=True)
    rows = [(r["path"], r["status"], r.get("error", "")) for r in checked.rows]
    assert rows[:2] == [
        ("memory:///ctxwin-test/a.json", "needs_pruning", ""),
        ("memory:///ctxwin-test/sub/b.jsonl", "fits", ""),
    ]
    assert rows[2] == ("memory://ctxwin-test/none.json", "invalid", "no such file, folder or match")
    assert rows[3][:2] == ("nosuch://x", "invalid") and "Protocol not known" in rows[3][2]
    assert checked.found.skipped == ["memory:///ctxwin-test/notes.txt"]
    assert checked.exit_code() == ExitCode.BAD_INPUT


def _open_reader_side(fifo: Path, timeout: float = 60) -> int:
    """A write end of ``fifo``, once some process has it open for reading."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _dead(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


def _holder(pids: dict[str, int], fifo: Path) -> int:
    """The worker process that has ``fifo`` open."""
    for pid in pids.values():
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if os.readlink(fd) == str(fifo):
                    return pid
            except OSError:
                continue
    raise AssertionError(f"no worker holds {fifo}")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc and FIFOs")
def test_a_worker_lost_mid_chunk_is_retried_and_counted_once(
    cluster: tuple[LocalDaskCluster, Any], tmp_path: Path
) -> None:
    running, client = cluster
    for i in range(6):
        write(tmp_path / f"r{i}.json", (fitting, needs_pruning, truncating)[i % 3]())
    fifo = tmp_path / "slow.json"
    os.mkfifo(fifo)  # the worker that reads it blocks: the test knows where the chunk is
    body = orjson.dumps(needs_pruning())
    out: list[Checked] = []
    errors: list[BaseException] = []
    done: list[int] = []

    def run() -> None:
        try:
            out.append(
                check_files(
                    [str(tmp_path)],
                    SETTINGS,
                    engine="dask",
                    scheduler=running.address,
                    on_file_done=done.append,
                )
            )
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    writer = _open_reader_side(fifo)
    try:
        victim = _holder(client.run(os.getpid, on_error="ignore"), fifo)
        # The path now names a plain file with the body: only the worker holding the FIFO
        # (about to die) reads the FIFO, any later attempt at the chunk reads the file.
        (tmp_path / "slow.tmp").write_bytes(body)
        os.rename(tmp_path / "slow.tmp", fifo)
        os.kill(victim, signal.SIGKILL)  # the worker dies in the middle of the chunk
        while not _dead(victim):
            time.sleep(0.01)
    finally:
        os.close(writer)
    thread.join(timeout=120)
    assert not errors, errors
    (checked,) = out
    paths = [r["path"] for r in checked.rows]
    assert paths == sorted(set(paths)) and len(paths) == 7  # every file once, in order
    assert sum(done) == 7
    slow = next(r for r in checked.rows if r["path"] == str(fifo))
    assert slow == check_bytes(body, str(fifo), SETTINGS)[0]
    assert checked.exit_code() == ExitCode.CONTEXT_TRUNCATED
    assert victim not in client.run(os.getpid, on_error="ignore").values()


def test_engine_errors_are_clear() -> None:
    from ctxwin.cluster import connect

    with pytest.raises(UsageError, match="engine: 'spark'") as usage:
        check_files([], SETTINGS, engine="spark")
    assert usage.value.setting == "engine"
    with pytest.raises(UsageError, match="needs the address of a scheduler") as usage:
        connect(None)
    assert usage.value.setting == "scheduler" and "--" not in str(usage.value)
    with pytest.raises(CtxwinError, match="cannot reach the Dask scheduler") as info:
        connect("tcp://127.0.0.1:9", timeout=1)
    assert info.value.exit_code == ExitCode.BAD_INPUT
    with pytest.raises(CtxwinError, match="no such scheduler file"):
        connect("/nonexistent/scheduler.json")


def test_docs_name_the_real_flags(cli: Cli) -> None:

    root = Path(__file__).resolve().parent.parent
    page = (root / "docs" / "cluster.md").read_text("utf-8")
    assert "](docs/cluster.md)" in (root / "README.md").read_text("utf-8")
    help_text = cli("check", "--help", terminal_width=200).stdout
    for flag in ("--engine", "--scheduler"):
        assert flag in page and flag in help_text
    assert "ctxwin[dask]" in page and "bench/cluster.py" in page
