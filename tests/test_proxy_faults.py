"""Upstream faults after the response head: each answered in the route's error shape,
counted in /metrics and logged with its status."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx2 as httpx
import orjson
import pytest

from ctxwin.proxy.server import Proxy
from tests.proxy_support import config_for, proxied, serve_proxy
from tests.test_proxy_fitting import agent_body


def _read_request(conn: socket.socket) -> None:
    """Read one request (head and Content-Length body) from ``conn``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return
        body += chunk


@contextmanager
def raw_upstream(answer: bytes, then: str) -> Iterator[str]:
    """An upstream on 127.0.0.1 that answers every request with ``answer`` and then
    ``close``s the connection or ``stall``s (holds it open, silent, until the end)."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def run() -> None:
        server.settimeout(0.1)
        held = []
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            conn.settimeout(10)
            _read_request(conn)
            conn.sendall(answer)
            if then == "close":
                conn.close()
            else:
                held.append(conn)
        for conn in held:
            conn.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(10)
        server.close()


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
CASES = [
    ("/v1/chat/completions", "error", "code"),
    ("/v1/messages", "type", None),
    ("/v1beta/models/gemini-2.0-flash:generateContent", "error", "status"),
]


def _shape(path: str, body: dict[str, object]) -> tuple[str, str]:
    """(the provider's error-kind field, the message) of an error body."""
    if path == "/v1/messages":
        assert body["type"] == "error"
        error = body["error"]
        assert isinstance(error, dict)
        return error["type"], error["message"]
    error = body["error"]
    assert isinstance(error, dict)
    if "status" in error:
        return error["status"], error["message"]
    return error["code"], error["message"]


@pytest.mark.parametrize(
    ("then", "status", "kind"), [("close", 502, "broken_response"), ("stall", 504, "timeout")]
)
@pytest.mark.parametrize("path", [c[0] for c in CASES])
def test_an_upstream_that_breaks_off_or_stalls_after_its_head(
    path: str, then: str, status: int, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ctxwin.proxy")
    body = agent_body(2)
    if path == "/v1/messages":
        body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": body["messages"][1:2]}
    elif "gemini" in path:
        body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    with raw_upstream(HEAD + b'{"partial": ', then) as url:
        proxy = Proxy(config_for(url, read_timeout=0.5, context_length=100_000))
        with serve_proxy(proxy) as served:
            started = time.monotonic()
            r = httpx.post(served.url + path, content=orjson.dumps(body), timeout=30)
            took = time.monotonic() - started
            metrics = httpx.get(served.url + "/metrics").text
    assert r.status_code == status, r.text
    field, message = _shape(path, r.json())
    assert message.startswith("ctxwin proxy: the upstream")
    expected = {
        (502, "/v1/chat/completions"): "upstream_broken",
        (504, "/v1/chat/completions"): "upstream_timeout",
        (502, "/v1/messages"): "api_error",
        (504, "/v1/messages"): "api_error",
    }.get((status, path), "UNAVAILABLE" if status == 502 else "DEADLINE_EXCEEDED")
    assert field == expected
    assert f'ctxwin_proxy_upstream_errors_total{{kind="{kind}"}} 1' in metrics
    lines = [r.getMessage() for r in caplog.records if r.name == "ctxwin.proxy"]
    assert any(line.startswith(f"POST {path} {status} ") for line in lines), lines
    if then == "stall":
        assert took < 20  # cut at the read timeout (0.5 s), not left hanging


def test_a_body_that_cannot_be_unpacked_is_a_400_not_a_500() -> None:
    with proxied() as (served, _, fake):
        r = httpx.post(
            served.url + "/v1/messages",
            content=b"\x1f\x8b\x08\x00not gzip at all" * 10,
            headers={"Content-Encoding": "gzip"},
            timeout=30,
        )
        metrics = httpx.get(served.url + "/metrics").text
    assert r.status_code == 400
    assert r.json()["type"] == "error"
    assert "cannot be read" in r.json()["error"]["message"]
    assert 'action="invalid_body"} 1' in metrics
    assert fake.received == []
