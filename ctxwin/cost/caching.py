"""Prompt caching: how much of each request a provider reads from its cache.

Pure arithmetic over what was sent. A request is a sequence of *blocks*: what comes
before the messages (system prompt, tools) and then one block per message, each with a
``key`` (equal content, equal key: a message's place in the run, and a new key once its
content is edited) and its tokens. Providers cache *prefixes* of requests:

* ``automatic`` (OpenAI): every prompt of at least ``min_prefix`` tokens is cached as it
  is sent; a later request reads the longest prefix it shares with a cached one, in
  ``step``-token steps from ``min_prefix`` (1,024, then 1,152, 1,280, …). Writes are free.
* ``implicit`` (Gemini): the same rule, with the model's minimum and a step of one token.
* ``breakpoints`` (Anthropic): only a prefix that ends at a cache mark (``cache_control``)
  is written; a request reads the longest written prefix that ends at one of its block
  boundaries no more than :data:`LOOKBACK` blocks before one of its own marks, and
  writes what lies between that and its last mark. Writes are billed (1.25 × input for
  the five-minute cache, 2 × input for the one-hour cache).

Blocks are compared whole: a request that shares part of a block with an earlier one is
taken to share none of it (the provider matches tokens, so it may read a little more).
An entry lives from its last use for the lifetime its request's marks ask (Anthropic's
``cache_control`` ``ttl``: five minutes, or an hour) or, when the request names none, the
rules' ``ttl_seconds``; requests without times are taken to follow each other within it.

A request is compared with the :data:`HISTORY` requests before it (in an agent loop each
extends the one before, or a fit cut it): a few list comparisons in C per request, so a
run of thousands of calls is priced in well under a second.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import accumulate
from typing import NamedTuple, Protocol, TypeVar, overload

T = TypeVar("T")

LOOKBACK = 20
"""Anthropic looks for a cache hit at most this many blocks before each cache mark."""


class Rules(Protocol):
    """A model's prompt-caching rules (:class:`ctxwin.cost.pricing.CacheRules` has them)."""

    @property
    def kind(self) -> str | None: ...

    @property
    def min_prefix(self) -> int | None: ...

    @property
    def step(self) -> int | None: ...

    @property
    def ttl_seconds(self) -> int | None: ...


class Block(NamedTuple):
    key: object
    """Equal for equal content in the same place of the conversation."""
    tokens: int


class Computed(Sequence[T]):
    """A sequence of :attr:`n` items, each computed when read (:meth:`at`) instead of
    stored: what a cache reads of a long request is a few of its keys and ends."""

    __slots__ = ("n",)

    n: int

    def __len__(self) -> int:
        return self.n

    @overload
    def __getitem__(self, i: int) -> T: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[T]: ...

    def __getitem__(self, i: int | slice) -> T | Sequence[T]:
        if isinstance(i, slice):
            return self.sliced(i)
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        return self.at(i)

    def at(self, i: int) -> T:
        """Item ``i``, ``0 <= i < n``."""
        raise NotImplementedError

    def sliced(self, s: slice) -> Sequence[T]:
        """The items ``s`` selects, as a list."""
        return [self.at(k) for k in range(*s.indices(self.n))]


class Places(Computed[object]):
    """The keys ``[first, *range(a, b), …]`` of a request made of runs of places, without
    the list: a replay's growing transcript keys each message by its place, and its
    requests are the head and a run of the newest messages. Two of them share a prefix
    worked out from their runs (:meth:`shared`), so a run of n calls is priced in O(n), not
    in O(n²) list building and comparing."""

    __slots__ = ("first", "runs")

    def __init__(self, first: object, runs: Sequence[range]) -> None:
        self.first = first
        self.runs = [r for r in runs if r]
        self.n = 1 + sum(len(r) for r in self.runs)

    def at(self, i: int) -> object:
        if i == 0:
            return self.first
        for r in self.runs:
            if i <= len(r):
                return r[i - 1]
            i -= len(r)
        raise IndexError(i)  # not reached: 0 < i < n

    def sliced(self, s: slice) -> Sequence[object]:
        return self.listed()[s]

    def listed(self) -> list[object]:
        """The keys as a list."""
        keys: list[object] = [self.first]
        for r in self.runs:
            keys.extend(r)
        return keys

    def shared(self, other: Places) -> int:
        """How many leading keys ``self`` and ``other`` share: runs are compared by their
        starts (two runs that start at the same place agree as far as both go)."""
        if self.first != other.first:
            return 0
        k = 1
        mine, theirs = iter(self.runs), iter(other.runs)
        a, b = next(mine, None), next(theirs, None)
        while a is not None and b is not None:
            if a[0] != b[0]:
                break
            step = min(len(a), len(b))
            k += step
            a = a[step:] or next(mine, None)
            b = b[step:] or next(theirs, None)
        return k


class Laid(NamedTuple):
    """A request's blocks laid out already: their keys and where each ends, for a caller
    that knows them without making a :class:`Block` per message (a replay's growing
    transcript: its keys are runs of places, its ends computed only where read)."""

    keys: Sequence[object]
    ends: Sequence[int]
    """``ends[i]``: the tokens of blocks ``[0, i)`` (``len(keys) + 1`` of them); only
    the ends the cache needs are read."""


class Sent(NamedTuple):
    """One request as the cache sees it."""

    blocks: Sequence[Block] | Laid
    marks: Sequence[int] = ()
    """Indices of the blocks a cache mark ends (``breakpoints`` only), ascending."""
    at: float | None = None
    """When it was sent (seconds); ``None``: right after the request before."""
    ttl: int | None = None
    """How long what it writes lives from its last use (seconds: Anthropic's ``ttl`` of
    its marks, 300 or 3,600); ``None``: the rules' ``ttl_seconds``."""


class Use(NamedTuple):
    """What one request did with the cache, in prompt tokens."""

    read: int = 0
    written: int = 0


def cache_use(requests: Iterable[Sent], rules: Rules) -> list[Use]:
    """What each of ``requests`` (in the order sent) reads from and writes to the cache of
    a provider with ``rules``. A kind of ``none`` or ``None`` reads and writes nothing."""
    cache = Cache(rules)
    return [cache.send(sent) for sent in requests]


class Cache:
    """One provider's cache as a run's requests reach it, one :meth:`send` at a time
    (:func:`cache_use` over requests that are not all known at once)."""

    __slots__ = ("kept", "rules")

    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        self.kept: list[_Entry] = []
        """The last :data:`HISTORY` requests, newest first."""

    def send(self, sent: Sent) -> Use:
        """What ``sent``, sent after the requests before it, reads and writes.

        One loop for every kind: the request reads the longest prefix it shares with a
        live earlier request (:meth:`_read`) that the kind lets it reach (:meth:`_reach`);
        what it then writes and how a read is rounded are the kind's own."""
        kind = self.rules.kind
        if kind not in _KINDS:
            return Use()
        least = self.rules.min_prefix or 0
        cur = _entry(sent)
        breakpoints = kind == "breakpoints"
        if breakpoints:
            cur.marks = [m for m in sent.marks if 0 <= m < len(cur.keys)]
            if not cur.marks:
                return Use()
        read = self._read(cur, least, breakpoints)
        self.kept = [cur, *self.kept[: HISTORY - 1]]
        if breakpoints:
            last = cur.tokens[cur.marks[-1] + 1]
            return Use(read=read, written=max(0, last - read) if last >= least else 0)
        step = self.rules.step or 1
        return Use(read=0 if read < least else least + (read - least) // step * step)

    def _read(self, cur: _Entry, least: int, breakpoints: bool) -> int:
        """The tokens of the longest prefix ``cur`` shares with an earlier request that is
        alive and that it may read (its last use moves to ``cur``'s time)."""
        read = 0
        ttl = self.rules.ttl_seconds
        for old in self.kept:
            if not _alive(old, cur.at, ttl):
                continue
            hit = _reach(old, _shared(cur.keys, old.keys), cur.marks, least, breakpoints)
            if hit and cur.tokens[hit] > read:
                read = cur.tokens[hit]
                old.at = cur.at if cur.at is not None else old.at
        return read


_KINDS = frozenset(("automatic", "implicit", "breakpoints"))
"""The cache kinds that read and write anything."""


def _reach(old: _Entry, k: int, marks: Sequence[int], least: int, breakpoints: bool) -> int:
    """How many leading blocks of a request that shares ``k`` with ``old`` it reads from
    ``old``'s entry (0: none). A prefix cache (``automatic``, ``implicit``) keeps the whole
    of a request at least ``least`` tokens long, so all ``k``; ``breakpoints`` keeps the
    prefixes that end at ``old``'s marks, at least ``least`` long, and the request
    finds one only within :data:`LOOKBACK` blocks before one of its own ``marks``."""
    if not breakpoints:
        return k if old.tokens[-1] >= least else 0
    return max(
        (
            m + 1
            for m in old.marks
            if m < k
            and old.tokens[m + 1] >= least
            and any(0 <= mine - m < LOOKBACK for mine in marks)
        ),
        default=0,
    )


HISTORY = 8
"""How many earlier requests a request is compared with: in an agent loop each request
extends the one before or is cut from it, so the last few hold every prefix it can read."""


class _Entry:
    """An earlier request as the cache keeps it."""

    __slots__ = ("at", "keys", "marks", "tokens", "ttl")

    def __init__(
        self,
        keys: Sequence[object],
        tokens: Sequence[int],
        marks: Sequence[int],
        at: float | None,
        ttl: int | None = None,
    ):
        self.keys = keys
        self.tokens = tokens
        """``tokens[i]``: the tokens of blocks ``[0, i)``."""
        self.marks = marks
        self.at = at
        self.ttl = ttl
        """Its own lifetime (the request's marks asked for it), else ``None``."""


def _alive(entry: _Entry, now: float | None, ttl: int | None) -> bool:
    """Whether ``entry`` is still cached at ``now``: it lives its own lifetime, else
    ``ttl`` (the rules'), from its last use."""
    life = entry.ttl if entry.ttl is not None else ttl
    return now is None or entry.at is None or life is None or now - entry.at <= life


def _shared(a: Sequence[object], b: Sequence[object]) -> int:
    """How many leading keys ``a`` and ``b`` share (list comparisons run in C: a request
    that extends the one before costs one comparison; two :class:`Places` compare runs)."""
    if isinstance(a, Places) or isinstance(b, Places):
        if isinstance(a, Places) and isinstance(b, Places):
            return a.shared(b)
        if not a or not b or a[0] != b[0]:
            return 0
        a = a.listed() if isinstance(a, Places) else a
        b = b.listed() if isinstance(b, Places) else b
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n - 1  # a[:lo] == b[:lo] and a[:hi + 1] != b[:hi + 1]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _entry(sent: Sent) -> _Entry:
    blocks = sent.blocks
    if isinstance(blocks, Laid):
        return _Entry(blocks.keys, blocks.ends, sent.marks, sent.at, sent.ttl)
    tokens = [0, *accumulate(b.tokens for b in blocks)]
    return _Entry([b.key for b in blocks], tokens, sent.marks, sent.at, sent.ttl)
