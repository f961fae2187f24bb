"""Model prices and prompt-caching rules: the ``price`` and ``cache`` objects of the
model table (``ctxwin/data/models.json``) and of a spec file, LiteLLM's per-token keys
included.

Prices are USD per million tokens; a field is ``None`` when unknown, never guessed. This
module is loaded only when something asks for a price (:attr:`ctxwin.fitting.budget.ModelRow.price`,
a spec file): building its classes would add to every command's start-up.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

from ctxwin.errors import SpecError, spec_int

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


def table_pricing(p: Mapping[str, Any]) -> Pricing:
    """A ``price`` object of ``models.json`` (trusted: the table's tests check it)."""
    above = p.get("above")
    if above is None:
        return Pricing(**p)
    return Pricing(**{**p, "above": Pricing(**above)})


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


def spec_pricing(entry: Mapping[str, Any]) -> tuple[Pricing | None, CacheRules | None]:
    """The prices and the caching rules a spec file's entry for the model gives (``None``
    where it gives none): ctxwin's ``price``/``cache`` objects (USD per million tokens, as
    in ``models.json``), else LiteLLM's per-token keys (``input_cost_per_token``,
    ``cache_read_input_token_cost``, ``input_cost_per_token_above_200k_tokens``, …),
    scaled to a million tokens, and its ``prompt_cache_min_tokens``.

    Raises :class:`~ctxwin.errors.SpecError` for a price that is not a number at least
    zero, an unknown key or an unknown cache kind."""
    own = entry.get("price")
    if own is not None:
        price: Pricing | None = _own_price(own, "price")
    else:
        price = _litellm_price(entry)
    own_cache = entry.get("cache")
    if own_cache is not None:
        cache: CacheRules | None = _own_cache(own_cache)
    else:
        least = spec_int(entry.get("prompt_cache_min_tokens"), "prompt_cache_min_tokens")
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
        fields["tokens"] = spec_int(p.get("tokens"), f"{what}.tokens")
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
            k: spec_int(c.get(k), f"cache.{k}")
            for k in ("min_prefix", "step", "ttl_seconds", "max_breakpoints")
        },
    )
