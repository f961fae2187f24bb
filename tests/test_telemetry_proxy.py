"""What ``ctxwin proxy`` tells an operator, against a fake upstream on 127.0.0.1: its fits'
log records under ``ctxwin.proxy`` beside its access lines, one server span per request
that continues the client's trace and is passed on upstream as ``traceparent``, and
nothing of the bodies, queries or credentials."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

pytest.importorskip("aiohttp")

import httpx2 as httpx
import orjson
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from tests.otel_support import assert_nothing_of, attrs, ids, traced
from tests.proxy_support import FakeUpstream, proxied
from tests.test_proxy_fitting import agent_body

SECRET = "sk-proxy-secret-41ab"
MARKER = "BODY-MARKER-9c2e"
CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
HEADERS = {"Authorization": f"Bearer {SECRET}", "x-api-key": SECRET}


def body(turns: int, **extra: Any) -> dict[str, Any]:
    b = agent_body(turns, **extra)
    b["messages"][1]["content"] = f"fix the bug {MARKER}"
    return b


def post(url: str, payload: Any, **headers: str) -> httpx.Response:
    return httpx.post(
        url, content=orjson.dumps(payload), headers={**HEADERS, **headers}, timeout=30
    )


def ours(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "ctxwin.proxy" and r.levelno == level]


def test_the_proxy_logs_its_fits_beside_its_access_lines(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with proxied(context_length=8000, max_tokens=500) as (served, _, _):
        url = served.url + f"/v1/chat/completions?key={SECRET}"
        assert post(url, body(2)).headers["x-ctxwin-action"] == "fit"
        pruned = post(url, body(30))
        assert pruned.headers["x-ctxwin-action"] == "pruned"
        too_big = body(1)
        too_big["messages"].append({"role": "user", "content": MARKER * 5000})
        assert post(url, too_big).status_code == 400
    [info] = [r for r in ours(caplog, logging.INFO) if r.getMessage().startswith("fitted")]
    f: dict[str, Any] = vars(info)
    assert f["ctxwin_status"] == "needs_pruning" and f["ctxwin_model"] == "gpt-4o"
    assert str(f["ctxwin_dropped_turns"]) == pruned.headers["x-ctxwin-dropped-turns"] != "0"
    assert (
        str(f["ctxwin_estimated_tokens_after"]) == pruned.headers["x-ctxwin-estimated-tokens-after"]
    )
    assert f["ctxwin_context_length"] == 8000 and f["ctxwin_budget"] == int(
        pruned.headers["x-ctxwin-budget"]
    )
    [error] = ours(caplog, logging.ERROR)
    assert vars(error)["ctxwin_status"] == "truncated"
    access = [
        r.getMessage() for r in ours(caplog, logging.INFO) if r.getMessage().startswith("POST")
    ]
    assert [line.split()[2:4] for line in access] == [
        ["200", "fit"],
        ["200", "pruned"],
        ["400", "truncated"],
    ]
    server = [r for r in caplog.records if not r.name.startswith(("httpx", "httpcore"))]
    assert_nothing_of([SECRET, MARKER, "x" * 50], server)


def test_an_unknown_model_warns_once_per_conversation(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="ctxwin")
    with proxied() as (served, _, _):
        for turns in (1, 2, 3):
            post(served.url + "/v1/chat/completions", body(turns, model="acme-7"))
    [warning] = ours(caplog, logging.WARNING)
    assert vars(warning)["ctxwin_warning"] == "unknown_model"
    assert vars(warning)["ctxwin_context_length"] == 8192


# --- spans ----------------------------------------------------------------------------


def finished(exporter: InMemorySpanExporter, n: int) -> list[ReadableSpan]:
    """The ``n`` spans of the requests made (a buffered answer's span ends once its usage is
    read, just after the answer is written)."""
    deadline = time.monotonic() + 5
    while len(spans := exporter.get_finished_spans()) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return list(spans)


@pytest.mark.parametrize("stream", [False, True])
def test_each_request_is_a_server_span_passed_on_upstream(
    monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    exporter = traced(monkeypatch)
    extra = {"stream": True, "stream_options": {"include_usage": True}} if stream else {}
    fake = FakeUpstream()
    with proxied(fake, context_length=8000, max_tokens=500) as (served, _, _):
        r = post(
            served.url + f"/v1/chat/completions?key={SECRET}",
            body(30, **extra),
            traceparent=TRACEPARENT,
            tracestate="vendor=client",
        )
        assert r.status_code == 200
        [span] = finished(exporter, 1)
    trace_id, span_id = ids(span)
    assert span.name == "POST chat" and span.kind.name == "SERVER"
    assert f"{trace_id:032x}" == CLIENT_TRACE  # the client's trace, continued
    assert span.parent is not None and f"{span.parent.span_id:016x}" == CLIENT_SPAN
    got = fake.received[-1].headers
    assert got["traceparent"] == f"00-{CLIENT_TRACE}-{span_id:016x}-01"  # the proxy's span
    assert got["tracestate"] == "vendor=client"
    assert got["Authorization"] == f"Bearer {SECRET}"  # the rest as it came
    a = attrs(span)
    assert a["http.request.method"] == "POST" and a["url.path"] == "/v1/chat/completions"
    assert a["http.response.status_code"] == 200 and a["ctxwin.action"] == "pruned"
    assert a["ctxwin.source"] == "ctxwin.proxy" and a["gen_ai.request.model"] == "gpt-4o"
    assert str(a["ctxwin.dropped_turns"]) == r.headers["x-ctxwin-dropped-turns"] != "0"
    assert a["ctxwin.budget"] == int(r.headers["x-ctxwin-budget"])
    sent = orjson.loads(fake.received[-1].body)
    assert a["gen_ai.usage.input_tokens"] == fake.tokens("openai-chat", sent)
    assert [e.name for e in span.events] == ["ctxwin.edit"]
    assert_nothing_of([SECRET, MARKER, "x" * 50], spans=[span])


def test_every_request_has_its_span(monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = traced(monkeypatch)
    fake = FakeUpstream()
    with proxied(fake, context_length=4000, max_tokens=500) as (served, _, _):
        models = httpx.get(served.url + "/v1/models", headers=HEADERS)
        too_big = body(1)
        too_big["messages"].append({"role": "user", "content": MARKER * 5000})
        refused = post(served.url + "/v1/chat/completions", too_big)
        foreign = post(served.url + "/v1/chat/completions", body(1), host="evil.example")
        spans = finished(exporter, 3)
    assert (models.status_code, refused.status_code, foreign.status_code) == (200, 400, 421)
    by_action = {attrs(s)["ctxwin.action"]: s for s in spans}
    assert set(by_action) == {"forwarded", "truncated", "refused:host"}
    passthrough = by_action["forwarded"]
    assert passthrough.name == "GET passthrough"
    assert fake.received[0].headers["traceparent"].split("-")[2] == (f"{ids(passthrough)[1]:016x}")
    truncated = attrs(by_action["truncated"])
    assert (
        truncated["ctxwin.status"] == "truncated" and truncated["http.response.status_code"] == 400
    )
    assert len(fake.received) == 1  # neither the truncated nor the refused one went upstream
    assert_nothing_of([SECRET, MARKER], spans=spans)


def test_without_an_sdk_the_clients_traceparent_passes_through() -> None:
    fake = FakeUpstream()
    with proxied(fake, context_length=8000, max_tokens=500) as (served, _, _):
        post(served.url + "/v1/chat/completions", body(3), traceparent=TRACEPARENT)
    assert fake.received[-1].headers["traceparent"] == TRACEPARENT
