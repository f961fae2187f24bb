"""The proxy's per-request decision, with no HTTP in it: bytes in, bytes to forward out.

:class:`Fitter` parses a request body once (orjson), reads it with the
route's adapter, fits it with :func:`ctxwin.plan` (and the configured strategy) at the
conversation's calibration, and returns a :class:`Fitted`:

* ``fit`` — within the budget: the *original bytes* are forwarded (never
  re-serialised);
* ``pruned`` — older turns dropped (and maybe results cleared): the fitted
  body, serialised once;
* ``cleared`` — no turn dropped, but the strategy cleared or cut tool results
  or thinking: the edited body, serialised once;
* ``truncated`` — even the floor (head + newest turn) is over the budget:
  nothing is forwarded, the client gets a 400;
* ``unread`` / ``unsafe`` — a body ctxwin cannot read as the route's format,
  or cannot prune without breaking a pairing rule: forwarded as it came (the
  provider decides), with the reason in a header.

A body that is not JSON raises :class:`~ctxwin.errors.InputError`.

State is one bounded map (:class:`Calibrations`): conversation fingerprint →
calibration factor, learned from the usage the provider reports. The
fingerprint (:func:`fingerprint`) hashes what never changes within one agent
run — the route, the model, a hash of the credentials and the head (system
prompt and first user message, which ctxwin never drops) — so requests of one
run find their factor on any proxy that has seen the run, and nothing else is
kept.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from ctxwin.calibration import grow
from ctxwin.codec import dumps, find_big_integer, may_hold_big_number, parse
from ctxwin.core import Plan, Transcript, load, plan
from ctxwin.errors import InputError
from ctxwin.proxy.routes import Route
from ctxwin.pruning import head_end
from ctxwin.settings import DEFAULT, Settings, body_model
from ctxwin.tokens.base import Estimator
from ctxwin.tokens.bpe import AUTO_TOKENIZER

FIT = "fit"
PRUNED = "pruned"
CLEARED = "cleared"
TRUNCATED = "truncated"
UNREAD = "unread"
UNSAFE = "unsafe"
ACTIONS = (FIT, PRUNED, CLEARED, TRUNCATED, UNREAD, UNSAFE)

DEFAULT_MAX_BODY = 32 << 20
"""Request bodies above 32 MiB are refused with 413 unless configured otherwise."""

CREDENTIAL_HEADERS = ("authorization", "x-api-key", "x-goog-api-key", "api-key")
"""Headers whose values separate tenants in the fingerprint (hashed, never stored or logged)."""

_TOP_LEVEL_HEAD = ("system", "instructions", "systemInstruction", "system_instruction")


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    """Everything ``ctxwin proxy`` is told on its command line."""

    upstream: str
    """Base URL requests are forwarded to; the request path is appended to its path."""
    host: str = "127.0.0.1"
    port: int = 8787
    settings: Settings = DEFAULT
    """Model, budget, estimator and strategy, as for ``ctxwin prune``. A ``model`` here
    is budgeted for instead of the body's (or the Gemini path's); a ``calibration`` is
    the factor each conversation starts from; ``fmt`` is ignored (the route decides)."""
    max_body_bytes: int = DEFAULT_MAX_BODY
    conversations: int = 10_000
    """How many conversations' calibrations are remembered (least recently used go first)."""
    connect_timeout: float = 10.0
    read_timeout: float = 600.0
    """Seconds without a byte from the upstream before the request fails (504 before headers)."""


class Calibrations:
    """Bounded LRU map: conversation fingerprint → calibration factor."""

    __slots__ = ("_data", "capacity")

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self._data: OrderedDict[bytes, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: bytes) -> float | None:
        factor = self._data.get(key)
        if factor is not None:
            self._data.move_to_end(key)
        return factor

    def learn(self, key: bytes, factor: float) -> float:
        """Store ``factor`` unless a larger one is already known (factors only grow)."""
        known = self._data.get(key)
        if known is not None and known >= factor:
            self._data.move_to_end(key)
            return known
        self._data[key] = factor
        self._data.move_to_end(key)
        while len(self._data) > self.capacity:
            self._data.popitem(last=False)
        return factor


def fingerprint(
    route: Route, transcript: Transcript, model: str | None, credentials: Iterable[str]
) -> bytes:
    """A 16-byte key for the conversation ``transcript`` belongs to (see the module doc)."""
    body = transcript.body
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{route.name}\0{model}\0".encode())
    for value in credentials:
        h.update(value.encode("utf-8", "replace"))
        h.update(b"\0")
    entries = body.get(transcript.adapter.items_key) if isinstance(body, dict) else body
    if isinstance(entries, list):
        entries = entries[: head_end(transcript.view.items)]
    rest = [body.get(k) for k in _TOP_LEVEL_HEAD] if isinstance(body, dict) else []
    h.update(orjson.dumps([entries, rest], default=str))
    return h.digest()


@dataclass(frozen=True, slots=True)
class Fitted:
    """What to do with one request (see the module doc for ``action``)."""

    action: str
    body: bytes
    """The bytes to forward (empty for ``truncated``)."""
    plan: Plan | None = None
    key: bytes | None = None
    raw_sent: int = 0
    """Uncalibrated estimate of what is forwarded (what calibration learns against)."""
    reason: str | None = None
    """Why a body was forwarded unfitted (``unread``/``unsafe``)."""

    def headers(self) -> dict[str, str]:
        """The ``x-ctxwin-*`` response headers for this decision."""
        out = {"x-ctxwin-action": self.action}
        p = self.plan
        if p is not None:
            r, a = p.result, p.applied
            out.update(
                {
                    "x-ctxwin-dropped-turns": str(r.dropped_turns),
                    "x-ctxwin-dropped-messages": str(len(r.dropped)),
                    "x-ctxwin-kept-turns": str(r.kept_turns),
                    "x-ctxwin-cleared-results": str(a.cleared_results),
                    "x-ctxwin-cleared-thinking": str(a.cleared_thinking),
                    "x-ctxwin-truncated-results": str(a.truncated_results),
                    "x-ctxwin-estimated-tokens": str(r.estimated_tokens),
                    "x-ctxwin-estimated-tokens-after": str(r.estimated_tokens_after),
                    "x-ctxwin-budget": str(r.budget),
                    "x-ctxwin-calibration": f"{r.calibration:.4f}",
                }
            )
        if self.reason is not None:
            out["x-ctxwin-reason"] = self.reason.encode("ascii", "replace").decode("ascii")
        return out


class Fitter:
    """Fits request bodies for the proxy and learns calibration from responses."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.settings = config.settings
        self.estimator = config.settings.make_estimator()
        self._by_model: dict[str | None, Estimator] = {}
        """With ``tokenizer="auto"``: the estimator of each model seen."""
        self.calibrations = Calibrations(config.conversations)

    def fit(self, route: Route, raw: bytes, credentials: Iterable[str] = ()) -> Fitted:
        """Decide what to forward for ``raw`` posted to ``route``.

        Raises :class:`InputError` when ``raw`` is not JSON (the caller answers 400).
        """
        body = parse(raw)
        settings = self.settings
        try:
            transcript = load(body, route.fmt, self.estimator_for(route.model, body))
        except InputError as exc:
            return Fitted(UNREAD, raw, reason=str(exc))
        model = settings.model or route.model
        key = fingerprint(route, transcript, model or transcript.view.model, credentials)
        learned = self.calibrations.get(key)
        changes: dict[str, Any] = {}
        if model != settings.model:
            changes["model"] = model
        if learned is not None:
            changes["calibration"] = learned
        try:
            p = plan(transcript, settings, **changes)
        except InputError as exc:  # fitting needed, but it would break a pairing rule
            return Fitted(UNSAFE, raw, key=key, reason=str(exc))
        result = p.result
        if result.overflow_at_floor:
            return Fitted(TRUNCATED, b"", p, key)
        edited = p.transcript is not transcript
        if not result.pruned and not edited:
            return Fitted(FIT, raw, p, key, result.raw_tokens)
        out = dumps(p.output())
        if may_hold_big_number(out):
            big = find_big_integer(raw)
            if big is not None:
                reason = f"{big} does not fit 64 bits; fitting would rewrite it"
                return Fitted(UNSAFE, raw, key=key, reason=reason)
        action = PRUNED if result.pruned else CLEARED
        return Fitted(action, out, p, key, p.transcript.raw_tokens(result.keep))

    def estimator_for(self, route_model: str | None, body: Any) -> Estimator:
        """The estimator for one request: the configured one, or under
        ``tokenizer="auto"`` the one for the request's model (its route's, else its body's)."""
        if self.settings.tokenizer != AUTO_TOKENIZER:
            return self.estimator
        model = self.settings.model or route_model or body_model(body)
        found = self._by_model.get(model)
        if found is None:
            if len(self._by_model) >= 64:  # model names come from clients: keep it bounded
                self._by_model.clear()
            found = self._by_model[model] = self.settings.make_estimator(model)
        return found

    def learn(self, fitted: Fitted, prompt_tokens: int | None) -> float | None:
        """Grow the conversation's factor from the prompt tokens its provider reported."""
        p = fitted.plan
        if p is None or fitted.key is None or prompt_tokens is None:
            return None
        factor = grow(p.result.calibration, fitted.raw_sent, prompt_tokens)
        return self.calibrations.learn(fitted.key, factor)


def floor_message(fitted: Fitted) -> str:
    """The 400 message for a request whose floor does not fit: names ctxwin and the fix."""
    p = fitted.plan
    assert p is not None
    r, b = p.result, p.budget
    model = b.spec.name or "the model"
    if not r.enforced:
        return (
            f"ctxwin proxy: request not forwarded: ctxwin has no budget for {model}: its "
            f"{b.context_length:,}-token window ({b.spec.context_length_source}) less "
            f"{b.reserve:,} tokens reserved for the response ({b.reserve_source}) and "
            f"{b.safety:,} of safety leaves {b.budget:,} for the prompt. Fix: lower "
            "max_tokens, or restart the proxy with a larger --context-length (or a smaller "
            "--max-tokens)."
        )
    return (
        f"ctxwin proxy: request not forwarded: even after dropping every older turn, the "
        f"system prompt, first user message and newest turn need about "
        f"{r.estimated_tokens_after:,} tokens, over ctxwin's budget of {r.budget:,} for "
        f"{model} ({b.context_length:,}-token window, {b.reserve:,} reserved for the "
        "response). Fix: shorten the newest message or tool result (or the system prompt), "
        "lower max_tokens, or start a new conversation; if the window is larger than ctxwin "
        "assumes, restart the proxy with --context-length (or --strategy ...,truncate-results "
        "to cut the largest results)."
    )
