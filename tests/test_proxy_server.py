"""The proxy over HTTP, against a fake upstream on 127.0.0.1: forwarding, streams, faults."""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

import httpx2 as httpx
import orjson
import pytest

from ctxwin.proxy.fitting import ProxyConfig
from ctxwin.proxy.server import Proxy, bind
from tests.proxy_support import FakeUpstream, proxied, serve_proxy
from tests.test_proxy_fitting import agent_body

SECRET = "sk-very-secret-key"
MARKER = "BODY-MARKER-5b1e"


def post(url: str, body: Any, **kw: Any) -> httpx.Response:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    return httpx.post(url, content=data, timeout=30, **kw)


def test_a_request_that_fits_goes_through_unchanged_and_so_does_the_response() -> None:
    raw = orjson.dumps(agent_body(3), option=orjson.OPT_INDENT_2)
    headers = {"Authorization": f"Bearer {SECRET}", "X-Custom": "kept", "OpenAI-Beta": "a=b"}
    with proxied(context_length=100_000, max_tokens=1000) as (served, _, fake):
        r = post(served.url + "/v1/chat/completions?api-version=1", raw, headers=headers)
    assert r.status_code == 200
    assert r.content == fake.sent[-1]
    got = fake.received[-1]
    assert got.body == raw
    assert got.path_qs == "/v1/chat/completions?api-version=1"
    for k, v in headers.items():
        assert got.headers[k] == v
    assert r.headers["x-ctxwin-action"] == "fit"
    assert r.headers["x-ctxwin-dropped-turns"] == "0"


def test_response_headers_pass_through_and_ours_replace_any_the_upstream_sent() -> None:
    fake = FakeUpstream(headers={"X-Request-Id": "r1", "x-ctxwin-action": "spoofed"})
    fake.headers["Set-Cookie"] = "a=1"
    with proxied(fake, context_length=100_000, max_tokens=1000) as (served, _, _):
        r = post(served.url + "/v1/chat/completions", agent_body(3))
        plain = httpx.get(served.url + "/v1/models")
    assert r.headers["x-request-id"] == "r1" and r.headers["set-cookie"] == "a=1"
    assert r.headers.get_list("x-ctxwin-action") == ["fit"]
    assert plain.headers.get_list("x-ctxwin-action") == ["spoofed"]  # passed through


def test_an_overflowing_request_is_pruned_before_forwarding() -> None:
    body = agent_body(30)
    with proxied(context_length=8000, max_tokens=500) as (served, _, fake):
        r = post(served.url + "/v1/chat/completions", body)
    assert r.status_code == 200
    forwarded = orjson.loads(fake.received[-1].body)
    assert forwarded["messages"][:2] == body["messages"][:2]  # the head is kept
    assert forwarded["messages"][-2:] == body["messages"][-2:]  # and the newest turn
    dropped = int(r.headers["x-ctxwin-dropped-turns"])
    assert dropped > 0
    assert len(forwarded["messages"]) == len(body["messages"]) - 2 * dropped
    assert int(fake.received[-1].headers["Content-Length"]) == len(fake.received[-1].body)


def test_sse_streams_come_back_byte_for_byte_and_teach_calibration() -> None:
    body = agent_body(3, stream=True, stream_options={"include_usage": True})
    fake = FakeUpstream(ratio=1.7, chunk_pause=0.01)
    with proxied(fake, context_length=100_000, max_tokens=1000) as (served, proxy, _):
        with httpx.stream(
            "POST", served.url + "/v1/chat/completions", content=orjson.dumps(body)
        ) as r:
            chunks = list(r.iter_raw())
        assert r.headers["content-type"] == "text/event-stream"
        assert b"".join(chunks) == fake.sent[-1]
        assert len(chunks) > 1  # streamed, not buffered
        deadline = time.monotonic() + 60  # generous: the machine may be busy
        while not proxy.fitter.learned() and time.monotonic() < deadline:
            time.sleep(0.01)
        again = post(served.url + "/v1/chat/completions", body)
    assert float(again.headers["x-ctxwin-calibration"]) == pytest.approx(1.7, rel=0.02)


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/chat/completions", agent_body(1, 60_000), "error.code"),
        ("/v1/messages", None, "type"),
        ("/v1beta/models/gemini-2.0-flash:generateContent", None, "error.status"),
    ],
)
def test_floor_overflow_is_a_400_in_the_providers_shape_and_not_forwarded(
    path: str, body: Any, field: str
) -> None:
    big = "word " * 30_000
    if path == "/v1/messages":
        body = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 500,
            "messages": [{"role": "user", "content": big}],
        }
    elif body is None:
        body = {"contents": [{"role": "user", "parts": [{"text": big}]}]}
    with proxied(context_length=8000, max_tokens=500) as (served, _, fake):
        r = post(served.url + path, body)
    assert r.status_code == 400
    assert fake.received == []
    error = r.json()
    top, _, key = field.partition(".")
    value = error[top][key] if key else error[top]
    assert value in ("context_length_exceeded", "error", "INVALID_ARGUMENT")
    text = r.text
    assert "ctxwin" in text and "not forwarded" in text
    assert r.headers["x-ctxwin-action"] == "truncated"


def test_malformed_json_is_a_400_and_not_forwarded() -> None:
    with proxied() as (served, _, fake):
        r = post(served.url + "/v1/messages", b'{"model": "x", "messages": [')
    assert r.status_code == 400
    assert r.json()["type"] == "error"
    assert "not valid JSON" in r.json()["error"]["message"]
    assert fake.received == []


def test_other_paths_pass_through_untouched() -> None:
    with proxied() as (served, _, fake):
        r = httpx.get(served.url + "/v1/models?limit=2", headers={"x-api-key": SECRET})
        odd = post(served.url + "/v1/embeddings", b"not json at all")
    assert r.status_code == 200
    assert r.content == fake.sent[0]
    assert fake.received[0].path_qs == "/v1/models?limit=2"
    assert fake.received[0].headers["x-api-key"] == SECRET
    assert "x-ctxwin-action" not in r.headers
    assert odd.status_code == 200
    assert fake.received[1].body == b"not json at all"


def test_body_size_limit() -> None:
    with proxied(max_body_bytes=10_000) as (served, _, fake):
        r = post(served.url + "/v1/chat/completions", agent_body(10))
        ok = post(served.url + "/v1/chat/completions", agent_body(1, 100))
    assert r.status_code == 413
    assert "--max-body-bytes" in r.json()["error"]["message"]
    assert ok.status_code == 200
    assert len(fake.received) == 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_upstream_down_is_502() -> None:
    proxy = Proxy(ProxyConfig(upstream=f"http://127.0.0.1:{free_port()}"))
    with serve_proxy(proxy) as served:
        r = post(served.url + "/v1/messages", {"model": "m", "messages": []})
        plain = httpx.get(served.url + "/v1/models")
    assert r.status_code == 502
    assert r.json()["error"]["type"] == "api_error"
    message = r.json()["error"]["message"]
    assert message.startswith("ctxwin proxy: cannot reach the upstream: cannot connect")
    assert plain.status_code == 502
    assert proxy.metrics.upstream_errors["unreachable"] == 2


def test_upstream_timeout_is_504() -> None:
    fake = FakeUpstream(delay=2.0)
    with proxied(fake, read_timeout=0.3) as (served, proxy, _):
        r = post(served.url + "/v1/chat/completions", agent_body(1))
    assert r.status_code == 504
    assert r.json()["error"]["code"] == "upstream_timeout"
    assert proxy.metrics.upstream_errors["timeout"] == 1


def test_a_client_that_goes_away_mid_stream_cancels_the_upstream_request() -> None:
    fake = FakeUpstream(endless=True)
    body = agent_body(1, stream=True)
    with proxied(fake) as (served, proxy, _):
        with httpx.stream(
            "POST", served.url + "/v1/chat/completions", content=orjson.dumps(body)
        ) as r:
            first = next(r.iter_raw())
            assert first.startswith(b"data: ")
        # the client has closed its connection; the upstream must see its request end
        assert fake.cancelled.wait(timeout=60)  # returns as soon as it is set
        deadline = time.monotonic() + 60
        while not proxy.metrics.upstream_errors["disconnect"] and time.monotonic() < deadline:
            time.sleep(0.01)
    assert proxy.metrics.upstream_errors["disconnect"] == 1


def test_health_and_metrics() -> None:
    with proxied(context_length=8000, max_tokens=500) as (served, _, _fake):
        assert httpx.get(served.url + "/healthz").json() == {"status": "ok"}
        post(served.url + "/v1/chat/completions", agent_body(30))
        post(served.url + "/v1/chat/completions", agent_body(1, 60_000))
        post(served.url + "/v1/chat/completions", b"{")
        text = httpx.get(served.url + "/metrics").text
    assert 'ctxwin_proxy_requests_total{route="chat",action="pruned"} 1' in text
    assert 'ctxwin_proxy_requests_total{route="chat",action="truncated"} 1' in text
    assert 'ctxwin_proxy_requests_total{route="chat",action="invalid_json"} 1' in text
    assert "ctxwin_proxy_pruned_total 1" in text
    assert "ctxwin_proxy_truncated_total 1" in text
    assert "ctxwin_proxy_fit_seconds_count 3" in text
    assert "ctxwin_proxy_cleared_total 0" in text
    dropped = next(
        line for line in text.splitlines() if line.startswith("ctxwin_proxy_dropped_turns_total")
    )
    assert int(dropped.split()[1]) > 0


def test_logs_never_hold_bodies_queries_or_credentials(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    body = agent_body(30) | {"metadata": {"note": MARKER}}
    with proxied(context_length=8000, max_tokens=500) as (served, _, _fake):
        post(
            served.url + f"/v1/chat/completions?key={SECRET}",
            body,
            headers={"Authorization": f"Bearer {SECRET}", "x-api-key": SECRET},
        )
        post(served.url + "/v1/chat/completions", b'{"x": "' + MARKER.encode())
    # the server side's records (the test's own HTTP client logs its URLs)
    server = [r for r in caplog.records if not r.name.startswith(("httpx", "httpcore"))]
    text = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in server)
    assert "/v1/chat/completions" in text  # it does log requests
    assert SECRET not in text
    assert MARKER not in text


def test_binds_to_loopback_by_default() -> None:
    config = ProxyConfig(upstream="http://127.0.0.1:1")
    assert config.host == "127.0.0.1"
    sock = bind(config.host, 0)
    try:
        assert sock.getsockname()[0] == "127.0.0.1"
    finally:
        sock.close()


def test_concurrent_conversations() -> None:
    fake = FakeUpstream(ratio=1.3)
    results: list[int] = []
    with proxied(fake, context_length=8000, max_tokens=500) as (served, proxy, _):

        def run(i: int) -> None:
            body = agent_body(20) | {"messages": [*agent_body(20)["messages"]]}
            body["messages"][1] = {"role": "user", "content": f"task {i}"}
            results.append(post(served.url + "/v1/chat/completions", body).status_code)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        deadline = time.monotonic() + 60  # learning runs just after each response is sent
        while proxy.fitter.learned() < 8 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proxy.fitter.learned() == 8
    assert results == [200] * 8


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_a_compressed_request_is_forwarded_decoded_and_labelled_so(encoding: str) -> None:
    import zlib

    raw = orjson.dumps(agent_body(30))
    packer = zlib.compressobj(wbits=31 if encoding == "gzip" else 15)
    packed = packer.compress(raw) + packer.flush()
    headers = {"Content-Encoding": encoding.upper(), "X-Custom": "kept"}
    with proxied(context_length=8000, max_tokens=500) as (served, _, fake):
        r = post(served.url + "/v1/chat/completions", packed, headers=headers)
    assert r.status_code == 200, r.text
    assert int(r.headers["x-ctxwin-dropped-turns"]) > 0  # the decoded body was fitted
    got = fake.received[-1]
    assert "content-encoding" not in {k.lower() for k in got.headers}
    assert got.headers["X-Custom"] == "kept"
    assert orjson.loads(got.body)["messages"][:2] == orjson.loads(raw)["messages"][:2]


def test_a_request_in_an_encoding_the_proxy_cannot_read_keeps_its_label() -> None:
    with proxied() as (served, _, fake):
        r = post(served.url + "/v1/other", b"\x00opaque", headers={"Content-Encoding": "x-custom"})
    assert r.status_code == 200
    assert fake.received[-1].headers["Content-Encoding"] == "x-custom"
    assert fake.received[-1].body == b"\x00opaque"
