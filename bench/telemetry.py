"""What seeing a fit costs: the manager's send path (logs and spans) against the fit alone.

An agent loop of ``--calls`` calls (each a tool call and a ~``--result``-byte result,
the history growing object for object, as a loop does) is fitted at a window it
outgrows, so most fits drop turns. Each call learns from a usage report, then fits:

* ``fit alone``: :meth:`ContextWindowManager.evaluate` (what replays use: nothing is seen);
* ``no opentelemetry``: :meth:`~ContextWindowManager.before_send` with
  ``opentelemetry`` not importable, logging not configured (the INFO records are not
  built: no logger is enabled for them);
* ``API, no SDK``: the same with ``opentelemetry-api`` installed and no tracer provider
  set (no exporter configured: no span is made);
* ``in-memory exporter``: an SDK tracer provider with a ``SimpleSpanProcessor`` into an
  ``InMemorySpanExporter``: a span per fit, its attributes and edit events;
* ``INFO logged``: no SDK, a ``logging`` handler at INFO on the ``ctxwin`` logger writing
  JSON-ready records to a string (the records built and formatted).

Each mode runs in its own interpreter (the global tracer provider is set once per
process), ``--rounds`` times in turn; each run times ``--reps`` loops after one that warms
up (its first fit imports ``logging`` and ``opentelemetry``). In each loop two managers
fit the same requests call by call, in turn: one by ``evaluate`` (the fit alone), one by
the mode's send path, so both see the same load. The table shows, over every fit timed,
the median time of each, the median of what the send path adds to the same call's fit
(in µs and as a share of it), the middle half of those shares (a garbage collection
or the machine's other work lands on single calls: medians, not means), and the median
added to the fits that changed the request (the only ones with an INFO record or an
edit event).
The load average before and after is printed, as the machine may be shared.

    .venv/bin/python bench/telemetry.py                 # 300 calls, 5 rounds of 3 loops
    .venv/bin/python bench/telemetry.py --calls 100 --rounds 3

Part of ``make bench`` (``make bench-telemetry``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

MODES = {
    "evaluate": "fit alone",  # timed beside every other mode, in its loop
    "absent": "no opentelemetry",
    "api": "API, no SDK",
    "memory": "in-memory exporter",
    "logged": "INFO logged",
}

WORKER = r"""
import io, json, logging, sys, time
mode, calls, reps, result, window = sys.argv[1], *map(int, sys.argv[2:6])
if mode == "absent":
    sys.modules["opentelemetry"] = None
if mode == "memory":
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
if mode == "logged":
    handler = logging.StreamHandler(io.StringIO())
    logging.getLogger("ctxwin").addHandler(handler)
    logging.getLogger("ctxwin").setLevel(logging.INFO)
import ctxwin

text = "".join(f"line {i}: value = {i * 7}\n" for i in range(result // 20))[:result]
head = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix it."},
]
steps = []
for i in range(calls):
    fn = {"name": "read", "arguments": '{"p": 1}'}
    call = {"id": f"c{i}", "type": "function", "function": fn}
    steps.append([{"role": "assistant", "content": None, "tool_calls": [call]},
                  {"role": "tool", "tool_call_id": f"c{i}", "content": f"{i} {text}"}])
clock = time.perf_counter_ns
alone, seen, changed, marks = [], [], 0, []
for rep in range(reps + 1):  # the first loop warms up (imports logging, opentelemetry)
    # two managers over the same loop, timed call by call in turn: the fit alone
    # (evaluate, what replays use) and the send path (before_send: logs, spans)
    quiet = ctxwin.ContextWindowManager("gpt-4o", context_length=window, max_tokens=1000)
    sent = ctxwin.ContextWindowManager("gpt-4o", context_length=window, max_tokens=1000)
    history = list(head)
    usage = None
    spent = [0, 0]
    raw = [0, 0]  # each manager learns against the raw estimate of what it sent
    for i in range(calls):
        history = history + steps[i]
        request = {"model": "gpt-4o", "messages": history}
        order = (0, 1) if i % 2 else (1, 0)
        for which in order:
            m = sent if which else quiet
            t = clock()
            if usage is None:
                m.reset()
            else:
                m.observe(usage, raw_tokens=raw[which])
            p = m.before_send(request) if which else m.evaluate(request)
            spent[which] = clock() - t
            raw[which] = p.raw_tokens_sent
        if rep:
            changed += p.changed
            marks.append(p.changed)
            alone.append(spent[0])
            seen.append(spent[1])
        usage = {"prompt_tokens": p.estimated_tokens_after}
        if p.changed:  # the loop goes on from what was sent, as a loop does
            history = list(p.request["messages"])
if mode == "memory":
    assert len(exporter.get_finished_spans()) == calls * (reps + 1)
out = {"alone_ns": alone, "seen_ns": seen, "changed_at": marks, "changed": changed / reps}
print(json.dumps(out))
"""


def run_mode(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            WORKER,
            mode,
            str(args.calls),
            str(args.reps),
            str(args.result),
            str(args.window),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{mode}: {proc.stderr.strip()}")
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300, help="calls per loop")
    ap.add_argument("--reps", type=int, default=3, help="loops per run")
    ap.add_argument("--rounds", type=int, default=5, help="runs of each mode, in turn")
    ap.add_argument("--result", type=int, default=2400, help="bytes per tool result")
    ap.add_argument("--window", type=int, default=32_000, help="the context window")
    ap.add_argument("--out", type=Path, default=None, help="write the Markdown table here too")
    args = ap.parse_args(argv)
    load_before = os.getloadavg()
    modes = [m for m in MODES if m != "evaluate"]
    alone: dict[str, list[float]] = {m: [] for m in modes}
    seen: dict[str, list[float]] = {m: [] for m in modes}
    marks: dict[str, list[bool]] = {m: [] for m in modes}
    changed = 0.0
    started = time.perf_counter()
    for _ in range(args.rounds):
        for mode in modes:
            got = run_mode(mode, args)
            alone[mode] += [ns / 1000 for ns in got["alone_ns"]]
            seen[mode] += [ns / 1000 for ns in got["seen_ns"]]
            marks[mode] += got["changed_at"]
            changed = got["changed"]
    seconds = time.perf_counter() - started
    load_after = os.getloadavg()
    lines = [
        f"{args.calls} calls per loop, ~{args.result:,}-byte results, a {args.window:,}-token "
        f"window ({changed:.0f} fits of each loop drop turns); per mode {args.rounds} runs of "
        f"{args.reps} loops of {args.calls} fits, each beside the fit alone; Python "
        f"{platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; load "
        f"average {load_before[0]:.2f} before, {load_after[0]:.2f} after ({seconds:.0f} s).",
        "",
        "| mode | fit alone (µs) | with it (µs) | added per fit | middle half of the fits "
        "| added to a fit that changed the request |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for mode in modes:
        a, b = statistics.median(alone[mode]), statistics.median(seen[mode])
        added = sorted(y - x for x, y in zip(alone[mode], seen[mode], strict=True))
        share = sorted(100 * (y / x - 1) for x, y in zip(alone[mode], seen[mode], strict=True))
        q1, q3 = share[len(share) // 4], share[3 * len(share) // 4]
        pairs = zip(alone[mode], seen[mode], marks[mode], strict=True)
        on_changed = [(x, y) for x, y, c in pairs if c]
        more = statistics.median(y - x for x, y in on_changed)
        of = statistics.median(100 * (y / x - 1) for x, y in on_changed)
        lines.append(
            f"| {MODES[mode]} | {a:.1f} | {b:.1f} | {statistics.median(added):+.1f} µs "
            f"({statistics.median(share):+.1f} %) | {q1:+.1f} to {q3:+.1f} % "
            f"| {more:+.1f} µs ({of:+.1f} %) |"
        )
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        args.out.write_text(
            "# What seeing a fit costs (`bench/telemetry.py`)\n\n" + text + "\n", encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
