"""The default estimator (``bound``) against ``--estimator content``, in one interleaved run.

    python bench/estimators.py [--sizes 10k,100k] [--windows 200k,1M] [--reps 5]

For each size (``bench/gen.py`` transcripts, as ``make bench``) and window ``C``, times
``ctxwin prune`` and ``ctxwin check`` with the default estimator and with
``--estimator content``, each against the floor of its own output (``bench/floor.py
--drop``: the messages that estimator's prune drops; ``check`` writes a report, so its
floor parses only); and, per size, ``ctxwin estimate --json`` with each estimator against
the floor that parses only, and, where the ``bpe`` extra is installed, against ``estimate
--tokenizer o200k_base`` (an exact count). Every repetition runs every job once, in
rotating order, so the machine's noise falls on all alike; the tables show medians of
whole-process wall time. Writes Markdown to ``--out`` (``bench/estimators.md``) and prints it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen  # bench/gen.py
import run as bench  # bench/run.py: measuring, data sets, the floor

ESTIMATORS = ("bound", "content")
"""The default estimator first, then the one it is compared with."""


@dataclass
class Job:
    name: str
    argv: list[str]
    ok: tuple[int, ...] = (0,)
    walls: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def median(self) -> float | None:
        return statistics.median(self.walls) if self.walls else None


def _jobs(
    ctxwin: list[str], python: str, path: Path, windows: list[int], tmp: Path, *, bpe: bool
) -> dict[str, Job]:
    floor = str(bench.BENCH / "floor.py")
    src = str(path)
    jobs: dict[str, Job] = {}
    for est in ESTIMATORS:
        flag = [] if est == "bound" else ["--estimator", est]
        jobs[f"estimate {est}"] = Job(
            f"estimate {est}", [*ctxwin, "estimate", src, "-c", str(windows[0]), "--json", *flag]
        )
    if bpe:  # the exact count of one tokenizer, through the bpe extra
        jobs["estimate o200k_base"] = Job(
            "estimate o200k_base",
            [
                *ctxwin,
                "estimate",
                src,
                "-c",
                str(windows[0]),
                "--json",
                "--tokenizer",
                "o200k_base",
            ],
        )
    jobs["floor (parse only)"] = Job(
        "floor (parse only)", [python, floor, "--parse-only", src, str(tmp / "parse.json")]
    )
    for c in windows:
        for est in ESTIMATORS:
            flag = [] if est == "bound" else ["--estimator", est]
            out = str(tmp / f"prune-{est}-{c}.json")
            jobs[f"{c} prune {est}"] = Job(
                f"prune {est}", [*ctxwin, "prune", src, out, "-c", str(c), *flag]
            )
            jobs[f"{c} check {est}"] = Job(
                f"check {est}", [*ctxwin, "check", src, "-c", str(c), "--jsonl", *flag], (0, 3, 4)
            )
            report = _report(ctxwin, path, c, tmp, flag)
            drop = bench.drop_ranges(report.get("dropped_messages") or [])
            jobs[f"{c} floor {est}"] = Job(
                f"floor (prune {est}'s output)",
                [python, floor, "--drop", drop, src, str(tmp / f"floor-{est}-{c}.json")],
            )
    return jobs


def _report(ctxwin: list[str], path: Path, c: int, tmp: Path, flag: list[str]) -> dict[str, object]:
    out, err = tmp / "report.json", tmp / "report.err"
    cmd = [*ctxwin, "estimate", str(path), "--context-length", str(c), "--json", *flag]
    s = bench.measure(cmd, out, err, timeout=3600)
    if s.rc != 0:
        sys.exit(f"ctxwin estimate failed (exit {s.rc}): {err.read_text()[-2000:]}")
    report: dict[str, object] = orjson.loads(out.read_bytes())
    return report


def _x(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}×" if a is not None and b else "—"


def _s(v: float | None) -> str:
    return "—" if v is None else f"{v:.3f}"


def render(
    sizes: dict[int, tuple[Path, dict[str, Job]]], windows: list[int], reps: int, load: tuple
) -> str:
    lines = [
        "# bound (the default) against --estimator content",
        "",
        f"- date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- machine: {os.cpu_count()} CPUs, shared with other work; load average (1 min) "
        f"before / after: {load[0]:.2f} / {load[1]:.2f}",
        f"- {reps} repetitions, every job once per repetition in rotating order; whole-process "
        "wall seconds, medians (`python bench/estimators.py`)",
        "- each floor does the output of what it is compared with: `prune` against writing the "
        "messages that estimator's prune keeps, `estimate` and `check` against parsing alone",
        "",
    ]
    for n, (path, jobs) in sizes.items():
        turns = _turns(path)
        lines += [
            f"## {bench.human_n(n)} messages ({turns:,} turns, {path.stat().st_size / 1e6:.1f} MB)",
            "",
            "| window | command | bound (s) | content (s) | bound ÷ content "
            "| bound ÷ its floor | content ÷ its floor |",
            "|---:|---|---:|---:|---:|---:|---:|",
        ]
        parse = jobs["floor (parse only)"].median
        for c in windows:
            for cmd in ("prune", "check"):
                b, ct = jobs[f"{c} {cmd} bound"].median, jobs[f"{c} {cmd} content"].median
                fb = jobs[f"{c} floor bound"].median if cmd == "prune" else parse
                fc = jobs[f"{c} floor content"].median if cmd == "prune" else parse
                lines.append(
                    f"| {c:,} | {cmd} | {_s(b)} | {_s(ct)} | {_x(b, ct)} | {_x(b, fb)} | "
                    f"{_x(ct, fc)} |"
                )
        b, ct = jobs["estimate bound"].median, jobs["estimate content"].median
        lines.append(
            f"| {windows[0]:,} | estimate | {_s(b)} | {_s(ct)} | {_x(b, ct)} | {_x(b, parse)} | "
            f"{_x(ct, parse)} |"
        )
        exact = jobs.get("estimate o200k_base")
        if exact is not None:
            lines += [
                "",
                f"`estimate --tokenizer o200k_base` (the `bpe` extra) {_s(exact.median)} s: "
                f"the bound's estimate takes {_x(b, exact.median)} its time.",
            ]
        lines += ["", "Floors (s): parse only " + _s(parse)]
        for c in windows:
            lines[-1] += (
                f"; window {c:,}: bound's prune output {_s(jobs[f'{c} floor bound'].median)}, "
                f"content's {_s(jobs[f'{c} floor content'].median)}"
            )
        lines[-1] += "."
        errors = [f"{k}: {j.error}" for k, j in jobs.items() if j.error]
        if errors:
            lines += ["", "Errors: " + "; ".join(errors)]
        lines.append("")
    return "\n".join(lines)


def _turns(path: Path) -> int:
    body = orjson.loads(path.read_bytes())
    return sum(1 for m in body["messages"] if m.get("role") == "assistant")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10k,100k", help="transcript sizes in messages")
    ap.add_argument("--windows", default="200k,1M", help="context lengths C")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ctxwin", help="the command to benchmark (default: as bench/run.py)")
    ap.add_argument("--python", help="interpreter for the floor (default: ctxwin's)")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--out", type=Path, default=bench.BENCH / "estimators.md")
    args = ap.parse_args(argv)
    ctxwin = bench.resolve_ctxwin(args.ctxwin)
    python = args.python or bench.interpreter_of(ctxwin)
    windows = [gen.parse_count(w) for w in args.windows.split(",") if w.strip()]
    tmp = bench.DATA / "out"
    tmp.mkdir(parents=True, exist_ok=True)
    bench.compile_package(python)
    bpe = subprocess.run([python, "-c", "import quicktok"], capture_output=True).returncode == 0
    sizes: dict[int, tuple[Path, dict[str, Job]]] = {}
    for n in bench.parse_sizes(args.sizes):
        path = bench.dataset(n, args.seed)
        bench.warm(path)
        (tmp / f"est-{n}").mkdir(exist_ok=True)
        sizes[n] = (path, _jobs(ctxwin, python, path, windows, tmp / f"est-{n}", bpe=bpe))
    every = [(n, key) for n, (_, jobs) in sizes.items() for key in jobs]
    load_before = os.getloadavg()[0]
    for rep in range(args.reps):
        k = rep % len(every)
        for n, key in every[k:] + every[:k]:
            job = sizes[n][1][key]
            if job.error:
                continue
            out, err = tmp / "est.stdout", tmp / "est.stderr"
            s = bench.measure(job.argv, out, err, timeout=args.timeout)
            if s.timed_out or s.rc not in job.ok:
                tail = err.read_text("utf-8", "replace").strip().splitlines()[-1:] or [""]
                job.error = "timeout" if s.timed_out else f"exit {s.rc}: {tail[0][:80]}"
            else:
                job.walls.append(s.wall)
            bench.log(f"  rep {rep + 1}/{args.reps} {n:>7,} {key:28s} {s.wall:8.3f} s")
    text = render(sizes, windows, args.reps, (load_before, os.getloadavg()[0]))
    args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
