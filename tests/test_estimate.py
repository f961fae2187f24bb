"""The seed estimator and exact calibration."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwin.tokens.base import Kind, calibrated
from ctxwin.tokens.registry import get_estimator
from ctxwin.tokens.seed import SeedEstimator


def cost_of(pairs: list[tuple[str, Kind]]) -> list[int]:
    est = SeedEstimator()
    cost = [0] * est.width
    for text, kind in pairs:
        est.add_text(cost, text, kind)
    return cost


def test_prose_and_dense_bytes() -> None:
    est = SeedEstimator()
    assert est.raw(cost_of([("a" * 7, Kind.PROSE)])) == 2
    assert est.raw(cost_of([("a" * 8, Kind.PROSE)])) == 3
    assert est.raw(cost_of([("a" * 5, Kind.DENSE)])) == 2
    assert est.raw(cost_of([("a" * 6, Kind.DENSE)])) == 3


def test_sizes_are_utf8_bytes() -> None:
    assert cost_of([("é", Kind.PROSE)])[1] == 2
    assert cost_of([("日本", Kind.DENSE)])[2] == 6
    assert cost_of([("😀", Kind.PROSE)])[1] == 4


def test_lone_surrogate_does_not_crash() -> None:
    assert cost_of([("\ud800", Kind.PROSE)])[1] == 3


def test_constants_are_configurable() -> None:
    est = SeedEstimator(prose_bytes_per_token=4, dense_bytes_per_token=2, per_message=3)
    cost = [est.per_message, 8, 8]
    assert est.raw(cost) == 3 + 2 + 4


@pytest.mark.parametrize(
    ("raw", "factor", "expected"),
    [(2503, 1.15, 2879), (2504, 1.15, 2880), (20, 1.15, 23), (100, 1.15, 115), (7, 0.5, 7)],
)
def test_calibration_is_exact_decimal(raw: int, factor: float, expected: int) -> None:
    assert calibrated(raw, factor) == expected


@given(st.integers(0, 10**9), st.floats(1.0, 10.0))
def test_calibration_never_rounds_down(raw: int, factor: float) -> None:
    assert calibrated(raw, factor) >= raw * factor - 1e-6 * max(1, raw)
    assert calibrated(raw, factor) >= raw


@given(st.lists(st.tuples(st.text(), st.sampled_from(Kind))), st.integers(0, 50))
def test_cost_vectors_add(pairs: list[tuple[str, Kind]], split: int) -> None:
    whole = cost_of(pairs)
    left, right = cost_of(pairs[:split]), cost_of(pairs[split:])
    assert whole == [a + b for a, b in zip(left, right, strict=True)]


@given(st.integers(0, 10**6), st.integers(0, 10**6))
def test_raw_matches_the_formula(prose: int, dense: int) -> None:
    est = SeedEstimator()
    assert est.raw([0, prose, dense]) == math.ceil(prose / 3.5) + math.ceil(dense / 2.5)


def test_unknown_estimator_names_the_choices() -> None:
    with pytest.raises(ValueError, match="seed"):
        get_estimator("nope")
