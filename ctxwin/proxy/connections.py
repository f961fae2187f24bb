"""The proxy's connections: a deadline for each request head and a cap on open connections.

aiohttp's server (3.14) closes a connection idle between requests after its
``keepalive_timeout`` and bounds each header line and the number of headers, but
gives a request head no deadline: a client sending one header line every few seconds
keeps its connection, and a task, for as long as it likes. Nor does it cap the
connections it accepts. :class:`Server` builds :class:`Connection` (aiohttp's
``RequestHandler``) with both:

* the head deadline: from the connection's opening for its first request, and from
  the first byte of each later one, the head (request line and headers) must be
  complete within ``head_timeout`` seconds, or the client is answered 408 and the
  connection closed. The body has its own deadline, kept by the request handler
  (``ProxyConfig.body_timeout``); the wait between requests is ``keepalive_timeout``;
* the cap: a connection opened while ``max_connections`` are open is answered 503 and
  closed at once, before any of it is read.

Counted in the proxy's metrics: ``head_timeouts`` and ``refused_connections``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ctxwin.extras import needs_extra
from ctxwin.proxy.metrics import Metrics

with needs_extra("ctxwin.proxy", "proxy"):
    from aiohttp import web
    from aiohttp.web_protocol import RequestHandler


def _answer(status: str, text: str) -> bytes:
    """A whole plain-text response that closes the connection (written to the transport)."""
    body = f"ctxwin proxy: {text}\n".encode()
    head = (
        f"HTTP/1.1 {status}\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


_HEAD_TIMEOUT = _answer("408 Request Timeout", "the request head did not arrive in time")
_BUSY = _answer("503 Service Unavailable", "too many open connections; try again later")


class Limits:
    """What every connection of one server shares: the limits, the count of open
    connections and the metrics the faults are counted in."""

    def __init__(self, head_timeout: float, max_connections: int, metrics: Metrics) -> None:
        self.head_timeout = head_timeout
        self.max_connections = max_connections
        self.metrics = metrics
        self.open = 0


class Connection(RequestHandler):
    """aiohttp's protocol for one connection, with the head deadline and the cap."""

    def __init__(self, manager: web.Server, limits: Limits, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self.limits = limits
        self.refused = False
        self.head_timer: asyncio.TimerHandle | None = None
        self.heads = 0  # request heads complete so far
        self.body: Any = None  # the body stream of the last request head

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        limits = self.limits
        if limits.open >= limits.max_connections:
            self.refused = True
            limits.metrics.count("refused_connections")
            writer: Any = transport
            writer.write(_BUSY)
            transport.close()
            return
        limits.open += 1
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self.refused:
            return
        self.limits.open -= 1
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.head_timer is None and data and (self.body is None or self.body.is_eof()):
            self._arm()  # the first byte of a new request's head
        super().data_received(data)
        if self._request_count != self.heads:  # one or more heads complete
            self.heads = self._request_count
            self._disarm()
            self.body = self._messages[-1][1] if self._messages else None

    def _arm(self) -> None:
        self._disarm()
        loop: Any = self._loop
        self.head_timer = loop.call_later(self.limits.head_timeout, self._head_late, self.heads)

    def _disarm(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_late(self, heads: int) -> None:
        self.head_timer = None
        if self._request_count != heads or self.transport is None:
            return
        self.limits.metrics.count("head_timeouts")
        self.transport.write(_HEAD_TIMEOUT)
        self.force_close()


class Server(web.Server):
    """aiohttp's low-level server, building a :class:`Connection` for each connection."""

    def __init__(self, *args: Any, limits: Limits, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits

    def __call__(self) -> RequestHandler:
        return Connection(self, self.limits, loop=self._loop, **self._kwargs)
