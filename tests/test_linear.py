"""Every pass over a body is linear in its size: hostile bodies (tests/adversarial.py)
through ``ctxwin prune``, ``ctxwin estimate`` and the proxy's fitting take at most
twice as long when they are twice as large.

A quadratic pass shows as 4x per doubling once it dominates (the backslash runs of
``codec._unescaped_quotes`` once took 0.96 / 3.0 / 12.0 s at 20k / 40k / 80k). Times
are the best of several runs, the sizes of a pair run in turn, and a pair over the
bound is measured again (at most :data:`ATTEMPTS` times), so a busy machine does not
fail a linear pass; the bound has :data:`NOISE` of margin for the same reason.

The default suite doubles 128 KiB (prune and the proxy's fitting, every kind).
``CTXWIN_LINEAR_MAX_BYTES=8388608`` (``make fuzz``) doubles every size from 1 MiB up
to it, through estimate too.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import orjson
import pytest

from tests import adversarial

MAX_BYTES = int(os.environ.get("CTXWIN_LINEAR_MAX_BYTES", "0"))
"""0: the default suite's sizes; else the largest size doubled to."""

SIZES = (
    [128 << 10, 256 << 10]
    if not MAX_BYTES
    else [n for n in (1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20) if n <= MAX_BYTES]
)
WAYS = ["prune", "fitter"] if not MAX_BYTES else ["prune", "estimate", "fitter"]
REPS = 3 if not MAX_BYTES else 2
ATTEMPTS = 3
NOISE = 1.25
"""Margin over 2x per doubling for the noise of a shared machine."""
BOUND = 2 * NOISE

EXPECTED = {"prune": 0, "estimate": 0, "fitter": "pruned"}
"""What each way returns for these bodies: every one is fitted by dropping its old
turn (prune and estimate exit 0, the proxy prunes), so the slowest path runs."""


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("linear")


@pytest.mark.parametrize("kind", list(adversarial.KINDS))
def test_bodies_are_valid_json_of_the_size_asked(kind: str) -> None:
    data = adversarial.body(kind, 100_000)
    orjson.loads(data)
    assert 90_000 <= len(data) <= 101_000, len(data)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("kind", list(adversarial.KINDS))
def test_time_is_linear_in_size(kind: str, way: str, tmp: Path) -> None:
    ratios: list[list[float]] = []
    for _ in range(ATTEMPTS):
        times, results = adversarial.best_times(kind, way, SIZES, tmp, REPS)
        assert results == [EXPECTED[way]] * len(SIZES), results
        ratios.append([b / a for a, b in itertools.pairwise(times)])
        pairs = zip(SIZES, times, strict=True)
        shown = ", ".join(f"{n >> 10} KiB {t * 1000:.1f} ms" for n, t in pairs)
        print(f"{kind} / {way}: {shown}; per doubling x{max(ratios[-1]):.2f}")
        if max(ratios[-1]) <= BOUND:
            return
    pytest.fail(f"{kind} / {way}: time per doubling {ratios} (bound {BOUND})")
