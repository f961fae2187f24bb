"""The figures set from provider calls: derived from the fit part only (fidelity.provider).

The shipped constants are compared with what ``python -m fidelity.provider`` wrote to
fidelity/provider.md; with the corpus, the file is compared with a fresh derivation.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from ctxwin.formats.anthropic import TOOL_SEARCH_TOKENS
from ctxwin.tokens.framing import OPENAI_REASONING_PREAMBLE, OPENAI_TOOLS_PREAMBLE
from ctxwin.tokens.registry import get_estimator
from ctxwin.tokens.seeds import BOUND_MODEL_CALIBRATION, CLAUDE_NEXT_SEED, MODEL_CALIBRATION
from fidelity import corpus, provider
from fidelity.run import count

WRITTEN = Path(provider.__file__).resolve().parent / "provider.md"
HAS_BPE = importlib.util.find_spec("quicktok") is not None

SHIPPED: dict[str, Any] = {
    "MODEL_CALIBRATION": dict(MODEL_CALIBRATION),
    "BOUND_MODEL_CALIBRATION": dict(BOUND_MODEL_CALIBRATION),
    "CLAUDE_NEXT_SEED": CLAUDE_NEXT_SEED,
    "OPENAI_REASONING_PREAMBLE": OPENAI_REASONING_PREAMBLE,
    "OPENAI_TOOLS_PREAMBLE": OPENAI_TOOLS_PREAMBLE,
    "TOOL_SEARCH_TOKENS": TOOL_SEARCH_TOKENS,
}
"""Each figure of the report → the constant it ships as (a seed table by family)."""


def _value(cell: str) -> float | None:
    return None if cell == "—" else float(cell)


def _shipped(row: dict[str, str]) -> float:
    found = SHIPPED[row["figure"]]
    return float(found.get(row["family"], 1.0)) if isinstance(found, dict) else float(found)


def test_the_shipped_figures_are_what_the_fit_part_derives() -> None:
    rows = provider.read_figures(WRITTEN)
    assert {r["figure"] for r in rows} == set(SHIPPED)
    for row in rows:
        shipped = _shipped(row)
        assert _value(row["shipped"]) == shipped, row
        derived = _value(row["from the fit part"])
        assert derived is None or derived == shipped, row
        assert row["held-out beyond"] == "0", row


def test_every_seed_row_rests_on_fit_calls_of_its_family() -> None:
    """A row of a seed table is a family the fit part derived it for (or another spelling
    of one: ``llama4`` of ``llama-4``)."""
    rows = provider.read_figures(WRITTEN)
    for label, table in (provider.SEED_TABLES["content"], provider.SEED_TABLES["bound"]):
        derived = {
            r["family"].replace("-", ""): r
            for r in rows
            if r["figure"] == label and int(r["fit calls"]) > 0
        }
        for family, _ in table:
            assert family.replace("-", "") in derived, (label, family)


def test_round_up_keeps_exact_steps() -> None:
    assert provider.round_up(1.3224) == 1.35
    assert provider.round_up(1.35) == 1.35
    assert provider.round_up(1.1598) == 1.2
    assert provider.round_up(1.0001) == 1.05


def _deepseek(run: str, text: str, reported: int) -> corpus.Usage:
    body = {"model": "deepseek-chat", "messages": [{"role": "user", "content": text}]}
    return corpus.Usage("src", run, "openai-chat", "deepseek-chat", body, reported, run)


def test_a_held_out_call_never_moves_a_seed() -> None:
    """However far the held-out calls are from the estimate, the seed is the fit part's;
    the held-out calls beyond it are counted, each an under-count."""
    text = "the quick brown fox jumps over the lazy dog " * 20
    est = get_estimator("content")
    raw = count({"messages": [{"role": "user", "content": text}]}, est, "openai-chat")
    calls = [_deepseek(f"run-{k}", text, round(raw * 1.26)) for k in range(4)]
    fit, held = corpus.split(calls)
    assert len(fit) == len(held) == 2
    for far in (1, 3, 10):
        moved = [_deepseek(u.run, text, round(raw * far)) if u in held else u for u in calls]
        f, h = corpus.split(moved)
        (row,) = [x for x in provider.seed_figures("content", f, h) if x.family == "deepseek"]
        assert row.derived == 1.3 and row.fit_calls == 2 and row.held_calls == 2
        assert row.held_beyond == (2 if far > 1.2 else 0)


@pytest.mark.corpus
@pytest.mark.skipif(corpus.corpus_dir() is None, reason="needs ../shared/corpus")
@pytest.mark.skipif(not HAS_BPE, reason="needs the bpe extra (quicktok)")
def test_the_written_figures_are_current() -> None:
    """fidelity/provider.md is what the derivation gives on the corpus today."""
    root = corpus.corpus_dir()
    assert root is not None
    rows = provider.read_figures(WRITTEN)
    fresh = [
        dict(zip(provider.HEADER, [f.figure, *f.row()[1:]], strict=True))
        for f in provider.figures(corpus.usages(root))
    ]
    assert fresh == rows
