"""Throughput of ``check --engine dask`` on a local Dask cluster of 1 and of 2 workers.

    python bench/cluster.py                       # 400 runs, 3 repetitions
    python bench/cluster.py --runs 1000 --repeat 5

The runs are those of ``bench/check_parallel.py`` (``bench/gen.py``, seeded; written
once under the temp dir and reused). Two clusters run side by side, each started as
the Dask CLI starts one (``dask scheduler`` and ``dask worker --nthreads 1``, with
nannies, on 127.0.0.1): one with 1 worker, one with 2. The timings are interleaved
(a pure-CPU control in 1 and 2 processes, local -j 1, local -j 2, Dask 1 worker, Dask 2
workers, again …) so load drifting on a shared machine hits every setting alike; best and
median of ``--repeat`` are kept. The control (``check_parallel.control``) shows how much
parallelism the machine had to give.
Each timed call is :func:`ctxwin.runs.checking.check_files`, from the file list to the
ordered rows (for Dask: connecting a client to the running scheduler included), and
its rows must equal the local rows. A first untimed call on each cluster lets the
workers import ctxwin. Prints one JSON object on stdout, a summary on stderr.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # check_parallel's generator; tests' cluster

from check_parallel import _gen, control, generate  # noqa: E402

from ctxwin.runs.checking import check_files  # noqa: E402
from ctxwin.settings import Settings  # noqa: E402
from tests.dask_cluster import local_cluster  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--min-messages", type=int, default=40)
    ap.add_argument("--max-messages", type=int, default=400)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--context-length", type=int, default=32_000)
    args = ap.parse_args(argv)

    gen = _gen()
    folder = Path(tempfile.gettempdir()) / (
        f"ctxwin-check-bench-{args.runs}-{args.min_messages}-{args.max_messages}-{args.seed}"
        f"-v{gen.GEN_VERSION}"
    )
    files, size = generate(gen, folder, args.runs, args.min_messages, args.max_messages, args.seed)
    settings = Settings(context_length=args.context_length, estimator="seed")
    reference = check_files([str(folder)], settings, jobs=1)
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="ctxwin-dask-bench-") as tmp:
        (Path(tmp) / "one").mkdir()
        (Path(tmp) / "two").mkdir()
        with (
            local_cluster(Path(tmp) / "one", workers=1) as one,
            local_cluster(Path(tmp) / "two", workers=2) as two,
        ):
            for cluster, n in ((one, 1), (two, 2)):
                cluster.client(workers=n).close()  # all workers are up
            engines: dict[str, dict[str, Any]] = {
                "local -j 1": {"jobs": 1},
                "local -j 2": {"jobs": 2},
                "dask, 1 worker": {"engine": "dask", "scheduler": one.address},
                "dask, 2 workers": {"engine": "dask", "scheduler": two.address},
            }
            for name, how in engines.items():
                if "scheduler" in how:  # warm-up: the workers import ctxwin
                    check_files([str(folder)], settings, **how)
                samples[name] = []
            load_before = os.getloadavg()
            for jobs in (1, 2):
                samples[f"control -j {jobs}"] = []
            for _ in range(args.repeat):
                for jobs in (1, 2):  # what parallelism the machine gives right now
                    samples[f"control -j {jobs}"].append(control(jobs))
                for name, how in engines.items():
                    start = time.perf_counter()
                    checked = check_files([str(folder)], settings, **how)
                    samples[name].append(time.perf_counter() - start)
                    if checked.rows != reference.rows:
                        print(f"{name}: rows differ from the local rows", file=sys.stderr)
                        return 1
            load_after = os.getloadavg()
    transcripts = len(reference.rows)
    results: dict[str, Any] = {
        "files": files,
        "transcripts": transcripts,
        "bytes": size,
        "cpus": os.cpu_count(),
        "repeat": args.repeat,
        "load_average_before": load_before,
        "load_average_after": load_after,
        "verdicts": reference.summary()["counts"],
        "timings": {
            name: {
                "best_s": round(min(t), 3),
                "median_s": round(statistics.median(t), 3),
                "files_per_s": round(files / min(t), 1),
                "mb_per_s": round(size / 1e6 / min(t), 2),
            }
            for name, t in samples.items()
            if not name.startswith("control")
        },
        "control": {name: round(min(t), 3) for name, t in samples.items() if "control" in name},
    }
    sys.stdout.buffer.write(orjson.dumps(results, option=orjson.OPT_INDENT_2) + b"\n")
    print(
        f"{files} files, {transcripts} transcripts, {size / 1e6:.1f} MB; load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after",
        file=sys.stderr,
    )
    c1, c2 = results["control"]["control -j 1"], results["control"]["control -j 2"]
    print(f"pure-CPU control: -j 1 {c1:.2f} s, -j 2 {c2:.2f} s (×{c1 / c2:.2f})", file=sys.stderr)
    for name, t in results["timings"].items():
        print(
            f"{name:>16}: best {t['best_s']:.2f} s (median {t['median_s']:.2f} s), "
            f"{t['files_per_s']:.0f} files/s, {t['mb_per_s']:.1f} MB/s",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
