"""``check`` without the command line: find files, check them in worker processes.

Worker functions are top-level and this module imports neither typer nor
rich, so it is safe under the ``spawn`` start method. Files go to the
workers in chunks, so a thousand small files are not dominated by
inter-process traffic. Nothing here raises for a bad file: every problem is
a row with ``status: invalid`` and its ``error``.
"""

from __future__ import annotations

import gc
import glob
import multiprocessing
import multiprocessing.context
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from ctxwin.runs import read_runs
from ctxwin.settings import Settings
from ctxwin.simulate import INVALID, check_run

SUFFIXES = (".json", ".jsonl", ".ndjson", ".traj")
"""File names a folder walk picks up (files named explicitly are always read)."""


@dataclass(slots=True)
class Found:
    """The files named by some paths, folders and globs."""

    files: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Files inside folders whose names do not end in one of :data:`SUFFIXES`."""
    missing: list[str] = field(default_factory=list)
    """Arguments that name nothing."""


def find_files(args: Iterable[str]) -> Found:
    """Expand files, folders (recursively) and globs into a sorted, de-duplicated list."""
    found = Found()
    seen: set[str] = set()

    def add(path: str) -> None:
        if path not in seen:
            seen.add(path)
            found.files.append(path)

    def walk(folder: str) -> None:
        for root, dirs, names in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(names):
                path = os.path.join(root, name)
                if name.startswith("."):
                    continue
                if name.lower().endswith(SUFFIXES):
                    add(path)
                else:
                    found.skipped.append(path)

    for arg in args:
        if os.path.isdir(arg):
            walk(arg)
        elif os.path.exists(arg):
            add(arg)
        elif glob.has_magic(arg):
            matches = sorted(glob.glob(arg, recursive=True))
            if not matches:
                found.missing.append(arg)
            for m in matches:
                if os.path.isdir(m):
                    walk(m)
                else:
                    add(m)
        else:
            found.missing.append(arg)
    return found


def check_file(path: str, settings: Settings, max_bytes: int = 0) -> list[dict[str, Any]]:
    """One row per run in the file at ``path``; never raises."""
    try:
        with open(path, "rb") as fh:
            if max_bytes > 0 and os.fstat(fh.fileno()).st_size > max_bytes:
                return [_invalid(path, f"over the {max_bytes:,}-byte input limit")]
            data = fh.read()
    except OSError as exc:
        return [_invalid(path, f"cannot read: {exc.strerror or exc}")]
    return check_bytes(data, path, settings)


def check_bytes(data: bytes, path: str, settings: Settings) -> list[dict[str, Any]]:
    """One row per run in ``data`` (read from ``path``); never raises."""
    try:
        estimator = settings.make_estimator()
        rows = []
        for run in read_runs(data):
            row = check_run(run, settings, estimator)
            rows.append({"path": path, **row})
        return rows or [_invalid(path, "no transcripts in this file")]
    except RecursionError:
        return [_invalid(path, "input nested too deeply")]
    except MemoryError:
        return [_invalid(path, "out of memory")]
    except Exception as exc:  # a bug must not take the whole check down
        return [_invalid(path, f"internal error: {type(exc).__name__}: {exc}")]


def _invalid(path: str, error: str) -> dict[str, Any]:
    return {"path": path, "run": "", "status": INVALID, "error": error}


def check_chunk(paths: list[str], settings: Settings, max_bytes: int = 0) -> list[dict[str, Any]]:
    """Check several files (the unit of work a worker process gets)."""
    rows: list[dict[str, Any]] = []
    for path in paths:
        rows.extend(check_file(path, settings, max_bytes))
    return rows


def chunks(paths: list[str], jobs: int, target: int = 16) -> list[list[str]]:
    """Split ``paths`` into about ``target`` chunks per worker, balanced by file size."""
    if not paths:
        return []
    count = max(1, min(len(paths), jobs * target))
    sizes = []
    for p in paths:
        try:
            sizes.append(os.path.getsize(p))
        except OSError:
            sizes.append(0)
    # Largest files first, each to the lightest chunk: big files do not pile up.
    order = sorted(range(len(paths)), key=lambda i: -sizes[i])
    loads = [0] * count
    out: list[list[int]] = [[] for _ in range(count)]
    for i in order:
        c = min(range(count), key=loads.__getitem__)
        out[c].append(i)
        loads[c] += sizes[i] + 4096
    return [[paths[i] for i in sorted(c)] for c in out if c]


def default_jobs() -> int:
    """All cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def _context() -> multiprocessing.context.BaseContext:
    """``fork`` on Linux (workers start in milliseconds, nothing to re-import); ``spawn``
    elsewhere. Worker functions are top-level and their arguments picklable either way.
    Callers must not have threads running when the pool starts (the CLI's progress bar
    refreshes by hand for that reason)."""
    if sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def check_paths(
    paths: list[str],
    settings: Settings,
    *,
    jobs: int = 0,
    max_bytes: int = 0,
    on_file_done: Callable[[int], None] | None = None,
) -> Iterator[dict[str, Any]]:
    """Rows for every file in ``paths``, checked by ``jobs`` processes (0: all cores).

    Rows come in completion order; ``on_file_done(n)`` is called as each
    chunk of ``n`` files finishes.
    """
    jobs = jobs or default_jobs()
    if jobs == 1 or len(paths) <= 1:
        for path in paths:
            yield from check_file(path, settings, max_bytes)
            if on_file_done is not None:
                on_file_done(1)
        return
    parts = chunks(paths, jobs)
    context = _context()
    # Forked workers inherit this process's objects: frozen, the collector leaves them
    # alone, so workers neither scan them nor copy their pages.
    gc.freeze()
    try:
        yield from _pooled(parts, settings, jobs, max_bytes, context, on_file_done)
    finally:
        gc.unfreeze()


def _pooled(
    parts: list[list[str]],
    settings: Settings,
    jobs: int,
    max_bytes: int,
    context: multiprocessing.context.BaseContext,
    on_file_done: Callable[[int], None] | None,
) -> Iterator[dict[str, Any]]:
    with ProcessPoolExecutor(max_workers=min(jobs, len(parts)), mp_context=context) as pool:
        pending: dict[Future[list[dict[str, Any]]], int] = {
            pool.submit(check_chunk, part, settings, max_bytes): len(part) for part in parts
        }
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                n = pending.pop(fut)
                yield from fut.result()
                if on_file_done is not None:
                    on_file_done(n)
