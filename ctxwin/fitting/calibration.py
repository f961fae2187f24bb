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

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ctxwin.tokens.base import calibrated, scaled

if TYPE_CHECKING:
    from ctxwin.fitting.rows import OverheadFit

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


ZERO_REPORT = "reported 0 prompt tokens: taken as no report"
"""Why a call whose usage counts 0 prompt tokens teaches nothing (a calibration row's
``error``)."""


def zero_report_words(calls: int, of: str = "") -> str:
    """The one warning about calls that reported 0 prompt tokens (a provider, or a gateway
    in front of one, that counts nothing): learning ignores them, as if they reported
    nothing. ``of`` names what the calls are of (``"the session's"``)."""
    counted = f"{calls:,} {of + ' ' if of else ''}call{'s' if calls != 1 else ''}"
    return (
        f"{counted} reported 0 prompt tokens (a gateway that does not count?): taken as no "
        "report, as for a log without usage"
    )


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


def output_tokens_from_usage(usage: Mapping[str, Any]) -> int | None:
    """The output tokens a provider's usage object bills (reasoning included), or
    ``None`` when it does not say.

    * OpenAI Chat Completions: ``completion_tokens`` (reasoning tokens are part of it).
    * OpenAI Responses, Anthropic Messages: ``output_tokens``.
    * Gemini ``usageMetadata`` (or the object holding it): ``candidatesTokenCount`` plus
      ``thoughtsTokenCount`` (thinking is billed as output).
    """
    meta = usage.get("usageMetadata")
    if isinstance(meta, Mapping):
        usage = meta
    if "completion_tokens" in usage:
        return _int(usage["completion_tokens"])
    if "candidatesTokenCount" in usage or "thoughtsTokenCount" in usage:
        parts = [_int(usage.get(k)) for k in ("candidatesTokenCount", "thoughtsTokenCount")]
        return sum(p or 0 for p in parts)
    if "output_tokens" in usage:
        return _int(usage["output_tokens"])
    return None


def cache_tokens_from_usage(usage: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """``(read, written)``: the prompt tokens a provider's usage object says were read
    from its prompt cache and written to it; ``None`` for what it does not say.

    * Anthropic Messages: ``cache_read_input_tokens`` and ``cache_creation_input_tokens``.
    * OpenAI Chat Completions: ``prompt_tokens_details.cached_tokens``; Responses:
      ``input_tokens_details.cached_tokens`` (writes are not billed, never reported).
    * Gemini ``usageMetadata`` (or the object holding it): ``cachedContentTokenCount``.
    """
    meta = usage.get("usageMetadata")
    if isinstance(meta, Mapping):
        usage = meta
    if "cache_read_input_tokens" in usage or "cache_creation_input_tokens" in usage:
        return (
            _int(usage.get("cache_read_input_tokens")),
            _int(usage.get("cache_creation_input_tokens")),
        )
    for key in ("prompt_tokens_details", "input_tokens_details"):
        details = usage.get(key)
        if isinstance(details, Mapping) and "cached_tokens" in details:
            return _int(details["cached_tokens"]), None
    if "cachedContentTokenCount" in usage:
        return _int(usage["cachedContentTokenCount"]), None
    return None, None


def hour_writes_from_usage(usage: Mapping[str, Any]) -> int | None:
    """Of the cache writes an Anthropic usage object reports, those written for an hour
    (``cache_creation.ephemeral_1h_input_tokens``: marks with ``ttl: "1h"``, billed at
    2 × input; the rest, ``ephemeral_5m_input_tokens``, live five minutes, billed at
    1.25 ×). ``None`` when the usage does not break its writes down by lifetime."""
    creation = usage.get("cache_creation")
    if not isinstance(creation, Mapping) or "ephemeral_1h_input_tokens" not in creation:
        return None
    return _int(creation["ephemeral_1h_input_tokens"])


FRESH_FACTOR = 3.0
"""The factor for content no report has counted yet, until two reports measure one
(see :class:`OverheadLearner`)."""

LEAST_FACTOR = 0.25
"""The least factor usage can teach: the raw estimate is an upper bound (opaque data
such as encrypted reasoning counts at its bytes), so a provider may count much less,
but a slope near or below 0 would predict that new content costs nothing."""

SHARE = 2 / 3
"""The factor is the slope that at least this share of the raw growth cost no more
than (a weighted quantile): chosen on part of the samples (``docs/sessions.md``)."""


class _Quantile:
    """A running weighted quantile: two heaps, O(log n) per value."""

    __slots__ = ("high", "low", "share", "w_high", "w_low")

    def __init__(self, share: float) -> None:
        self.share = share
        self.low: list[tuple[float, float]] = []  # (-value, weight): a max-heap
        self.high: list[tuple[float, float]] = []  # (value, weight): a min-heap
        self.w_low = 0.0
        self.w_high = 0.0

    def __bool__(self) -> bool:
        return bool(self.low or self.high)

    def add(self, value: float, weight: float) -> None:
        from heapq import heappop, heappush

        if self.low and value <= -self.low[0][0]:
            heappush(self.low, (-value, weight))
            self.w_low += weight
        else:
            heappush(self.high, (value, weight))
            self.w_high += weight
        target = self.share * (self.w_low + self.w_high)
        while self.high and self.w_low < target:
            v, w = heappop(self.high)
            self.w_high -= w
            heappush(self.low, (-v, w))
            self.w_low += w
        while self.low and self.w_low - self.low[0][1] >= target:
            v, w = heappop(self.low)
            self.w_low -= w
            heappush(self.high, (-v, w))
            self.w_high += w

    @property
    def value(self) -> float:
        """The least value with at least ``share`` of the weight at or below it."""
        return -self.low[0][0]


def _cross(o: tuple[int, int], a: tuple[int, int], b: tuple[int, int]) -> int:
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


class _Hull:
    """The upper convex hull of ``(raw, reported)`` points: ``max(reported − factor ×
    raw)`` over every point in O(log n). Points come mostly in raw order (a growing
    transcript): those are added in O(1) amortized; another is rebuilt in O(n)."""

    __slots__ = ("hull", "points")

    def __init__(self) -> None:
        self.points: list[tuple[int, int]] = []
        self.hull: list[tuple[int, int]] = []

    def add(self, raw: int, reported: int) -> None:
        p = (raw, reported)
        self.points.append(p)
        if self.hull and raw < self.hull[-1][0]:
            self.hull = _upper(sorted(self.points))
        else:
            _extend(self.hull, p)

    def top(self, factor: float) -> float:
        """``max(reported − factor × raw)`` over the points."""
        h = self.hull
        lo, hi = 0, len(h) - 1
        while lo < hi:  # edge slopes fall along the hull: find the first ≤ factor
            mid = (lo + hi) // 2
            (r0, p0), (r1, p1) = h[mid], h[mid + 1]
            if p1 - p0 > factor * (r1 - r0):
                lo = mid + 1
            else:
                hi = mid
        raw, reported = h[lo]
        return reported - factor * raw


def _extend(h: list[tuple[int, int]], p: tuple[int, int]) -> None:
    """Add ``p``, at or right of every point of the upper hull ``h``, to ``h``."""
    if h and p[0] == h[-1][0]:
        if p[1] <= h[-1][1]:
            return
        h.pop()
    while len(h) >= 2 and _cross(h[-2], h[-1], p) >= 0:
        h.pop()
    h.append(p)


def _upper(points: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The upper hull of ``points`` (sorted by raw)."""
    h: list[tuple[int, int]] = []
    for p in points:
        _extend(h, p)
    return h


@dataclass(slots=True)
class OverheadLearner:
    """``reported ≈ overhead + factor × raw``, both fitted to one run's usage.

    Learned online: after each call, ``observe(raw, reported)`` with the
    uncalibrated estimate of what was sent and the prompt tokens the provider
    reported.

    * Before any report the prediction is ``seed × raw`` (nothing is known).
    * The **factor** is what the content the run adds costs per raw token: each
      report after the previous one measures a slope ``Δreported ÷ Δraw`` (over at
      least ``min_tokens`` raw tokens of growth), and the factor is the slope that
      ``share`` of all that growth, weighted by its raw tokens, cost no more than,
      within ``[least, most]``. Until a slope is measured it is ``max(seed, fresh)``.
      One call whose report jumps (content the log does not show: a system prompt
      and tools at the first call, an attached file later) is one slope over few
      raw tokens: it cannot carry the quantile, so it never fixes the factor; and
      the factor follows the run, down as well as up.
    * The **overhead** is the least intercept that keeps the line on or above
      every report seen: the model stays an upper bound on what was seen (the
      estimate errs high), and a jump raises the overhead, which is where content
      a provider keeps counting belongs. When every report is under ``factor ×
      raw`` (no hidden overhead) the overhead is 0 and the factor is the largest
      ``reported ÷ raw`` seen, so a small request is never predicted below it.
    * The prediction is the line, ``overhead + factor × raw``.

    On the agent-tool samples (``docs/sessions.md``) the median prediction ÷
    reported after a run's first call is 1.00–1.09 per agent tool; a prediction
    under the reported count is a step that cost more than the factor, by what
    the budget's safety margin (3 % of the window) bounds, and the next report
    counts it.
    """

    seed: float
    fresh: float = FRESH_FACTOR
    min_tokens: int = 64
    most: float = 2 * FRESH_FACTOR
    """The factor grows no further than this."""
    least: float = LEAST_FACTOR
    share: float = SHARE
    last: tuple[int, int] | None = None
    """``(raw, reported)`` of the last call that reported usage."""
    _slopes: _Quantile | None = None
    _hull: _Hull | None = None
    _line: tuple[int, float] = (0, 0.0)
    _ratio: float = 0.0

    def __post_init__(self) -> None:
        self._slopes = _Quantile(self.share)
        self._hull = _Hull()
        self._line = (0, max(self.seed, self.fresh))

    @property
    def learned(self) -> bool:
        """Whether any usage has been seen (the line is known)."""
        return self.last is not None

    @property
    def measured(self) -> bool:
        """Whether two reports have measured a slope (the factor is no longer the fresh one)."""
        return bool(self._slopes)

    @property
    def overhead(self) -> int:
        """The line's intercept: tokens every request costs beyond its content."""
        return self._line[0]

    @property
    def factor(self) -> float:
        """The line's slope (the seed's growth until a report measures one)."""
        return self._line[1]

    def predict(self, raw: int) -> int:
        """The prompt tokens the provider should report for a request of ``raw``."""
        if self.last is None:
            return calibrated(raw, self.seed)
        overhead, factor = self._line
        return overhead + scaled(raw, factor)

    def observe(self, raw: int, reported: int) -> None:
        """Learn from one call: ``raw`` is the uncalibrated estimate of what was sent."""
        if raw < 0 or reported <= 0:
            return
        slopes, hull = self._slopes, self._hull
        assert slopes is not None and hull is not None
        if self.last is not None:
            grew = raw - self.last[0]
            if grew >= self.min_tokens:
                slopes.add((reported - self.last[1]) / grew, grew)
        hull.add(raw, reported)
        self.last = (raw, reported)
        if slopes:
            factor = round(min(max(slopes.value, self.least), self.most), 4)
        else:
            factor = max(self.seed, self.fresh)
        if raw > 0:
            self._ratio = max(self._ratio, reported / raw)
        top = hull.top(factor)
        if top < 0 and self._ratio > 0:
            # every report is under factor × raw: no overhead, and the line turns
            # down about 0 until it meets the steepest report (a negative intercept
            # would predict a small request below what it holds)
            factor = max(math.ceil(self._ratio * 10_000) / 10_000, self.least)
            top = hull.top(factor)
        # ceil(raw × factor) rounds up: the line is on or above every point
        self._line = (max(0, math.ceil(top)), factor)


def fit_overhead(points: Sequence[tuple[int, int]]) -> OverheadFit:
    """The safe line ``overhead + factor × raw`` with the least waste over a run's
    ``(raw, reported)`` points.

    Safe: every point on or under the line. The total waste, ``n × overhead +
    factor × Σraw − Σreported`` with ``overhead = max(0, max(reported − factor ×
    raw))``, is convex in the factor and changes slope only at the slopes of the
    points' upper hull, so the best factor (at least :data:`LEAST_FACTOR`) is one of
    them: O(n log n).
    Returns the factor, overhead, waste and the median of prediction ÷ reported.
    """
    pts = [(r, rep) for r, rep in points if r > 0 and rep > 0]
    if not pts:
        return {"calls": 0, "factor": None, "overhead": None}
    h = _upper(sorted(pts))
    hull = _Hull()
    hull.hull = h
    candidates = {LEAST_FACTOR}
    for (r0, p0), (r1, p1) in itertools.pairwise(h):
        slope = (p1 - p0) / (r1 - r0)
        if slope > LEAST_FACTOR:
            candidates.add(round(slope, 4))
            candidates.add(math.ceil(slope * 10_000) / 10_000)
    raw_sum = sum(r for r, _ in pts)
    rep_sum = sum(rep for _, rep in pts)
    n = len(pts)

    def waste(factor: float) -> tuple[float, float]:
        overhead = max(0.0, hull.top(factor))
        return n * overhead + factor * raw_sum - rep_sum, factor

    _, factor = min(waste(f) for f in candidates)
    overhead = max(0, max(rep - scaled(r, factor) for r, rep in pts))
    predictions = [overhead + scaled(r, factor) for r, _ in pts]
    wasted = sum(predictions) - rep_sum
    import statistics  # here: importing it costs every replay's start-up

    ratios = [round(p / rep, 4) for p, (_, rep) in zip(predictions, pts, strict=True)]
    return {
        "calls": n,
        "factor": factor,
        "overhead": overhead,
        "waste_tokens": wasted,
        "reported_tokens": rep_sum,
        "waste_percent": round(100 * wasted / rep_sum, 2),
        "median_ratio": round(statistics.median(ratios), 4),
        "ratios": ratios,
    }
