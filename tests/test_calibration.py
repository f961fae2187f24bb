"""Calibration: the factor only grows, measured against the raw estimate."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwin.fitting.calibration import grow, prompt_tokens_from_usage
from ctxwin.tokens.base import calibrated


@settings(max_examples=200)
@given(
    st.floats(min_value=1.0, max_value=10.0),
    st.integers(min_value=0, max_value=10**7),
    st.integers(min_value=0, max_value=10**7),
)
def test_grow_never_shrinks(factor: float, raw: int, reported: int) -> None:
    assert grow(factor, raw, reported) >= factor


def test_grow_takes_reported_over_raw() -> None:
    assert grow(1.0, 1000, 1300) == pytest.approx(1.3)
    assert grow(1.5, 1000, 1300) == 1.5
    assert grow(1.15, 0, 500) == 1.15
    assert grow(1.15, 500, 0) == 1.15


@pytest.mark.parametrize("seed", [1.0, 1.15, 1.5])
def test_converges_to_true_ratio_of_two(seed: float) -> None:
    factor = seed
    for raw in (1000, 1500, 2200, 3000, 4100):
        reported = 2 * raw  # the model truly needs twice the raw estimate
        factor = grow(factor, raw, reported)
        assert calibrated(raw, factor) >= reported
    assert factor == pytest.approx(2.0)


def test_dividing_by_the_calibrated_estimate_stalls() -> None:
    """The rule this module replaces: ratio to the calibrated estimate stalls near 1.74."""
    factor = 1.15
    for raw in (1000, 1500, 2200, 3000):
        factor = max(factor, 2 * raw / calibrated(raw, factor))
    assert factor == pytest.approx(2 / 1.15, rel=1e-3)
    assert grow(1.15, 1000, 2000) == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"prompt_tokens": 5920, "completion_tokens": 128}, 5920),
        ({"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 80}}, 100),
        (
            {
                "input_tokens": 3,
                "cache_creation_input_tokens": 10,
                "cache_read_input_tokens": 1111,
                "output_tokens": 414,
            },
            1124,
        ),
        ({"input_tokens": 641}, 641),
        ({"input_tokens": 7, "cache_creation_input_tokens": None}, 7),
        ({"promptTokenCount": 23, "candidatesTokenCount": 5}, 23),
        ({"usageMetadata": {"promptTokenCount": 35, "toolUsePromptTokenCount": 4}}, 39),
        ({"completion_tokens": 3}, None),
        ({"prompt_tokens": "many"}, None),
        ({}, None),
    ],
)
def test_prompt_tokens_from_usage(usage: dict[str, object], expected: int | None) -> None:
    assert prompt_tokens_from_usage(usage) == expected


def test_fit_overhead_is_the_least_waste_safe_line_in_n_log_n() -> None:
    """A first call that logs almost nothing (reported ÷ raw 2,000) and 20,000 calls:
    the fit takes the hull's slopes, not a factor grid up to the largest ratio."""
    import time

    from ctxwin.fitting.calibration import fit_overhead

    points = [(10, 20_000)] + [(100 + 50 * k, 20_000 + 100 + 45 * k) for k in range(20_000)]
    start = time.perf_counter()
    fit = fit_overhead(points)
    assert time.perf_counter() - start < 2.0
    assert fit["calls"] == 20_001
    assert fit["factor"] is not None and fit["overhead"] is not None
    assert 0.85 <= fit["factor"] <= 0.95
    assert all(fit["overhead"] + fit["factor"] * r >= rep for r, rep in points)
    assert fit["median_ratio"] <= 1.01
