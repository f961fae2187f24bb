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

Each conversation is fitted by its own :class:`~ctxwin.manager.ContextWindowManager`,
as the SDK wrappers' are (:class:`ctxwin.integrations._common.Conversations`): it
learns the calibration from the usage the provider reports and reads a request that
extends the conversation's last one incrementally (only its new messages). A
conversation is named by what never changes within one agent run — the route, the
model, a hash of the credentials and the head (system prompt and first user message,
which ctxwin never drops) — and the least recently used are forgotten past
``ProxyConfig.conversations`` or once the conversations remembered hold more than
``ProxyConfig.max_memory`` bytes (:func:`held_bytes`); a request that alone would hold
more is fitted and not remembered.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ctxwin.codec import dumps, find_big_integer, may_hold_big_number, parse
from ctxwin.core import FITS, NEEDS_PRUNING, Plan, load
from ctxwin.errors import InputError, budget_words, floor_words
from ctxwin.formats import get_adapter
from ctxwin.integrations._common import Conversations
from ctxwin.manager import ContextWindowManager
from ctxwin.proxy.routes import Route
from ctxwin.settings import DEFAULT, Settings, body_model
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

DEFAULT_MAX_MEMORY = 512 << 20
"""The conversations remembered hold at most 512 MiB (:func:`held_bytes`) unless configured
otherwise."""

ITEM_BYTES = 512
"""What a remembered conversation holds per message beyond the message itself, at most
(its reader's per-item state, list slots, edited copies of cleared results): measured
at most 390 B per item beyond the objects :func:`held_bytes` walks, for plain, pruned,
cleared and extended requests; see ``bench/proxy_memory.py --shapes``."""
CONVERSATION_BYTES = 8 << 10
"""What a remembered conversation holds besides its messages: its manager, reader and
key (measured 3.0-3.7 KiB)."""

LOGGER = "ctxwin.proxy"
"""The proxy's logger: its access lines and the records of its fits (:mod:`ctxwin.telemetry`)."""

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
    max_memory: int = DEFAULT_MAX_MEMORY
    """Bytes the remembered conversations may hold (:func:`held_bytes`; least recently used
    go first); a request that alone would hold more is fitted and not remembered."""
    connect_timeout: float = 10.0
    read_timeout: float = 600.0
    """Seconds without a byte from the upstream before the request fails (504 before headers)."""
    head_timeout: float = 10.0
    """Seconds a client has to send a request head, from the connection's opening or from
    the first byte of a later request on it (then 408, and the connection is closed)."""
    body_timeout: float = 60.0
    """Seconds a client has to send a request body, once its head is in (then 408)."""
    idle_timeout: float = 60.0
    """Seconds a kept-alive connection may wait for its next request."""
    max_connections: int = 512
    """Client connections open at once; one more is answered 503 and closed."""
    allow_remote: bool = False
    """Listen on a host that is not loopback (refused otherwise: see :mod:`ctxwin.proxy.guard`)."""
    allow_hosts: tuple[str, ...] = ()
    """``Host`` names (``NAME`` or ``NAME:PORT``) accepted besides the proxy's own."""
    token: str | None = field(default=None, repr=False)
    """When set, every request but ``GET /healthz`` must carry it in ``x-ctxwin-token``."""


@dataclass(frozen=True, slots=True)
class Fitted:
    """What to do with one request (see the module doc for ``action``)."""

    action: str
    body: bytes
    """The bytes to forward (empty for ``truncated``)."""
    plan: Plan | None = None
    """The fit (:class:`~ctxwin.core.Plan`): what is sent, and the raw estimate of it that
    calibration learns against (``plan.raw_tokens_sent``)."""
    key: tuple[str | None, str] | None = None
    """The conversation the request belongs to."""
    reason: str | None = None
    """Why a body was forwarded unfitted (``unread``/``unsafe``)."""
    manager: ContextWindowManager | None = None
    """The conversation's manager, which learns from the response's usage."""

    def headers(self) -> dict[str, str]:
        """The ``x-ctxwin-*`` response headers for this decision."""
        out = {"x-ctxwin-action": self.action}
        p = self.plan
        if p is not None:
            row = p.row()
            out.update(
                {
                    "x-ctxwin-dropped-turns": str(row["dropped_turns"]),
                    "x-ctxwin-dropped-messages": str(len(p.result.dropped)),
                    "x-ctxwin-kept-turns": str(row["kept_turns"]),
                    "x-ctxwin-cleared-results": str(row["cleared_results"]),
                    "x-ctxwin-cleared-thinking": str(row["cleared_thinking"]),
                    "x-ctxwin-truncated-results": str(row["truncated_results"]),
                    "x-ctxwin-estimated-tokens": str(row["estimated_tokens"]),
                    "x-ctxwin-estimated-tokens-after": str(row["estimated_tokens_after"]),
                    "x-ctxwin-budget": str(row["budget"]),
                    "x-ctxwin-calibration": f"{row['calibration']:.4f}",
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
        self.conversations = Conversations(
            "auto",
            {"settings": config.settings},
            config.conversations,
            learn_overhead=False,
            parsed=True,
            logger=LOGGER,
        )
        """One manager per conversation; calibration only grows (no overhead is learned:
        the proxy sees every byte of each request)."""
        self.held: dict[tuple[str | None, str], int] = {}
        """What each remembered conversation holds, in bytes (:func:`held_bytes`)."""
        self.held_total = 0
        """The sum of :attr:`held`: the ``ctxwin_proxy_conversation_bytes`` gauge."""
        self.sized: dict[tuple[str | None, str], Sized] = {}
        """What :func:`held_bytes` measured of each conversation's entries, for the next
        request, which reuses them when it extends the conversation."""

    def fit(
        self, route: Route, raw: bytes, credentials: Iterable[str] = (), span: Any = None
    ) -> Fitted:
        """Decide what to forward for ``raw`` posted to ``route`` (the fit seen on ``span``,
        the request's server span, when given: :mod:`ctxwin.telemetry`).

        Raises :class:`InputError` when ``raw`` is not JSON (the caller answers 400),
        nested deeper than :data:`ctxwin.codec.MAX_DEPTH` included. A body that parses
        but that ctxwin cannot follow to its depth is forwarded unread.
        """
        body = parse(raw)
        try:
            return self._fit(route, raw, body, credentials, span)
        except RecursionError:
            return Fitted(UNREAD, raw, reason="nested too deeply for ctxwin to read")

    def _fit(
        self, route: Route, raw: bytes, body: Any, credentials: Iterable[str], span: Any
    ) -> Fitted:
        settings = self.settings
        try:
            items_key = get_adapter(body, route.fmt).items_key
        except InputError as exc:
            return Fitted(UNREAD, raw, reason=str(exc))
        model = settings.model or route.model
        named = model or body_model(body)
        messages = body.get(items_key) if isinstance(body, dict) else body
        entries = messages if isinstance(messages, list) else []
        key = self.conversations.key(named, entries, extra=_extra(route, body, credentials))
        changes: dict[str, Any] = {"fmt": route.fmt, "estimator": self.estimator_for(named)}
        if model != settings.model:
            changes["model"] = model
        self._make_room(key, 0)  # one more conversation, within the count
        manager, read = self.conversations.entries(named, entries, key[1], changes=changes)
        held, sized = held_bytes(body, entries, read, self.sized.get(key))
        self.sized[key] = sized
        if held <= self.config.max_memory:
            self._make_room(key, held)
        if isinstance(messages, list):
            body = read if body is messages else {**body, items_key: read}
        fitted: Fitted | None = None
        try:
            fitted = self._decide(raw, body, route, manager, key, span)
            return fitted
        finally:
            if fitted is not None and fitted.plan is not None:
                # the edited copies the manager keeps of a request the strategy edited
                edited = {entry for entry, _ in fitted.plan.applied.edits}
                if edited:
                    held += _size([entries[i] for i in edited if i < len(entries)])
            if held <= self.config.max_memory:
                self._make_room(key, held)
                self.held_total += held - self.held.get(key, 0)
                self.held[key] = held
            else:  # fitted, not remembered: it alone would hold more than the cap
                self._forget(key)

    def _make_room(self, key: tuple[str | None, str], held: int) -> None:
        """Forget the least recently used conversations (not ``key``) until one more, or
        ``key`` holding ``held`` bytes, fits both the count and the memory caps."""
        conversations = self.conversations.managers
        cap = self.config.max_memory
        limit = self.config.conversations
        while conversations:
            total = self.held_total - self.held.get(key, 0) + held
            count = len(conversations) + (key not in conversations)
            if total <= cap and count <= limit:
                return
            oldest = next(iter(conversations))
            if oldest == key:  # only this one left to forget: it is renewed instead
                if len(conversations) == 1:
                    return
                conversations.move_to_end(key)
                continue
            self._forget(oldest)

    def _forget(self, key: tuple[str | None, str]) -> None:
        self.conversations.managers.pop(key, None)
        self.conversations.seen.pop(key, None)
        self.held_total -= self.held.pop(key, 0)
        self.sized.pop(key, None)

    def _decide(
        self,
        raw: bytes,
        body: Any,
        route: Route,
        manager: ContextWindowManager,
        key: tuple[str | None, str],
        span: Any = None,
    ) -> Fitted:
        """What to forward for ``body`` (``raw`` parsed, its entries read for ``manager``)."""
        try:
            p = manager.before_send(body, span)
        except InputError as exc:
            try:
                load(body, route.fmt, manager.estimator)
            except InputError as unread:
                return Fitted(UNREAD, raw, reason=str(unread))
            # fitting needed, but it would break a pairing rule
            return Fitted(UNSAFE, raw, key=key, reason=str(exc), manager=manager)
        status = p.status
        if status == FITS and not p.marked:
            return Fitted(FIT, raw, p, key, manager=manager)
        if status not in (FITS, NEEDS_PRUNING):
            return Fitted(TRUNCATED, b"", p, key, manager=manager)
        out = dumps(p.request)
        if may_hold_big_number(out):
            big = find_big_integer(raw)
            if big is not None:
                reason = f"{big} does not fit 64 bits; fitting would rewrite it"
                return Fitted(UNSAFE, raw, key=key, reason=reason, manager=manager)
        action = FIT if status == FITS else PRUNED if p.result.pruned else CLEARED
        return Fitted(action, out, p, key, manager=manager)

    def estimator_for(self, model: str | None) -> Any:
        """The estimator for a new conversation: the configured one, or under
        ``tokenizer="auto"`` the one for its model (its route's, else its body's)."""
        if self.settings.tokenizer != AUTO_TOKENIZER:
            return self.estimator
        return self.settings.make_estimator(model)

    def learned(self) -> int:
        """How many of the conversations remembered have learned from usage."""
        return sum(1 for m in self.conversations.managers.values() if m.learned)

    def learn(self, fitted: Fitted, prompt_tokens: int | None) -> float | None:
        """Grow the conversation's factor from the prompt tokens its provider reported."""
        p, manager = fitted.plan, fitted.manager
        if p is None or manager is None or prompt_tokens is None:
            return None
        return manager.observe({"prompt_tokens": prompt_tokens}, raw_tokens=p.raw_tokens_sent)


class Sized(NamedTuple):
    """What :func:`held_bytes` measured of a conversation's entries as handed to its
    manager (``read``): the first of them, how many (``length``), and their size."""

    first: Any
    length: int
    size: int


def held_bytes(
    body: Any, entries: list[Any], read: list[Any], before: Sized | None = None
) -> tuple[int, Sized]:
    """An upper bound of what remembering a conversation whose last request is ``body``
    holds, in bytes, and what to pass as ``before`` for its next request: ``entries`` is
    the body's message list, ``read`` what the conversation table handed its manager for
    them (:meth:`Conversations.entries`), ``before`` what this returned for the
    conversation's previous request.

    The manager and the table keep the parsed body: its top-level fields other than the
    messages, its ``entries``, and the entries of ``read`` that are not those (the copies
    read from an earlier request of a growing conversation, equal and distinct: those
    messages are held twice); and per message a reader's state. So: the size of every
    object of the body and of those earlier copies (``sys.getsizeof``, each occurrence
    counted, shared dict keys included), plus :data:`ITEM_BYTES` per message and
    :data:`CONVERSATION_BYTES`. (:meth:`Fitter.fit` adds, for a request the strategy
    edited, the size of each edited message again: the manager keeps an edited copy.)
    When ``read`` starts with the previous request's entries (the table reused them),
    their size is ``before``'s and only the new entries are walked, and the equal
    entries of this body are taken to be as large: each entry is walked once in the
    conversation's life. Checked against ``tracemalloc`` by
    ``bench/proxy_memory.py --shapes`` and ``tests/test_proxy_memory.py``.
    """
    if before is not None and 0 < before.length <= len(read) and read[0] is before.first:
        earlier = before.size  # read[:count] are the previous request's entries
        items = earlier + _items(read[before.length :])
    else:
        items = _items(entries)
        earlier = _items([r for r, e in zip(read, entries, strict=False) if r is not e])
    top = sys.getsizeof(entries)
    if isinstance(body, dict):
        top += sys.getsizeof(body)
        top += sum(sys.getsizeof(k) + _size(v) for k, v in body.items() if v is not entries)
    held = top + items + earlier + ITEM_BYTES * len(entries) + CONVERSATION_BYTES
    return held, Sized(read[0] if read else None, len(read), items)


def _items(values: list[Any]) -> int:
    """The bytes of every object of the values of ``values`` (not of the list itself)."""
    return _size(values) - sys.getsizeof(values)


def _size(value: Any) -> int:
    """The bytes of every object of a parsed JSON value (None, true and false are shared)."""
    total = 0
    stack = [value]
    size = sys.getsizeof
    while stack:
        v = stack.pop()
        if v is None or v is True or v is False:
            continue
        total += size(v)
        if type(v) is dict:
            stack += v.keys()
            stack += v.values()
        elif type(v) is list:
            stack += v
    return total


def _extra(route: Route, body: Any, credentials: Iterable[str]) -> list[Any]:
    """What names a conversation besides its model and head entries: the route, a hash
    of the credentials (never stored) and the body's top-level system prompt."""
    h = hashlib.blake2b(digest_size=16)
    for value in credentials:
        h.update(value.encode("utf-8", "replace"))
        h.update(b"\0")
    rest = [body.get(k) for k in _TOP_LEVEL_HEAD] if isinstance(body, dict) else []
    return [route.name, h.hexdigest(), rest]


def floor_message(fitted: Fitted) -> str:
    """The 400 message for a request whose floor does not fit: names ctxwin and the fix."""
    p = fitted.plan
    assert p is not None
    r, b = p.result, p.budget
    model = b.spec.name or "the model"
    if not r.enforced:
        words = budget_words(
            b.context_length,
            b.spec.context_length_source,
            b.reserve,
            b.reserve_source,
            b.safety,
            b.budget,
            b.spec.max_input_tokens,
        )
        return (
            f"ctxwin proxy: request not forwarded: ctxwin has no budget for {model}: {words}. "
            "Fix: lower max_tokens, or restart the proxy with a larger --context-length (or "
            "a smaller --max-tokens)."
        )
    return (
        f"ctxwin proxy: request not forwarded: after dropping every older turn, "
        f"{floor_words(r.estimated_tokens_after, r.budget)} for {model} "
        f"({b.context_length:,}-token window, {b.reserve:,} reserved for the "
        "response). Fix: shorten the newest message or tool result (or the system prompt), "
        "lower max_tokens, or start a new conversation; if the window is larger than ctxwin "
        "assumes, restart the proxy with --context-length (or --strategy ...,truncate-results "
        "to cut the largest results)."
    )
