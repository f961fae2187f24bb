"""Time hostile request bodies of doubling sizes through ``ctxwin prune``, ``ctxwin
estimate`` and the proxy's fitting, in-process, and print a Markdown table: the best
time at each size and the largest ratio from one size to the next (2.0 is linear).

Usage::

    .venv/bin/python bench/linear.py                       # 1, 2, 4 and 8 MiB, 3 runs each
    .venv/bin/python bench/linear.py --sizes 256k,512k --reps 5 --only 'nesting'

The bodies are ``tests/adversarial.py``'s: runs of backslashes, quotes, digits or
whitespace, long keys, many numbers, nesting 250 and 1000 levels deep, many turns.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]

from tests import adversarial  # noqa: E402


def _size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20}
    last = text[-1:].lower()
    return int(float(text[:-1]) * units[last]) if last in units else int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1m,2m,4m,8m", help="comma-separated, k/m suffixes")
    parser.add_argument("--reps", type=int, default=3, help="runs per size (the best is kept)")
    parser.add_argument("--ways", default="prune,estimate,fitter")
    parser.add_argument("--only", default="", help="only the kinds whose name holds this")
    args = parser.parse_args()
    sizes = [_size(s) for s in args.sizes.split(",")]
    ways = args.ways.split(",")
    kinds = [k for k in adversarial.KINDS if args.only in k]
    head = [f"{n >> 10} KiB" for n in sizes]
    print(f"| body | way | {' | '.join(head)} | largest ratio per doubling |")
    print(f"|---|---|{'---:|' * len(sizes)}---:|")
    with tempfile.TemporaryDirectory(prefix="ctxwin-linear-") as tmp:
        for kind in kinds:
            for way in ways:
                times, _ = adversarial.best_times(kind, way, sizes, Path(tmp), args.reps)
                ratio = max((b / a for a, b in itertools.pairwise(times)), default=0.0)
                cells = " | ".join(f"{t * 1000:,.1f} ms" for t in times)
                print(f"| {kind} | {way} | {cells} | {ratio:.2f} |", flush=True)


if __name__ == "__main__":
    main()
