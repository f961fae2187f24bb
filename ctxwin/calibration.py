"""Calibration: grow the estimate's factor toward what the provider reports.

The ADR's rule, kept: the factor starts at a seed (above or at 1.0), only
ever grows, and is reset for each run. This module holds the two pure steps
a stateful caller needs:

* :func:`prompt_tokens_from_usage` reads *all* prompt tokens out of a
  provider's usage object (OpenAI ``prompt_tokens``; Anthropic
  ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens``;
  Gemini ``promptTokenCount``).
* :class:`OverheadLearner` learns ``reported ≈ overhead + factor × raw`` for
  agent tools whose logs never record the system prompt and tool definitions
  they send (a Claude Code session's first call reports ~20,000 prompt tokens
  for a conversation of a few hundred), and :func:`fit_overhead` fits the same
  line to a whole run after the fact.
* :func:`grow` moves the factor to ``reported ÷ raw`` when that is larger,
  where ``raw`` is the **uncalibrated** estimate of the same request. Dividing
  by the already-calibrated estimate instead measures the ratio against an
  estimate the factor has already inflated: a model that truly needs 2× gives
  ``2 ÷ 1.15 ≈ 1.74`` on the first report from the 1.15 seed, and every later
  report gives ``2 ÷ 1.74 < 1.74``, so the factor stalls there and the
  estimate stays 13 % short.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ctxwin.tokens.base import calibrated

if TYPE_CHECKING:
    from ctxwin.rows import OverheadFit

__all__ = ["FRESH_FACTOR", "OverheadLearner", "fit_overhead", "grow", "prompt_tokens_from_usage"]


def grow(factor: float, raw_estimate: int, reported_prompt_tokens: int) -> float:
    """The calibration factor after one provider report: ``max(factor, reported ÷ raw)``.

    ``raw_estimate`` is the uncalibrated estimate of the request the provider
    answered; ``reported_prompt_tokens`` is everything it counted as prompt
    (see :func:`prompt_tokens_from_usage`). The factor never shrinks; a report
    with ``raw_estimate <= 0`` or ``reported_prompt_tokens <= 0`` carries no
    information and leaves it unchanged.
    """
    if raw_estimate <= 0 or reported_prompt_tokens <= 0:
        return factor
    ratio = reported_prompt_tokens / raw_estimate
    return ratio if ratio > factor else factor


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def usage_in(body: Any) -> Mapping[str, Any] | None:
    """The usage object at the top of a provider response body, if any: OpenAI's and
    Anthropic's ``usage``, Gemini's ``usageMetadata``."""
    if not isinstance(body, Mapping):
        return None
    for key in ("usage", "usageMetadata"):
        usage = body.get(key)
        if isinstance(usage, Mapping):
            return usage
    return None


def prompt_tokens_from_usage(usage: Mapping[str, Any]) -> int | None:
    """All prompt tokens in a provider's usage object, or ``None`` when it has none.

    * OpenAI Chat Completions (and LiteLLM, OpenRouter, DeepSeek, vLLM):
      ``prompt_tokens`` — cached tokens are already part of it.
    * OpenAI Responses: ``input_tokens`` (cached ones included).
    * Anthropic Messages: ``input_tokens + cache_creation_input_tokens +
      cache_read_input_tokens`` (``input_tokens`` alone excludes the cached
      prefix); a ``count_tokens`` answer is a bare ``input_tokens``.
    * Gemini ``usageMetadata`` (or the object holding it): ``promptTokenCount``
      (cached content included) plus ``toolUsePromptTokenCount`` when present.
    """
    meta = usage.get("usageMetadata")
    if isinstance(meta, Mapping):
        usage = meta
    if "prompt_tokens" in usage:
        return _int(usage["prompt_tokens"])
    if "promptTokenCount" in usage:
        total = _int(usage["promptTokenCount"])
        extra = _int(usage.get("toolUsePromptTokenCount"))
        return None if total is None else total + (extra or 0)
    if "input_tokens" in usage:
        total = _int(usage["input_tokens"])
        if total is None:
            return None
        for key in ("cache_creation_input_tokens", "cache_read_input_tokens"):
            total += _int(usage.get(key)) or 0
        return total
    return None


FRESH_FACTOR = 3.0
"""The least factor for content no report has counted yet (see :class:`OverheadLearner`)."""


@dataclass(slots=True)
class OverheadLearner:
    """``reported ≈ overhead + raw`` for what was counted, ``factor × raw`` for what is new.

    Learned online from one run's usage: after each call, ``observe(raw,
    reported)`` with the uncalibrated estimate of what was sent and the prompt
    tokens the provider reported.

    * Before any report the prediction is ``seed × raw`` (nothing is known).
    * The **overhead** is what usage proves: the largest ``reported − raw``
      seen in the run, so a system prompt and tools the log never recorded
      are counted from the first report on. It never shrinks within a run.
    * The **factor** applies to content added since the last report (new tool
      results, the reply): the provider has not counted it yet. It starts at
      ``max(seed, FRESH_FACTOR)`` and grows, never shrinks, when a report
      proves the content added since the previous one cost more (a slope over
      at least ``min_tokens`` raw tokens, up to ``most``).
    * The prediction is ``max(overhead + raw, last_reported + factor × (raw −
      last_raw))``: the second term anchors on the last report, so only the
      new content is estimated; the first keeps a pruned request honest.

    On the agent-tool samples (``docs/sessions.md``) a fresh-content factor of
    3 leaves 4 of 279 predictions after a run's first call under the reported
    count (17 of 311 with the two redacted Codex rollouts), median prediction ÷
    reported 1.08. The 4 miss what the session files never show (content
    Claude Code adds to a request without logging it, paths shortened by the
    files' publisher), by 6 to 695 tokens: no factor on the logged content
    bounds that; the budget's safety margin (3 % of the window) does, and the
    next report counts it.
    """

    seed: float
    fresh: float = FRESH_FACTOR
    min_tokens: int = 64
    most: float = 2 * FRESH_FACTOR
    """The factor grows no further than this (one noisy report cannot blow it up)."""
    overhead: int = 0
    factor: float = 0.0
    last: tuple[int, int] | None = None
    """``(raw, reported)`` of the last call that reported usage."""

    def __post_init__(self) -> None:
        self.factor = max(self.seed, self.fresh)

    @property
    def learned(self) -> bool:
        """Whether any usage has been seen (an overhead is known)."""
        return self.last is not None

    @property
    def anchor(self) -> int:
        """The intercept of the fresh-content line: ``last_reported − factor × last_raw``."""
        if self.last is None:
            return 0
        raw, reported = self.last
        return reported - calibrated(raw, self.factor)

    def predict(self, raw: int) -> int:
        """The prompt tokens the provider should report for a request of ``raw``."""
        if self.last is None:
            return calibrated(raw, self.seed)
        return max(self.anchor + calibrated(raw, self.factor), self.overhead + raw)

    def observe(self, raw: int, reported: int) -> None:
        """Learn from one call: ``raw`` is the uncalibrated estimate of what was sent."""
        if raw < 0 or reported <= 0:
            return
        if self.last is not None and reported > self.predict(raw):
            grew = raw - self.last[0]
            if grew >= self.min_tokens:
                slope = min((reported - self.last[1]) / grew, self.most)
                self.factor = max(self.factor, slope)
        first = self.last is None
        self.overhead = max(0 if first else self.overhead, reported - raw, 0)
        self.last = (raw, reported)


def fit_overhead(
    points: Sequence[tuple[int, int]], seed: float, *, step: float = 0.005
) -> OverheadFit:
    """The safe line ``overhead + factor × raw`` over a run's ``(raw, reported)`` points.

    Every factor from 1.0 to 3× the largest needed one is tried in ``step``
    increments (and the seed); for each, the overhead is the smallest that
    puts every point on or under the line. The factor with the least total
    waste wins. Returns the factor, overhead, waste and the median of
    prediction ÷ reported.
    """
    pts = [(r, rep) for r, rep in points if r > 0 and rep > 0]
    if not pts:
        return {"calls": 0, "factor": None, "overhead": None}
    top = max(3.0, max(rep / r for r, rep in pts))
    candidates = {seed}
    f = 1.0
    while f <= top:
        candidates.add(round(f, 6))
        f += step
    best: tuple[int, float, int] | None = None
    for factor in sorted(candidates):
        overhead = max(0, max(rep - calibrated(r, factor) for r, rep in pts))
        waste = sum(overhead + calibrated(r, factor) - rep for r, rep in pts)
        if best is None or waste < best[0]:
            best = (waste, factor, overhead)
    assert best is not None
    import statistics  # here: importing it costs every replay's start-up

    waste, factor, overhead = best
    reported = sum(rep for _, rep in pts)
    ratios = [(overhead + calibrated(r, factor)) / rep for r, rep in pts]
    return {
        "calls": len(pts),
        "factor": round(factor, 4),
        "overhead": overhead,
        "waste_tokens": waste,
        "waste_percent": round(100 * waste / reported, 2),
        "median_ratio": round(statistics.median(ratios), 4),
    }
