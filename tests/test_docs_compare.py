"""docs/strategies.md's ``replay --compare`` tables are what ``python -m fidelity.compare``
prints: the runs it writes are the ones in ``examples/``; the tables themselves are
regions of the doc and ``fidelity/compare.md`` a generated file, which
``tests/test_figures.py`` writes again and compares. What the doc says of them is checked
here on the figures the commands print."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from fidelity import compare
from tests import figures

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def printed() -> list[dict[str, Any]]:
    return figures.compared()


def test_the_runs_are_what_the_script_writes() -> None:
    for path, data in compare.runs().items():
        assert (ROOT / path).read_bytes() == data, path


def _row(result: dict[str, Any], policy: str) -> dict[str, Any]:
    rows: list[dict[str, Any]] = [r for r in result["policies"] if r["policy"] == policy]
    (row,) = rows
    return row


def test_what_the_doc_says_of_the_tables(printed: list[dict[str, Any]]) -> None:
    by_title = {title: r for (title, _, _), r in zip(compare.COMMANDS, printed, strict=True)}
    chat = by_title["the default steps (drop-turns)"]
    cleared = by_title["clearing before dropping"]
    unmarked = by_title["Anthropic, the run's own marks (none)"]
    marked = by_title["Anthropic, with --cache-mark"]
    cost = "input_cost"
    # the block cut is cheaper than just-fit, a larger share costs less and sends less;
    # clearing in batches reads more from the cache
    shares = chat["policies"]
    assert [r["policy"] for r in shares] == compare.POLICIES.split(",")
    for smaller, larger in pairwise(shares):
        assert larger[cost] < smaller[cost]
        assert larger["mean_tokens_sent"] < smaller["mean_tokens_sent"]
    assert _row(cleared, "block=0.45")["cached_tokens"] > _row(cleared, "just-fit")["cached_tokens"]
    # an Anthropic run without marks reads nothing; with the mark, just-fit pays for writes
    # no call reads, and the block cut costs a fraction
    assert all(r["cached_tokens"] == 0 for r in unmarked["policies"])
    assert _row(marked, "just-fit")[cost] > _row(unmarked, "just-fit")[cost]
    assert _row(marked, "block=0.45")[cost] < _row(unmarked, "block=0.45")[cost] / 2
