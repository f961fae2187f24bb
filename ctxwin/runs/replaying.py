"""``replay`` over many files without the command line: each file read and replayed where
an engine runs it (this machine's processes, or the workers of a Dask cluster).

The per-file work is one function, :func:`replay_chunk`, that every engine maps over the
files (:func:`ctxwin.runs.checking.on_engine`): it reads a file (a path or an fsspec URL),
reads its runs and replays each under every policy asked for. Recorded calls are the
exception: the calls recorded in several files are one agent run, call after call
(:func:`ctxwin.runs.join_recorded`), that one manager must see in order, so a file's
recorded calls come back unreplayed and :func:`replay_files` joins and replays them in
this process. What comes back is in input order whatever the engine, and nothing here
raises for a bad file: its :class:`ReplayedFile` says what went wrong.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from ctxwin.errors import CtxwinError
from ctxwin.recorded import Run
from ctxwin.runs import join_recorded, read_runs
from ctxwin.runs.checking import _read_url, is_url, on_engine
from ctxwin.runs.simulate import SESSION_SHAPES, replay_run
from ctxwin.settings import Settings

if TYPE_CHECKING:
    from ctxwin.runs.policies import Policy


@dataclass(slots=True)
class ReplayedRun:
    """One run of a file, replayed once per policy."""

    name: str
    """The run's name: prefixed with its file's path when several files are replayed."""
    results: list[Any]
    """The report (one per policy, in order: its outcome, :data:`ctxwin.runs.policies.Outcome`),
    or why the run could not be replayed."""


@dataclass(slots=True)
class ReplayedFile:
    """What one file gave: its runs, replayed (or, for recorded calls, still to be joined
    and replayed), the warnings of reading it, or why it could not be read."""

    path: str
    runs: list[ReplayedRun | Run] = field(default_factory=list)
    """In the file's order, those named like ``select``; a :class:`~ctxwin.runs.Run` of
    recorded calls is replayed by :func:`replay_files` (joined with those of other files)."""
    warnings: list[str] = field(default_factory=list)
    """Of every run read from the file (selected or not), each once, in order."""
    error: str | None = None
    """Why the file could not be read (it then has no runs)."""
    over_limit: bool = False
    """The error is that the file is larger than the input limit."""


@dataclass(slots=True)
class Replayed:
    """What :func:`replay_files` found, the same whatever the engine."""

    files: list[ReplayedFile]
    """In input order."""
    runs: list[ReplayedRun]
    """File order, then run order within a file; the calls recorded in several files
    are one run, in the place of the first."""
    label: str
    """What names the inputs: the one file, or the folder the files share."""
    engine: str

    def reports(self, policy: int = 0) -> list[Any]:
        """The reports of the runs replayed under the ``policy``-th policy, in order."""
        return [r for run in self.runs if not isinstance(r := run.results[policy], str)]

    def errors(self, policy: int = 0) -> list[tuple[str, str]]:
        """``(run name, why)`` of the runs that could not be replayed under the
        ``policy``-th policy, in order."""
        return [(run.name, r) for run in self.runs if isinstance(r := run.results[policy], str)]


def replay_each(
    run: Run,
    settings: Settings,
    chosen: Sequence[Policy] | None = None,
    summaries: Sequence[str] = (),
) -> list[Any]:
    """``run`` replayed as ``settings`` say: its report, or why it could not be; under
    ``chosen`` policies, each one's outcome (:func:`ctxwin.runs.policies.outcomes`;
    ``summaries``: those the session's compactions wrote), or why it could not be had."""
    if chosen is not None:
        from ctxwin.runs.policies import outcomes

        return list(outcomes(run, settings, chosen, summaries))
    try:
        return [replay_run(run, settings)]
    except CtxwinError as exc:
        return [str(exc)]


def deferred(run: Run) -> bool:
    """Whether ``run`` is recorded calls, joined across files before it is replayed: not
    those of an agent tool's session (each of its runs is one conversation of its own)."""
    return run.recorded is not None and run.error is None and run.shape not in SESSION_SHAPES


def read_file(path: str, max_bytes: int = 0) -> bytes | ReplayedFile:
    """The bytes of the file (or fsspec URL) at ``path``, refusing more than ``max_bytes``
    (0: no limit), or the :class:`ReplayedFile` that says why they cannot be had."""
    if is_url(path):
        data = _read_url(path, max_bytes)
        if isinstance(data, str):
            return ReplayedFile(path, error=f"{path}: {data}", over_limit="input limit" in data)
        return data
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if max_bytes > 0 and size > max_bytes:
                return _too_big(path, size, max_bytes)
            data = fh.read() if max_bytes <= 0 else fh.read(max_bytes + 1)
    except FileNotFoundError:
        return ReplayedFile(path, error=f"{path}: no such file")
    except IsADirectoryError:
        return ReplayedFile(path, error=f"{path}: is a folder, expected a JSON file")
    except PermissionError:
        return ReplayedFile(path, error=f"{path}: permission denied")
    except OSError as exc:
        return ReplayedFile(path, error=f"{path}: cannot read: {exc.strerror or exc}")
    if max_bytes > 0 and len(data) > max_bytes:
        return _too_big(path, len(data), max_bytes)
    return data


def _too_big(path: str, size: int, limit: int) -> ReplayedFile:
    error = f"{path} is {size:,} bytes, over the {limit:,}-byte input limit"
    return ReplayedFile(path, error=error, over_limit=True)


def replay_bytes(
    data: bytes,
    path: str,
    settings: Settings,
    run_format: str = "auto",
    *,
    chosen: Sequence[Policy] | None = None,
    named: bool = False,
    select: str | None = None,
) -> ReplayedFile:
    """The runs in ``data`` (read from ``path``) replayed as ``settings`` say (under each
    of the ``chosen`` policies),
    those of recorded calls left for :func:`replay_files`. ``named``: each run's name is
    prefixed with ``path``; ``select``: only runs whose name contains it."""
    runs = read_runs(data, run_format, path)
    out = ReplayedFile(path, warnings=list(dict.fromkeys(w for r in runs for w in r.warnings)))
    summaries = [r.summary for r in runs if r.summary]
    for run in runs:
        if named:
            run.name = f"{path} {run.name}".strip()
        if deferred(run):
            out.runs.append(run)  # selected once joined: its name is the joined run's
        elif select is None or select in run.name:
            done = replay_each(run, settings, chosen, summaries)
            out.runs.append(ReplayedRun(run.name, done))
    return out


def replay_chunk(
    paths: list[str],
    settings: Settings,
    max_bytes: int = 0,
    run_format: str = "auto",
    *,
    chosen: tuple[Policy, ...] | None = None,
    named: bool = False,
    select: str | None = None,
) -> list[ReplayedFile]:
    """One :class:`ReplayedFile` per path, in order: the unit of work an engine runs
    (:func:`replay_bytes` of each file, under each of the ``chosen`` policies)."""
    out: list[ReplayedFile] = []
    for path in paths:
        data = read_file(path, max_bytes)
        if isinstance(data, ReplayedFile):
            out.append(data)
            continue
        read = replay_bytes(
            data, path, settings, run_format, chosen=chosen, named=named, select=select
        )
        out.append(read)
    return out


def replay_files(
    paths: Sequence[str],
    settings: Settings,
    *,
    chosen: Sequence[Policy] | None = None,
    engine: str = "local",
    scheduler: Any = None,
    jobs: int = 0,
    max_bytes: int = 0,
    run_format: str = "auto",
    select: str | None = None,
    given: Mapping[str, bytes] | None = None,
    on_file_done: Callable[[int], None] | None = None,
) -> Replayed:
    """Replay the runs of the files in ``paths`` (paths or fsspec URLs, as
    :func:`ctxwin.runs.checking.find_files` lists them) on ``engine``, under
    ``settings`` under each of the ``chosen`` policies (``None``: once, as they are).

    ``engine="local"`` uses ``jobs`` processes of this machine (0: all cores);
    ``engine="dask"`` the workers of the Dask scheduler ``scheduler``, which must see
    the same paths. Every engine runs :func:`replay_chunk`, and the result is the same
    whatever the engine. ``given`` holds inputs already read, by their name in ``paths``
    (standard input): replayed in this process. ``select`` keeps the runs whose name
    contains it. With several files, each run's name starts with its file's path.
    """
    named = len(paths) > 1
    label = _common(paths)
    given = given or {}
    portable = settings.portable()
    picked = None if chosen is None else tuple(chosen)
    work = partial(replay_chunk, chosen=picked, named=named, select=select)
    remote = [p for p in dict.fromkeys(paths) if p not in given]
    done = on_engine(
        remote,
        settings.portable(),
        work,
        engine=engine,
        scheduler=scheduler,
        jobs=jobs,
        max_bytes=max_bytes,
        on_file_done=on_file_done,
        run_format=run_format,
    )
    by_path: dict[str, ReplayedFile] = {f.path: f for f in done}
    for name, data in given.items():
        by_path[name] = replay_bytes(
            data, name, portable, run_format, chosen=picked, named=named, select=select
        )
    files = [by_path[p] for p in paths]
    joined = _joined(files, portable, picked, label if named else "", select)
    return Replayed(files, joined, label, engine)


def _common(paths: Sequence[str]) -> str:
    """What names ``paths``: the one path, or the folder they share (for fsspec URLs of one
    protocol, as a URL); ``(inputs)`` when they share none."""
    if len(paths) <= 1:
        return paths[0] if paths else ""
    protocols = {p.partition("://")[0] if is_url(p) else None for p in paths}
    protocol = protocols.pop() if len(protocols) == 1 else None
    try:
        if protocol is None:
            return os.path.commonpath(list(paths))
        common = os.path.commonpath([p.partition("://")[2] for p in paths])
        return f"{protocol}://{common}"
    except ValueError:  # absolute and relative paths, or standard input among files
        return "(inputs)"


def _joined(
    files: Iterable[ReplayedFile],
    settings: Settings,
    chosen: Sequence[Policy] | None,
    name: str,
    select: str | None,
) -> list[ReplayedRun]:
    """The runs of ``files`` in order, the recorded calls joined into one run named
    ``name`` (:func:`join_recorded`) and replayed here."""
    slots = [run for f in files for run in f.runs]
    recorded = [run for run in slots if isinstance(run, Run)]
    joined = join_recorded(recorded, name)
    out: list[ReplayedRun] = []
    waiting = iter(joined)
    for run in slots:
        if isinstance(run, ReplayedRun):
            out.append(run)
        elif run is recorded[0] or len(joined) == len(recorded):
            one = next(waiting)
            if select is None or select in one.name:
                out.append(ReplayedRun(one.name, replay_each(one, settings, chosen)))
    return out
