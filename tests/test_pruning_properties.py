"""Property tests for every promise the pruner makes (see ctxwin/fitting/pruning.py)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxwin.core import load
from ctxwin.fitting.pruning import fit, segment
from ctxwin.tokens.seed import SeedEstimator
from tests.builders import Message
from tests.strategies import transcripts

EST = SeedEstimator()


def head_length(messages: list[Message]) -> int:
    """Independent statement of the head rule."""
    i = 0
    while i < len(messages) and messages[i]["role"] in ("system", "developer"):
        i += 1
    for j in range(i, len(messages)):
        if messages[j]["role"] == "user":
            return j + 1
    return i


def newest_turn_start(messages: list[Message]) -> int | None:
    h = head_length(messages)
    starts = [i for i in range(h, len(messages)) if messages[i]["role"] == "assistant"]
    if starts:
        return starts[-1]
    return h if h < len(messages) else None


def estimate(messages: list[Message]) -> int:
    return fit(load(messages, estimator=EST).view, 10**12, EST).estimated_tokens


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts(), st.integers(1, 12_000), st.sampled_from([1.0, 1.15, 1.7]))
def test_pruner_promises(messages: list[Message], budget: int, calibration: float) -> None:
    transcript = load(messages, estimator=EST)
    result = fit(transcript.view, budget, EST, calibration)
    keep = result.keep
    out = transcript.write(keep)

    # 1. an ordered subsequence of the input
    assert keep == sorted(set(keep))
    assert out == [messages[i] for i in keep]
    assert sorted(keep + result.dropped) == list(range(len(messages)))

    # 2. head and newest turn kept
    h = head_length(messages)
    assert keep[:h] == list(range(h))
    newest = newest_turn_start(messages)
    if newest is not None:
        assert set(range(newest, len(messages))) <= set(keep)

    # 3. pairing intact: every result answers a call made earlier in the output,
    #    and no call lost any of the results it had in the input
    made: set[str] = set()
    open_calls: set[str] = set()
    for m in out:
        for c in m.get("tool_calls") or []:
            assert c["id"] not in open_calls  # never two open calls with one id
            made.add(c["id"])
            open_calls.add(c["id"])
        if m["role"] == "tool":
            assert m["tool_call_id"] in open_calls  # answers a call still awaiting it
            open_calls.discard(m["tool_call_id"])
    answered_in = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    answered_out = {m["tool_call_id"] for m in out if m["role"] == "tool"}
    assert (made & answered_in) <= answered_out

    # 4. fits, or says it overflows at the floor; the bookkeeping matches a fresh estimate
    assert (
        result.estimated_tokens_after
        == fit(load(out, estimator=EST).view, 10**12, EST, calibration).estimated_tokens
    )
    if result.overflow_at_floor:
        assert result.estimated_tokens_after > budget
        # the floor: nothing droppable is left
        seg = segment(load(out, estimator=EST).view.items)
        assert len(seg.unit_starts) <= 1
    else:
        assert result.estimated_tokens_after <= budget

    # minimality: keeping the newest dropped unit back would not fit
    if result.pruned and not result.overflow_at_floor:
        seg = segment(transcript.view.items)
        unit_first_items = [seg.turn_starts[u] for u in seg.unit_starts]
        hh = seg.head_end
        cut = keep[hh] if len(keep) > hh else len(messages)
        previous = max(i for i in unit_first_items if i < cut)
        wider = [messages[i] for i in [*range(hh), *range(previous, len(messages))]]
        wider_est = fit(load(wider, estimator=EST).view, 10**12, EST, calibration)
        assert wider_est.estimated_tokens > budget

    # 5. idempotent
    again = fit(load(out, estimator=EST).view, budget, EST, calibration)
    assert not again.pruned
    assert again.keep == list(range(len(out)))


@settings(max_examples=200, deadline=None)
@given(transcripts(), st.integers(1, 12_000))
def test_reported_counts_are_consistent(messages: list[Message], budget: int) -> None:
    transcript = load(messages, estimator=EST)
    result = fit(transcript.view, budget, EST)
    seg = segment(transcript.view.items)
    assert result.dropped_turns + result.kept_turns == seg.turn_count()
    assert result.fits == (result.estimated_tokens <= budget)
    assert result.pruned == bool(result.dropped)
    assert result.estimated_tokens == estimate(messages) or result.calibration != 1.15
