"""Shared helpers for the wire-format tests: fixtures, the corpus, reports."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxwin import core
from ctxwin.cli.report import REPORT_KEYS
from ctxwin.fitting.pruning import segment

FIXTURES = Path(__file__).parent / "fixtures"
CASSETTES = (
    Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "pydantic_ai_cassettes"
)


def fixture(name: str) -> Any:
    return orjson.loads((FIXTURES / name).read_bytes())


def cassette_bodies(url_part: str) -> Iterator[tuple[str, Any]]:
    """``(label, request body)`` of every recorded request whose URL contains ``url_part``.

    Skips the calling test when the corpus is absent.
    """
    if not CASSETTES.is_dir():
        pytest.skip("corpus not available")
    found = False
    for path in sorted(CASSETTES.glob("*.json")):
        data = orjson.loads(path.read_bytes())
        for k, interaction in enumerate(data["interactions"]):
            request = interaction["request"]
            if url_part in request.get("uri", "") and request.get("parsed_body") is not None:
                found = True
                yield f"{path.stem}[{k}]", request["parsed_body"]
    if not found:
        pytest.skip(f"no {url_part} requests in the corpus")


def check_report(stdout: str, fmt: str) -> dict[str, Any]:
    report: dict[str, Any] = orjson.loads(stdout)
    assert list(report)[: len(REPORT_KEYS)] == list(REPORT_KEYS)
    assert report["format"] == fmt
    return report


def floor_and_total(body: Any) -> tuple[int, int]:
    """Raw token estimates of the floor (head + newest unit) and of the whole body."""
    t = core.load(body)
    view = t.view
    seg = segment(view.items)
    last_unit = seg.turn_starts[seg.unit_starts[-1]] if seg.unit_starts else len(view.items)
    keep = list(range(seg.head_end)) + list(range(last_unit, len(view.items)))
    total = list(view.base)
    floor = list(view.base)
    for i, item in enumerate(view.items):
        for k, v in enumerate(item.cost):
            total[k] += v
            if i in keep:
                floor[k] += v
    return t.estimator.raw(floor), t.estimator.raw(total)


def squeeze(body: Any) -> tuple[Any, core.Plan]:
    """Prune ``body`` to a window between its floor and its full size, so something goes."""
    floor, total = floor_and_total(body)
    context = int((floor + (total - floor) * 0.5) * 1.15 / 0.97) + 2
    p = core.plan(core.load(body), context_length=context, max_tokens=0, calibration=1.15)
    return p.output(), p
