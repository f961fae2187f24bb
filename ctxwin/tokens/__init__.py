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

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ctxwin.tokens.base import (
        SEED_CALIBRATION,
        Estimator,
        Kind,
        calibrated,
        exact_decimal,
        scaled,
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
    from ctxwin.tokens.registry import (
        DEFAULT_ESTIMATOR,
        ESTIMATORS,
        check_estimator,
        default_calibration,
        default_estimator,
        estimator_for,
        get_estimator,
        seed_of,
    )
    from ctxwin.tokens.seed import SeedEstimator
    from ctxwin.tokens.seeds import (
        BOUND_MODEL_CALIBRATION,
        CLAUDE_NEXT_SEED,
        CLAUDE_TOKENIZER_GROWTH,
        MODEL_CALIBRATION,
        claude_seed,
        family_seed,
    )

_SOURCES = {
    "ANTHROPIC_TOOL_PROMPT": "framing",
    "AUTO_TOKENIZER": "bpe",
    "BOUND_MODEL_CALIBRATION": "seeds",
    "BPE_MISSING": "bpe",
    "BoundEstimator": "bound",
    "CLAUDE_NEXT_SEED": "seeds",
    "CLAUDE_TOKENIZER_GROWTH": "seeds",
    "ContentEstimator": "content",
    "DEFAULT_ESTIMATOR": "registry",
    "ESTIMATORS": "registry",
    "check_estimator": "registry",
    "estimator_for": "registry",
    "Estimator": "base",
    "Kind": "base",
    "MODEL_CALIBRATION": "seeds",
    "OPENAI_REASONING_PREAMBLE": "framing",
    "OPENAI_REPLY_PRIMING": "framing",
    "OPENAI_TOOLS_PREAMBLE": "framing",
    "OPEN_FAMILIES": "bpe",
    "REASONING_FAMILIES": "framing",
    "SCALE": "content",
    "SEED_CALIBRATION": "base",
    "SeedEstimator": "seed",
    "TOKENIZERS": "bpe",
    "TOOL_PROMPT_TOKENS": "framing",
    "TokenizerEstimator": "bpe",
    "auto_estimator": "bpe",
    "calibrated": "base",
    "scaled": "base",
    "claude_seed": "seeds",
    "default_calibration": "registry",
    "family_seed": "seeds",
    "seed_of": "registry",
    "default_estimator": "registry",
    "exact_decimal": "base",
    "exact_encoding": "bpe",
    "get_estimator": "registry",
    "name_family": "models",
    "provider_framing": "framing",
    "reasoning_model": "framing",
}
"""Each public name → the module of this package that defines it: a name is imported on
first use, so a command loads only the modules it needs (start-up time)."""


def __getattr__(name: str) -> Any:
    module = _SOURCES.get(name)
    if module is None:
        raise AttributeError(f"module 'ctxwin.tokens' has no attribute {name!r}")
    return getattr(import_module(f"ctxwin.tokens.{module}"), name)


__all__ = [
    "ANTHROPIC_TOOL_PROMPT",
    "AUTO_TOKENIZER",
    "BOUND_MODEL_CALIBRATION",
    "BPE_MISSING",
    "CLAUDE_NEXT_SEED",
    "CLAUDE_TOKENIZER_GROWTH",
    "DEFAULT_ESTIMATOR",
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
    "check_estimator",
    "claude_seed",
    "default_calibration",
    "default_estimator",
    "estimator_for",
    "exact_decimal",
    "exact_encoding",
    "family_seed",
    "get_estimator",
    "name_family",
    "provider_framing",
    "reasoning_model",
    "scaled",
    "seed_of",
]
