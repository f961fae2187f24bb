"""What every estimator is: the protocol, the content classes, and exact arithmetic.

An estimator turns text into a *cost vector*: a short list of integers, one
slot per content class it distinguishes. Slot 0 always holds whole tokens
(per-message overhead, media, framing); the other slots hold whatever the
estimator measures (UTF-8 bytes per class for :class:`~ctxwin.tokens.seed.SeedEstimator`).
Cost vectors add: the cost of a transcript is the element-wise sum of its
messages' vectors, and :meth:`Estimator.raw` maps a summed vector to tokens.
That is what lets the pruner drop turns by subtraction instead of
re-estimating the whole transcript per dropped turn.

The calibrated estimate is ``ceil(raw × max(1, calibration))``, computed in
exact decimal arithmetic so ``2503 × 1.15`` is ``2878.45`` and rounds up to
``2879`` on every platform.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from functools import lru_cache
from typing import Protocol, runtime_checkable

SEED_CALIBRATION = 1.15
"""The ADR's calibration seed: the estimate starts 15 % above the raw count."""


class Kind(IntEnum):
    """Content class of a piece of text, as the adapters see it."""

    PROSE = 0
    """Natural-language text: message content, function names."""
    DENSE = 1
    """Machine text: tool arguments and results, call ids, the tool schema block."""


@runtime_checkable
class Estimator(Protocol):
    """What the adapters and the pruner need from an estimator."""

    name: str
    width: int
    """Number of slots in a cost vector (slot 0 counts whole tokens)."""
    per_message: int
    """Tokens added for each message (role markers, separators)."""
    per_tool_call: int
    """Tokens added for each tool call (call framing)."""

    def add_text(self, cost: list[int], text: str, kind: Kind) -> None:
        """Add the cost of ``text`` of class ``kind`` into ``cost``."""

    def add_bytes(self, cost: list[int], data: bytes, kind: Kind) -> None:
        """Add the cost of UTF-8 ``data`` (e.g. a serialized schema) into ``cost``."""

    def raw(self, totals: Sequence[int]) -> int:
        """Uncalibrated tokens for a summed cost vector."""

    def framing(self, fmt: str, *, has_tools: bool, model: str | None = None) -> int:
        """Request-level tokens the provider adds that the body does not show (``model``:
        the body's, if it names one)."""

    def seed(self, model: str | None = None) -> float:
        """The calibration factor a run with ``model`` starts at (before any usage is
        reported): how far this estimator's raw count can fall short of that model's
        tokenizer."""


@lru_cache(maxsize=64)
def exact_decimal(value: float) -> tuple[int, int]:
    """``value`` as written (its shortest decimal form, ``repr``) as an exact fraction
    ``(numerator, denominator)``: 1.15 is 115/100, not the binary float's 1.149999….

    Raises ``ValueError`` for infinities and NaN.
    """
    text = repr(float(value))
    mantissa, _, exponent = text.partition("e")
    whole, _, digits = mantissa.partition(".")
    if not (whole.lstrip("-") + digits).isdigit():
        raise ValueError(f"expected a finite number, got {value!r}")
    numerator = int(whole + digits)
    denominator = 10 ** len(digits)
    shift = int(exponent) if exponent else 0
    if shift >= 0:
        numerator *= 10**shift
    else:
        denominator *= 10**-shift
    return numerator, denominator


def _ratio(value: float) -> tuple[int, int]:
    if value <= 0:
        raise ValueError(f"bytes per token must be positive, got {value!r}")
    return exact_decimal(value)


def _ceil_div(n: int, d: tuple[int, int]) -> int:
    """``ceil(n / d)`` exactly, for ``n >= 0`` and a positive fraction ``d``."""
    return -((-n * d[1]) // d[0])


def calibrated(raw: int, calibration: float) -> int:
    """``ceil(raw × max(1, calibration))`` in exact decimal arithmetic
    (:func:`exact_decimal`); ``ValueError`` for a calibration that is not finite."""
    numerator, denominator = exact_decimal(calibration)
    if numerator <= denominator:
        return raw
    return -((-raw * numerator) // denominator)


def scaled(raw: int, factor: float) -> int:
    """``ceil(raw × factor)`` in exact decimal arithmetic, for any factor ``>= 0``: a
    factor learned from usage may be below 1 (the provider counted less than the raw
    estimate's upper bound), where :func:`calibrated` counts a setting below 1 as 1."""
    numerator, denominator = exact_decimal(factor)
    if numerator == denominator:
        return raw
    return -((-raw * numerator) // denominator)
