"""``check`` and ``replay`` on a Dask cluster: the workers of a running scheduler read the
files and do the per-file work.

Needs the ``dask`` extra (``pip install 'ctxwin[dask]'``, which brings
``distributed``), imported here on first use only. The client lists the files
once, splits them into chunks balanced by size (``split``: the caller's, e.g.
:func:`ctxwin.runs.checking.chunks`, about 16 per worker thread) and submits one task per
chunk: each runs ``work`` (:func:`ctxwin.runs.checking.check_chunk`,
:func:`ctxwin.runs.replaying.replay_chunk`: the very function of the local process pool),
so a worker reads the paths itself (a shared filesystem, or fsspec URLs) and returns the
rows. This module knows nothing of what a row is: the caller passes the work, so the
layers above import this one and never the reverse.

A worker lost mid-run: the scheduler gives its chunk to another worker; a chunk
that has been on too many lost workers (Dask's ``allowed-failures``) is submitted
again, up to ``retries`` times. Each chunk's rows are taken once, from the first
attempt that finishes, so nothing is counted twice.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from importlib import metadata
from typing import TYPE_CHECKING, Any, TypeVar

from ctxwin.errors import CtxwinError, UsageError
from ctxwin.extras import install_hint

if TYPE_CHECKING:
    from ctxwin.settings import Settings

Row = TypeVar("Row")
Work = Callable[[list[str], "Settings", int, str], list[Row]]
"""What a worker runs on one chunk: ``work(paths, settings, max_bytes, run_format)``
→ the rows of those files, in their order (a module-level function, or a
:func:`functools.partial` of one, so Dask and a process pool can send it by name)."""
Split = Callable[[list[str], int], list[list[str]]]
"""How the files are cut into chunks for a number of worker threads."""

# distributed is typed only in part (Client.close, .cancel, .nthreads are not): clients
# are Any here, so mypy --strict does not need stubs for it.
Client = Any

INSTALL = install_hint("dask")
KEY_PREFIX = "ctxwin-"
"""Task keys are ``ctxwin-<work>-<run id>-<chunk>-<attempt>`` (``<work>``: ``check`` for
:func:`~ctxwin.runs.checking.check_chunk`, ``replay`` for
:func:`~ctxwin.runs.replaying.replay_chunk`)."""
CONNECT_TIMEOUT = 20.0
"""Seconds to reach the scheduler, and then to wait for its first worker."""


def _distributed() -> Any:
    try:
        import distributed
    except ImportError as exc:
        raise UsageError(
            f"'dask' needs dask.distributed: {INSTALL} ({exc})", setting="engine"
        ) from exc
    return distributed


def connect(scheduler: str | None, timeout: float = CONNECT_TIMEOUT) -> Client:
    """A client of the scheduler at ``scheduler``: an address (``tcp://host:8786``,
    ``host:8786``) or the JSON file ``dask scheduler --scheduler-file`` writes. ``None``
    or empty: the address in Dask's configuration (``DASK_SCHEDULER_ADDRESS``)."""
    distributed = _distributed()
    if not scheduler:
        import dask.config

        scheduler = dask.config.get("scheduler-address", None)
        if not scheduler:
            raise UsageError(
                "engine 'dask' needs the address of a scheduler "
                "(or DASK_SCHEDULER_ADDRESS in the environment)",
                setting="scheduler",
            )
    where = {"address": scheduler}
    if scheduler.endswith(".json") and "://" not in scheduler:
        if not os.path.isfile(scheduler):
            raise CtxwinError(f"{scheduler}: no such scheduler file", setting="scheduler")
        where = {"scheduler_file": scheduler}
    try:
        client: Client = distributed.Client(
            **where, timeout=timeout, set_as_default=False, name="ctxwin"
        )
    except ValueError as exc:
        raise UsageError(
            f"{scheduler}: not a Dask scheduler address ({exc})", setting="scheduler"
        ) from exc
    except (OSError, TimeoutError) as exc:
        raise CtxwinError(
            f"{scheduler}: cannot reach the Dask scheduler ({exc})", setting="scheduler"
        ) from exc
    return client


def check_paths_on_dask(
    paths: list[str],
    settings: Settings,
    *,
    work: Work[Row],
    split: Split,
    scheduler: Client | str | None,
    max_bytes: int = 0,
    on_file_done: Callable[[int], None] | None = None,
    retries: int = 3,
    run_format: str = "auto",
) -> Iterator[Row]:
    """Rows for every file in ``paths``, made by ``work`` on the workers of ``scheduler``
    (a :class:`distributed.Client`, or what :func:`connect` takes), in chunks cut by
    ``split``.

    Rows come chunk by chunk in completion order; ``on_file_done(n)`` is called as
    each chunk of ``n`` files finishes, once per chunk whatever was retried.
    """
    if not paths:
        return
    distributed = _distributed()
    own = not isinstance(scheduler, distributed.Client)
    client: Client = connect(scheduler) if own else scheduler
    try:
        threads = ready_threads(client)
        parts = split(paths, threads)
        for i, rows in run_chunks(
            client, parts, work, settings, max_bytes, retries=retries, run_format=run_format
        ):
            yield from rows
            if on_file_done is not None:
                on_file_done(len(parts[i]))
    finally:
        if own:
            client.close()


def ready_threads(client: Client, timeout: float = CONNECT_TIMEOUT) -> int:
    """How many threads the cluster's workers have, once at least one worker is there
    and every worker runs this version of ctxwin."""
    try:
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError as exc:
        raise CtxwinError(
            f"the Dask scheduler at {client.scheduler.address} has no workers "
            f"(waited {timeout:g} s)"
        ) from exc
    versions = client.run(metadata.version, "ctxwin", on_error="return")
    mine = metadata.version("ctxwin")
    for worker, version in sorted(versions.items()):
        if version != mine:
            found = "no ctxwin" if isinstance(version, BaseException) else f"ctxwin {version}"
            raise CtxwinError(
                f"Dask worker {worker} has {found}, this client ctxwin {mine}: "
                "install the same ctxwin on every worker"
            )
    return max(1, int(sum(client.nthreads().values())))


def run_chunks(
    client: Client,
    parts: list[list[str]],
    work: Work[Row],
    settings: Settings,
    max_bytes: int,
    *,
    retries: int = 3,
    run_format: str = "auto",
) -> Iterator[tuple[int, list[Row]]]:
    """``(chunk index, rows)`` for every chunk of ``parts``, each exactly once, in
    completion order. A chunk whose task was lost with its workers (``KilledWorker``)
    or cancelled is submitted again, at most ``retries`` times."""
    distributed = _distributed()
    run_id = uuid.uuid4().hex[:12]
    name = work_name(work)
    attempts: dict[str, tuple[int, int]] = {}
    submitted: list[Any] = []

    def submit(i: int, attempt: int) -> Any:
        key = f"{KEY_PREFIX}{name}-{run_id}-{i}-{attempt}"
        attempts[key] = (i, attempt)
        submitted.append(
            client.submit(work, parts[i], settings, max_bytes, run_format, key=key, pure=False)
        )
        return submitted[-1]

    pending = distributed.as_completed([submit(i, 0) for i in range(len(parts))], loop=client.loop)
    try:
        yield from _collect(pending, attempts, submit, parts, retries)
    finally:  # stopped early (an error, or the caller gave up): free the cluster
        client.cancel([f for f in submitted if not f.done()])


def work_name(work: Callable[..., Any]) -> str:
    """What the tasks of ``work`` are called: its function's name, less ``_chunk``."""
    func = getattr(work, "func", work)  # a functools.partial: the function it calls
    return str(getattr(func, "__name__", "work")).removesuffix("_chunk").replace("_", "")


def _collect(
    pending: Any,
    attempts: dict[str, tuple[int, int]],
    submit: Callable[[int, int], Any],
    parts: list[list[str]],
    retries: int,
) -> Iterator[tuple[int, list[Row]]]:
    distributed = _distributed()
    done: set[int] = set()
    for future in pending:
        i, attempt = attempts.pop(future.key)
        if i in done:  # a chunk that finished twice counts once
            continue
        try:
            rows: list[Row] = future.result()
        except (distributed.KilledWorker, distributed.CancelledError) as exc:
            if attempt >= retries:
                raise CtxwinError(
                    f"chunk {i + 1} of {len(parts)} ({parts[i][0]} …) was lost "
                    f"{attempt + 1} times: {type(exc).__name__}: {exc}"
                ) from exc
            pending.add(submit(i, attempt + 1))
            continue
        except Exception as exc:
            raise CtxwinError(
                f"a Dask worker failed on chunk {i + 1} of {len(parts)} ({parts[i][0]} …): "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        finally:
            future.release()
        done.add(i)
        yield i, rows
