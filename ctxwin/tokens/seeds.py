"""Calibration seeds: the factor an estimate starts at, per model family.

Each estimator states its own seed (:meth:`~ctxwin.tokens.base.Estimator.seed`): the
ADR's 1.15 for its formula, which can under-count; 1.0 for exact counts; for
``content`` and ``bound``, 1.0 or the measured seed of the model's family in their
table here (:func:`family_seed`).
"""

from __future__ import annotations

from functools import lru_cache

from ctxwin.tokens.models import lookup_model, match

MODEL_CALIBRATION: tuple[tuple[str, float], ...] = (
    ("claude", 1.35),
    ("deepseek", 1.2),
    ("llama-4", 1.3),
    ("llama4", 1.3),
)
"""Seeds for :class:`ContentEstimator` on model families whose own tokenizers
count more than the four it bounds, by family (:func:`ctxwin.tokens.models.match`:
``anthropic/claude-…`` and Bedrock's ``us.anthropic.claude-…`` are ``claude``).
Each is the largest reported prompt count ÷ the uncalibrated estimate of the same body
over the *fit part* of the recorded provider calls, rounded up to 0.05 (``python -m
fidelity.provider`` → fidelity/provider.md; the held-out part is only measured against
them, and it is a thin check: 50 calls, 33 of them from one run, docs/fidelity.md):
Claude Sonnet 4/4.5 and Haiku 4.5 1.322, DeepSeek-V3 1.160, Llama 4 Maverick 1.279; held
out, 1.109, 1.141 and 1.279. A Claude model on the newer tokenizer takes
:data:`CLAUDE_NEXT_SEED` instead (:func:`claude_seed`)."""

BOUND_MODEL_CALIBRATION: tuple[tuple[str, float], ...] = (
    ("claude", 1.4),
    ("deepseek", 1.4),
    ("llama-4", 1.45),
    ("llama4", 1.45),
)
"""Seeds for :class:`BoundEstimator` on the model families of :data:`MODEL_CALIBRATION`.
It sits closer to the four tokenizers than ``content``, so it cannot borrow their seeds,
which rest on ``content``'s slack. Each is the provider-reported prompt count ÷ the
largest of the four exact counts of the same body (with the estimators' framing), worst
call of the fit part of the recorded provider calls, rounded up to 0.05: Claude Sonnet
4.5 1.353, DeepSeek-V3 1.366, Llama 4 Maverick 1.418 (``python -m fidelity.provider``;
held out, a thin check, 1.184, 1.281 and 1.397). The bound is never below the largest of
the four, so the bound times its seed is not below those calls' reported counts either.
Claude on the newer tokenizer takes :data:`CLAUDE_NEXT_SEED` too."""

CLAUDE_TOKENIZER_GROWTH = 1.35
"""Anthropic documents that the tokenizer of Claude Opus 4.7 and later models
"may use roughly 1× to 1.35× as many tokens when processing text compared to
previous models" (platform.claude.com, "What's new in Claude Opus 4.7" and the
migration guide). The model table marks those models ``tokenizer_generation`` 2."""

CLAUDE_GROWTH_MEASURED = 1.47
"""The largest growth of the generation-2 Claude tokenizer over generation 1 measured
outside Anthropic: ``count_tokens`` comparisons of Opus 4.6 and 4.7 published after the
release found 1.45× on English prose and 1.47× on technical documents (see
:data:`CLAUDE_NEXT_SEED`)."""

CLAUDE_NEXT_SEED = 2.0
"""The seed of a Claude model on the generation-2 tokenizer (Opus 4.7 and later).

It rests on two figures: the generation-1 worst case on the fit part of the recorded
provider calls (1.322× ``content``'s uncalibrated estimate, 1.353× the largest of the
four exact counts: :data:`MODEL_CALIBRATION`, :data:`BOUND_MODEL_CALIBRATION`) times
Anthropic's documented growth of up to 1.35× (:data:`CLAUDE_TOKENIZER_GROWTH`) is 1.83;
times the largest growth measured since (:data:`CLAUDE_GROWTH_MEASURED`, 1.47) it is
1.99, rounded up to 0.05 (``python -m fidelity.provider``). The corpus holds no call to
such a model, so this seed is not measured here; pathological text (one letter
repeated) grows ~3× and is not covered. Usage teaches the real factor after the first
call (``ctxwin proxy``, :class:`~ctxwin.ContextWindowManager`)."""


@lru_cache(maxsize=256)
def claude_seed(model: str, first: float = MODEL_CALIBRATION[0][1]) -> float:
    """The seed of Claude ``model``: ``first`` (the generation-1 seed, 1.35 for
    ``content``) when the model table puts it on the generation-1 tokenizer, else
    :data:`CLAUDE_NEXT_SEED` (a Claude model the table does not know is taken to be
    newer)."""
    row = lookup_model(model)
    if row is not None and row.tokenizer == "claude" and row.tokenizer_generation == 1:
        return first
    return CLAUDE_NEXT_SEED


def family_seed(model: str | None, table: tuple[tuple[str, float], ...]) -> float:
    """The seed ``table`` gives ``model``'s family (:data:`MODEL_CALIBRATION`,
    :data:`BOUND_MODEL_CALIBRATION`), a Claude model's by the generation of its tokenizer
    (:func:`claude_seed`); 1.0 for a model no row names."""
    if model:
        found = match(model, dict(table))
        if found is not None:
            family = found[0]
            seed = dict(table)[family]
            return claude_seed(model, seed) if family == "claude" else seed
    return 1.0
