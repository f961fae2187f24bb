"""Calibration: grow the estimate's factor toward what the provider reports.

The ADR's rule, kept: the factor starts at a seed (above or at 1.0), only
ever grows, and is reset for each run. This module holds the two pure steps
a stateful caller needs:

* :func:`prompt_tokens_from_usage` reads *all* prompt tokens out of a
  provider's usage object (OpenAI ``prompt_tokens``; Anthropic
  ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens``;
  Gemini ``promptTokenCount``).
* :func:`grow` moves the factor to ``reported ÷ raw`` when that is larger,
  where ``raw`` is the **uncalibrated** estimate of the same request. Dividing
  by the already-calibrated estimate instead measures the ratio against an
  estimate the factor has already inflated: a model that truly needs 2× gives
  ``2 ÷ 1.15 ≈ 1.74`` on the first report from the 1.15 seed, and every later
  report gives ``2 ÷ 1.74 < 1.74``, so the factor stalls there and the
  estimate stays 13 % short.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["grow", "prompt_tokens_from_usage"]


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
