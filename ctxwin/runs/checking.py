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
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ctxwin.core import INVALID, NEEDS_PRUNING, NO_BUDGET, STATUSES, TRUNCATED
from ctxwin.errors import ExitCode, UsageError
from ctxwin.fitting.rows import CheckRow, CheckSummary
from ctxwin.runs import read_runs
from ctxwin.runs.simulate import check_run
from ctxwin.settings import Settings, settings_with

if TYPE_CHECKING:  # the pool's modules are imported when a pool starts
    import multiprocessing.context

    from ctxwin.cluster import Row, Work

ENGINES = ("local", "dask")
"""Where :func:`check_files` (and :func:`ctxwin.runs.replaying.replay_files`) run their
per-file work: this machine's processes, or the workers of a Dask cluster (the ``dask``
extra)."""


MISSING = "no such file, folder or match"
"""The error of the row for an argument that names nothing."""

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
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    """URL arguments that could not be listed, with the error."""


def is_url(path: str) -> bool:
    """``s3://bucket/runs``, ``file:///data/runs``…: read with fsspec (a local path that
    happens to contain ``://`` stays a path)."""
    return "://" in path and not os.path.exists(path)


def find_files(args: Iterable[str]) -> Found:
    """Expand files, folders (recursively) and globs into a sorted, de-duplicated list.

    URLs (:func:`is_url`) are expanded the same way by their fsspec filesystem."""
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
        if is_url(arg):
            _find_url(arg, found, add)
        elif os.path.isdir(arg):
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


def _find_url(arg: str, found: Found, add: Callable[[str], None]) -> None:
    try:
        from fsspec.core import url_to_fs

        fs, root = url_to_fs(arg)
        if glob.has_magic(root):
            matches = sorted(fs.glob(root))
        elif fs.exists(root):
            matches = [root]
        else:
            matches = []
        if not matches:
            found.missing.append(arg)
        for match in matches:
            if not fs.isdir(match):
                add(fs.unstrip_protocol(match))
                continue
            for path in sorted(fs.find(match)):
                parts = path[len(match) :].strip("/").split("/")
                if any(part.startswith(".") for part in parts):
                    continue
                if parts[-1].lower().endswith(SUFFIXES):
                    add(fs.unstrip_protocol(path))
                else:
                    found.skipped.append(fs.unstrip_protocol(path))
    except ImportError as exc:
        found.unreadable.append((arg, f"cannot list: URLs need fsspec ({exc})"))
    except Exception as exc:  # any filesystem's error: network, credentials, protocol
        found.unreadable.append((arg, f"cannot list: {type(exc).__name__}: {exc}"))


def _read_url(path: str, max_bytes: int) -> bytes | str:
    """The bytes at the fsspec URL ``path``, or the error."""
    try:
        import fsspec

        with fsspec.open(path, "rb") as fh:
            data: bytes = fh.read() if max_bytes <= 0 else fh.read(max_bytes + 1)
    except ImportError as exc:
        return f"cannot read: URLs need fsspec ({exc})"
    except Exception as exc:  # any filesystem's error: network, credentials, missing
        return f"cannot read: {type(exc).__name__}: {exc}"
    if max_bytes > 0 and len(data) > max_bytes:
        return f"over the {max_bytes:,}-byte input limit"
    return data


def check_file(
    path: str, settings: Settings, max_bytes: int = 0, run_format: str = "auto"
) -> list[CheckRow]:
    """One row per run in the file (or fsspec URL) at ``path``; never raises.
    ``run_format`` names a session reader (:mod:`ctxwin.sessions`) instead of
    detecting the shape."""
    if is_url(path):
        data = _read_url(path, max_bytes)
        if isinstance(data, str):
            return [_invalid(path, data)]
        return check_bytes(data, path, settings, run_format)
    try:
        with open(path, "rb") as fh:
            if max_bytes > 0 and os.fstat(fh.fileno()).st_size > max_bytes:
                return [_invalid(path, f"over the {max_bytes:,}-byte input limit")]
            data = fh.read()
    except OSError as exc:
        return [_invalid(path, f"cannot read: {exc.strerror or exc}")]
    held = [data]
    del data  # the file's bytes go once read: a big session is checked at about its size
    return _check_held(held, path, settings, run_format)


def check_bytes(
    data: bytes, path: str, settings: Settings, run_format: str = "auto"
) -> list[CheckRow]:
    """One row per run in ``data`` (read from ``path``); never raises."""
    return _check_held([data], path, settings, run_format)


def _check_held(
    held: list[bytes], path: str, settings: Settings, run_format: str
) -> list[CheckRow]:
    """:func:`check_bytes` of ``held[0]``, letting go of the bytes once they are read."""
    try:
        # one estimator for the file's runs; under tokenizer="auto" each run's model
        # picks its own
        if settings.tokenizer is None:
            settings = settings._replace(estimator=settings.make_estimator())
        rows: list[CheckRow] = []
        runs = read_runs(held.pop(), run_format, path)
        if not runs:  # it goes with the session file beside it, and is read with that one
            return []
        for run in runs:
            row = check_run(run, settings)
            if run.warnings:
                row["warnings"] = [*run.warnings, *row.get("warnings", ())]
            rows.append({"path": path, **row})
        return rows or [_invalid(path, "no transcripts in this file")]
    except RecursionError:
        return [_invalid(path, "input nested too deeply")]
    except MemoryError:
        return [_invalid(path, "out of memory")]
    except Exception as exc:  # a bug must not take the whole check down
        return [_invalid(path, f"internal error: {type(exc).__name__}: {exc}")]


def _invalid(path: str, error: str) -> CheckRow:
    return {"path": path, "run": "", "status": INVALID, "error": error}


def check_chunk(
    paths: list[str], settings: Settings, max_bytes: int = 0, run_format: str = "auto"
) -> list[CheckRow]:
    """Check several files (the unit of work a worker process gets)."""
    rows: list[CheckRow] = []
    for path in paths:
        rows.extend(check_file(path, settings, max_bytes, run_format))
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
    import multiprocessing

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
    run_format: str = "auto",
) -> Iterator[CheckRow]:
    """Rows for every file in ``paths``, checked by ``jobs`` processes (0: all cores).

    Rows come in completion order; ``on_file_done(n)`` is called as each
    chunk of ``n`` files finishes.
    """
    return work_paths(
        paths,
        settings,
        check_chunk,
        jobs=jobs,
        max_bytes=max_bytes,
        on_file_done=on_file_done,
        run_format=run_format,
    )


def work_paths(
    paths: list[str],
    settings: Settings,
    work: Work[Row],
    *,
    jobs: int = 0,
    max_bytes: int = 0,
    on_file_done: Callable[[int], None] | None = None,
    run_format: str = "auto",
) -> Iterator[Row]:
    """``work``'s rows for every file in ``paths``, made by ``jobs`` processes of this
    machine (0: all cores; one file, or one job: in this process).

    Rows come chunk by chunk in completion order; ``on_file_done(n)`` is called as each
    chunk of ``n`` files finishes.
    """
    jobs = jobs or default_jobs()
    if jobs == 1 or len(paths) <= 1:
        for path in paths:
            yield from work([path], settings, max_bytes, run_format)
            if on_file_done is not None:
                on_file_done(1)
        return
    parts = chunks(paths, jobs)
    context = _context()
    # Forked workers inherit this process's objects: frozen, the collector leaves them
    # alone, so workers neither scan them nor copy their pages.
    gc.freeze()
    try:
        yield from _pooled(
            parts, settings, work, jobs, max_bytes, context, on_file_done, run_format
        )
    finally:
        gc.unfreeze()


def _pooled(
    parts: list[list[str]],
    settings: Settings,
    work: Work[Row],
    jobs: int,
    max_bytes: int,
    context: multiprocessing.context.BaseContext,
    on_file_done: Callable[[int], None] | None,
    run_format: str = "auto",
) -> Iterator[Row]:
    from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

    with ProcessPoolExecutor(max_workers=min(jobs, len(parts)), mp_context=context) as pool:
        pending: dict[Future[list[Row]], int] = {
            pool.submit(work, part, settings, max_bytes, run_format): len(part) for part in parts
        }
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                n = pending.pop(fut)
                yield from fut.result()
                if on_file_done is not None:
                    on_file_done(n)


def on_engine(
    paths: list[str],
    settings: Settings,
    work: Work[Row],
    *,
    run_format: str = "auto",
    max_bytes: int = 0,
    engine: str = "local",
    scheduler: Any = None,
    jobs: int = 0,
    on_file_done: Callable[[int], None] | None = None,
) -> Iterator[Row]:
    """``work``'s rows for every file in ``paths`` (read as ``run_format``, none over
    ``max_bytes``), made on ``engine``: ``local``, by
    ``jobs`` processes of this machine (:func:`work_paths`); ``dask``, by the workers of
    the Dask scheduler ``scheduler`` (:func:`ctxwin.cluster.check_paths_on_dask`), in
    chunks balanced by size (:func:`chunks`). Rows come chunk by chunk in completion
    order: the caller puts them in its order."""
    if engine not in ENGINES:
        raise UsageError(f"{engine!r}: choose one of {', '.join(ENGINES)}", setting="engine")
    if engine == "dask":
        from ctxwin.cluster import check_paths_on_dask

        return check_paths_on_dask(
            paths,
            settings,
            work=work,
            split=chunks,
            scheduler=scheduler,
            max_bytes=max_bytes,
            on_file_done=on_file_done,
            run_format=run_format,
        )
    if scheduler is not None:
        raise UsageError("a scheduler is for engine 'dask'", setting="scheduler")
    return work_paths(
        paths,
        settings,
        work,
        jobs=jobs,
        max_bytes=max_bytes,
        on_file_done=on_file_done,
        run_format=run_format,
    )


# --- the whole check: engine, stable order, summary, exit code -----------------------


@dataclass(slots=True)
class Checked:
    """What :func:`check_files` found: one row per transcript, in a stable order."""

    rows: list[CheckRow]
    """File order (as :func:`find_files` lists them), then run order within a file; the
    rows of arguments that name nothing come last."""
    found: Found
    engine: str

    def summary(self, worst: int = 10) -> CheckSummary:
        """The ``summary`` object of ``check --json``."""
        return summarize(self.rows, self.found, worst)

    def exit_code(self, fail_on: str = "pruned") -> ExitCode:
        """The exit code ``ctxwin check`` gives for these rows."""
        return check_exit_code(count_statuses(self.rows), fail_on)


def check_files(
    paths: Iterable[str] | Found,
    settings: Settings | None = None,
    *,
    engine: str = "local",
    scheduler: Any = None,
    jobs: int = 0,
    max_bytes: int = 0,
    on_file_done: Callable[[int], None] | None = None,
    run_format: str = "auto",
    **changes: Any,
) -> Checked:
    """Check every transcript in ``paths`` (files, folders, globs, fsspec URLs; or what
    :func:`find_files` listed) on ``engine``.

    ``engine="local"`` uses ``jobs`` processes of this machine (0: all cores);
    ``engine="dask"`` sends the files in chunks to the workers of the Dask scheduler
    at ``scheduler`` (an address such as ``tcp://10.0.0.5:8786``, a scheduler file, or
    a ``distributed.Client``), which must see the same paths. Either engine runs
    :func:`check_chunk` on the files and gives the same rows in the same order.
    ``on_file_done(n)`` is called as each chunk of ``n`` files finishes. ``settings``
    and keyword names of :class:`~ctxwin.settings.Settings` (``model=``,
    ``context_length=``, ``estimator=`` …) say what to check against; ``run_format``
    names a session reader (:mod:`ctxwin.sessions`) instead of detecting shapes.
    """
    found = paths if isinstance(paths, Found) else find_files(paths)
    settings = settings_with(settings, changes).portable()
    rows = on_engine(
        found.files,
        settings,
        check_chunk,
        run_format=run_format,
        max_bytes=max_bytes,
        engine=engine,
        scheduler=scheduler,
        jobs=jobs,
        on_file_done=on_file_done,
    )
    ordered = in_file_order(rows, found.files)
    ordered += [_invalid(arg, MISSING) for arg in found.missing]
    ordered += [_invalid(arg, error) for arg, error in found.unreadable]
    return Checked(ordered, found, engine)


def in_file_order(rows: Iterable[CheckRow], files: list[str]) -> list[CheckRow]:
    """``rows`` (in any order of chunks) sorted by the place of their file in ``files``,
    keeping the order of rows within a file (a stable sort)."""
    order = {p: i for i, p in enumerate(files)}
    return sorted(rows, key=lambda r: order[r["path"]])


def count_statuses(rows: Iterable[CheckRow]) -> dict[str, int]:
    """How many rows have each status (every status present, zero when none)."""
    counts: dict[str, int] = dict.fromkeys(STATUSES, 0)
    for r in rows:
        counts[r["status"]] += 1
    return counts


def check_exit_code(counts: dict[str, int], fail_on: str) -> ExitCode:
    """The exit code of ``check`` for these verdict counts: 1 for an invalid input; 3 for
    a transcript with no budget (``no_budget``: the window is at most reserve + safety,
    so no request fits), whatever ``fail_on`` says; then as ``fail_on`` chooses."""
    if counts.get(INVALID, 0):
        return ExitCode.BAD_INPUT
    if counts.get(NO_BUDGET, 0):
        return ExitCode.CONTEXT_TRUNCATED
    if fail_on == "never":
        return ExitCode.OK
    if counts.get(TRUNCATED, 0):
        return ExitCode.CONTEXT_TRUNCATED
    if fail_on == "pruned" and counts.get(NEEDS_PRUNING, 0):
        return ExitCode.NEEDS_PRUNING
    return ExitCode.OK


def summarize(rows: list[CheckRow], found: Found, worst: int = 10) -> CheckSummary:
    """The ``summary`` of ``check --json`` for ``rows`` of the files in ``found``."""
    offenders = sorted(
        (r for r in rows if r["status"] in (NEEDS_PRUNING, TRUNCATED, NO_BUDGET)),
        key=lambda r: -(r["over_by"]),
    )[:worst]
    invalid = [r for r in rows if r["status"] == INVALID][:worst]
    return {
        "files": len(found.files),
        "skipped_files": len(found.skipped),
        "missing": list(found.missing),
        "transcripts": len(rows),
        "counts": count_statuses(rows),
        "not_enforced": sum(1 for r in rows if r.get("enforced") is False),
        "worst": [
            {
                "path": r["path"],
                "run": r["run"],
                "status": r["status"],
                "estimated_tokens": r.get("estimated_tokens"),
                "budget": r.get("budget"),
                "over_by": r.get("over_by"),
            }
            for r in offenders
        ],
        "invalid": [{"path": r["path"], "run": r["run"], "error": r.get("error")} for r in invalid],
    }
