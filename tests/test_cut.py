"""The cache-stable cut (``Strategy.block``, :meth:`ctxwin.fitting.cut.Kept.stable`): over a
growing run the cut moves only in blocks of the budget, so consecutive requests share
their prefix, and each request still fits."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwin import core
from ctxwin.fitting.budget import Budget, resolve_spec
from ctxwin.fitting.strategy import Strategy
from ctxwin.manager import ContextWindowManager
from ctxwin.settings import Settings


def run(sizes: list[int]) -> list[list[dict[str, Any]]]:
    """The messages of each call of a loop whose k-th tool result is ``sizes[k]`` words."""
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Fix the build."},
    ]
    calls = []
    for k, n in enumerate(sizes):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
        history = [
            *history,
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{k}", "content": "word " * n},
        ]
        calls.append(history)
    return calls


def budget(tokens: int) -> Budget:
    return Budget(resolve_spec(None, context_length=10**9), 0, "flag", 0, tokens)


def cuts(sizes: list[int], tokens: int, block: float) -> list[tuple[int, int, int]]:
    """``(first kept item after the head, estimate sent, budget)`` of each call."""
    out = []
    for messages in run(sizes):
        t = core.load({"messages": messages})
        p = core.fit_plan(t, budget(tokens), 1.0, Strategy(block=block))
        r = p.result
        assert r.estimated_tokens_after <= r.budget or r.overflow_at_floor
        out.append((r.cut if r.pruned else 0, r.estimated_tokens_after, r.budget))
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(5, 400), min_size=5, max_size=60),
    st.integers(1500, 6000),
    st.sampled_from([0.25, 0.5, 1.0]),
)
def test_a_block_cut_never_goes_back_and_never_drops_less(
    sizes: list[int], tokens: int, block: float
) -> None:
    got = cuts(sizes, tokens, block)
    pruned = [c for c, _, _ in got if c]
    # the cut never goes back
    assert pruned == sorted(pruned)
    just = cuts(sizes, tokens, 0.0)
    # a block cut drops at least what just-fit drops, never a turn less
    for (c, _, _), (j, _, _) in zip(got, just, strict=True):
        assert c >= j


def test_a_block_cut_keeps_the_prefix_between_moves() -> None:
    """30 calls whose results are about 300 tokens at a 4,000-token budget: just-fit moves
    the cut on almost every call once the run reaches its budget; blocks of half the
    budget move it a few times, and keep most of the context just-fit keeps."""
    sizes = [300] * 30
    just = cuts(sizes, 4000, 0.0)
    half = cuts(sizes, 4000, 0.5)
    moves = [sum(1 for a, b in pairwise(x) if a[0] != b[0]) for x in (just, half)]
    assert moves[1] * 3 <= moves[0]
    kept = [sum(e for _, e, _ in x) / len(x) for x in (just, half)]
    assert kept[1] >= 0.6 * kept[0]


def test_block_is_checked_and_named() -> None:
    from ctxwin.errors import UsageError

    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(UsageError) as info:
            Strategy(block=bad)
        assert info.value.setting == "block"


def test_the_manager_cuts_in_blocks_as_a_whole_fit_does() -> None:
    sizes = [250] * 40
    settings_ = Settings(context_length=5000, max_tokens=500, strategy=Strategy(block=0.5))
    manager = ContextWindowManager(settings=settings_, learn_overhead=False)
    whole = ContextWindowManager(settings=settings_, learn_overhead=False, incremental=False)
    for messages in run(sizes):
        a = manager.evaluate({"model": "m", "messages": messages})
        b = whole.evaluate({"model": "m", "messages": messages})
        assert a.result.keep == b.result.keep


def test_a_block_out_of_reach_is_not_forced_by_emptying_the_request() -> None:
    """Blocks of the whole budget cannot be reached while the history after the head is
    shorter than one: the cut is then just-fit's, not the floor."""
    sizes = [6, 5, 5, 5, 324, 400, 400, 400, 5]
    assert [c for c, _, _ in cuts(sizes, 1500, 1.0)] == [c for c, _, _ in cuts(sizes, 1500, 0)]
