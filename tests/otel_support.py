"""The OpenTelemetry SDK for the span tests: an in-memory exporter behind the global tracer
provider, OTLP JSON as a collector's file exporter writes it, and checks that what ctxwin
writes to logs and spans holds nothing of the request but its shape."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)


def traced(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    """An SDK tracer provider with an in-memory exporter as the global one, for this test
    only. (The API lets a process set its provider once; this sets the global the way
    opentelemetry's own test utilities reset it, and ``monkeypatch`` puts it back.)"""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    return exporter


def named(spans: Iterable[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def ids(span: ReadableSpan) -> tuple[int, int]:
    """``(trace id, span id)`` of ``span``."""
    ctx = span.get_span_context()
    assert ctx is not None
    return ctx.trace_id, ctx.span_id


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


# --- OTLP JSON ------------------------------------------------------------------------


def _any(value: Any) -> dict[str, Any]:
    """An OTLP ``AnyValue`` (ints as decimal strings, as the protobuf JSON mapping has it)."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, Sequence):
        return {"arrayValue": {"values": [_any(v) for v in value]}}
    raise TypeError(f"not an attribute value: {value!r}")


def _pairs(attributes: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    return [{"key": k, "value": _any(v)} for k, v in (attributes or {}).items()]


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """``spans`` as OTLP JSON (``ExportTraceServiceRequest``): hex ids, times in nanoseconds
    as strings, ``SPAN_KIND_*`` and status codes as numbers, grouped by instrumentation
    scope, as the collector's file exporter writes them."""
    scopes: dict[tuple[str, str | None], list[dict[str, Any]]] = {}
    for s in spans:
        ctx = s.get_span_context()
        assert ctx is not None
        scope = s.instrumentation_scope
        key = (scope.name if scope else "", scope.version if scope else None)
        out: dict[str, Any] = {
            "traceId": f"{ctx.trace_id:032x}",
            "spanId": f"{ctx.span_id:016x}",
            "name": s.name,
            "kind": s.kind.value + 1,
            "startTimeUnixNano": str(s.start_time),
            "endTimeUnixNano": str(s.end_time),
            "attributes": _pairs(s.attributes),
            "events": [
                {
                    "timeUnixNano": str(e.timestamp),
                    "name": e.name,
                    "attributes": _pairs(e.attributes),
                }
                for e in s.events
            ],
            "status": {"code": s.status.status_code.value},
        }
        if s.parent is not None:
            out["parentSpanId"] = f"{s.parent.span_id:016x}"
        scopes.setdefault(key, []).append(out)
    resource = spans[0].resource.attributes if spans else {}
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _pairs(resource)},
                "scopeSpans": [
                    {"scope": {"name": name, "version": version or ""}, "spans": found}
                    for (name, version), found in scopes.items()
                ],
            }
        ]
    }


# --- nothing of the request ---------------------------------------------------------


def _texts(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield str(k)
            yield from _texts(v)
    elif isinstance(value, Sequence | set | frozenset):
        for v in value:
            yield from _texts(v)
    elif value is not None:
        yield str(value)


def record_texts(record: logging.LogRecord) -> list[str]:
    """Everything a record carries: its message with its arguments, and every attribute
    (its ``extra`` fields among them)."""
    return [record.getMessage(), *_texts(vars(record))]


def span_texts(span: ReadableSpan) -> list[str]:
    """Everything a span carries: name, attributes, events, status."""
    out = [span.name, *_texts(dict(span.attributes or {}))]
    for e in span.events:
        out += [e.name, *_texts(dict(e.attributes or {}))]
    out.append(str(span.status.description))
    return out


def assert_nothing_of(
    secrets: Iterable[str],
    records: Iterable[logging.LogRecord] = (),
    spans: Iterable[ReadableSpan] = (),
) -> None:
    """Fails when a ctxwin record or span carries any of ``secrets`` (message content, a
    credential's value), whole or as part of a longer text."""
    records = [r for r in records if r.name == "ctxwin" or r.name.startswith("ctxwin.")]
    texts = [t for r in records for t in record_texts(r)]
    texts += [t for s in spans for t in span_texts(s)]
    for secret in secrets:
        found = [t for t in texts if secret in t]
        assert not found, f"{secret!r} found in {found[:3]!r}"
