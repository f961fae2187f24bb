"""Re-derive :class:`ctxwin.tokens.ContentEstimator`'s weights from the data.

    python -m fidelity.fit [--corpus DIR]

For every stress sample and every corpus transcript it counts the UTF-8 bytes
of each class the estimator distinguishes (over every string the adapter
counts) and the real tokens of all four encodings (as :mod:`fidelity.run`
defines them). Then, for every combination of extra steps on a grid, it
takes the smallest per-byte base that keeps the estimate at or above
``--stress-margin`` (1.05) × the largest real count on every stress sample
and ``--transcript-margin`` (1.01) × on every transcript, and at or above
reported ÷ the model family's calibration seed on every provider-reported call
of the fit part (:func:`fidelity.corpus.split`; the held-out part is not used),
with a 2-byte character costing at least one token, and prints the combinations with the
lowest median estimate ÷ o200k_base count, and how the current weights fare.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ctxwin.fitting.pruning import total_cost
from ctxwin.formats import get_adapter
from ctxwin.tokens.base import Kind
from ctxwin.tokens.bpe import TOKENIZERS
from ctxwin.tokens.content import _BYTE, _STEP, EXTRA_STEPS, SCALE, ContentEstimator
from ctxwin.tokens.framing import provider_framing
from ctxwin.tokens.registry import default_calibration
from fidelity import corpus, stress
from fidelity.run import RealCount, count

CLASSES = ("upper", "digit", "punct", "cont", "lead2", "lead3", "lead4")
STRESS_MARGIN = 1.05
TRANSCRIPT_MARGIN = 1.01
GRID = {
    "upper": range(7, 12),
    "digit": range(14, 19),
    "punct": range(1, 4),
    "cont": range(2, 5),
    "lead2": range(0, 9, 2),
    "lead3": range(0, 5, 2),
    "lead4": range(8, 21, 4),
}


def _class_table() -> bytes:
    table = bytearray(b"a" * 256)
    spans = {
        "upper": range(ord("A"), ord("Z") + 1),
        "digit": range(ord("0"), ord("9") + 1),
        "cont": range(0x80, 0xC0),
        "lead2": range(0xC0, 0xE0),
        "lead3": range(0xE0, 0xF0),
        "lead4": range(0xF0, 0x100),
    }
    for c in [*b"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", *range(0x20), 0x7F]:
        table[c] = ord("p")
    for i, name in enumerate(CLASSES):
        for c in spans.get(name, ()):
            table[c] = ord("0") + i
    return bytes(table)


TABLE = _class_table()
MARK = {name: bytes([ord("0") + i]) for i, name in enumerate(CLASSES)}
MARK["punct"] = b"p"


class _Features:
    """An estimator that records byte-class counts instead of pricing."""

    name = "features"
    width = 1 + 1 + len(CLASSES)

    def __init__(self) -> None:
        base = ContentEstimator()
        self.per_message = base.per_message
        self.per_tool_call = base.per_tool_call

    def add_text(self, cost: list[int], text: str, kind: Kind) -> None:
        self.add_bytes(cost, text.encode("utf-8", "surrogatepass"), kind)

    def add_bytes(self, cost: list[int], data: bytes, kind: Kind) -> None:
        t = data.translate(TABLE)
        cost[1] += len(data)
        for i, name in enumerate(CLASSES):
            cost[2 + i] += t.count(MARK[name])

    def raw(self, totals: Sequence[int]) -> int:
        return 0

    def framing(self, fmt: str, *, has_tools: bool, model: str | None = None) -> int:
        return provider_framing(fmt, has_tools=has_tools, model=model)

    def seed(self, model: str | None = None) -> float:
        return 1.0


def features(body: Any, fmt: str = "auto") -> list[int]:
    return total_cost(get_adapter(body, fmt).read(body, _Features()))


def provider_rows(root: Path | None, held: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Features of every provider-reported request of the fit part
    (:func:`fidelity.corpus.split`; the held-out part, with ``held``, is only
    measured, never fitted on), and reported ÷ calibration seed."""
    xs: list[list[int]] = []
    ts: list[float] = []
    if root is not None:
        for u in corpus.split(corpus.usages(root))[held]:
            xs.append(features(u.body, u.fmt))
            ts.append(u.reported / default_calibration("content", u.model))
    return np.array(xs, float), np.array(ts, float)


def collect(root: Path | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    reals = [RealCount(e) for e in TOKENIZERS]
    xs, rs, xt, rt = [], [], [], []
    for texts in stress.samples().values():
        for text in texts:
            body = {"messages": [{"role": "user", "content": text}]}
            xs.append(features(body))
            rs.append([count(body, r) for r in reals])
    if root is not None:
        for t in corpus.transcripts(root):
            xt.append(features(t.body))
            rt.append([count(t.body, r) for r in reals])
    return np.array(xs, float), np.array(rs, float), np.array(xt, float), np.array(rt, float)


def search(
    whole: np.ndarray,
    nbytes: np.ndarray,
    extra: np.ndarray,
    target: np.ndarray,
    tr: slice,
    rt: np.ndarray,
    use: np.ndarray | None = None,
) -> list[tuple[float, float, dict[str, int]]]:
    """Every grid point with its smallest base, sorted by median ÷ o200k on ``tr``.

    ``use`` selects the rows that constrain the fit (all by default); the median
    is taken over the transcripts ``tr`` selected by ``use`` too.
    """
    step = _STEP / SCALE
    rows = np.ones(len(whole), bool) if use is None else use
    t_use = rows[tr]
    results = []
    for combo in itertools.product(*(GRID[c] for c in CLASSES)):
        steps = dict(zip(CLASSES, combo, strict=True))
        if 2 * (_BYTE / SCALE) + (steps["cont"] + steps["lead2"]) * step < 1.0:
            continue
        e = np.array(combo, float) * step
        need = (target - whole - extra @ e) / np.maximum(nbytes, 1)
        base = math.ceil(need[rows].max() * SCALE) / SCALE
        est = np.ceil(whole[tr] + nbytes[tr] * base + extra[tr] @ e)
        median = float(np.median((est / rt[:, 0])[t_use])) if t_use.any() else float("nan")
        results.append((median, base, steps))
    results.sort(key=lambda r: r[0])
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fidelity.fit", description=__doc__)
    parser.add_argument("--corpus", type=Path, default=None)
    parser.add_argument("--top", type=int, default=5)
    parser.add_argument("--stress-margin", type=float, default=STRESS_MARGIN)
    parser.add_argument("--transcript-margin", type=float, default=TRANSCRIPT_MARGIN)
    parser.add_argument(
        "--holdout",
        action="store_true",
        help="also fit on every other transcript and test on the rest, both ways",
    )
    args = parser.parse_args(argv)
    root = args.corpus or corpus.corpus_dir()
    xs, rs, xt, rt = collect(root)
    xp, tp = provider_rows(root)
    rows = np.vstack([xs, xt, *([xp] if len(xp) else [])])
    target = np.concatenate(
        [rs.max(1) * args.stress_margin, rt.max(1) * args.transcript_margin, tp]
    )
    whole, nbytes, extra = rows[:, 0], rows[:, 1], rows[:, 2:]
    step = _STEP / SCALE
    tr = slice(len(xs), len(xs) + len(xt))
    results = search(whole, nbytes, extra, target, tr, rt)
    results.sort(key=lambda r: r[0])
    out = sys.stdout
    cur = np.array([EXTRA_STEPS[c] for c in CLASSES], float) * step
    est = np.ceil(whole + nbytes * (_BYTE / SCALE) + extra @ cur)
    real = np.concatenate([rs.max(1), rt.max(1), tp])
    ratio = est / real
    n_s, n_t = len(xs), len(xs) + len(xt)
    out.write(
        f"{len(xs)} stress samples, {len(xt)} transcripts, {len(xp)} provider calls "
        "(the fit part); "
        f"margins: stress {args.stress_margin}, transcripts {args.transcript_margin}\n"
        f"current: base {_BYTE / SCALE}, steps {EXTRA_STEPS}: median ÷ o200k "
        f"{np.median(est[n_s:n_t] / rt[:, 0]):.4f}; lowest estimate ÷ real: stress "
        f"{ratio[:n_s].min():.4f}, transcripts {ratio[n_s:n_t].min():.4f}, provider calls "
        f"(÷ reported/seed) {ratio[n_t:].min() if len(xp) else float('nan'):.4f}\n"
    )
    xh, th = provider_rows(root, held=True)
    if len(xh):
        est_h = np.ceil(xh[:, 0] + xh[:, 1] * (_BYTE / SCALE) + xh[:, 2:] @ cur)
        out.write(
            f"held-out part, {len(xh)} provider calls (not fitted on): lowest estimate ÷ "
            f"(reported/seed) {(est_h / th).min():.4f}, under-counts {(est_h < th).sum()}\n"
        )
    for median, base, steps in results[: args.top]:
        out.write(f"median ÷ o200k {median:.4f}  base {base:.4f}  steps {steps}\n")
    if args.holdout:
        for parity in (0, 1):
            held = np.arange(len(xt)) % 2 != parity
            fit_rows = np.ones(len(rows), bool)
            fit_rows[tr] = ~held
            median, base, steps = search(whole, nbytes, extra, target, tr, rt, fit_rows)[0]
            e = np.array([steps[c] for c in CLASSES], float) * step
            est = np.ceil(whole[tr] + nbytes[tr] * base + extra[tr] @ e)
            low = (est / rt.max(1))[held]
            out.write(
                f"holdout: fit on {'even' if parity == 0 else 'odd'} transcripts -> base "
                f"{base:.4f} steps {steps}; held-out {held.sum()}: lowest ÷ largest real "
                f"{low.min():.4f}, under-counts {(low < 1).sum()}, median ÷ o200k "
                f"{np.median((est / rt[:, 0])[held]):.4f}\n"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
