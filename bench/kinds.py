"""What the bound costs by kind of text: each line pool of ``bench/gen.py`` priced cold.

    python bench/kinds.py [--lines 3000] [--reps 3]

For each pool (prose, code, logs, hex, CJK/Cyrillic/emoji, base64), ``--lines`` lines are
priced one string a line by the bound (``ctxwin.tokens.bound``) with its memos emptied
first, and by ``content``; the table gives MB/s, the median of ``--reps`` rounds taken in
turn. Then the runs of non-ASCII letters of the CJK pool and of random text in seven
scripts are cut with the vocabulary's letter spans and without them (every part length
tried), in turn, to show what the spans spare (the parts are the same: checked here too).
Timings of one process on the machine it runs on; Markdown on stdout.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gen  # bench/gen.py

from ctxwin.tokens import bound, vocabulary
from ctxwin.tokens.content import _cost
from ctxwin.tokens.vocabulary import bound_vocabulary

POOLS = {
    "prose": gen._prose_lines,
    "code": gen._code_lines,
    "logs": gen._log_lines,
    "hex": gen._hex_lines,
    "CJK, Cyrillic and emoji": gen._intl_lines,
    "base64": gen._b64_lines,
}


def _forget() -> None:
    """Empty the bound's memos, so the next pricing is cold."""
    bound._PIECE.clear()
    bound._RUN_MEMO.clear()
    for memo in (bound._OPENING_CHUNK, bound._SPACED_CHUNK):
        memo.clear()
        memo[b""] = 0
        memo.long.clear()
        memo.long_bytes = 0


def _rate(lines: list[bytes], price: Callable[[bytes], int], cold: bool) -> float:
    if cold:
        _forget()
    start = time.perf_counter()
    for line in lines:
        price(line)
    return sum(map(len, lines)) / (time.perf_counter() - start) / 1e6


def _letter_runs(lines: list[bytes], seed: int) -> list[str]:
    """The runs the bound cuts by parts in ``lines``, and runs of random letters of seven
    scripts (alone, after a space, after a parenthesis)."""
    runs: set[str] = set()
    cut = bound._cut_letter_run

    def spy(text: str, vocab: object) -> list[bytes]:
        runs.add(text)
        return cut(text, vocab)

    _forget()
    bound._cut_letter_run = spy
    try:
        for line in lines:
            bound._bound_cents(line)
    finally:
        bound._cut_letter_run = cut
    rng = random.Random(seed)
    blocks = [(0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0x0E01, 0x0E3A), (0x0430, 0x044F)]
    blocks += [(0x3041, 0x30FF), (0x0620, 0x064A), (0x0905, 0x0939)]
    for _ in range(2000):
        lo, hi = rng.choice(blocks)
        text = "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 30)))
        text = "".join(c for c in text if unicodedata.category(c)[0] in "LM") or "한"
        runs.update((text, " " + text, "(" + text))
    return sorted(runs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=3000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    pools = {k: [line.encode() for line in f(rng, args.lines)] for k, f in POOLS.items()}
    rates: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in pools}
    for _ in range(args.reps):
        for name, lines in pools.items():
            rates[name][0].append(_rate(lines, bound._bound_cents, cold=True))
            rates[name][1].append(_rate(lines, _cost, cold=False))
    out = [
        f"Cold pricing, {args.lines:,} lines a pool, median of {args.reps} (MB/s):",
        "",
        "| pool | MB | bound | content |",
        "|---|---:|---:|---:|",
    ]
    for name, lines in pools.items():
        b, c = (statistics.median(r) for r in rates[name])
        out.append(f"| {name} | {sum(map(len, lines)) / 1e6:.2f} | {b:.1f} | {c:.1f} |")
    runs = _letter_runs(pools["CJK, Cyrillic and emoji"], args.seed)
    vocab = bound_vocabulary()
    spans = vocabulary.letter_spans_of
    times: dict[str, list[float]] = {"with": [], "without": []}
    parts: dict[str, list[list[bytes]]] = {}
    for _ in range(args.reps):
        for which in ("with", "without"):
            bound.letter_spans_of = spans if which == "with" else lambda v: None
            start = time.perf_counter()
            parts[which] = [bound._cut_letter_run(run, vocab) for run in runs]
            times[which].append(time.perf_counter() - start)
    bound.letter_spans_of = spans
    if parts["with"] != parts["without"]:
        sys.exit("the letter spans changed a run's parts")
    out += [
        "",
        f"Cutting {len(runs):,} runs of non-ASCII letters, median of {args.reps}: "
        f"{statistics.median(times['without']):.2f} s trying every part length, "
        f"{statistics.median(times['with']):.2f} s within the letter spans (same parts).",
    ]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
