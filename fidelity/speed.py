"""Estimator speed against ``orjson.loads`` on one transcript.

    python -m fidelity.speed FILE.json [--reps 7]

Collects every string the adapter hands the estimator, then times, in
alternation, ``orjson.loads`` of the file and one pass of each estimator over
those strings, and prints the best time of each and its ratio to
``orjson.loads``. Alternating and taking the best of several repetitions keeps
the ratio meaningful on a busy machine; the garbage collector is paused while
timing (otherwise it charges ``orjson.loads`` for the strings held here).
Generate a ~70 MB transcript with
``python bench/gen.py --messages 100000 --seed 1 OUT.json``.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from ctxwin.core import load
from ctxwin.tokens.base import Estimator, Kind
from ctxwin.tokens.registry import get_estimator


class _Collect:
    name = "collect"
    width = 1
    per_message = 0
    per_tool_call = 0

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.blobs: list[bytes] = []

    def add_text(self, cost: list[int], text: str, kind: Kind) -> None:
        self.texts.append(text)

    def add_bytes(self, cost: list[int], data: bytes, kind: Kind) -> None:
        self.blobs.append(data)

    def raw(self, totals: Sequence[int]) -> int:
        return 0

    def framing(self, fmt: str, *, has_tools: bool, model: str | None = None) -> int:
        return 0

    def seed(self, model: str | None = None) -> float:
        return 1.0


def _pass(est: Estimator, texts: list[str], blobs: list[bytes]) -> Callable[[], Any]:
    def run() -> None:
        cost = [0] * est.width
        add = est.add_text
        kind = Kind.DENSE
        for t in texts:
            add(cost, t, kind)
        for b in blobs:
            est.add_bytes(cost, b, kind)

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fidelity.speed", description=__doc__)
    parser.add_argument("file", type=Path)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--estimator", action="append", default=None)
    args = parser.parse_args(argv)
    data = args.file.read_bytes()
    collect = _Collect()
    load(orjson.loads(data), estimator=collect)
    nbytes = sum(len(t.encode("utf-8", "surrogatepass")) for t in collect.texts)
    nbytes += sum(map(len, collect.blobs))
    runs: dict[str, Callable[[], Any]] = {"orjson.loads": lambda: orjson.loads(data)}
    for name in args.estimator or ["seed", "content"]:
        runs[name] = _pass(get_estimator(name), collect.texts, collect.blobs)
    best = dict.fromkeys(runs, float("inf"))
    gc.collect()
    gc.disable()  # the collector would charge orjson.loads for the strings held here
    for _ in range(args.reps):
        for name, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    gc.enable()
    base = best["orjson.loads"]
    out = sys.stdout
    out.write(
        f"{args.file.name}: {len(data) / 1e6:.1f} MB, {len(collect.texts):,} strings "
        f"({nbytes / 1e6:.1f} MB) handed to the estimator; best of {args.reps}\n"
    )
    for name, secs in best.items():
        out.write(
            f"  {name:14s} {secs:7.3f} s  {secs / base:5.2f}× orjson.loads  "
            f"{secs / nbytes * 1e9:6.2f} ns per estimated byte\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
