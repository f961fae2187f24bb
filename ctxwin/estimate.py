"""Token estimation without a tokenizer.

An estimator turns text into a *cost vector*: a short list of integers, one
slot per content class it distinguishes. Slot 0 always holds whole tokens
(per-message overhead, media, framing); the other slots hold whatever the
estimator measures (UTF-8 bytes per class for :class:`SeedEstimator`).
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
from fractions import Fraction
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

    def framing(self, fmt: str, *, has_tools: bool) -> int:
        """Request-level tokens the provider adds that the body does not show."""


def _ratio(value: float) -> Fraction:
    if value <= 0:
        raise ValueError(f"bytes per token must be positive, got {value!r}")
    return Fraction(repr(float(value)))


def _ceil_div(n: int, d: Fraction) -> int:
    """``ceil(n / d)`` exactly, for ``n >= 0``."""
    return -((-n * d.denominator) // d.numerator)


class SeedEstimator:
    """The ADR's estimator: UTF-8 bytes ÷ 3.5 for prose, ÷ 2.5 for dense text.

    raw = ceil(prose ÷ 3.5) + ceil(dense ÷ 2.5) + 8 per message + 12 per tool call.
    Every constant is configurable.
    """

    width = 3

    def __init__(
        self,
        *,
        prose_bytes_per_token: float = 3.5,
        dense_bytes_per_token: float = 2.5,
        per_message: int = 8,
        per_tool_call: int = 12,
        name: str = "seed",
    ) -> None:
        self.name = name
        self.per_message = per_message
        self.per_tool_call = per_tool_call
        self._prose = _ratio(prose_bytes_per_token)
        self._dense = _ratio(dense_bytes_per_token)

    def add_text(self, cost: list[int], text: str, kind: Kind) -> None:
        n = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        cost[1 + kind] += n

    def add_bytes(self, cost: list[int], data: bytes, kind: Kind) -> None:
        cost[1 + kind] += len(data)

    def raw(self, totals: Sequence[int]) -> int:
        return totals[0] + _ceil_div(totals[1], self._prose) + _ceil_div(totals[2], self._dense)

    def framing(self, fmt: str, *, has_tools: bool) -> int:
        return TOOL_PROMPT_TOKENS.get(fmt, 0) if has_tools else 0


TOOL_PROMPT_TOKENS = {"anthropic": 346}
"""Tokens a provider adds to the prompt when the request has tools.

Anthropic documents a tool-use system prompt of 346 tokens (``tool_choice``
auto or none; 313 for any or tool) for its current models ("Tool use
pricing" in the tool-use overview); the larger figure is used.
"""


def calibrated(raw: int, calibration: float) -> int:
    """``ceil(raw × max(1, calibration))`` in exact decimal arithmetic."""
    factor = Fraction(repr(float(calibration)))
    if factor <= 1:
        return raw
    scaled = raw * factor
    return -((-scaled.numerator) // scaled.denominator)


def new_cost(estimator: Estimator) -> list[int]:
    """A zero cost vector for ``estimator``."""
    return [0] * estimator.width


def add_into(total: list[int], cost: Sequence[int]) -> None:
    """``total += cost`` element-wise."""
    for i, v in enumerate(cost):
        total[i] += v


def default_estimator() -> Estimator:
    """The estimator used when none is named."""
    return SeedEstimator()


ESTIMATORS = {"seed": SeedEstimator}
"""Estimators selectable by name (``--estimator``)."""


def get_estimator(name: str) -> Estimator:
    """Build the estimator called ``name``; ``ValueError`` names the choices."""
    try:
        factory = ESTIMATORS[name]
    except KeyError:
        choices = ", ".join(sorted(ESTIMATORS))
        raise ValueError(f"unknown estimator {name!r} (choose from: {choices})") from None
    return factory()
