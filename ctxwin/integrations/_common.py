"""What the SDK wrappers share: settings, fitting a call's keyword arguments, learning
from usage, and wrapping a client or a stream so that everything else passes through.

Nothing here imports a provider SDK: the wrappers work on the objects they are
given (the SDK's own client, its responses and its streams).
"""

from __future__ import annotations

import hashlib
import inspect
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any

from ctxwin import telemetry
from ctxwin.codec import dumps
from ctxwin.errors import truncated
from ctxwin.fitting.calibration import prompt_tokens_from_usage
from ctxwin.fitting.strategy import DEFAULT_STRATEGY, Strategy
from ctxwin.manager import ContextWindowManager, ManagedFit
from ctxwin.tokens.base import Estimator

SDK_OPTIONS = frozenset({"extra_headers", "extra_query", "extra_body", "timeout"})
"""Keyword arguments of an SDK call that are not part of the request body."""


def settings_for(
    *,
    model: str | None = None,
    context_length: int | None = None,
    max_output_tokens: int | None = None,
    max_tokens: int | None = None,
    spec: Any = None,
    calibration: float | None = None,
    estimator: str | Estimator | None = None,
    strategy: Strategy = DEFAULT_STRATEGY,
    cache_mark: bool = False,
    model_spec: Any = None,
) -> dict[str, Any]:
    """The settings a wrapper takes, by their :class:`~ctxwin.settings.Settings` names,
    as the keyword arguments of :class:`~ctxwin.manager.ContextWindowManager`: ``model``
    (the model's spec is looked up by this name instead of the request's),
    ``context_length``, ``max_output_tokens``, ``max_tokens`` (the response allocation,
    when the request names none), ``spec`` (a :class:`~ctxwin.fitting.budget.ModelSpec` or its
    dict), ``calibration`` (the seed factor), ``estimator`` (a name, or an estimator)
    ``strategy`` and ``cache_mark`` (one Anthropic ``cache_control`` mark at the end of the
    stable prefix). ``model_spec`` is the former name of ``spec`` (deprecated, still
    accepted)."""
    if model_spec is not None:
        if spec is not None:
            raise TypeError("spec and model_spec (its former name): give one")
        spec = model_spec
    return {
        "model": model,
        "context_length": context_length,
        "max_output_tokens": max_output_tokens,
        "max_tokens": max_tokens,
        "spec": spec,
        "calibration": calibration,
        "estimator": estimator,
        "strategy": strategy,
        "cache_mark": cache_mark,
    }


def plain(value: Any) -> Any:
    """``value`` as JSON-like data: SDK objects (pydantic models) are dumped, without
    their unset ``None`` fields; anything already plain is returned as it is (a dict
    or list whose items are all plain already is the same object).

    Iterative, so nesting as deep as JSON allows (:data:`ctxwin.codec.MAX_DEPTH`) is
    no trouble; deeper than :data:`PLAIN_DEPTH` (a structure that refers to itself)
    raises :class:`RecursionError`."""
    frame = _open(value)
    if not isinstance(frame, _Frame):
        return frame
    stack = [frame]
    while True:
        top = stack[-1]
        if len(top.out) < len(top.items):
            child = _open(top.items[len(top.out)])
            if isinstance(child, _Frame):
                if len(stack) >= PLAIN_DEPTH:
                    raise RecursionError(f"nested deeper than {PLAIN_DEPTH} levels")
                stack.append(child)
            else:
                top.out.append(child)
            continue
        done = stack.pop().close()
        if not stack:
            return done
        stack[-1].out.append(done)


PLAIN_DEPTH = 10_000
"""How deep :func:`plain` follows containers."""


class _Frame:
    """A container :func:`plain` is converting: its items, and theirs converted so far."""

    __slots__ = ("items", "out", "value")

    def __init__(self, value: Any) -> None:
        self.value = value
        self.items: list[Any] | tuple[Any, ...] = (
            list(value.values()) if isinstance(value, dict) else value
        )
        self.out: list[Any] = []

    def close(self) -> Any:
        value, out = self.value, self.out
        same = all(a is b for a, b in zip(out, self.items, strict=True))
        if isinstance(value, dict):
            return value if same else dict(zip(value, out, strict=True))
        return value if same and isinstance(value, list) else out


def _open(value: Any) -> Any:
    """A scalar or an object that is not an SDK model as it is; a container as a
    :class:`_Frame` to convert; an SDK model dumped first."""
    while True:
        if isinstance(value, str | int | float | bool) or value is None:
            return value
        if isinstance(value, dict | list | tuple):
            return _Frame(value)
        dump = getattr(value, "model_dump", None)
        if not callable(dump):
            return value
        value = dump(mode="json", exclude_none=True)


class Fitting:
    """The state of one wrapped client: a manager per model, and what each message
    object reads as (so a growing history is estimated once per message)."""

    def __init__(
        self,
        fmt: str,
        items_key: str,
        settings: dict[str, Any],
        record: Any = None,
        logger: str = "ctxwin.integrations",
    ) -> None:
        self.record = record
        """An object whose ``last`` is set too (one record shared by several APIs)."""
        self.logger = logger
        """The logger the fits are recorded under (the wrapper's module)."""
        self.fmt = fmt
        self.items_key = items_key
        self.settings = settings
        self.managers: dict[str | None, ContextWindowManager] = {}
        self._plain: dict[int, tuple[Any, Any]] = {}
        self.last: ManagedFit | None = None
        """The fit of the last request sent."""

    def manager(self, model: str | None) -> ContextWindowManager:
        """The manager of ``model``'s requests (calibration is learned per model)."""
        found = self.managers.get(model)
        if found is None:
            found = ContextWindowManager(fmt=self.fmt, logger=self.logger, **self.settings)
            self.managers[model] = found
        return found

    def reset(self) -> None:
        """Start over: forget what was learned (a new agent run)."""
        self.managers.clear()
        self._plain.clear()
        self.last = None

    def _items(self, messages: list[Any]) -> list[Any]:
        cache = self._plain
        fresh: dict[int, tuple[Any, Any]] = {}
        out = []
        for m in messages:
            hit = cache.get(id(m))
            if hit is None or hit[0] is not m:
                hit = (m, plain(m))
            fresh[id(m)] = hit
            out.append(hit[1])
        self._plain = fresh
        return out

    def fit(self, kwargs: dict[str, Any], span: Any = None) -> tuple[dict[str, Any], ManagedFit]:
        """The keyword arguments to send (the message list fitted) and the fit (seen on
        ``span`` when given: :meth:`~ctxwin.manager.ContextWindowManager.before_send`).

        Raises :class:`~ctxwin.errors.ContextTruncated` when even the floor does
        not fit: nothing is to be sent.
        """
        key = self.items_key
        messages = kwargs.get(key)
        body: dict[str, Any] = {}
        for k, v in kwargs.items():
            if k in SDK_OPTIONS or k == key:
                continue
            body[k] = plain(v)
        if isinstance(messages, list | tuple):
            body[key] = self._items(list(messages))
        elif messages is not None:
            body[key] = plain(messages)
        model = body.get("model") if isinstance(body.get("model"), str) else None
        fitted = self.manager(model).before_send(body, span)
        if fitted.result.overflow_at_floor:
            raise truncated(fitted.result, fitted.budget)
        self.last = fitted
        if self.record is not None:
            self.record.last = fitted
        if not (fitted.changed or fitted.marked) or not isinstance(messages, list | tuple):
            return kwargs, fitted
        return {**kwargs, key: sent_items(messages, fitted)}, fitted

    def learn(self, model: Any, usage: Any, fitted: ManagedFit) -> int | None:
        """Learn from the ``usage`` a provider reported for the request ``fitted`` sent;
        the prompt tokens it reports, if any."""
        if usage is None:
            return None
        data = plain(usage)
        if not isinstance(data, Mapping):
            return None
        name = model if isinstance(model, str) else None
        self.manager(name).observe(data, raw_tokens=fitted.raw_tokens_sent)
        return prompt_tokens_from_usage(data)


def sent_items(items: Sequence[Any], fitted: ManagedFit) -> list[Any]:
    """The entries of ``items`` that ``fitted`` sends: the caller's own objects, untouched,
    except the entries a strategy step edited (cleared or cut results, removed thinking)
    and the last one when a cache mark is added to it (``cache_mark``), which are sent as
    edited plain copies."""
    keep = fitted.result.keep
    edited = {entry for entry, _ in fitted.applied.edits}
    if keep and fitted.marked:
        edited.add(keep[-1])
    if not edited:
        return [items[i] for i in keep]
    written = fitted.messages
    return [written[j] if i in edited else items[i] for j, i in enumerate(keep)]


def remember(table: OrderedDict[Any, Any], key: Any, value: Any, limit: int) -> None:
    """``table[key] = value``, forgetting the oldest entries past ``limit``."""
    table[key] = value
    table.move_to_end(key)
    while len(table) > limit:
        table.popitem(last=False)


def _head(items: Sequence[Any]) -> list[Any]:
    """The leading system messages and the first other entry: what names a conversation."""
    for i, m in enumerate(items):
        role = m.get("role") if isinstance(m, Mapping) else getattr(m, "role", None)
        if role not in ("system", "developer"):
            return list(items[: i + 1])
    return list(items)


class Conversations:
    """One :class:`~ctxwin.manager.ContextWindowManager` per conversation, for a
    callback that sees the calls of many conversations (a LiteLLM callback, an
    Agents SDK filter): a conversation is named by the caller, else by its model and
    head (the leading system messages and the first other entry, which ctxwin always
    sends, with ``extra`` such as the instructions). At most ``limit`` are kept, the
    least recently used forgotten.

    :meth:`entries` hands the manager the entries of a call as plain data, reusing the
    plain copies of the last call's for the entries it had: a framework that copies
    its history for every call (LiteLLM deep-copies the messages, the Agents SDK
    runner rebuilds its input items) gives equal entries, never the same objects, and
    the manager then reads only the new ones (``ctxwin.fitting.incremental``).

    Each call fitted is remembered under a key until its usage is learned
    (:meth:`sent`, :meth:`learn`). With ``learn_overhead`` (the default) what usage
    reports beyond the estimate becomes an overhead of the conversation's later calls
    and new content is estimated at its own cost (the entries are what is sent:
    ``fresh_factor=1.0``); else usage teaches a calibration factor only."""

    def __init__(
        self,
        fmt: str,
        settings: dict[str, Any],
        limit: int = 1024,
        learn_overhead: bool = True,
        parsed: bool = False,
        logger: str = "ctxwin.integrations",
    ) -> None:
        self.fmt = fmt
        self.logger = logger
        """The logger the fits are recorded under (the callback's module, the proxy)."""
        self.parsed = parsed
        """The entries are JSON data already (parsed from bytes, as the proxy's are):
        read as they are, without :func:`plain`'s walk over every value."""
        self.settings = {**settings, "learn_overhead": learn_overhead, "fresh_factor": 1.0}
        self.limit = limit
        self.managers: OrderedDict[tuple[str | None, str], ContextWindowManager] = OrderedDict()
        self.pending: OrderedDict[Any, tuple[ContextWindowManager, ManagedFit]] = OrderedDict()
        """The calls whose usage is not learned yet, by key."""
        self.seen: OrderedDict[tuple[str | None, str], tuple[list[Any], list[Any]]] = OrderedDict()
        """Each conversation's last entries, as given and as plain data (:meth:`entries`)."""
        self.entries_read = 0
        """How many entries :meth:`entries` converted to plain data (each new one once,
        while a conversation's calls extend one another)."""

    def key(
        self, model: str | None, items: Sequence[Any], name: Any = None, extra: Any = None
    ) -> tuple[str | None, str]:
        """The conversation of ``model`` whose entries are ``items``: ``name``, else a
        digest of ``extra`` and the head of ``items``."""
        if name is None:
            head = dumps([plain(extra), plain(_head(items))], sort_keys=True)
            name = hashlib.blake2b(head, digest_size=16).hexdigest()
        return model, str(name)

    def manager(
        self, model: str | None, items: Sequence[Any], name: Any = None, extra: Any = None
    ) -> ContextWindowManager:
        """The manager of the conversation of ``model`` whose entries are ``items``."""
        return self._manager(self.key(model, items, name, extra))

    def _manager(
        self, key: tuple[str | None, str], changes: Mapping[str, Any] | None = None
    ) -> ContextWindowManager:
        found = self.managers.get(key)
        if found is None:
            found = ContextWindowManager(
                **{"fmt": self.fmt, "logger": self.logger, **self.settings, **(changes or {})}
            )
        remember(self.managers, key, found, self.limit)
        return found

    def entries(
        self,
        model: str | None,
        items: Sequence[Any],
        name: Any = None,
        extra: Any = None,
        changes: Mapping[str, Any] | None = None,
    ) -> tuple[ContextWindowManager, list[Any]]:
        """The manager of the conversation (see :meth:`manager`; a new one with the
        settings given here, then ``changes``) and ``items`` as plain data for it to read.

        When the conversation's last call had entries that ``items`` starts with (the
        same objects or equal ones, compared at C speed), their plain copies are
        reused, the very objects the manager read then, so it reads only the entries
        that are new; anything else (an entry edited, removed or reordered) is
        converted whole and the manager reads the call whole. An entry equal to the
        one it replaces (``==``) is taken to read the same."""
        key = self.key(model, items, name, extra)
        manager = self._manager(key, changes)
        given = list(items)
        before = self.seen.get(key)
        start = 0
        reused: list[Any] = []
        if before is not None:
            old, read = before
            n = len(old)
            try:
                same = n <= len(given) and given[:n] == old
            except Exception:  # an entry that cannot be compared: read the call whole
                same = False
            if same:
                start, reused = n, read
        added = given[start:] if self.parsed else [plain(m) for m in given[start:]]
        self.entries_read += len(added)
        converted = reused + added
        remember(self.seen, key, (given, converted), self.limit)
        return manager, converted

    def sent(self, key: Any, manager: ContextWindowManager, fitted: ManagedFit) -> None:
        """``manager`` fitted the call ``key`` as ``fitted``: its usage is to be learned."""
        remember(self.pending, key, (manager, fitted), self.limit)

    def learn(self, key: Any, usage: Any) -> None:
        """Learn from the ``usage`` reported for the call ``key`` (once per call)."""
        pending = self.pending.pop(key, None)
        data = plain(usage)
        if pending is not None and isinstance(data, Mapping):
            manager, fitted = pending
            manager.observe(data, raw_tokens=fitted.raw_tokens_sent)

    def clear(self) -> None:
        self.managers.clear()
        self.pending.clear()
        self.seen.clear()


Create = Callable[..., Any]


def fitted_call(
    fitting: Fitting,
    create: Create,
    usage_of: Callable[[Any], Any],
    stream_usage: Callable[[Any], Any],
) -> Create:
    """``create`` fitted: the request is fitted before it is sent, usage is learned
    from the response (or from the stream's events, when ``stream=True``).
    Keeps ``create``'s sync or async nature.

    When spans are recorded (:mod:`ctxwin.telemetry`), the call is one ``ctxwin.fit``
    span: the fit, then the provider call as its child (the current span while it runs),
    with the prompt tokens the response reports; a streamed call's span ends when the
    stream is handed back (its usage comes later)."""

    def call(**kwargs: Any) -> Any:
        span = telemetry.fit_span(fitting.logger)
        if span is None:
            sent, fitted = fitting.fit(kwargs)
            response = create(**sent)
            if inspect.isawaitable(response):  # an async client's call

                async def finish() -> Any:
                    done = await response
                    return _after(fitting, kwargs, fitted, done, usage_of, stream_usage)

                return finish()
            return _after(fitting, kwargs, fitted, response, usage_of, stream_usage)
        return _traced(span, fitting, create, kwargs, usage_of, stream_usage)

    return call


def _traced(
    span: Any,
    fitting: Fitting,
    create: Create,
    kwargs: dict[str, Any],
    usage_of: Callable[[Any], Any],
    stream_usage: Callable[[Any], Any],
) -> Any:
    """:func:`fitted_call`'s call inside ``span``, which it ends."""
    try:
        sent, fitted = fitting.fit(kwargs, span)
        with telemetry.current(span):
            response = create(**sent)
    except BaseException as exc:
        telemetry.failed(span, exc)
        telemetry.end(span)
        raise
    if inspect.isawaitable(response):

        async def finish() -> Any:
            try:
                with telemetry.current(span):
                    done = await response
                return _after(fitting, kwargs, fitted, done, usage_of, stream_usage, span)
            except BaseException as exc:
                telemetry.failed(span, exc)
                raise
            finally:
                telemetry.end(span)

        return finish()
    try:
        return _after(fitting, kwargs, fitted, response, usage_of, stream_usage, span)
    finally:
        telemetry.end(span)


def _after(
    fitting: Fitting,
    kwargs: dict[str, Any],
    fitted: ManagedFit,
    response: Any,
    usage_of: Callable[[Any], Any],
    stream_usage: Callable[[Any], Any],
    span: Any = None,
) -> Any:
    model = kwargs.get("model")
    if kwargs.get("stream"):

        def seen(event: Any) -> None:
            usage = stream_usage(event)
            if usage is not None:
                fitting.learn(model, usage, fitted)

        return Watched(response, seen)
    reported = fitting.learn(model, usage_of(response), fitted)
    telemetry.usage(span, reported)
    return response


class Watched:
    """A stream (sync or async) that shows each event to ``seen`` as it passes;
    everything else is the stream's own."""

    def __init__(self, stream: Any, seen: Callable[[Any], None]) -> None:
        self._stream = stream
        self._seen = seen
        self._iter: Iterator[Any] | None = None
        self._aiter: AsyncIterator[Any] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def __iter__(self) -> Iterator[Any]:
        for event in self._stream:
            self._seen(event)
            yield event

    def __next__(self) -> Any:
        if self._iter is None:
            self._iter = iter(self)
        return next(self._iter)

    async def _agen(self) -> AsyncIterator[Any]:
        async for event in self._stream:
            self._seen(event)
            yield event

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._agen()

    async def __anext__(self) -> Any:
        if self._aiter is None:
            self._aiter = self._agen()
        return await self._aiter.__anext__()

    def __enter__(self) -> Watched:
        self._stream.__enter__()
        return self

    def __exit__(self, *exc: object) -> Any:
        return self._stream.__exit__(*exc)

    async def __aenter__(self) -> Watched:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> Any:
        return await self._stream.__aexit__(*exc)


class Wrapped:
    """A client whose calls at some attribute paths are replaced; every other
    attribute is the client's own (``ctxwin`` is the wrapper's :class:`Fitting`)."""

    def __init__(
        self,
        target: Any,
        calls: dict[tuple[str, ...], Any],
        fitting: Any,
        path: tuple[str, ...] = (),
    ) -> None:
        self._target = target
        self._calls = calls
        self._path = path
        self.ctxwin = fitting

    def __getattr__(self, name: str) -> Any:
        path = (*self._path, name)
        call = self._calls.get(path)
        if call is not None:
            return call
        value = getattr(self._target, name)
        if any(p[: len(path)] == path for p in self._calls):
            return Wrapped(value, self._calls, self.ctxwin, path)
        return value

    def __repr__(self) -> str:
        return f"ctxwin-fitted {self._target!r}"


class Record:
    """The state of a wrapped client with several fitted APIs (``client.ctxwin``)."""

    def __init__(self) -> None:
        self.last: ManagedFit | None = None
        """The fit of the last request sent, through any API."""
        self.fittings: list[Fitting] = []

    def add(
        self,
        fmt: str,
        items_key: str,
        settings: dict[str, Any],
        logger: str = "ctxwin.integrations",
    ) -> Fitting:
        fitting = Fitting(fmt, items_key, settings, self, logger)
        self.fittings.append(fitting)
        return fitting

    def reset(self) -> None:
        """Start a new agent run: forget what was learned."""
        for fitting in self.fittings:
            fitting.reset()
        self.last = None
