"""Parallel speed-up of ``ctxwin check``: 1,000 generated runs, 1 worker against N.

    python bench/check_parallel.py                      # 1,000 runs, jobs 1 and 2
    python bench/check_parallel.py --runs 200 --jobs 1 2 4 --repeat 5

Runs come from ``bench/gen.py`` (seeded, so every invocation checks the same
bytes): run ``i`` has between ``--min-messages`` and ``--max-messages``
messages. They are written once to ``--dir`` (default: a folder under the
system temp dir) and reused.

Three timings per job count, best of ``--repeat`` (interleaved across job counts):

* ``control``: a pure-Python CPU loop split over the same number of
  processes: the speed-up the machine itself allows at that moment;
* ``library``: :func:`ctxwin.runs.checking.check_paths` in this process (what the
  workers do, without interpreter start-up);
* ``cli``: ``python -m ctxwin check DIR -j N --jsonl > /dev/null`` end to end.

Every parallel run's rows are compared with the serial rows (they must be
equal). CPU seconds (this process and its workers) and the load average are
reported too: on a shared machine, other processes take cores and the
wall-clock speed-up says less than it seems. Prints one JSON object on
stdout; a summary on stderr.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import orjson

from ctxwin.runs.checking import check_paths, find_files
from ctxwin.settings import Settings

HERE = Path(__file__).resolve().parent


def _gen() -> Any:
    spec = importlib.util.spec_from_file_location("ctxwin_bench_gen", HERE / "gen.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generate(gen: Any, folder: Path, runs: int, lo: int, hi: int, seed: int) -> tuple[int, int]:
    """Write the runs (once); returns (files, total bytes)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    total = 0
    for i in range(runs):
        n = rng.randint(lo, hi)
        path = folder / f"run-{i:04}-{n}.json"
        if not path.exists():
            gen.write(path, n, seed * 100_003 + i)
        total += path.stat().st_size
    return runs, total


def best(times: list[float], cpu: list[float]) -> dict[str, float]:
    return {
        "best_s": round(min(times), 4),
        "median_s": round(statistics.median(times), 4),
        "cpu_s": round(statistics.median(cpu), 4),
    }


def spin(n: int) -> int:
    """Pure CPU work (the control: what parallelism the machine gives right now)."""
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def control(jobs: int, tasks: int = 8, n: int = 1_500_000) -> float:
    """Wall time of ``tasks`` spins in ``jobs`` forked processes (1: in this process)."""
    start = time.perf_counter()
    if jobs == 1:
        for _ in range(tasks):
            spin(n)
    else:
        import multiprocessing

        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            list(pool.map(spin, [n] * tasks))
    return time.perf_counter() - start


def cpu_seconds() -> float:
    """User + system CPU of this process and its finished children."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--min-messages", type=int, default=40)
    ap.add_argument("--max-messages", type=int, default=400)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--context-length", type=int, default=128_000)
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args(argv)

    gen = _gen()
    folder = args.dir or Path(tempfile.gettempdir()) / (
        f"ctxwin-check-bench-{args.runs}-{args.min_messages}-{args.max_messages}-{args.seed}"
        f"-v{gen.GEN_VERSION}"
    )
    files, size = generate(gen, folder, args.runs, args.min_messages, args.max_messages, args.seed)
    paths = find_files([str(folder)]).files
    options = Settings(context_length=args.context_length, estimator="seed")

    def key(row: dict[str, Any]) -> tuple[str, str]:
        return row["path"], row["run"]

    reference = sorted(check_paths(paths, options, jobs=1), key=key)
    counts: dict[str, int] = {}
    for row in reference:
        counts[row["status"]] = counts.get(row["status"], 0) + 1

    results: dict[str, Any] = {
        "runs": files,
        "bytes": size,
        "cpus": os.cpu_count(),
        "context_length": args.context_length,
        "verdicts": counts,
        "load_average_before": os.getloadavg(),
        "control": {},
        "library": {},
        "cli": {},
    }
    # Interleaved (1, 2, 1, 2, ...): on a shared machine, load drifts; best-of per setting.
    samples: dict[tuple[str, int], tuple[list[float], list[float]]] = {
        (kind, jobs): ([], []) for kind in ("control", "library", "cli") for jobs in args.jobs
    }
    for _ in range(args.repeat):
        for jobs in args.jobs:
            wall, cpu = samples[("control", jobs)]
            cpu0 = cpu_seconds()
            wall.append(control(jobs))
            cpu.append(cpu_seconds() - cpu0)
            wall, cpu = samples[("library", jobs)]
            cpu0 = cpu_seconds()
            start = time.perf_counter()
            rows = list(check_paths(paths, options, jobs=jobs))
            wall.append(time.perf_counter() - start)
            cpu.append(cpu_seconds() - cpu0)
            if sorted(rows, key=key) != reference:
                print(f"rows differ with {jobs} jobs", file=sys.stderr)
                return 1
            wall, cpu = samples[("cli", jobs)]
            cmd = [sys.executable, "-m", "ctxwin", "check", str(folder), "-j", str(jobs)]
            cmd += ["--jsonl", "--context-length", str(args.context_length)]
            cmd += ["--estimator", "seed", "-q"]
            cpu0 = cpu_seconds()
            start = time.perf_counter()
            done = subprocess.run(cmd, stdout=subprocess.DEVNULL, check=False)
            wall.append(time.perf_counter() - start)
            cpu.append(cpu_seconds() - cpu0)
            if done.returncode not in (0, 3, 4):
                print(f"ctxwin check exited {done.returncode}", file=sys.stderr)
                return 1
    for (kind, jobs), (wall, cpu) in samples.items():
        results[kind][str(jobs)] = best(wall, cpu)
    results["load_average_after"] = os.getloadavg()
    base = str(args.jobs[0])
    for kind in ("control", "library", "cli"):
        for jobs, t in results[kind].items():
            speedup = results[kind][base]["best_s"] / t["best_s"]
            t["speedup"] = round(speedup, 3)
            t["efficiency"] = round(speedup / (int(jobs) / int(base)), 3)
    sys.stdout.buffer.write(orjson.dumps(results, option=orjson.OPT_INDENT_2) + b"\n")
    before, after = results["load_average_before"][0], results["load_average_after"][0]
    print(
        f"{files} runs, {size / 1e6:.1f} MB, verdicts {counts}; "
        f"load average {before:.2f} before, {after:.2f} after",
        file=sys.stderr,
    )
    for kind in ("control", "library", "cli"):
        line = ", ".join(
            f"-j {j}: {t['best_s']:.2f}s (×{t['speedup']:.2f}, cpu {t['cpu_s']:.2f}s)"
            for j, t in results[kind].items()
        )
        print(f"{kind}: {line}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
