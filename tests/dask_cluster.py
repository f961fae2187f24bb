"""A real local Dask cluster for the tests and the bench: ``dask scheduler`` and
``dask worker`` processes started as the Dask CLI starts them, on 127.0.0.1 only."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def dask_command() -> list[str]:
    """The ``dask`` command of this interpreter's environment."""
    script = Path(sys.executable).with_name("dask")
    if script.exists():
        return [str(script)]
    found = shutil.which("dask")
    return [found] if found else [sys.executable, "-m", "dask"]


class LocalDaskCluster:
    """A scheduler and ``workers`` worker processes (one thread each, with a nanny),
    logging into ``directory``. Stop with :meth:`close` (or use :func:`local_cluster`)."""

    def __init__(self, directory: Path, workers: int = 2, env: dict[str, str] | None = None):
        self.directory = directory
        self.scheduler_file = directory / "scheduler.json"
        self.env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
        self.procs: list[subprocess.Popen[bytes]] = []
        self._start("scheduler", "--host", "127.0.0.1", "--port", "0")
        deadline = time.monotonic() + 60
        while not self._scheduler_file_written():
            if time.monotonic() > deadline or self.procs[0].poll() is not None:
                self.close()
                raise RuntimeError(f"dask scheduler did not start: see {directory}/scheduler.log")
            time.sleep(0.05)
        for i in range(workers):
            self._start(
                "worker",
                "--scheduler-file",
                str(self.scheduler_file),
                "--host",
                "127.0.0.1",
                "--nthreads",
                "1",
                "--name",
                f"w{i}",
                "--local-directory",
                str(directory / f"w{i}"),
                log=f"worker{i}.log",
            )

    def _scheduler_file_written(self) -> bool:
        """Whether the scheduler has written its whole file: it appears before its JSON
        is complete, and a reader in between gets a decode error."""
        import json

        try:
            return "address" in json.loads(self.scheduler_file.read_text())
        except (OSError, ValueError):
            return False

    def _start(self, role: str, *args: str, log: str = "") -> None:
        out = (self.directory / (log or f"{role}.log")).open("wb")
        common = ["--no-dashboard"]
        if role == "scheduler":
            common += ["--scheduler-file", str(self.scheduler_file)]
        self.procs.append(
            subprocess.Popen(
                [*dask_command(), role, *args, *common],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.directory,
                env=self.env,
                start_new_session=True,  # its own process group: the nanny's worker too
            )
        )
        out.close()

    @property
    def address(self) -> str:
        import json

        address: str = json.loads(self.scheduler_file.read_text())["address"]
        return address

    def client(self, workers: int, timeout: float = 90) -> Any:
        from distributed import Client

        client = Client(self.address, timeout=timeout, set_as_default=False)  # type: ignore[no-untyped-call]
        client.wait_for_workers(workers, timeout=timeout)
        return client

    def close(self) -> None:
        """Stop every process started here (workers first), by process group."""
        for proc in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@contextlib.contextmanager
def local_cluster(directory: Path, workers: int = 2, **kw: Any) -> Iterator[LocalDaskCluster]:
    cluster = LocalDaskCluster(directory, workers, **kw)
    try:
        yield cluster
    finally:
        cluster.close()
