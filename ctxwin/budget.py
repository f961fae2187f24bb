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
spec file, then the built-in model table (``ctxwin/data/models.json``).

The table and a spec file may also give the model's prices (:class:`Pricing`, USD per
million tokens, with a long-context tier above a prompt size) and its prompt-caching
rules (:class:`CacheRules`), for pricing recorded runs offline; either is ``None`` when
unknown. A LiteLLM entry's per-token costs are read as prices per million tokens.
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

ReserveSource = Literal["flag", "body", "model", "scaled", "default"]
"""Where the response reserve came from (``scaled``: the model table's output cap,
scaled to a window smaller than the table's)."""

SNAPSHOT_WORDS = frozenset(("latest", "preview", "exp", "experimental", "instruct"))
"""Words after a model name that name a release of the same model, as a date does
(``gpt-4o-2024-08-06``, ``gemini-2.5-flash-preview-05-20``), not a sibling model."""


CacheKind = Literal["breakpoints", "automatic", "implicit", "none"]
"""How a provider caches prompt prefixes: ``breakpoints`` (explicit ``cache_control``
marks, Anthropic), ``automatic`` (every long enough prefix, OpenAI), ``implicit``
(Gemini's implicit caching) or ``none``."""

CACHE_KINDS: frozenset[str] = frozenset(("breakpoints", "automatic", "implicit", "none"))

PER_MILLION = 1_000_000


class Pricing(NamedTuple):
    """A model's prices in USD per million tokens; a field is ``None`` when unknown.

    ``above`` is the long-context tier: the prices of a request whose prompt is longer
    than its ``tokens`` (Gemini 2.5 Pro above 200,000 tokens). A NamedTuple: a dataclass
    would compile its methods at every start.
    """

    input: float | None = None
    output: float | None = None
    cache_read: float | None = None
    """A cached prompt token read back (OpenAI, Anthropic: a tenth of ``input``)."""
    cache_write: float | None = None
    """A prompt token written to the cache (Anthropic's 5-minute writes: 1.25 × input)."""
    cache_write_1h: float | None = None
    """Anthropic's 1-hour cache writes (2 × input)."""
    tokens: int | None = None
    """In a tier (``above``): the prompt size above which the tier applies."""
    above: Pricing | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape of ``models.json``: the known fields only."""
        out: dict[str, Any] = {
            k: v for k, v in zip(self._fields, self, strict=True) if v is not None and k != "above"
        }
        if self.above is not None:
            out["above"] = self.above.as_dict()
        return out


class CacheRules(NamedTuple):
    """A model's prompt-caching rules; a field is ``None`` when unknown.

    A NamedTuple: a dataclass would compile its methods at every start.
    """

    kind: CacheKind | None = None
    min_prefix: int | None = None
    """The shortest cacheable prefix in tokens (OpenAI: 1,024; Anthropic: 512 to 4,096
    by model)."""
    step: int | None = None
    """A cached prefix grows in steps of this many tokens."""
    ttl_seconds: int | None = None
    """How long an unused cache entry lives, at least (Anthropic: 300 by default)."""
    max_breakpoints: int | None = None
    """``breakpoints``: the most cache marks one request may carry (Anthropic: 4)."""

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape of ``models.json``: the known fields only."""
        return {k: v for k, v in zip(self._fields, self, strict=True) if v is not None}


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
    :data:`ctxwin.estimate.CLAUDE_TOKENIZER_GROWTH`)."""
    max_input_tokens: int | None = None
    """The provider's cap on the prompt where it is below ``context_length`` minus the
    output cap (GPT-5: 272,000 of 400,000); ``None``: the window is the only cap."""
    price: Pricing | None = None
    price_source: str | None = None
    price_date: str | None = None
    cache: CacheRules | None = None
    cache_source: str | None = None
    note: str | None = None
    """Where the figures differ from a source read, or could not be checked."""
    litellm_key: str | None = None
    """The entry of LiteLLM's model map the figures (and prices) were read from."""


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
    max_input_tokens: int | None = None
    """The provider's cap on the prompt (``None``: none apart from the window)."""
    max_input_tokens_source: str | None = None
    """``flag``, ``spec`` or ``table``; ``None`` when there is no input cap."""
    table_context_length: int | None = None
    """The matched table row's window, whatever window applies (a smaller window than
    the table's scales the table's output cap: :func:`compute_budget`)."""
    price: Pricing | None = None
    """The model's prices, USD per million tokens (``None``: unknown)."""
    price_source: str | None = None
    """``spec`` or ``table``; ``None`` when no price is known."""
    cache: CacheRules | None = None
    """The model's prompt-caching rules (``None``: unknown)."""


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
            max_input_tokens=r.get("max_input_tokens"),
            price=_table_price(r.get("price")),
            price_source=r.get("price_source"),
            price_date=r.get("price_date"),
            cache=CacheRules(**r["cache"]) if "cache" in r else None,
            cache_source=r.get("cache_source"),
            note=r.get("note"),
            litellm_key=r.get("litellm_key"),
        )
        for r in rows
    )


def _table_price(p: dict[str, Any] | None) -> Pricing | None:
    if p is None:
        return None
    above = p.get("above")
    if above is None:
        return Pricing(**p)
    return Pricing(**{**p, "above": Pricing(**above)})


@cache
def _by_name() -> dict[str, ModelRow]:
    return {row.name.lower(): row for row in model_table()}


def lookup_model(name: str) -> ModelRow | None:
    """The table row for ``name``: exact, else the longest known prefix.

    Provider prefixes (``openai/``, ``litellm_proxy/anthropic/``) are stripped
    one at a time, and a prefix must end at a boundary (``-``, ``:``, ``@``,
    ``_``), so ``gpt-4o-2024-08-06`` finds ``gpt-4o`` but ``gpt-4o`` never
    finds ``gpt-4``.

    A name that extends a row's by a word (``gpt-5.4-mini`` after ``gpt-5.4``) names a
    sibling model, not a release of that row's (a date, a number or one of
    :data:`SNAPSHOT_WORDS`): it never inherits a larger window than the family's row
    for that word. The row's name is shortened one ``-`` or ``.`` part at a time to
    find that family row (``gpt-5`` + ``-mini``: ``gpt-5-mini``), and of the two the
    one with the smaller window is the answer.
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
            return _sibling_guard(best, candidate[len(best.name) + 1 :], table)
        _, slash, rest = candidate.partition("/")
        candidate = rest if slash else ""
    return None


def _sibling_guard(row: ModelRow, rest: str, table: Mapping[str, ModelRow]) -> ModelRow:
    """``row``, or the family row of the variant word that starts ``rest`` when its
    window is no larger (see :func:`lookup_model`)."""
    word = rest
    for i, ch in enumerate(rest):
        if ch in _BOUNDARY or ch == ".":
            word = rest[:i]
            break
    if not word or not word[0].isalpha() or word in SNAPSHOT_WORDS:
        return row
    stem = row.name.lower()
    while True:
        cut = max(stem.rfind("-"), stem.rfind("."))
        if cut <= 0:
            return row
        stem = stem[:cut]
        family = table.get(f"{stem}-{word}")
        if family is not None:
            return family if family.context_length <= row.context_length else row


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
    data = _spec_entry(data, model)
    ctx = _positive_int(data.get("context_length"), "context_length")
    if ctx is None:
        ctx = _positive_int(data.get("max_input_tokens"), "max_input_tokens")
    out = _positive_int(data.get("max_output_tokens"), "max_output_tokens")
    if out is None:
        out = _positive_int(data.get("max_tokens"), "max_tokens")
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
    return _positive_int(entry.get("max_input_tokens"), "max_input_tokens")


_LITELLM_PRICE_KEYS = {
    "input_cost_per_token": "input",
    "output_cost_per_token": "output",
    "cache_read_input_token_cost": "cache_read",
    "cache_creation_input_token_cost": "cache_write",
    "cache_creation_input_token_cost_above_1hr": "cache_write_1h",
}
"""LiteLLM's per-token cost keys and the :class:`Pricing` field each gives; a key with
``_above_<N>k_tokens`` after it gives the same field of the tier above N thousand tokens."""

_PRICE_FIELDS = ("input", "output", "cache_read", "cache_write", "cache_write_1h")


def spec_pricing(data: Any, model: str | None = None) -> tuple[Pricing | None, CacheRules | None]:
    """The prices and the caching rules a spec-file object gives (``None`` where it gives
    none): ctxwin's ``price``/``cache`` objects (USD per million tokens, as in
    ``models.json``), else LiteLLM's per-token keys (``input_cost_per_token``,
    ``cache_read_input_token_cost``, ``input_cost_per_token_above_200k_tokens``, …),
    scaled to a million tokens, and its ``prompt_cache_min_tokens``."""
    entry = _spec_entry(data, model)
    own = entry.get("price")
    if own is not None:
        price: Pricing | None = _own_price(own, "price")
    else:
        price = _litellm_price(entry)
    own_cache = entry.get("cache")
    if own_cache is not None:
        cache: CacheRules | None = _own_cache(own_cache)
    else:
        least = _positive_int(entry.get("prompt_cache_min_tokens"), "prompt_cache_min_tokens")
        cache = None if least is None else CacheRules(min_prefix=least)
    return price, cache


def _cost(value: Any, what: str, scale: int = 1) -> float:
    """A price: a finite number not below zero, times ``scale`` (a LiteLLM per-token
    cost is scaled to a million tokens, rounded to a millionth of a dollar)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or value < 0
        or value != value  # NaN
        or value == float("inf")
    ):
        raise SpecError(f"model spec: {what} must be a number not below zero, got {value!r}")
    return round(float(value) * scale, 6)


def _own_price(p: Any, what: str, tier: bool = False) -> Pricing:
    if not isinstance(p, Mapping):
        raise SpecError(f"model spec: {what} must be an object of prices per million tokens")
    known = {*_PRICE_FIELDS, "tokens"} if tier else {*_PRICE_FIELDS, "above"}
    unknown = sorted(set(p) - known)
    if unknown:
        raise SpecError(f"model spec: {what} has unknown key {unknown[0]!r}")
    fields: dict[str, Any] = {
        k: _cost(p[k], f"{what}.{k}") for k in _PRICE_FIELDS if p.get(k) is not None
    }
    if tier:
        fields["tokens"] = _positive_int(p.get("tokens"), f"{what}.tokens")
        if fields["tokens"] is None:
            raise SpecError(f"model spec: {what} needs tokens, the prompt size it applies above")
    elif p.get("above") is not None:
        fields["above"] = _own_price(p["above"], f"{what}.above", tier=True)
    return Pricing(**fields)


def _litellm_price(entry: Mapping[str, Any]) -> Pricing | None:
    base: dict[str, Any] = {}
    tiers: dict[int, dict[str, Any]] = {}
    for key, value in entry.items():
        field = _LITELLM_PRICE_KEYS.get(key)
        if field is not None and value is not None:
            base[field] = _cost(value, key, PER_MILLION)
            continue
        stem, sep, rest = key.rpartition("_above_")
        field = _LITELLM_PRICE_KEYS.get(stem) if sep else None
        if field is None or value is None or not rest.endswith("k_tokens"):
            continue
        thousands = rest[: -len("k_tokens")]
        if not thousands.isdigit():
            continue
        tiers.setdefault(int(thousands) * 1000, {})[field] = _cost(value, key, PER_MILLION)
    if tiers:
        tokens = min(tiers)  # the first tier a growing prompt reaches
        base["above"] = Pricing(**tiers[tokens], tokens=tokens)
    return Pricing(**base) if base else None


def _own_cache(c: Any) -> CacheRules:
    if not isinstance(c, Mapping):
        raise SpecError("model spec: cache must be an object")
    unknown = sorted(set(c) - set(CacheRules._fields))
    if unknown:
        raise SpecError(f"model spec: cache has unknown key {unknown[0]!r}")
    kind = c.get("kind")
    if kind is not None and kind not in CACHE_KINDS:
        raise SpecError(
            f"model spec: cache.kind must be one of {', '.join(sorted(CACHE_KINDS))}, got {kind!r}"
        )
    return CacheRules(
        kind=kind,
        **{
            k: _positive_int(c.get(k), f"cache.{k}")
            for k in ("min_prefix", "step", "ttl_seconds", "max_breakpoints")
        },
    )


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
) -> ModelSpec:
    """Resolve the model spec, field by field: flags, spec file, table, fallback."""
    spec_ctx, spec_out = spec_fields(spec, model) if spec is not None else (None, None)
    spec_in = spec_input_cap(spec, model) if spec is not None else None
    price, cache = spec_pricing(spec, model) if spec is not None else (None, None)
    row = lookup_model(model) if model else None
    price_source: str | None = "spec" if price is not None else None
    if price is None and row is not None and row.price is not None:
        price, price_source = row.price, "table"
    if cache is None and row is not None:
        cache = row.cache
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
    in_source: str | None = "flag"
    cap = _positive_int(max_input_tokens, "max_input_tokens")
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
        price=price,
        price_source=price_source,
        cache=cache,
    )


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
