"""The ADR's estimator: UTF-8 bytes ÷ 3.5 for prose, ÷ 2.5 for dense text."""

from __future__ import annotations

from collections.abc import Sequence

from ctxwin.tokens.base import SEED_CALIBRATION, Kind, _ceil_div, _ratio
from ctxwin.tokens.framing import TOOL_PROMPT_TOKENS


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

    def framing(self, fmt: str, *, has_tools: bool, model: str | None = None) -> int:
        return TOOL_PROMPT_TOKENS.get(fmt, 0) if has_tools else 0

    def seed(self, model: str | None = None) -> float:
        """The ADR's 1.15 (:data:`~ctxwin.tokens.base.SEED_CALIBRATION`) for every model:
        the formula can under-count."""
        return SEED_CALIBRATION
