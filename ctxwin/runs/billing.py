"""What a replayed run's calls cost: the prompt each sends as the cache sees it, and
its price.

Pure functions and plain data, used by :func:`ctxwin.runs.simulate.replay_run`:

* a request *as fitted and sent* is laid out as cache blocks (:mod:`ctxwin.cost.caching`):
  one block for what comes before the messages (the learned overhead and the body's
  system prompt and tools), then one per kept message. Each block's tokens are on the
  prediction's scale (``overhead + factor × raw``: the ends of the blocks are the
  estimates of the request's prefixes, so the last end is the request's estimate).
  A message is keyed by its place in the run when the run is one growing transcript
  (:func:`laid_prefix`), else by its content (:func:`laid_plan`): a message a strategy
  edited (a cleared result) then differs from the one before it and from its original;
* cache marks (Anthropic's ``cache_control``) are read from the body where it has them
  (:func:`body_marks`), kept where they are, with the lifetime they ask for
  (:func:`body_ttl`); a Claude Code session's log never records them: Claude Code marks
  its system prompt and the last two messages (:data:`SESSION_MARKS`), for the lifetime
  its logged writes show (:func:`written_ttl`), and each call is sent at its logged time;
* the prompt is priced at the model's prices (:func:`input_cost`): uncached tokens at
  the input price, cached ones at the cache-read price, written ones at the cache-write
  price of their lifetime, all at the long-context tier when the prompt is above it; an
  unknown price gives ``None``, never a guess.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ctxwin.cost.caching import Cache, Computed, Laid, Places, Sent
from ctxwin.cost.pricing import CacheRules
from ctxwin.fitting.pruning import Scale

if TYPE_CHECKING:
    from ctxwin.core import Plan
    from ctxwin.cost.pricing import Pricing
    from ctxwin.fitting.incremental import Prefixes
    from ctxwin.fitting.pruning import FitResult

BEFORE = "before the messages"
"""The key of the block before the messages in a growing transcript's requests."""

SESSION_MARKS: dict[str, str] = {
    "claude-code": "the system prompt and the last two messages",
}
"""Where an agent tool whose session log records no cache marks puts them (by run shape).

Claude Code marks every block of its system prompt and the last content block of each of
the request's last two messages (an assistant message's last block unless it is a
thinking block), all with one lifetime: five minutes, or an hour when it asks ``ttl:
"1h"``. Its logged usage shows it: each call reads the whole prompt of the call before
(``cache_read_input_tokens`` equals the previous call's read plus its write) and writes
up to the end of its last message, and a session's first call reads a prefix that an
earlier session wrote: the system prompt and tools. The mark on the message before the
last keeps the prefix the call before wrote within :data:`~ctxwin.cost.caching.LOOKBACK`
blocks of a mark when one response adds many blocks."""

_SAMPLING_KEYS = frozenset(
    (
        "model",
        "max_tokens",
        "max_completion_tokens",
        "max_output_tokens",
        "temperature",
        "top_p",
        "top_k",
        "stop",
        "stop_sequences",
        "stream",
        "stream_options",
        "metadata",
        "n",
        "seed",
        "user",
        "store",
    )
)
"""Request fields that are no part of the prompt: a change to one keeps the cache."""


class ScaleNow:
    """The scale of a run's latest prediction: every request the cache keeps is sized at
    it when read (a session learns its overhead from its first call's usage, and its
    first request was no smaller than the second shows)."""

    __slots__ = ("scale",)

    def __init__(self) -> None:
        self.scale = Scale(1.0)


class _Ends(Computed[int]):
    """The ends of a request's blocks, each computed when read at the run's latest
    scale: ``raw_at(i)`` is the raw estimate of blocks ``[1, i)`` with the body's fixed
    part (what comes before the messages)."""

    __slots__ = ("now", "raw_at")

    def __init__(self, n: int, raw_at: Callable[[int], int], now: ScaleNow) -> None:
        self.n = n
        self.raw_at = raw_at
        self.now = now

    def at(self, i: int) -> int:
        return 0 if i == 0 else max(0, self.now.scale.estimate(self.raw_at(i)))


def laid_prefix(prefixes: Prefixes, result: FitResult, now: ScaleNow) -> Laid:
    """The blocks of a growing transcript's request that ``result`` fitted (the fit of
    ``prefixes``' first ``result.items`` items), keyed by place: O(1) besides building
    the list of keys in C."""
    keys = Places(BEFORE, [range(result.head), range(result.cut, result.items)])
    base = prefixes.view.base
    columns = prefixes.prefix
    raw = prefixes.estimator.raw
    head, cut = result.head, result.cut

    def raw_at(i: int) -> int:
        kept = i - 1  # messages in blocks [1, i)
        if kept <= head:
            return raw([b + c[kept] for b, c in zip(base, columns, strict=True)])
        end = cut + kept - head
        return raw([b + c[head] + c[end] - c[cut] for b, c in zip(base, columns, strict=True)])

    return Laid(keys, _Ends(len(keys) + 1, raw_at, now))


def laid_plan(plan: Plan, now: ScaleNow) -> Laid:
    """The blocks of the request ``plan`` sends (its kept messages, as edited), keyed by
    content: the body's fields before the messages, then each message."""
    t = plan.transcript
    r = plan.result
    view = t.view
    raw = t.estimator.raw
    total = list(view.base)
    raws = [0, raw(total)]
    items = view.items
    for i in r.keep:
        total = [a + b for a, b in zip(total, items[i].cost, strict=True)]
        raws.append(raw(total))
    body = plan.output()
    before: object = None
    if isinstance(body, Mapping):
        before = {
            k: _unmarked(v)
            for k, v in body.items()
            if k not in _SAMPLING_KEYS and k != t.adapter.items_key
        }
    messages: list[object] = [_unmarked(m) for m in plan.messages]
    if len(messages) != len(r.keep):  # a body whose entries are not its items
        messages = [("item", i) for i in r.keep]
    return Laid([before, *messages], _Ends(len(raws), raws.__getitem__, now))


def _unmarked(value: Any) -> Any:
    """``value`` (a message, the system prompt, the tools) as the cache matches it: a mark
    moved from one request's last message to the next one's leaves the tokens as they
    were, so ``cache_control`` is no part of a key. ``value`` itself when it has none."""
    if isinstance(value, list):
        if not any(map(_marked, value)):
            return value
        return [_unmarked(v) for v in value]
    if not _marked(value):
        return value
    out = {k: v for k, v in value.items() if k != "cache_control"}
    content = out.get("content")
    if isinstance(content, list):
        out["content"] = [_unmarked(b) if isinstance(b, Mapping) else b for b in content]
    return out


def _marked(value: Any) -> bool:
    """Whether ``value`` (a content block, a tool, a message) or a block in its
    ``content`` (a message's blocks, a ``tool_result``'s) carries a ``cache_control`` mark."""
    if not isinstance(value, Mapping):
        return False
    if value.get("cache_control") is not None:
        return True
    content = value.get("content")
    return isinstance(content, list) and any(map(_marked, content))


def body_marks(body: Any) -> list[int] | None:
    """The blocks ``body`` (an Anthropic Messages request as sent) marks with
    ``cache_control``: 0 for a mark on a tool or the system prompt, ``1 + j`` for one in
    message ``j``. ``None`` when the body marks nothing."""
    if not isinstance(body, Mapping):
        return None
    marks: list[int] = []
    system = body.get("system")
    tools = body.get("tools")
    if (isinstance(system, list) and any(map(_marked, system))) or (
        isinstance(tools, list) and any(map(_marked, tools))
    ):
        marks.append(0)
    messages = body.get("messages")
    if isinstance(messages, list):
        marks += [1 + j for j, m in enumerate(messages) if _marked(m)]
    return marks or None


HOUR = 3600
"""Anthropic's longer cache lifetime (``cache_control: {"type": "ephemeral", "ttl": "1h"}``)."""

FIVE_MINUTES = 300
"""Anthropic's default cache lifetime (a mark without ``ttl``, or ``ttl: "5m"``)."""


def body_ttl(body: Any) -> int | None:
    """The lifetime ``body``'s last ``cache_control`` mark asks for (tools, then the
    system prompt, then the messages, in the order the prompt is cached): :data:`HOUR`
    for ``ttl: "1h"``, else :data:`FIVE_MINUTES`; ``None`` when it marks nothing. (The
    prefix up to the last mark is what the next request reads; marks of one request
    that ask for both lifetimes are priced at the last one's.)"""
    if not isinstance(body, Mapping):
        return None
    last: Any = None
    for key in ("tools", "system", "messages"):
        values = body.get(key)
        if not isinstance(values, list):
            continue
        for value in values:
            if not isinstance(value, Mapping):
                continue
            last = _last_mark(value, last)
    if last is None:
        return None
    return HOUR if isinstance(last, Mapping) and last.get("ttl") == "1h" else FIVE_MINUTES


def _last_mark(value: Any, last: Any) -> Any:
    """The last ``cache_control`` mark of the blocks in ``value``'s ``content`` and of
    ``value`` itself, which ends after them (in the order the prompt is read), else ``last``."""
    if not isinstance(value, Mapping):
        return last
    blocks = value.get("content")
    for block in blocks if isinstance(blocks, list) else ():
        last = _last_mark(block, last)
    if value.get("cache_control") is not None:
        last = value["cache_control"]
    return last


def written_ttl(usage: Mapping[str, Any], before: int | None = None) -> int | None:
    """The lifetime a call's marks asked for, as its logged ``usage`` shows: an hour when
    it wrote only one-hour entries (``cache_creation.ephemeral_1h_input_tokens``), the
    rules' own (``None``) when it wrote five-minute ones; ``before`` (what the calls
    before showed) when it wrote nothing or does not break its writes down."""
    from ctxwin.fitting.calibration import cache_tokens_from_usage, hour_writes_from_usage

    hour = hour_writes_from_usage(usage)
    written = cache_tokens_from_usage(usage)[1]
    if hour is None or not written:
        return before
    return HOUR if hour >= written else None


def session_marks(blocks: int) -> list[int]:
    """The marks :data:`SESSION_MARKS` assumes for a request of ``blocks`` blocks (block
    0: what comes before the messages; block ``1 + j``: message ``j``)."""
    return [0, *range(max(1, blocks - 2), blocks)]


def input_cost(
    prompt: int, read: int, written: int, price: Pricing | None, hour: int = 0
) -> float | None:
    """USD for a prompt of ``prompt`` tokens of which ``read`` came from the cache and
    ``written`` were written to it, ``hour`` of those for an hour (billed at
    ``cache_write_1h``, the rest at ``cache_write``: Anthropic's 2 × and 1.25 × input)
    (:class:`~ctxwin.cost.pricing.Pricing`, per million tokens; the tier ``price.above`` when
    the prompt is longer than its ``tokens``). ``None`` when a price it needs is
    unknown."""
    if price is None:
        return None
    tier = price.above
    if tier is not None and tier.tokens is not None and prompt > tier.tokens:
        price = tier
    fresh = max(0, prompt - read - written)
    total = 0.0
    for tokens, per_million in (
        (fresh, price.input),
        (read, price.cache_read),
        (written - hour, price.cache_write),
        (hour, price.cache_write_1h),
    ):
        if tokens:
            if per_million is None:
                return None
            total += tokens * per_million
    return total / 1_000_000


def _rules_dict(rules: Any) -> dict[str, Any] | None:
    return None if rules is None else dict(rules.as_dict())


class CacheLog:
    """What a run's log shows its provider's cache doing that no rule of one cache does.

    * *Breaks*: a call that read less than the call before it left cached (its logged
      read plus write), though the call extends that request and comes within the
      lifetime of what it wrote. A provider that answers a session's calls from caches
      that do not share entries does that (Amazon Bedrock's cross-Region inference
      routes a call to another Region's cache "at times of high demand": its
      prompt-caching guide); which call lands where is no rule of the prompt.
    * *Uncached calls*: a marked request at least the model's shortest cacheable prefix
      that neither read nor wrote: it reached the provider without its marks (caching
      turned off, or a gateway that drops ``cache_control``).

    Such a log is reported, not predicted: the prediction stays the rules'."""

    __slots__ = ("before", "breaks", "checked", "tokens", "uncached")

    def __init__(self) -> None:
        self.breaks = 0
        """Calls that read less than the call before left cached."""
        self.tokens = 0
        """What they read less, in all."""
        self.uncached = 0
        """Marked calls long enough to cache that neither read nor wrote."""
        self.checked = 0
        """Calls whose log says what they read and wrote."""
        self.before: tuple[int, float | None, int | None] | None = None
        """What the last such call left cached, when it was sent, and its lifetime."""

    def see(
        self,
        read: int,
        written: int,
        at: float | None,
        life: int | None,
        grows: bool,
        default: int | None = None,
        cacheable: bool = False,
    ) -> int:
        """Take the next call's logged ``read`` and ``written`` tokens (sent at ``at``,
        writing for ``life`` seconds, ``None``: ``default``, the rules'; ``grows``: its
        request extends the one before; ``cacheable``: it was marked and at least the
        shortest cacheable prefix); how many tokens less than the call before left
        cached it read (0: none)."""
        self.checked += 1
        if cacheable and not read and not written:
            self.uncached += 1
        short = 0
        if self.before is not None and grows:
            prefix, when, lived = self.before
            lived = lived if lived is not None else default
            if at is None or when is None or lived is None or at - when <= lived:
                short = max(0, prefix - read)
        if short:
            self.breaks += 1
            self.tokens += short
        cached = read + written
        self.before = (cached, at, life) if cached else None
        return short


class Bill:
    """One cache and its bill: each request sent (:meth:`send`) is laid out as blocks,
    read from and written to the model's cache (:class:`~ctxwin.cost.caching.Cache`,
    its ``rules``) and priced (:func:`input_cost`, ``price``). The one model of a cache
    every replayed policy uses: ctxwin's cuts (:class:`Ledger`) and the providers' and
    agents' own policies (:mod:`ctxwin.runs.policies`)."""

    __slots__ = ("cache", "cost", "price", "read", "rules", "written", "written_1h")

    def __init__(self, rules: Any, price: Pricing | None) -> None:
        self.rules = rules
        self.price = price
        self.cache = Cache(rules if rules is not None else _NO_RULES)
        self.read = 0
        self.written = 0
        self.written_1h = 0
        self.cost: float | None = 0.0

    @property
    def known(self) -> bool:
        """Whether the model's caching rules are known (else nothing is priced)."""
        return self.rules is not None and self.rules.kind is not None

    def send(
        self,
        prompt: int,
        laid: Laid,
        marks: Sequence[int] | None,
        at: float | None,
        life: int | None,
    ) -> dict[str, Any]:
        """Send a prompt of ``prompt`` tokens laid out as ``laid`` (``marks``: its cache
        marks; ``life``: the lifetime they ask for, ``None``: the rules') at ``at``; the
        row's keys (``None``: unknown)."""
        if not self.known:
            return {
                "cached_tokens": None,
                "cache_write_tokens": None,
                "cache_write_1h_tokens": None,
                "input_cost": None,
            }
        use = self.cache.send(Sent(laid, marks or (), at, life))
        hour = use.written if life == HOUR else 0
        self.read += use.read
        self.written += use.written
        self.written_1h += hour
        cost = input_cost(prompt, use.read, use.written, self.price, hour)
        self.cost = None if cost is None or self.cost is None else self.cost + cost
        return {
            "cached_tokens": use.read,
            "cache_write_tokens": use.written,
            "cache_write_1h_tokens": hour,
            "input_cost": usd(cost),
        }

    def totals(self) -> dict[str, Any]:
        """What was read, written and paid in all (``None``: unknown)."""
        known = self.known
        return {
            "cached_tokens": self.read if known else None,
            "cache_write_tokens": self.written if known else None,
            "cache_write_1h_tokens": self.written_1h if known else None,
            "input_cost": usd(self.cost) if known else None,
        }


class Ledger:
    """A replayed run's cache and bill, one sent call at a time (:meth:`add`), its log's
    calls (:meth:`log`), and its totals (:meth:`totals`)."""

    def __init__(self, shape: str, grows: bool = False) -> None:
        self.shape = shape
        self.grows = grows
        """Whether each call's request (as logged) extends the one before: a transcript."""
        self.logged = CacheLog()
        self.assumed = SESSION_MARKS.get(shape)
        self.bill: Bill | None = None
        self.rules: Any = None
        self.price: Pricing | None = None
        self.price_source: str | None = None
        self.marked = False
        self.sent = 0
        self.reported = Reported()
        self.now = ScaleNow()
        """The scale the requests are laid out at (:meth:`rescale`)."""
        self.ttl: int | None = None
        """The lifetime the run's marks ask for, as its log shows (:func:`written_ttl`):
        ``None`` for the rules' own."""

    def rescale(self, result: FitResult, learned: bool) -> None:
        """Size the requests at the scale ``result`` (the fit of the call about to be
        sent) was predicted at: its line, moved to pass through its estimate when that is
        anchored on a report (``ctxwin.fitting.anchor``: the report's difference from the
        line is laid before the messages, as ``estimate --explain`` lays it)."""
        line = Scale(result.calibration, result.overhead, learned)
        shift = result.estimated_tokens - line.estimate(result.raw_tokens)
        self.now.scale = Scale(result.calibration, result.overhead + shift, learned)

    def log(
        self,
        usage: Mapping[str, Any] | None,
        at: float | None,
        ttl: int | None = None,
        rules: Any = None,
    ) -> dict[str, Any]:
        """Take what the next call's log says (``usage``, sent at ``at``; ``ttl``: the
        lifetime its body's marks ask for, ``None`` when it has none; ``rules``: the
        model's caching rules): the lifetime its marks asked for, and what its provider's
        cache did that one cache would not (:class:`CacheLog`). Called for every call,
        sent or not, before :meth:`add`; the row's keys."""
        from ctxwin.fitting.calibration import cache_tokens_from_usage, prompt_tokens_from_usage

        if not isinstance(usage, Mapping):
            return {}
        self.ttl = written_ttl(usage, self.ttl)
        read, written = cache_tokens_from_usage(usage)
        if read is None or written is None:
            return {}
        life = ttl if ttl is not None else self.ttl
        default = None if rules is None else rules.ttl_seconds
        least = None if rules is None else rules.min_prefix
        prompt = prompt_tokens_from_usage(usage)
        cacheable = (
            (self.assumed is not None or ttl is not None)
            and least is not None
            and prompt is not None
            and prompt >= least
        )
        short = self.logged.see(read, written, at, life, self.grows, default, cacheable)
        return {"reported_cache_break_tokens": short} if short else {}

    def add(
        self,
        plan: Plan,
        laid: Laid,
        marks: Sequence[int] | None,
        reported: int | None,
        usage: Mapping[str, Any] | None,
        at: float | None = None,
        ttl: int | None = None,
    ) -> dict[str, Any]:
        """Send ``plan``'s request laid out as ``laid`` (``marks``: its ``cache_control``
        marks, ``None`` when it has none; ``ttl``: the lifetime they ask for,
        :func:`body_ttl`, else what the log shows) at ``at`` (seconds; ``None``: right
        after the call before) after the calls before it; the row's keys."""
        if self.bill is None:
            spec = plan.budget.spec
            self.rules = spec.cache
            self.price = spec.price
            self.price_source = spec.price_source
            self.bill = Bill(self.rules, self.price)
        prompt = plan.result.estimated_tokens_after
        self.sent += prompt
        if self.assumed is not None:
            marks = session_marks(len(laid.keys))
        if marks:
            self.marked = True
        life = ttl if ttl is not None else self.ttl
        row = self.bill.send(prompt, laid, marks, at, life)
        row.update(self.reported.add(usage, reported, self.price))
        return row

    def totals(self) -> dict[str, Any]:
        """The run's totals (``None``: unknown) and where its prices and rules came from."""
        checked = self.grows and self.logged.checked > 0
        bill = self.bill if self.bill is not None else Bill(None, None)
        return {
            "tokens_sent": self.sent,
            **bill.totals(),
            **self.reported.totals(),
            "reported_cache_breaks": self.logged.breaks if checked else None,
            "reported_cache_break_tokens": self.logged.tokens if checked else None,
            "reported_uncached_calls": self.logged.uncached if self.logged.checked else None,
            "price": self.price.as_dict() if self.price is not None else None,
            "price_source": self.price_source,
            "cache_rules": _rules_dict(self.rules),
            "cache_marks": self.assumed
            if self.assumed is not None
            else ("cache_control in the body" if self.marked else None),
        }


class Reported:
    """What a run's log says its calls read from and wrote to the cache, and what that
    cost at the model's prices (``None``: no call says)."""

    __slots__ = ("cost", "priced", "read", "written", "written_1h")

    def __init__(self) -> None:
        self.read: int | None = None
        self.written: int | None = None
        self.written_1h: int | None = None
        self.cost: float | None = None
        self.priced = True

    def add(
        self, usage: Mapping[str, Any] | None, prompt: int | None, price: Pricing | None
    ) -> dict[str, Any]:
        """Take a call's logged ``usage`` (``prompt``: the prompt tokens it reports); the
        row's ``reported_*`` keys."""
        from ctxwin.fitting.calibration import cache_tokens_from_usage, hour_writes_from_usage

        row: dict[str, Any] = {}
        if not isinstance(usage, Mapping):
            return row
        got_read, got_written = cache_tokens_from_usage(usage)
        if got_read is not None:
            row["reported_cached_tokens"] = got_read
            self.read = (self.read or 0) + got_read
        if got_written is not None:
            row["reported_cache_write_tokens"] = got_written
            self.written = (self.written or 0) + got_written
        got_hour = hour_writes_from_usage(usage)
        if got_hour is not None:
            row["reported_cache_write_1h_tokens"] = got_hour
            self.written_1h = (self.written_1h or 0) + got_hour
        if prompt is not None and got_read is not None:
            paid = input_cost(prompt, got_read, got_written or 0, price, got_hour or 0)
            row["reported_input_cost"] = usd(paid)
            if paid is None:
                self.priced = False
            else:
                self.cost = (self.cost or 0.0) + paid
        return row

    def totals(self) -> dict[str, Any]:
        return {
            "reported_cached_tokens": self.read,
            "reported_cache_write_tokens": self.written,
            "reported_cache_write_1h_tokens": self.written_1h,
            "reported_input_cost": usd(self.cost) if self.priced else None,
        }


def usd(value: float | None) -> float | None:
    """A dollar amount to a millionth of a dollar."""
    return None if value is None else round(value, 6)


_NO_RULES = CacheRules()
"""A model whose caching is unknown: nothing is read from or written to a cache."""
