"""Estimators by name: the default, and what ``--estimator`` accepts."""

from __future__ import annotations

from collections.abc import Callable

from ctxwin.tokens.base import Estimator
from ctxwin.tokens.bound import BoundEstimator
from ctxwin.tokens.content import ContentEstimator
from ctxwin.tokens.seed import SeedEstimator


def default_estimator() -> Estimator:
    """The estimator used when none is named."""
    return ContentEstimator()


ESTIMATORS: dict[str, Callable[[], Estimator]] = {
    "seed": SeedEstimator,
    "content": ContentEstimator,
    "bound": BoundEstimator,
}
"""Estimators selectable by name (``--estimator``)."""


def get_estimator(name: str) -> Estimator:
    """Build the estimator called ``name``; ``ValueError`` names the choices."""
    try:
        factory = ESTIMATORS[name]
    except KeyError:
        choices = ", ".join(sorted(ESTIMATORS))
        raise ValueError(f"unknown estimator {name!r} (choose from: {choices})") from None
    return factory()
