"""Benchmark ctxwin against the floor and peer libraries (what ``make bench`` runs).

    python bench/run.py [--sizes 1k,10k,100k] [--reps 11] [--ctxwin CMD] [--skip-peers]

For each size: generate (or reuse) a seeded transcript under ``bench/.data/``, ask
``ctxwin estimate`` for its token count, pick the context length ``C`` whose budget is
about half of it, then time, in one interleaved run (every repetition runs every tool
once, in rotating order, so machine noise hits all alike):

* ``ctxwin estimate FILE --context-length C --json``
* ``ctxwin prune FILE OUT --context-length C``
* ``ctxwin replay FILE --context-length C --json``: the transcript as a recorded agent
  run, one provider call per assistant message, all fitted by one manager
* the floor (``bench/floor.py``: orjson loads + dumps, same interpreter as ctxwin)
* langchain-core's and litellm's trimmers (``bench/peers.py``, in ``bench/.venv-peers``)
  with ``max_tokens`` = ctxwin's budget for ``C``.

Each sample is one whole process: wall time from spawn to exit, and peak RSS from
``os.wait4``. The table shows medians. A peer is skipped at a size when the previous
size's time, scaled as O(n) (langchain) or O(n^2) (litellm), projects past
``--limit`` seconds; any tool is skipped when its projected peak RSS would not fit in
memory. Results are printed as Markdown and written to ``bench/results.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
DATA = BENCH / ".data"
PEERS_VENV = BENCH / ".venv-peers"
sys.path.insert(0, str(BENCH))

import gen  # noqa: E402  (bench/gen.py, next to this file)

DEFAULT_PEER_PINS = ("langchain-core==1.8.3", "litellm==1.110.2")
"""Used when pyproject.toml has no ``[dependency-groups] bench``."""

RESERVE_FLOOR = 1000
RESERVE_PERCENT = 2
SAFETY_PERCENT = 3
STARTUP_CONTEXT = 128_000


# -- budget ---------------------------------------------------------------------------
def ctxwin_budget(context_length: int) -> int:
    """ctxwin's budget when no output cap is known: C - reserve - safety."""
    reserve = max(RESERVE_FLOOR, math.ceil(context_length * RESERVE_PERCENT / 100))
    safety = math.ceil(context_length * SAFETY_PERCENT / 100)
    return context_length - reserve - safety


def context_for_budget(target: int) -> int:
    """The smallest context length whose budget is at least ``target``."""
    lo, hi = 1, max(2 * target + 2 * RESERVE_FLOOR, 4 * RESERVE_FLOOR)
    while lo < hi:
        mid = (lo + hi) // 2
        if ctxwin_budget(mid) >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


# -- process measurement --------------------------------------------------------------
@dataclass
class Sample:
    wall: float
    rss_kib: int
    rc: int
    timed_out: bool = False


def measure(
    argv: Sequence[str],
    stdout: Path,
    stderr: Path,
    *,
    timeout: float,
    env: dict[str, str] | None = None,
) -> Sample:
    """Run ``argv`` once: wall seconds from spawn to reap, and the child's peak RSS."""
    with stdout.open("wb") as out, stderr.open("wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=env,
            start_new_session=True,
        )
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # the group this run created

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Sample(wall, int(usage.ru_maxrss), proc.returncode, killed.is_set())


# -- tools ----------------------------------------------------------------------------
@dataclass
class Job:
    """What one tool needs for one size."""

    src: Path
    dst: Path
    context_length: int
    budget: int
    drop: str = "0:0"
    """The messages ``ctxwin prune`` drops at this size, as ``bench/floor.py --drop`` takes
    them (``A:B,C:D``), so the floor of ``prune`` writes the same body."""


@dataclass
class Tool:
    name: str
    argv: Callable[[Job], list[str]]
    writes_output: bool
    time_exponent: float | None = None
    """Peers only: scaling assumed when projecting the next size's time."""
    env: dict[str, str] | None = None


@dataclass
class Row:
    """One tool at one size."""

    tool: str
    samples: list[Sample] = field(default_factory=list)
    skipped: str | None = None
    error: str | None = None
    at_least: float | None = None
    """Set when one probe run was killed after this many seconds (the time is a lower bound)."""
    projection: str | None = None
    kept: int | None = None
    check: str | None = None
    phases: list[dict[str, Any]] = field(default_factory=list)

    @property
    def wall(self) -> float | None:
        ok = [s.wall for s in self.samples if s.rc == 0]
        return statistics.median(ok) if ok else None

    @property
    def wall_min(self) -> float | None:
        ok = [s.wall for s in self.samples if s.rc == 0]
        return min(ok) if ok else None

    @property
    def rss_mib(self) -> float | None:
        ok = [s.rss_kib for s in self.samples if s.rc == 0]
        return statistics.median(ok) / 1024 if ok else None


@dataclass
class SizeResult:
    n: int
    path: Path
    size_bytes: int
    tokens: int
    context_length: int
    budget: int
    rows: list[Row]
    load: tuple[float, float]
    """1-minute load average before and after the size's runs (other work on the box)."""


def resolve_ctxwin(arg: str | None) -> list[str]:
    if arg:
        return shlex.split(arg)
    local = ROOT / ".venv" / "bin" / "ctxwin"
    if local.exists():
        return [str(local)]
    found = shutil.which("ctxwin")
    if found:
        return [found]
    sys.exit("run.py: no ctxwin found (.venv/bin/ctxwin or PATH); pass --ctxwin CMD")


def interpreter_of(cmd: list[str]) -> str:
    """The Python that runs ``cmd`` (a console script's shebang), else this one."""
    exe = Path(cmd[0])
    if (len(cmd) >= 2 and cmd[1] == "-m") or "python" in exe.name:
        return str(shutil.which(cmd[0]) or cmd[0])
    path = Path(shutil.which(str(exe)) or exe)
    try:
        with path.open("rb") as f:
            first = f.readline().decode("utf-8", "replace").strip()
    except OSError:
        return sys.executable
    if first.startswith("#!"):
        parts = first[2:].split()
        if parts and Path(parts[0]).name != "env":
            return parts[0]
    return sys.executable


# -- peers venv -----------------------------------------------------------------------
def peer_pins() -> list[str]:
    """``[dependency-groups] bench`` from pyproject.toml, else the built-in pins."""
    try:
        data = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
        group = data.get("dependency-groups", {}).get("bench")
    except (OSError, tomllib.TOMLDecodeError):
        group = None
    pins = [g for g in group or () if isinstance(g, str)]
    return pins or list(DEFAULT_PEER_PINS)


def ensure_peers_venv(base_python: str) -> Path:
    """Create ``bench/.venv-peers`` with the peer pins (and orjson) unless up to date."""
    python = PEERS_VENV / "bin" / "python"
    pins = peer_pins()
    try:
        from importlib.metadata import version

        orjson_pin = f"orjson=={version('orjson')}"
    except Exception:
        orjson_pin = "orjson"
    wanted = "\n".join([*pins, orjson_pin]) + "\n"
    stamp = PEERS_VENV / ".pins"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    log(f"setting up {PEERS_VENV.relative_to(ROOT)}: {' '.join([*pins, orjson_pin])}")
    if not python.exists():
        subprocess.run([base_python, "-m", "venv", str(PEERS_VENV)], check=True)
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            *pins,
            orjson_pin,
        ],
        check=True,
    )
    stamp.write_text(wanted)
    return python


def version_of(python: str, dist: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({dist!r}))"
    res = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd="/")
    return res.stdout.strip() if res.returncode == 0 else "?"


# -- data -----------------------------------------------------------------------------
def dataset(n: int, seed: int) -> Path:
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / f"agent-{n}-s{seed}-v{gen.GEN_VERSION}.json"
    if not path.exists():
        log(f"generating {path.relative_to(ROOT)} ({n:,} messages)")
        t0 = time.perf_counter()
        gen.write(path, n, seed)
        log(f"  {path.stat().st_size / 1e6:.1f} MB in {time.perf_counter() - t0:.1f} s")
    return path


def warm(path: Path) -> None:
    """Read the file once so every tool sees it in the page cache."""
    with path.open("rb") as f:
        while f.read(1 << 24):
            pass


def mem_total_kib() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


# -- the run --------------------------------------------------------------------------
def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def ctxwin_report(ctxwin: list[str], path: Path, context_length: int, tmp: Path) -> dict[str, Any]:
    out, err = tmp / "report.json", tmp / "report.err"
    s = measure(
        [*ctxwin, "estimate", str(path), "--context-length", str(context_length), "--json"],
        out,
        err,
        timeout=3600,
    )
    if s.rc != 0:
        sys.exit(f"ctxwin estimate failed (exit {s.rc}): {err.read_text()[-2000:]}")
    report: dict[str, Any] = orjson.loads(out.read_bytes())
    return report


def drop_ranges(indices: Sequence[int]) -> str:
    """``ctxwin``'s ``dropped_messages`` as the ranges ``bench/floor.py --drop`` takes."""
    ranges: list[list[int]] = []
    for i in sorted(indices):
        if ranges and ranges[-1][1] == i:
            ranges[-1][1] = i + 1
        else:
            ranges.append([i, i + 1])
    return ",".join(f"{a}:{b}" for a, b in ranges) or "0:0"


FLOOR_OF = {
    "ctxwin estimate": "floor (parse only)",
    "ctxwin replay": "floor (parse only)",
    "ctxwin check": "floor (parse only)",
    "ctxwin prune": "floor (prune's output)",
}
"""The floor each command is compared with: the one that writes what the command writes
(a report is not a body: ``estimate``, ``replay`` and ``check`` against parsing alone;
``prune`` against writing the messages it keeps). The peers and the floors themselves are
compared with ``floor``, which writes every message."""


def check_output(python: str, path: Path) -> dict[str, Any]:
    res = subprocess.run([python, str(BENCH / "check.py"), str(path)], capture_output=True)
    if res.returncode != 0:
        return {"error": res.stderr.decode("utf-8", "replace")[-300:]}
    summary: dict[str, Any] = orjson.loads(res.stdout)
    return summary


def describe_check(summary: dict[str, Any]) -> str:
    if "error" in summary:
        return "unreadable output"
    problems = []
    if summary["orphan_results"]:
        problems.append(f"{summary['orphan_results']} orphan tool results")
    if summary["unanswered_calls"]:
        problems.append(f"{summary['unanswered_calls']} unanswered calls")
    if summary["first_roles"][:2] != ["system", "user"]:
        problems.append("head lost: starts " + ",".join(summary["first_roles"]))
    return "; ".join(problems) or "ok"


def run_size(
    n: int,
    tools: list[Tool],
    args: argparse.Namespace,
    ctxwin: list[str],
    python: str,
    history: dict[str, tuple[int, float, float]],
) -> SizeResult:
    path = dataset(n, args.seed)
    warm(path)
    tmp = DATA / "out"
    tmp.mkdir(parents=True, exist_ok=True)
    tokens = int(ctxwin_report(ctxwin, path, 10**12, tmp)["estimated_tokens"])
    context_length = args.context_length or context_for_budget(round(tokens * args.fraction))
    budget = ctxwin_budget(context_length)
    at_c = ctxwin_report(ctxwin, path, context_length, tmp)
    drop = drop_ranges(at_c.get("dropped_messages") or [])
    reported = at_c.get("budget")
    if reported is not None and reported != budget:
        log(f"  note: ctxwin reports budget {reported:,}, formula gives {budget:,}; using ctxwin's")
        budget = int(reported)
    log(
        f"== {n:,} messages: {path.stat().st_size / 1e6:.1f} MB, ~{tokens:,} tokens, "
        f"C={context_length:,}, budget={budget:,}"
    )

    load_before = os.getloadavg()[0]
    mem_kib = mem_total_kib()
    rows = {t.name: Row(t.name) for t in tools}
    active: list[Tool] = []
    probes: list[Tool] = []
    for tool in tools:
        prev = history.get(tool.name)
        if prev is not None:
            pn, pt, prss = prev
            scale = n / pn
            if tool.time_exponent is not None:
                projected = pt * scale**tool.time_exponent
                if projected > args.limit:
                    rows[tool.name].projection = f"~{projected:,.0f} s projected"
                    rows[tool.name].skipped = f"skipped ({rows[tool.name].projection})"
                    history[tool.name] = (n, projected, prss * scale)
                    if n in args.probe:
                        probes.append(tool)
                    continue
            if mem_kib and prss * scale > 0.8 * mem_kib:
                gib = prss * scale / 2**20
                rows[tool.name].skipped = f"skipped (~{gib:.0f} GiB RSS projected)"
                history[tool.name] = (n, pt * scale, prss * scale)
                continue
        active.append(tool)

    for rep in range(args.reps):
        k = rep % len(active) if active else 0
        for tool in active[k:] + active[:k]:
            row = rows[tool.name]
            if row.error or (tool.time_exponent is not None and rep >= args.peer_reps):
                continue
            job = Job(path, tmp / f"{tool.name}.out.json", context_length, budget, drop)
            out, err = tmp / f"{tool.name}.stdout", tmp / f"{tool.name}.stderr"
            s = measure(tool.argv(job), out, err, timeout=args.timeout, env=tool.env)
            row.samples.append(s)
            status = "timeout" if s.timed_out else f"exit {s.rc}" if s.rc else "ok"
            log(
                f"  rep {rep + 1}/{args.reps} {tool.name:16s} {s.wall:8.3f} s "
                f"{s.rss_kib / 1024:8.0f} MiB  {status}"
            )
            if s.timed_out:
                row.error = f"timeout (>{args.timeout:g} s)"
            elif s.rc != 0:
                tail = err.read_text("utf-8", "replace").strip().splitlines()[-1:] or [""]
                row.error = f"exit {s.rc}: {tail[0][:80]}"
            else:
                collect(tool, row, job, out, python, first=rep == 0)
            if tool.writes_output:
                job.dst.unlink(missing_ok=True)

    for tool in active:
        row = rows[tool.name]
        if row.wall is not None and row.rss_mib is not None:
            history[tool.name] = (n, row.wall, row.rss_mib * 1024)
    for tool in probes:  # one run, killed at --limit: a measured lower bound
        row = rows[tool.name]
        job = Job(path, tmp / f"{tool.name}.out.json", context_length, budget)
        out, err = tmp / f"{tool.name}.stdout", tmp / f"{tool.name}.stderr"
        s = measure(tool.argv(job), out, err, timeout=args.limit, env=tool.env)
        log(f"  probe {tool.name:16s} {s.wall:8.3f} s  {'killed' if s.timed_out else s.rc}")
        row.skipped = None
        if s.timed_out:
            row.at_least = args.limit
        elif s.rc == 0:
            row.samples.append(s)
            collect(tool, row, job, out, python, first=True)
        else:
            row.error = f"exit {s.rc}"
        job.dst.unlink(missing_ok=True)
    return SizeResult(
        n,
        path,
        path.stat().st_size,
        tokens,
        context_length,
        budget,
        [rows[t.name] for t in tools],
        (load_before, os.getloadavg()[0]),
    )


def collect(tool: Tool, row: Row, job: Job, stdout: Path, python: str, *, first: bool) -> None:
    """Record what a successful run produced (kept messages, pairing check, phases)."""
    text = stdout.read_bytes()
    if tool.name.startswith("ctxwin estimate"):
        if first:
            report = orjson.loads(text)
            row.kept = report.get("messages_out")
            row.check = "(dry run)"
        return
    if tool.name == "ctxwin replay":
        if first:
            (run,) = orjson.loads(text)["runs"]
            row.check = f"{run['calls']:,} calls, first pruned at {run['first_pruned'] or '—'}"
        return
    if tool.time_exponent is not None and text.strip():
        row.phases.append(orjson.loads(text.strip().splitlines()[-1]))
    if first and tool.writes_output:
        summary = check_output(python, job.dst)
        row.kept = summary.get("messages")
        row.check = describe_check(summary)


def compile_package(python: str) -> None:
    """Write ctxwin's bytecode, as installing a wheel does: an editable install run
    with PYTHONDONTWRITEBYTECODE would otherwise compile every module at every start."""
    where = subprocess.run(
        [python, "-c", "import ctxwin, os; print(os.path.dirname(ctxwin.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    subprocess.run([python, "-m", "compileall", "-q", where], check=True)


def startup_check(
    ctxwin: list[str], python: str, reps: int, seed: int, baseline: list[str] | None = None
) -> dict[str, list[float]]:
    """``ctxwin estimate`` on a 10-message file vs ``python -c 'import orjson'``.

    With ``baseline`` (another ctxwin command, e.g. an older checkout), its rows are
    timed in the same rounds, so a before/after comparison shares the machine's load.
    """
    tiny = dataset(10, seed)
    tmp = DATA / "out"
    tmp.mkdir(parents=True, exist_ok=True)
    flags = ["estimate", str(tiny), "--context-length", str(STARTUP_CONTEXT)]
    cmds: dict[str, list[str]] = {}
    for label, cmd in [("", ctxwin), (" (baseline)", baseline)]:
        if cmd is not None:
            cmds[f"ctxwin estimate (10 messages) --json{label}"] = [*cmd, *flags, "--json"]
            cmds[f"ctxwin estimate (10 messages), summary{label}"] = [*cmd, *flags]
    cmds["python -c 'import orjson'"] = [python, "-c", "import orjson"]
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for argv in cmds.values():  # warm-up (bytecode caches)
        measure(argv, tmp / "startup.out", tmp / "startup.err", timeout=120)
    for rep in range(reps):
        order = list(cmds.items())
        for name, argv in order[rep % len(order) :] + order[: rep % len(order)]:
            s = measure(argv, tmp / "startup.out", tmp / "startup.err", timeout=120)
            if s.rc != 0:
                sys.exit(f"{name} failed: {(tmp / 'startup.err').read_text()[-2000:]}")
            times[name].append(s.wall)
    return times


# -- rendering ------------------------------------------------------------------------
def fmt_s(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.3f}" if v < 10 else f"{v:.1f}"


def fmt_x(a: float | None, b: float | None, *, bound: bool = False) -> str:
    if a is None or b is None or b == 0:
        return "—"
    return f"> {a / b:.0f}×" if bound else f"{a / b:.2f}×"


def human_n(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def render(
    results: list[SizeResult],
    startup: dict[str, list[float]],
    meta: dict[str, str],
    args: argparse.Namespace,
) -> str:
    lines = ["# ctxwin benchmark results", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items()]
    lines += [
        f"- repetitions: {args.reps} per size"
        f"{f' ({args.peer_reps} for the peers)' if args.peer_reps != args.reps else ''} "
        "(round-robin over tools, rotating order); "
        f"start-up: {args.startup_reps}; all times are whole-process wall seconds, medians",
        "",
        "## Start-up",
        "",
        "| command | median (ms) | min (ms) |",
        "|---|---:|---:|",
    ]
    for name, ts in startup.items():
        lines.append(f"| `{name}` | {statistics.median(ts) * 1000:.1f} | {min(ts) * 1000:.1f} |")
    base_name = "python -c 'import orjson'"
    if base_name in startup:
        base = statistics.median(startup[base_name])
        lines.append("")
        for name, ts in startup.items():
            if name != base_name:
                a = statistics.median(ts)
                lines.append(
                    f"- `{name}` over bare `import orjson`: {(a - base) * 1000:+.1f} ms "
                    f"({a / base:.2f}×)."
                )
    for res in results:
        by = {r.tool: r for r in res.rows}
        prune = by.get("ctxwin prune")
        lines += [
            "",
            f"## {human_n(res.n)} messages — {res.size_bytes / 1e6:.1f} MB, "
            f"~{res.tokens:,} estimated tokens, C = {res.context_length:,}, "
            f"budget = {res.budget:,}",
            "",
            f"Load average (1 min) before / after: {res.load[0]:.2f} / {res.load[1]:.2f} "
            f"on {os.cpu_count()} CPUs.",
            "",
            "| tool | wall median (s) | wall min (s) | peak RSS (MiB) | kept msgs | output check "
            "| × its floor | its floor | × ctxwin prune | notes |",
            "|---|---:|---:|---:|---:|---|---:|---|---:|---|",
        ]
        for r in res.rows:
            floor_name = FLOOR_OF.get(r.tool, "floor")
            floor = by.get(floor_name) or by.get("floor")
            floor_name = floor.tool if floor else "—"
            if r.at_least is not None:
                lines.append(
                    f"| {r.tool} | > {r.at_least:g} (one run, killed) | | | | | "
                    f"{fmt_x(r.at_least, floor.wall if floor else None, bound=True)} | "
                    f"{floor_name} | "
                    f"{fmt_x(r.at_least, prune.wall if prune else None, bound=True)} | "
                    f"time is a lower bound; {r.projection} |"
                )
                continue
            if r.skipped or (r.error and r.wall is None):
                lines.append(f"| {r.tool} | {r.skipped or r.error} | | | | | | | | |")
                continue
            vs_prune = fmt_x(r.wall, prune.wall if prune else None) if r.phases else ""
            notes = []
            if r.phases:
                imp = statistics.median(p["import"] for p in r.phases)
                trim = statistics.median(p["trim"] for p in r.phases)
                notes.append(f"import {fmt_s(imp)} s, trim {fmt_s(trim)} s")
            if r.error:
                notes.append(r.error)
            reps = len([s for s in r.samples if s.rc == 0])
            if reps != (args.peer_reps if r.phases else args.reps):
                notes.append(f"{reps} reps")
            lines.append(
                f"| {r.tool} | {fmt_s(r.wall)} | {fmt_s(r.wall_min)} | "
                f"{r.rss_mib:.0f} | {r.kept if r.kept is not None else '—'} | {r.check or '—'} | "
                f"{fmt_x(r.wall, floor.wall if floor else None)} | {floor_name} | {vs_prune} | "
                f"{'; '.join(notes)} |"
            )
    lines.append("")
    return "\n".join(lines)


def parse_sizes(text: str) -> list[int]:
    return [gen.parse_count(part) for part in text.split(",") if part.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Benchmark ctxwin against the floor and peers.")
    ap.add_argument("--sizes", default="1k,10k,100k", help="message counts (default 1k,10k,100k)")
    ap.add_argument("--reps", type=int, default=11, help="repetitions per size (default 11)")
    ap.add_argument(
        "--peer-reps",
        type=int,
        default=5,
        help="repetitions of the peers, in the first rounds (default 5, at most --reps)",
    )
    ap.add_argument("--startup-reps", type=int, default=21, help="start-up check reps (>=10)")
    ap.add_argument("--ctxwin", help="ctxwin command (default: .venv/bin/ctxwin, else PATH)")
    ap.add_argument(
        "--baseline",
        help="another ctxwin command whose start-up is timed in the same rounds (before/after)",
    )
    ap.add_argument("--python", help="interpreter for the floor (default: ctxwin's)")
    ap.add_argument("--skip-peers", action="store_true", help="don't run langchain/litellm")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fraction", type=float, default=0.5, help="budget / estimated tokens")
    ap.add_argument("--context-length", type=int, help="fixed C instead of --fraction")
    ap.add_argument("--limit", type=float, default=120.0, help="peer skip threshold, seconds")
    ap.add_argument("--timeout", type=float, default=900.0, help="kill a run after this")
    ap.add_argument(
        "--probe",
        type=parse_sizes,
        default=parse_sizes("10k"),
        help="sizes at which a peer skipped by projection still runs once, killed after "
        "--limit seconds, so its time is bounded from below (default 10k; '' for none)",
    )
    ap.add_argument("--litellm-model", default="gpt-4o", help="model litellm counts for")
    ap.add_argument(
        "--only",
        type=lambda text: [t.strip() for t in text.split(",") if t.strip()],
        help="run only these rows, comma-separated (e.g. 'ctxwin replay,floor'; "
        "the peers are set up only when named)",
    )
    ap.add_argument("--out", type=Path, default=BENCH / "results.md")
    args = ap.parse_args(argv)
    args.peer_reps = min(args.peer_reps, args.reps)
    if min(args.reps, args.startup_reps, args.peer_reps) < 1:
        ap.error("--reps, --peer-reps and --startup-reps must be >= 1")

    sizes = parse_sizes(args.sizes)
    ctxwin = resolve_ctxwin(args.ctxwin)
    python = args.python or interpreter_of(ctxwin)
    floor = str(BENCH / "floor.py")

    def ctx_args(job: Job) -> list[str]:
        return ["--context-length", str(job.context_length)]

    tools = [
        Tool(
            "ctxwin estimate",
            lambda j: [*ctxwin, "estimate", str(j.src), *ctx_args(j), "--json"],
            writes_output=False,
        ),
        Tool(
            "ctxwin prune",
            lambda j: [*ctxwin, "prune", str(j.src), str(j.dst), *ctx_args(j)],
            writes_output=True,
        ),
        # The transcript as a recorded run: one provider call per assistant message,
        # each fitted by one manager (incrementally; target: at most 4× the floor).
        Tool(
            "ctxwin replay",
            lambda j: [*ctxwin, "replay", str(j.src), *ctx_args(j), "--json"],
            writes_output=False,
        ),
        Tool("floor", lambda j: [python, floor, str(j.src), str(j.dst)], writes_output=True),
        # Equal work: the floor of a command writes what that command writes (FLOOR_OF).
        Tool(
            "floor (prune's output)",
            lambda j: [python, floor, "--drop", j.drop, str(j.src), str(j.dst)],
            writes_output=True,
        ),
        Tool(
            "floor (parse only)",
            lambda j: [python, floor, "--parse-only", str(j.src), str(j.dst)],
            writes_output=False,
        ),
        # The same floor with the cyclic collector off, as ctxwin runs: a reference
        # row, so the ratios above can be read with and without that difference.
        Tool(
            "floor (gc off)",
            lambda j: [python, floor, "--no-gc", str(j.src), str(j.dst)],
            writes_output=True,
        ),
    ]
    names = [t.name for t in tools] + ["langchain", "litellm"]
    if args.only is not None:
        unknown = [t for t in args.only if t not in names]
        if unknown:
            ap.error(f"--only: no row named {unknown[0]!r}; rows: {', '.join(names)}")
        tools = [t for t in tools if t.name in args.only]
        if not {"langchain", "litellm"} & set(args.only):
            args.skip_peers = True
    compile_package(python)
    meta = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} CPUs, {mem_total_kib() / 2**20:.1f} GiB RAM, "
        f"{platform.system()} {platform.release()}",
        "ctxwin": f"`{shlex.join(ctxwin)}` "
        f"({version_of(python, 'ctxwin')}, Python {platform.python_version()} runner)",
        "floor": f"`{Path(python).name} bench/floor.py` (orjson {version_of(python, 'orjson')})",
    }
    if not args.skip_peers:
        peer_python = str(ensure_peers_venv(sys.executable))
        peers = str(BENCH / "peers.py")
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        tools += [
            Tool(
                "langchain",
                lambda j: [
                    peer_python,
                    peers,
                    "langchain",
                    str(j.src),
                    str(j.dst),
                    "--max-tokens",
                    str(j.budget),
                ],
                writes_output=True,
                time_exponent=1.0,
                env=env,
            ),
            Tool(
                "litellm",
                lambda j: [
                    peer_python,
                    peers,
                    "litellm",
                    str(j.src),
                    str(j.dst),
                    "--max-tokens",
                    str(j.budget),
                    "--model",
                    args.litellm_model,
                ],
                writes_output=True,
                time_exponent=2.0,
                env=env,
            ),
        ]
        if args.only is not None:
            tools = [t for t in tools if t.name in args.only]
        meta["peers"] = (
            f"langchain-core {version_of(peer_python, 'langchain-core')}, "
            f"litellm {version_of(peer_python, 'litellm')} (model `{args.litellm_model}`), "
            f"in bench/.venv-peers"
        )

    log("start-up check")
    baseline = shlex.split(args.baseline) if args.baseline else None
    startup = startup_check(ctxwin, python, args.startup_reps, args.seed, baseline)
    history: dict[str, tuple[int, float, float]] = {}
    results: list[SizeResult] = []
    text = render(results, startup, meta, args)
    for n in sizes:
        results.append(run_size(n, tools, args, ctxwin, python, history))
        text = render(results, startup, meta, args)
        args.out.write_text(text, "utf-8")  # keep partial results if a later size dies
    print(text)
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
