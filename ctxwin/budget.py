"""Model spec → token budget.

``budget = context_length − reserve − safety`` where

* ``reserve`` is the response allocation: an explicit ``max_tokens``, else the
  body's ``max_tokens``/``max_completion_tokens``, else the model's output cap,
  else ``max(1000, ceil(0.02 × context_length))``;
* ``safety`` is ``ceil(0.03 × context_length)``;
* an unknown context length falls back to 8192.

Each field of the spec comes from the first source that has it: flags, then a
spec file, then the built-in model table (``ctxwin/data/models.json``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache
from typing import Any, Literal, NamedTuple

import orjson

from ctxwin.errors import SpecError

FALLBACK_CONTEXT_LENGTH = 8192
RESERVE_FLOOR = 1000
RESERVE_PERCENT = 2
SAFETY_PERCENT = 3

_BOUNDARY = "-:@_"


ContextSource = Literal["flag", "spec", "table", "fallback"]
"""Where a context length came from."""

ReserveSource = Literal["flag", "body", "model", "default"]
"""Where the response reserve came from."""


class ModelRow(NamedTuple):
    """One row of the built-in model table.

    A NamedTuple: a dataclass would compile its methods at every start.
    """

    name: str
    provider: str
    context_length: int
    max_output_tokens: int | None
    source: str
    date: str
    tokenizer: str | None = None
    """The model's tokenizer family: an encoding ``--tokenizer`` counts exactly
    (``o200k_base``, ``cl100k_base``, ``llama3``, ``qwen3``) or a family it does not
    ship (``claude``, ``gemini``, ``llama4``, ``mistral``, ``deepseek-v3``, ``qwen``)."""
    tokenizer_generation: int | None = None
    """Claude only: 1 for Claude 3 through Opus 4.6 / Sonnet 4.6 / Haiku 4.5, 2 for the
    tokenizer of Claude Opus 4.7 and later (up to 1.35× the tokens of generation 1,
    :data:`ctxwin.tokens.CLAUDE_TOKENIZER_GROWTH`)."""


class ModelSpec(NamedTuple):
    """What is known about the target model, and where each figure came from.

    A NamedTuple: a dataclass would compile its methods at every start.
    """

    name: str | None
    context_length: int
    context_length_source: ContextSource
    """``flag``, ``spec``, ``table`` or ``fallback``."""
    max_output_tokens: int | None = None
    max_output_tokens_source: str | None = None
    table_row: str | None = None
    """Name of the model-table row that matched, if any."""


class Budget(NamedTuple):
    """The token budget for the prompt, and how it was derived.

    A NamedTuple: a dataclass would compile its methods at every start.
    """

    spec: ModelSpec
    reserve: int
    reserve_source: ReserveSource
    safety: int
    budget: int

    @property
    def context_length(self) -> int:
        return self.spec.context_length

    @property
    def enforced(self) -> bool:
        """False when the budget is not positive: the transcript then passes unchanged."""
        return self.budget > 0


@cache
def model_table() -> tuple[ModelRow, ...]:
    """The built-in model table, in file order."""
    # orjson and os.path: json and pathlib would add to every command's start-up
    with open(os.path.join(os.path.dirname(__file__), "data", "models.json"), "rb") as f:
        rows = orjson.loads(f.read())["models"]
    return tuple(
        ModelRow(
            name=r["name"],
            provider=r["provider"],
            context_length=int(r["context_length"]),
            max_output_tokens=r.get("max_output_tokens"),
            source=r["source"],
            date=r["date"],
            tokenizer=r.get("tokenizer"),
            tokenizer_generation=r.get("tokenizer_generation"),
        )
        for r in rows
    )


@cache
def _by_name() -> dict[str, ModelRow]:
    return {row.name.lower(): row for row in model_table()}


def lookup_model(name: str) -> ModelRow | None:
    """The table row for ``name``: exact, else the longest known prefix.

    Provider prefixes (``openai/``, ``litellm_proxy/anthropic/``) are stripped
    one at a time, and a prefix must end at a boundary (``-``, ``:``, ``@``,
    ``_``), so ``gpt-4o-2024-08-06`` finds ``gpt-4o`` but ``gpt-4o`` never
    finds ``gpt-4``.
    """
    table = _by_name()
    candidate = name.strip().lower()
    while candidate:
        row = table.get(candidate)
        if row is not None:
            return row
        best: ModelRow | None = None
        for key, row in table.items():
            if (
                len(key) < len(candidate)
                and candidate.startswith(key)
                and candidate[len(key)] in _BOUNDARY
                and (best is None or len(key) > len(best.name))
            ):
                best = row
        if best is not None:
            return best
        _, slash, rest = candidate.partition("/")
        candidate = rest if slash else ""
    return None


def _positive_int(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SpecError(f"model spec: {what} must be a positive integer, got {value!r}")
    return value


def spec_fields(data: Any, model: str | None = None) -> tuple[int | None, int | None]:
    """``(context_length, max_output_tokens)`` from a spec-file object.

    Accepts ``context_length``/``max_output_tokens`` and LiteLLM's keys
    (``max_input_tokens``, ``max_tokens``, ``max_output_tokens``). A LiteLLM
    model map (``{"gpt-4o": {...}, ...}``) is searched for ``model``.
    """
    if not isinstance(data, Mapping):
        raise SpecError("model spec: expected a JSON object")
    keys = {"context_length", "max_input_tokens", "max_tokens", "max_output_tokens"}
    if not keys & data.keys():
        entry = _map_entry(data, model)
        if entry is None:
            raise SpecError(
                "model spec: expected context_length and max_output_tokens "
                "(or LiteLLM's max_input_tokens/max_output_tokens)"
                + (f", or an entry for model {model!r}" if model else "")
            )
        data = entry
    ctx = _positive_int(data.get("context_length"), "context_length")
    if ctx is None:
        ctx = _positive_int(data.get("max_input_tokens"), "max_input_tokens")
    out = _positive_int(data.get("max_output_tokens"), "max_output_tokens")
    if out is None:
        out = _positive_int(data.get("max_tokens"), "max_tokens")
    if ctx is None and out is None:
        raise SpecError(f"model spec: the entry for {model!r} has no context length or output cap")
    return ctx, out


def _map_entry(data: Mapping[str, Any], model: str | None) -> Mapping[str, Any] | None:
    if model is None:
        return None
    candidate = model
    while candidate:
        entry = data.get(candidate)
        if isinstance(entry, Mapping):
            return entry
        _, slash, rest = candidate.partition("/")
        candidate = rest if slash else ""
    return None


def resolve_spec(
    model: str | None = None,
    *,
    context_length: int | None = None,
    max_output_tokens: int | None = None,
    spec: Any = None,
) -> ModelSpec:
    """Resolve the model spec, field by field: flags, spec file, table, fallback."""
    spec_ctx, spec_out = spec_fields(spec, model) if spec is not None else (None, None)
    row = lookup_model(model) if model else None
    ctx_source: ContextSource = "flag"
    ctx = _positive_int(context_length, "context_length")
    if ctx is None and spec_ctx is not None:
        ctx, ctx_source = spec_ctx, "spec"
    if ctx is None and row is not None:
        ctx, ctx_source = row.context_length, "table"
    if ctx is None:
        ctx, ctx_source = FALLBACK_CONTEXT_LENGTH, "fallback"
    out_source: str | None = "flag"
    out = _positive_int(max_output_tokens, "max_output_tokens")
    if out is None and spec_out is not None:
        out, out_source = spec_out, "spec"
    if out is None and row is not None and row.max_output_tokens is not None:
        out, out_source = row.max_output_tokens, "table"
    if out is None:
        out_source = None
    return ModelSpec(
        name=model,
        context_length=ctx,
        context_length_source=ctx_source,
        max_output_tokens=out,
        max_output_tokens_source=out_source,
        table_row=row.name if row else None,
    )


def _percent_ceil(percent: int, n: int) -> int:
    """``ceil(percent % of n)`` in integers."""
    return -((-percent * n) // 100)


def compute_budget(
    spec: ModelSpec, *, max_tokens: int | None = None, body_max_tokens: int | None = None
) -> Budget:
    """The budget for ``spec`` given an explicit or body-declared response allocation."""
    ctx = spec.context_length
    source: ReserveSource
    if max_tokens is not None:
        reserve, source = max_tokens, "flag"
    elif body_max_tokens is not None:
        reserve, source = body_max_tokens, "body"
    elif spec.max_output_tokens is not None:
        reserve, source = spec.max_output_tokens, "model"
    else:
        reserve, source = max(RESERVE_FLOOR, _percent_ceil(RESERVE_PERCENT, ctx)), "default"
    safety = _percent_ceil(SAFETY_PERCENT, ctx)
    return Budget(spec, reserve, source, safety, ctx - reserve - safety)
