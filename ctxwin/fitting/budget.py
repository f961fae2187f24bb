"""Model spec → token budget.

``budget = min(context_length − reserve, max_input_tokens) − safety`` where

* ``reserve`` is the response allocation: an explicit ``max_tokens``, else the
  body's ``max_tokens``/``max_completion_tokens``, else the model's output cap,
  else ``max(1000, ceil(0.02 × context_length))``. A model-table output cap
  applied to a window smaller than the table's own is scaled to it: ``ceil(cap ×
  context_length ÷ table window)``, never below that default nor above the cap (source
  ``scaled``); a table cap never reserves more than half the window (gpt-4's 8,192 of
  8,192 reserves 4,096): the response keeps the share of the window the model gives it, and
  a 64,000-token cap never swallows a 50,000-token window;
* ``max_input_tokens`` is the provider's cap on the prompt, where it has one apart
  from the window (OpenAI's GPT-5 models: 272,000 of a 400,000 window); none
  means no cap beyond the window. The table's cap goes with the table's window: a
  window given by flag or spec file replaces both (a spec file may name its own cap);
* ``safety`` is ``ceil(0.03 × context_length)``;
* an unknown context length falls back to 8192.

A budget that is not positive (the window is at most reserve + safety) leaves no
room for any prompt: fitting then reports an overflow at the floor
(:attr:`Budget.enforced` is false) and every caller refuses to send
(:class:`~ctxwin.errors.NoBudget`); nothing passes through unchecked.

Each field of the spec comes from the first source that has it: flags, then a
spec file, then the built-in model table (``ctxwin/data/models.json``). The window has two
more: a model id ending in ``[1m]`` asks for the 1M-token window (source ``name``) after a
spec file; and a window given with a source of its own (an agent tool's session:
:mod:`ctxwin.fitting.windows`) is named by it (``session``, ``tool``).

The table and a spec file may also give the model's prices
(:class:`~ctxwin.cost.pricing.Pricing`, USD per million tokens, with a long-context tier above
a prompt size) and its prompt-caching rules (:class:`~ctxwin.cost.pricing.CacheRules`), for
pricing recorded runs offline; either is ``None`` when unknown. They are built on use
(:mod:`ctxwin.cost.pricing`), so a command that prices nothing pays nothing for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from ctxwin.errors import SpecError, spec_int
from ctxwin.tokens.models import (
    LONG_CONTEXT_WINDOW,
    long_context,
    lookup_model,
    table_row,
    unknown_model_words,
)

if TYPE_CHECKING:
    from ctxwin.cost.pricing import CacheRules, Pricing

FALLBACK_CONTEXT_LENGTH = 8192
RESERVE_FLOOR = 1000
RESERVE_PERCENT = 2
SAFETY_PERCENT = 3

ContextSource = Literal["flag", "spec", "name", "session", "tool", "table", "fallback"]
"""Where a context length came from: a flag (or the caller), a spec file, the model name
(a ``[1m]`` id), an agent tool's session file (the window it names, or the larger one its
reports show), the agent tool's own default for the model, the model table, or the
fallback for an unknown model."""

CONTEXT_SOURCES: tuple[ContextSource, ...] = (
    "flag",
    "spec",
    "name",
    "session",
    "tool",
    "table",
    "fallback",
)

ReserveSource = Literal["flag", "body", "model", "scaled", "default"]
"""Where the response reserve came from (``scaled``: the model table's output cap,
scaled to a window smaller than the table's)."""


class ModelSpec(NamedTuple):
    """What is known about the target model, and where each figure came from.

    A NamedTuple: a dataclass would compile its methods at every start.
    """

    name: str | None
    context_length: int
    context_length_source: ContextSource
    """One of :data:`CONTEXT_SOURCES`."""
    max_output_tokens: int | None = None
    max_output_tokens_source: str | None = None
    table_row: str | None = None
    """Name of the model-table row that matched, if any."""
    max_input_tokens: int | None = None
    """The provider's cap on the prompt (``None``: none apart from the window)."""
    max_input_tokens_source: str | None = None
    """``flag``, ``spec`` or ``table``; ``None`` when there is no input cap."""
    table_context_length: int | None = None
    """The matched table row's window, whatever window applies (a smaller window than
    the table's scales the table's output cap: :func:`compute_budget`)."""
    spec_price: Pricing | None = None
    """The prices a spec file gave (see :attr:`price`)."""
    spec_cache: CacheRules | None = None
    """The caching rules a spec file gave (see :attr:`cache`)."""

    @property
    def price(self) -> Pricing | None:
        """The model's prices, USD per million tokens: the spec file's, else the matched
        table row's; ``None`` when unknown."""
        if self.spec_price is not None:
            return self.spec_price
        row = table_row(self.table_row)
        return None if row is None else row.price

    @property
    def price_source(self) -> str | None:
        """``spec`` or ``table``; ``None`` when no price is known."""
        if self.spec_price is not None:
            return "spec"
        row = table_row(self.table_row)
        return "table" if row is not None and row.price_source is not None else None

    @property
    def cache(self) -> CacheRules | None:
        """The model's prompt-caching rules: the spec file's, else the table row's."""
        if self.spec_cache is not None:
            return self.spec_cache
        row = table_row(self.table_row)
        return None if row is None else row.cache


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
        """False when the budget is not positive: no prompt fits, so fitting reports an
        overflow at the floor and nothing may be sent (:class:`~ctxwin.errors.NoBudget`)."""
        return self.budget > 0


def spec_fields(data: Any, model: str | None = None) -> tuple[int | None, int | None]:
    """``(context_length, max_output_tokens)`` from a spec-file object.

    Accepts ``context_length``/``max_output_tokens`` and LiteLLM's keys
    (``max_input_tokens``, ``max_tokens``, ``max_output_tokens``). A LiteLLM
    model map (``{"gpt-4o": {...}, ...}``) is searched for ``model``.
    """
    data = _spec_entry(data, model)
    ctx = spec_int(data.get("context_length"), "context_length")
    if ctx is None:
        ctx = spec_int(data.get("max_input_tokens"), "max_input_tokens")
    out = spec_int(data.get("max_output_tokens"), "max_output_tokens")
    if out is None:
        out = spec_int(data.get("max_tokens"), "max_tokens")
    if ctx is None and out is None:
        raise SpecError(f"model spec: the entry for {model!r} has no context length or output cap")
    return ctx, out


def spec_input_cap(data: Any, model: str | None = None) -> int | None:
    """The input cap a spec-file object gives: its ``max_input_tokens`` when it also
    names a ``context_length`` (alone, LiteLLM's ``max_input_tokens`` is taken as the
    window: :func:`spec_fields`)."""
    entry = _spec_entry(data, model)
    if entry.get("context_length") is None:
        return None
    return spec_int(entry.get("max_input_tokens"), "max_input_tokens")


def _spec_entry(data: Any, model: str | None) -> Mapping[str, Any]:
    """The object of a spec file that describes ``model`` (the file itself, or the
    entry of a LiteLLM model map)."""
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
        return entry
    return data


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
    max_input_tokens: int | None = None,
    context_length_source: ContextSource = "flag",
) -> ModelSpec:
    """Resolve the model spec, field by field: flags, spec file, table, fallback; the
    window also from a ``[1m]`` model id after the spec file. ``context_length_source``
    names where ``context_length`` came from (default: a flag)."""
    spec_ctx, spec_out = spec_fields(spec, model) if spec is not None else (None, None)
    spec_in = spec_input_cap(spec, model) if spec is not None else None
    price = cache = None
    if spec is not None:
        from ctxwin.cost.pricing import spec_pricing

        price, cache = spec_pricing(_spec_entry(spec, model))
    row = lookup_model(model) if model else None
    ctx_source: ContextSource = context_length_source
    ctx = spec_int(context_length, "context_length")
    if ctx is None and spec_ctx is not None:
        ctx, ctx_source = spec_ctx, "spec"
    if ctx is None and long_context(model):
        ctx, ctx_source = LONG_CONTEXT_WINDOW, "name"
    if ctx is None and row is not None:
        ctx, ctx_source = row.context_length, "table"
    if ctx is None:
        ctx, ctx_source = FALLBACK_CONTEXT_LENGTH, "fallback"
    out_source: str | None = "flag"
    out = spec_int(max_output_tokens, "max_output_tokens")
    if out is None and spec_out is not None:
        out, out_source = spec_out, "spec"
    if out is None and row is not None and row.max_output_tokens is not None:
        out, out_source = row.max_output_tokens, "table"
    if out is None:
        out_source = None
    in_source: str | None = "flag"
    cap = spec_int(max_input_tokens, "max_input_tokens")
    if cap is None and spec_in is not None:
        cap, in_source = spec_in, "spec"
    if cap is None and ctx_source == "table" and row is not None:
        # the table's cap belongs to the table's window: a window given instead replaces both
        cap, in_source = row.max_input_tokens, "table"
    if cap is None:
        in_source = None
    return ModelSpec(
        name=model,
        context_length=ctx,
        context_length_source=ctx_source,
        max_output_tokens=out,
        max_output_tokens_source=out_source,
        table_row=row.name if row else None,
        max_input_tokens=cap,
        max_input_tokens_source=in_source,
        table_context_length=row.context_length if row else None,
        spec_price=price,
        spec_cache=cache,
    )


def spec_warnings(spec: ModelSpec) -> list[str]:
    """What to warn about ``spec``: a window that is the fallback for a model the table
    does not know (naming the closest names it has), or for no model named."""
    if spec.context_length_source != "fallback":
        return []
    return [unknown_model_words(spec.name, spec.context_length)]


def _percent_ceil(percent: int, n: int) -> int:
    """``ceil(percent % of n)`` in integers."""
    return -((-percent * n) // 100)


def default_reserve(context_length: int) -> int:
    """The reserve when nothing names one: ``max(1000, ceil(0.02 × context_length))``."""
    return max(RESERVE_FLOOR, _percent_ceil(RESERVE_PERCENT, context_length))


def compute_budget(
    spec: ModelSpec, *, max_tokens: int | None = None, body_max_tokens: int | None = None
) -> Budget:
    """The budget for ``spec`` given an explicit or body-declared response allocation."""
    ctx = spec.context_length
    source: ReserveSource
    table_ctx = spec.table_context_length
    if max_tokens is not None:
        reserve, source = max_tokens, "flag"
    elif body_max_tokens is not None:
        reserve, source = body_max_tokens, "body"
    elif spec.max_output_tokens is not None:
        reserve, source = spec.max_output_tokens, "model"
        if spec.max_output_tokens_source == "table" and table_ctx is not None and ctx < table_ctx:
            scaled = -((-reserve * ctx) // table_ctx)
            reserve, source = min(reserve, max(default_reserve(ctx), scaled)), "scaled"
        if spec.max_output_tokens_source == "table" and reserve > ctx // 2:
            # a cap as large as the window (gpt-4: 8,192 of 8,192) would leave no prompt
            reserve, source = ctx // 2, "scaled"
    else:
        reserve, source = default_reserve(ctx), "default"
    safety = _percent_ceil(SAFETY_PERCENT, ctx)
    room = ctx - reserve
    if spec.max_input_tokens is not None:
        room = min(room, spec.max_input_tokens)
    return Budget(spec, reserve, source, safety, room - safety)
