"""Tokens: what a request costs, without a tokenizer or with one.

Split by concern, as tiktoken splits its own:

* :mod:`~ctxwin.tokens.base`: the :class:`Estimator` protocol, content classes,
  exact decimal arithmetic and :func:`calibrated`;
* one module per estimator: :mod:`~ctxwin.tokens.seed` (the ADR's formula),
  :mod:`~ctxwin.tokens.content`, :mod:`~ctxwin.tokens.bound`, and
  :mod:`~ctxwin.tokens.bpe` (exact counts, the ``bpe`` extra);
* :mod:`~ctxwin.tokens.framing`: tokens a provider adds that the body does not show;
* :mod:`~ctxwin.tokens.seeds`: the calibration factor each estimator starts at;
* :mod:`~ctxwin.tokens.registry`: estimators by name;
* :mod:`~ctxwin.tokens.models`: the one rule model names are matched by.
"""

from __future__ import annotations

from ctxwin.tokens.base import (
    SEED_CALIBRATION,
    Estimator,
    Kind,
    calibrated,
    exact_decimal,
)
from ctxwin.tokens.bound import BoundEstimator
from ctxwin.tokens.bpe import (
    AUTO_TOKENIZER,
    BPE_MISSING,
    OPEN_FAMILIES,
    TOKENIZERS,
    TokenizerEstimator,
    auto_estimator,
    exact_encoding,
)
from ctxwin.tokens.content import SCALE, ContentEstimator
from ctxwin.tokens.framing import (
    ANTHROPIC_TOOL_PROMPT,
    OPENAI_REASONING_PREAMBLE,
    OPENAI_REPLY_PRIMING,
    OPENAI_TOOLS_PREAMBLE,
    REASONING_FAMILIES,
    TOOL_PROMPT_TOKENS,
    provider_framing,
    reasoning_model,
)
from ctxwin.tokens.models import name_family
from ctxwin.tokens.registry import ESTIMATORS, default_estimator, get_estimator
from ctxwin.tokens.seed import SeedEstimator
from ctxwin.tokens.seeds import (
    BOUND_MODEL_CALIBRATION,
    CLAUDE_NEXT_SEED,
    CLAUDE_TOKENIZER_GROWTH,
    DEFAULT_CALIBRATION,
    MODEL_CALIBRATION,
    claude_seed,
    default_calibration,
)

__all__ = [
    "ANTHROPIC_TOOL_PROMPT",
    "AUTO_TOKENIZER",
    "BOUND_MODEL_CALIBRATION",
    "BPE_MISSING",
    "CLAUDE_NEXT_SEED",
    "CLAUDE_TOKENIZER_GROWTH",
    "DEFAULT_CALIBRATION",
    "ESTIMATORS",
    "MODEL_CALIBRATION",
    "OPENAI_REASONING_PREAMBLE",
    "OPENAI_REPLY_PRIMING",
    "OPENAI_TOOLS_PREAMBLE",
    "OPEN_FAMILIES",
    "REASONING_FAMILIES",
    "SCALE",
    "SEED_CALIBRATION",
    "TOKENIZERS",
    "TOOL_PROMPT_TOKENS",
    "BoundEstimator",
    "ContentEstimator",
    "Estimator",
    "Kind",
    "SeedEstimator",
    "TokenizerEstimator",
    "auto_estimator",
    "calibrated",
    "claude_seed",
    "default_calibration",
    "default_estimator",
    "exact_decimal",
    "exact_encoding",
    "get_estimator",
    "name_family",
    "provider_framing",
    "reasoning_model",
]
