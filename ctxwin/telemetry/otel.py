"""ctxwin's OpenTelemetry spans (the ``otel`` extra: ``opentelemetry-api`` only).

:mod:`ctxwin.telemetry` imports this module the first time a fit may be traced; without
``opentelemetry-api`` the import raises :class:`~ctxwin.extras.MissingExtra` naming the
extra, and ctxwin traces nothing. Spans are made only when an SDK's tracer provider is
set (:func:`tracing`): under the API's own no-op provider nothing is created at all.

* A fit before a send is a span ``ctxwin.fit`` (child of the current span), or adds to
  the span it is given (the proxy's server span): ``gen_ai.request.model``,
  ``ctxwin.source`` (the logger of whoever sent it), every field of
  :data:`ctxwin.telemetry.FIELDS` as ``ctxwin.NAME``, an event ``ctxwin.edit`` per
  edit (the turns dropped; each result cleared or cut, each thinking part removed: the
  step and the message's index, never its content), and status ERROR when nothing may
  be sent. ``gen_ai.usage.input_tokens`` is added where the usage is known before the
  span ends (an SDK wrapper's call that is not streamed; the proxy).
* The proxy's request is a ``SERVER`` span (:func:`server_span`) continuing the
  client's ``traceparent``, and the request it forwards carries the proxy's span as its
  ``traceparent`` (:func:`inject`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ctxwin import __version__
from ctxwin.extras import needs_extra

with needs_extra("ctxwin.telemetry.otel", "otel"):
    from opentelemetry import propagate, trace
    from opentelemetry.trace import (
        NoOpTracerProvider,
        ProxyTracerProvider,
        SpanKind,
        Status,
        StatusCode,
    )

if TYPE_CHECKING:
    from ctxwin.core import Plan


MAX_EVENTS = 128
"""Edit events per span at most (the SDK's own default limit)."""

PROPAGATED = frozenset({"traceparent", "tracestate", "baggage"})
"""The request headers the proxy replaces with its own span's context."""

_OFF = (ProxyTracerProvider, NoOpTracerProvider)
_TRACER: tuple[Any, Any] = (None, None)
"""The global tracer provider last seen, and ctxwin's tracer of it."""


_NAMED_BY_ENVIRONMENT = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
"""Whether the environment names a provider the API loads on its first use."""


def tracer() -> Any:
    """ctxwin's tracer of the global tracer provider; ``None`` when no SDK's provider is
    set (the API's own records nothing). It follows the provider set now, whenever and
    however often the application sets one.

    Until a provider is set, the API's module global that holds it is ``None``: that is
    read first, sparing every fit the API's lookup of the environment (a microsecond);
    the API's own function decides in every other case."""
    global _TRACER
    if not _NAMED_BY_ENVIRONMENT and getattr(trace, "_TRACER_PROVIDER", False) is None:
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, _OFF):
        return None
    if _TRACER[0] is not provider:
        _TRACER = (provider, provider.get_tracer("ctxwin", __version__))
    return _TRACER[1]


def tracing() -> bool:
    """Whether spans are recorded: an SDK tracer provider is set (not the API's own)."""
    return tracer() is not None


def start(name: str, source: str) -> Any:
    """A span ``name`` opened by ``source``, child of the current span (not made current);
    ``None`` when nothing is traced."""
    found = tracer()
    if found is None:
        return None
    return found.start_span(name, attributes={"ctxwin.source": source})


@contextmanager
def current(span: Any) -> Iterator[None]:
    """``span`` as the current span inside the block (not ended on leaving it)."""
    with trace.use_span(
        span, end_on_exit=False, record_exception=False, set_status_on_exception=False
    ):
        yield


def failed(span: Any, exc: BaseException) -> None:
    """Status ERROR with the exception's type only (its message may quote the request)."""
    kind = type(exc).__name__
    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR, kind))


def record(span: Any, p: Plan, fields: Mapping[str, Any]) -> None:
    """The fit ``p`` (its :data:`~ctxwin.telemetry.FIELDS`: ``fields``) on ``span``."""
    if not span.is_recording():
        return
    model = p.transcript.view.model or p.budget.spec.name
    attributes: dict[str, Any] = {} if model is None else {"gen_ai.request.model": model}
    for key, value in fields.items():
        if value is not None:
            attributes[f"ctxwin.{key}"] = value
    span.set_attributes(attributes)
    for name, event in edits(p):
        span.add_event(name, event)
    if p.result.overflow_at_floor:
        span.set_status(Status(StatusCode.ERROR, fields["status"]))


def edits(p: Plan) -> Iterator[tuple[str, dict[str, Any]]]:
    """An event per edit of ``p`` (at most :data:`MAX_EVENTS`): the turns dropped (and a
    superseded block dropped before a compaction), then each content edit, oldest first."""
    from ctxwin.fitting.strategy import (
        CLEAR_RESULTS,
        CLEAR_THINKING,
        CLEARED_PREFIX,
        DROP_TURNS,
        TRUNCATE_RESULTS,
    )

    r = p.result
    n = 0
    drops = [(r.head, r.cut)] if r.cut > r.head else []
    if r.gap is not None:
        drops.insert(0, r.gap)
    for first, end in drops:
        n += 1
        yield (
            "ctxwin.edit",
            {
                "ctxwin.edit.step": DROP_TURNS,
                "ctxwin.edit.message": first,
                "ctxwin.edit.messages": end - first,
                "ctxwin.edit.turns": r.dropped_turns if (first, end) == (r.head, r.cut) else 0,
            },
        )
    for (entry, _path), text in p.applied.edits.items():
        if n >= MAX_EVENTS:
            return
        n += 1
        if text is None:
            step = CLEAR_THINKING
        elif text.startswith(CLEARED_PREFIX):
            step = CLEAR_RESULTS
        else:
            step = TRUNCATE_RESULTS
        yield "ctxwin.edit", {"ctxwin.edit.step": step, "ctxwin.edit.message": entry}


# --- the proxy ----------------------------------------------------------------------


def server_span(method: str, route: str, path: str, headers: Mapping[str, str]) -> Any:
    """The ``SERVER`` span of one proxied request: ``METHOD ROUTE``, continuing the trace
    the client's ``traceparent`` names (``path``: the request's path, without its query);
    ``None`` when nothing is traced."""
    found = tracer()
    if found is None:
        return None
    parent = propagate.extract(headers)
    return found.start_span(
        f"{method} {route}",
        context=parent,
        kind=SpanKind.SERVER,
        attributes={
            "ctxwin.source": "ctxwin.proxy",
            "http.request.method": method,
            "url.path": path,
            "http.route": route,
        },
    )


def inject(span: Any, headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """``headers`` with the trace context of ``span`` (``traceparent``, and ``tracestate``
    and baggage where set) in place of the client's."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    kept = [(k, v) for k, v in headers if k.lower() not in PROPAGATED]
    return kept + list(carrier.items())


def answered(span: Any, status: int, action: str) -> None:
    """What the proxy answered: the HTTP status and its action (``fit``, ``pruned``,
    ``truncated``, ``refused:host``, ...); status ERROR for a 5xx."""
    span.set_attribute("http.response.status_code", status)
    span.set_attribute("ctxwin.action", action)
    if status >= 500:
        span.set_attribute("error.type", str(status))
        span.set_status(Status(StatusCode.ERROR, str(status)))
