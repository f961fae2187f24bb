"""The HTTP side of ``ctxwin proxy``: an aiohttp server that fits and forwards.

Per request: read the body (up to ``max_body_bytes``), fit it when the route
is a generation endpoint (:mod:`ctxwin.proxy.fitting`), forward it with the
client's headers (hop-by-hop ones aside; a compressed body arrives unpacked and
goes on so, without its ``Content-Encoding``) to ``upstream`` + the request's path
and query, and relay the response, streamed or not, byte for byte, adding
``x-ctxwin-*`` headers. A copy of the response bytes is read for the usage
that teaches the conversation's calibration.

A body over :data:`INLINE_BYTES` is fitted in a thread of its own (:attr:`Proxy.fitting`),
so the event loop keeps serving other requests meanwhile; while that thread has work,
every fit, and learning from a response's usage, queue after it there.

Faults: a body that is not JSON → 400, not forwarded; a floor overflow → 400
in the provider's shape, not forwarded; body too large → 413, or not in within
``body_timeout`` → 408 (the connection then closes, and the rest of the body is
dropped as it arrives, never unpacked); upstream unreachable → 502, silent past
``read_timeout`` → 504 (before its headers, or before the end of a response that is
buffered), closing before the end of a buffered response → 502; a streamed response
that breaks is cut short; a client that goes away cancels the upstream request (the
handler is cancelled, the upstream connection closed). The head deadline and the
connection cap are :mod:`ctxwin.proxy.connections`'. Bodies, query strings and
credentials are never logged.

With the ``otel`` extra and an SDK tracer provider set, each request is a ``SERVER`` span
that continues the client's ``traceparent``; the fit adds to it, the upstream request
carries it as its ``traceparent``, and the prompt tokens the response reports are added
before it ends (:mod:`ctxwin.telemetry.otel`).

Before anything is read, :class:`~ctxwin.proxy.guard.Guard` may refuse the request (a
target that is not a plain path, a foreign ``Host`` or ``Origin``, a missing token):
answered in the provider's shape, counted by reason, never forwarded.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import zlib
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from time import perf_counter
from typing import Any

from ctxwin import telemetry
from ctxwin.errors import InputError
from ctxwin.extras import needs_extra
from ctxwin.proxy.connections import Limits, Server
from ctxwin.proxy.fitting import (
    CREDENTIAL_HEADERS,
    LOGGER,
    TRUNCATED,
    Fitted,
    Fitter,
    ProxyConfig,
    floor_message,
)
from ctxwin.proxy.guard import TOKEN_HEADER, Guard, Refusal, connection_named, loggable
from ctxwin.proxy.metrics import Metrics
from ctxwin.proxy.routes import Route, error_body, flavor_for, route_for
from ctxwin.proxy.upstream import Response, Upstream, UpstreamError
from ctxwin.proxy.usage import MAX_BUFFER, UsageReader

with needs_extra("ctxwin.proxy", "proxy"):
    from aiohttp import web
    from aiohttp.http_exceptions import HttpProcessingError

log = logging.getLogger(LOGGER)

_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "expect",
    }
)
_REQUEST_DROP = _HOP_BY_HOP | {"host", "content-length", TOKEN_HEADER}
_JSON = "application/json"


INLINE_BYTES = 64 << 10
"""A request body up to this size is fitted on the event loop when the fitting thread has
no work (about a millisecond: 0.2-0.6 ms for a 47 KiB, 30-turn agent body); a larger one
in the fitting thread."""

_UNPACKED = frozenset({"gzip", "deflate", "br", "zstd"})
"""Request ``Content-Encoding`` values aiohttp's server decodes before the body is read
(its parser's own list): such a body is forwarded decoded, so its label is dropped."""


def _decoded(encoding: str | None) -> bool:
    """Whether a request body labelled ``encoding`` reaches the proxy decoded (the
    server decodes one encoding named alone, matched as aiohttp's parser does)."""
    return encoding is not None and encoding.isascii() and encoding.lower() in _UNPACKED


def _dropped(base: frozenset[str], connection: list[str]) -> frozenset[str]:
    """``base`` and the headers a ``Connection`` header names (hop-by-hop too)."""
    return base | connection_named(connection) if connection else base


def _decoder(encoding: str | None) -> Any:
    """A zlib decompressor for a gzip or deflate response (for the usage copy), else None."""
    if encoding in ("gzip", "x-gzip", "deflate"):
        return zlib.decompressobj(47)  # gzip or zlib header, detected
    return None


class Proxy:
    """The proxy application: :meth:`app` builds the aiohttp application."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.fitter = Fitter(config)
        self.metrics = Metrics(
            lambda: len(self.fitter.conversations.managers),
            lambda: self.fitter.held_total,
            lambda: self.limits.open,
        )
        self.limits = Limits(config.head_timeout, config.max_connections, self.metrics)
        self.upstream = Upstream(config.upstream, config.connect_timeout, config.read_timeout)
        self.fitting = ThreadPoolExecutor(1, thread_name_prefix="ctxwin-proxy-fit")
        """The thread that fits large bodies off the event loop (:meth:`_fit`)."""
        self.queued = 0
        """Jobs given to :attr:`fitting` and not finished (changed on the event loop only).
        The fitter's state (its conversations, their managers) is used by the event loop
        only while this is 0, else by the fitting thread only: never by both at once."""
        self.guard = Guard.for_config(config)

    def server(self) -> web.Server:
        """The low-level aiohttp server for :meth:`handle` (no application, router or
        middleware machinery: one handler sees every request), with the head deadline
        and the connection cap (:mod:`ctxwin.proxy.connections`)."""
        loop = asyncio.get_running_loop()
        limit = self.config.max_body_bytes

        def request(
            message: Any, payload: Any, protocol: Any, writer: Any, task: Any
        ) -> web.BaseRequest:  # as aiohttp's own factory, with the body limit
            return web.BaseRequest(
                message, payload, protocol, writer, task, loop, client_max_size=limit
            )

        return Server(
            self.handle,
            limits=self.limits,
            request_factory=request,
            handler_cancellation=True,
            access_log=None,
            keepalive_timeout=self.config.idle_timeout,
            logger=_ServerLog(self.metrics),
        )

    async def close(self) -> None:
        """Close the upstream connection pool and the fitting thread (after serving)."""
        await self.upstream.close()
        self.fitting.shutdown(wait=False, cancel_futures=True)

    def _error(
        self, flavor: str, status: int, message: str, code: str, fitted: Fitted | None = None
    ) -> web.Response:
        headers = fitted.headers() if fitted is not None else {}
        return web.Response(
            status=status,
            body=error_body(flavor, status, message, code),
            content_type=_JSON,
            headers=headers,
        )

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        start = perf_counter()
        method, path = request.method, request.path
        refusal = self.guard.check(method, request.raw_path, request.headers, _local(request))
        if refusal is None:
            if method == "GET" and path == "/healthz":
                return web.Response(body=b'{"status":"ok"}', content_type=_JSON)
            if method == "GET" and path == "/metrics":
                return web.Response(
                    body=self.metrics.render(), content_type="text/plain", charset="utf-8"
                )
        route = route_for(method, path)
        label = route.name if route is not None else "passthrough"
        flavor = route.flavor if route is not None else flavor_for(path)
        # the raw path (percent-encoded, no query), escaped: one request, one line
        target = loggable(request.raw_path.partition("?")[0])
        traced = _Traced.start(method, label, target, request.headers)
        status = 0
        action = "forwarded"
        response: web.StreamResponse
        try:
            if refusal is not None:
                response, action = self._refuse(flavor, refusal), f"refused:{refusal.reason}"
            else:
                try:
                    response, action = await self._serve(request, route, flavor, traced)
                except ConnectionError:  # the client went away
                    raise
                except Exception as exc:  # a fault of the proxy's own, in the route's shape
                    action = "error"
                    message = f"ctxwin proxy: internal error ({type(exc).__name__})"
                    response = self._error(flavor, 500, message, "internal_error")
            status = response.status
            return response
        finally:
            self.metrics.requests[label, action.partition(":")[0]] += 1
            elapsed = perf_counter() - start
            self.metrics.request_seconds.observe(elapsed)
            log.info("%s %s %s %s %.1fms", method, target, status, action, elapsed * 1000)
            if traced is not None:
                traced.answered(status, action)

    def _refuse(self, flavor: str, refusal: Refusal) -> web.Response:
        self.metrics.refused[refusal.reason] += 1
        return self._error(flavor, refusal.status, refusal.message, refusal.code)

    async def _serve(
        self, request: web.BaseRequest, route: Any, flavor: str, traced: _Traced | None = None
    ) -> tuple[web.StreamResponse, str]:
        try:
            async with asyncio.timeout(self.config.body_timeout):
                raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            limit = self.config.max_body_bytes
            message = (
                f"ctxwin proxy: request body over the proxy's limit of {limit:,} bytes; "
                "not forwarded (restart the proxy with a larger --max-body-bytes)"
            )
            response = self._error(flavor, 413, message, "request_too_large")
            return _unread(request, response), "too_large"
        except web.RequestPayloadError:
            message = (
                "ctxwin proxy: the request body cannot be read (broken chunked framing or "
                "compression); not forwarded"
            )
            response = self._error(flavor, 400, message, "invalid_body")
            return _unread(request, response), "invalid_body"
        except TimeoutError:
            self.metrics.count("body_timeouts")
            seconds = self.config.body_timeout
            message = f"ctxwin proxy: the request body did not arrive within {seconds:g} s"
            response = self._error(flavor, 408, message, "request_timeout")
            return _unread(request, response), "body_timeout"
        fitted: Fitted | None = None
        body = raw
        if route is not None:
            credentials = [request.headers.get(h, "") for h in CREDENTIAL_HEADERS]
            try:
                fitted = await self._fit(route, raw, credentials, traced)
            except InputError as exc:
                message = f"ctxwin proxy: the request body is not valid JSON ({exc}); not forwarded"
                return self._error(flavor, 400, message, "invalid_json"), "invalid_json"
            if fitted.action == TRUNCATED:
                self.metrics.count("truncated")
                message = floor_message(fitted)
                response = self._error(flavor, 400, message, "context_length_exceeded", fitted)
                return response, TRUNCATED
            if fitted.plan is not None:
                self.metrics.fitted(fitted.plan)
            body = fitted.body
        action = fitted.action if fitted is not None else "forwarded"
        return await self._forward(request, body, flavor, fitted, traced), action

    async def _forward(
        self,
        request: web.BaseRequest,
        body: bytes,
        flavor: str,
        fitted: Fitted | None,
        traced: _Traced | None = None,
    ) -> web.StreamResponse:
        drop = _dropped(_REQUEST_DROP, request.headers.getall("Connection", []))
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in drop]
        if _decoded(request.headers.get("Content-Encoding")):
            # the server read the body unpacked: it goes on without that label
            at = (i for i, (k, _) in enumerate(headers) if k.lower() == "content-encoding")
            if (first := next(at, None)) is not None:  # (None: Connection named it)
                del headers[first]
        if traced is not None:  # the upstream request continues the proxy's span
            headers = traced.inject(headers)
        has_body = bool(body) or request.body_exists
        try:
            upstream = await self.upstream.request(
                request.method, request.raw_path, headers, body if has_body else None
            )
        except TimeoutError:
            self.metrics.upstream_errors["timeout"] += 1
            message = "ctxwin proxy: the upstream did not answer in time"
            return self._error(flavor, 504, message, "upstream_timeout", fitted)
        except UpstreamError as exc:
            self.metrics.upstream_errors["unreachable"] += 1
            message = f"ctxwin proxy: cannot reach the upstream: {exc}"
            return self._error(flavor, 502, message, "upstream_unreachable", fitted)
        try:
            return await self._relay(request, upstream, flavor, fitted, traced)
        finally:
            upstream.close()

    async def _relay(
        self,
        request: web.BaseRequest,
        upstream: Response,
        flavor: str,
        fitted: Fitted | None,
        traced: _Traced | None = None,
    ) -> web.StreamResponse:
        reader: UsageReader | None = None
        decoder: Any = None
        # the upstream's headers, but a fitted request's x-ctxwin-* replace any it sent
        ours = fitted.headers() if fitted is not None else {}
        drop = _dropped(_HOP_BY_HOP, upstream.headers.getall("Connection", []))
        headers = [
            (k, v)
            for k, v in upstream.headers.items()
            if (low := k.lower()) not in drop and low not in ours
        ]
        headers += ours.items()
        if fitted is not None and fitted.plan is not None and upstream.status < 300:
            reader = UsageReader(upstream.content_type == "text/event-stream")
            decoder = _decoder(upstream.headers.get("Content-Encoding"))
        length = upstream.content_length
        if length is not None and length <= MAX_BUFFER:
            try:
                data = await upstream.read()
            except TimeoutError:  # silent after its headers: nothing sent to the client yet
                self.metrics.upstream_errors["timeout"] += 1
                message = "ctxwin proxy: the upstream stopped answering after its headers"
                return self._error(flavor, 504, message, "upstream_timeout", fitted)
            except UpstreamError as exc:  # closed (or broke framing) before the body's end
                self.metrics.upstream_errors["broken_response"] += 1
                message = f"ctxwin proxy: the upstream broke off its response: {exc}"
                return self._error(flavor, 502, message, "upstream_broken", fitted)
            if reader is not None and fitted is not None:  # after the response is written
                loop = asyncio.get_running_loop()
                if traced is not None:
                    traced.later = True  # the span ends once the usage is read
                loop.call_soon(
                    self._with_fitter, self._learn, fitted, reader, decoder, data, traced
                )
            return web.Response(
                status=upstream.status, reason=upstream.reason, body=data, headers=headers
            )
        response = web.StreamResponse(
            status=upstream.status, reason=upstream.reason, headers=headers
        )
        await response.prepare(request)
        try:
            async for chunk in upstream.iter_chunks():
                if reader is not None:
                    reader.feed(decoder.decompress(chunk) if decoder is not None else chunk)
                await response.write(chunk)
        except ConnectionResetError:  # the client went away: drop the upstream request
            self.metrics.upstream_errors["disconnect"] += 1
            raise
        except (TimeoutError, UpstreamError):  # upstream stalled or broke mid-stream
            self.metrics.upstream_errors["broken_stream"] += 1
            if request.transport is not None:
                request.transport.close()  # the client sees the response cut short
            return response
        except asyncio.CancelledError:
            self.metrics.upstream_errors["disconnect"] += 1
            raise
        await response.write_eof()
        if reader is not None and fitted is not None:
            prompt_tokens = reader.result()
            if traced is not None:
                telemetry.usage(traced.span, prompt_tokens)
            self._with_fitter(self.fitter.learn, fitted, prompt_tokens)
        return response

    async def _fit(
        self, route: Route, raw: bytes, credentials: list[str], traced: _Traced | None = None
    ) -> Fitted:
        """``fitter.fit``: for a body over :data:`INLINE_BYTES`, or while the fitting
        thread has work, in the fitting thread (after that work), the event loop free
        meanwhile; else here, on the loop (the hop to the thread costs about as much as
        such a fit)."""
        span = traced.span if traced is not None else None
        if not self.queued and len(raw) <= INLINE_BYTES:
            return self._timed_fit(route, raw, credentials, span)
        return await asyncio.wrap_future(
            self._submit(self._timed_fit, route, raw, credentials, span)
        )

    def _timed_fit(
        self, route: Route, raw: bytes, credentials: list[str], span: Any = None
    ) -> Fitted:
        start = perf_counter()
        try:
            return self.fitter.fit(route, raw, credentials, span)
        finally:
            self.metrics.fit_seconds.observe(perf_counter() - start)

    def _submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """``fn(*args)`` queued for the fitting thread, counted in :attr:`queued` until it
        has run (or was cancelled before it ran)."""
        loop = asyncio.get_running_loop()
        future = self.fitting.submit(fn, *args)
        self.queued += 1

        def finished(_: Future[Any]) -> None:  # in the fitting thread, once fn returned
            with suppress(RuntimeError):  # the loop is closed: nothing is counted any more
                loop.call_soon_threadsafe(self._finished)

        future.add_done_callback(finished)
        return future

    def _finished(self) -> None:
        self.queued -= 1

    def _with_fitter(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)``, which uses the fitter's state: now when the fitting thread has
        nothing to do, else in that thread after its work."""
        if not self.queued:
            fn(*args)
            return
        with suppress(RuntimeError):  # the proxy is closing: nothing more is learned
            self._submit(fn, *args)

    def _learn(
        self,
        fitted: Fitted,
        reader: UsageReader,
        decoder: Any,
        data: bytes,
        traced: _Traced | None = None,
    ) -> None:
        try:
            try:
                reader.feed(decoder.decompress(data) if decoder is not None else data)
            except zlib.error:
                return
            prompt_tokens = reader.result()
            if traced is not None:
                telemetry.usage(traced.span, prompt_tokens)
            self.fitter.learn(fitted, prompt_tokens)
        finally:
            if traced is not None:
                traced.end()


class _Traced:
    """The server span of one request (:mod:`ctxwin.telemetry.otel`), when spans are
    recorded. It ends when the answer is sent, or, for a buffered answer whose usage is
    read after it is written, once that usage is on it (:attr:`later`)."""

    __slots__ = ("later", "module", "span")

    def __init__(self, module: Any, span: Any) -> None:
        self.module = module
        self.span = span
        self.later = False

    @classmethod
    def start(cls, method: str, route: str, path: str, headers: Any) -> _Traced | None:
        """The span of a request to ``path`` (no query), or ``None`` when nothing is traced."""
        module = telemetry.traces()
        span = None if module is None else module.server_span(method, route, path, headers)
        return None if span is None else cls(module, span)

    def inject(self, headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return list(self.module.inject(self.span, headers))

    def answered(self, status: int, action: str) -> None:
        if status:
            self.module.answered(self.span, status, action)
        else:
            self.span.set_attribute("ctxwin.action", action)
        if not self.later:
            self.end()

    def end(self) -> None:
        self.span.end()


def _unread(request: web.BaseRequest, response: web.Response) -> web.Response:
    """``response`` to a request whose body is left unread: the connection closes after
    it, and the rest of the body is received and dropped, not parsed (aiohttp's lingering
    close would otherwise unpack a compressed body's rest on the event loop)."""
    response.force_close()
    request.protocol.close()  # the protocol drops what arrives from now on
    return response


def _local(request: web.BaseRequest) -> tuple[str, int] | None:
    """The (address, port) the client connected to."""
    transport = request.transport
    name = transport.get_extra_info("sockname") if transport is not None else None
    return (str(name[0]), int(name[1])) if isinstance(name, tuple) else None


class _ServerLog(logging.LoggerAdapter[logging.Logger]):
    """aiohttp's server logger, except that a request its HTTP parser refuses (a bad
    head: ``Content-Length: ²``, a malformed target, an over-long line) is counted in
    ``ctxwin_proxy_refused_total{reason="bad_request"}`` and logged as one escaped line,
    not a traceback."""

    def __init__(self, metrics: Metrics) -> None:
        super().__init__(logging.getLogger("aiohttp.server"), {})
        self.metrics = metrics

    def _refused(self, exc_info: Any) -> bool:
        if not isinstance(exc_info, HttpProcessingError):
            return False
        self.metrics.refused["bad_request"] += 1
        first = str(exc_info.message).strip().partition("\n")[0]
        log.info("- - %s refused:bad_request (%s)", exc_info.code, loggable(first))
        return True

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kw: Any) -> None:
        if not self._refused(exc_info):
            super().exception(msg, *args, exc_info=exc_info, **kw)

    def debug(self, msg: object, *args: object, **kw: Any) -> None:
        if not self._refused(kw.get("exc_info")):
            super().debug(msg, *args, **kw)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (port 0: any free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


class Running:
    """A proxy being served: :meth:`cleanup` stops it."""

    def __init__(self, proxy: Proxy, runner: web.BaseRunner) -> None:
        self.proxy = proxy
        self.runner = runner

    async def cleanup(self) -> None:
        await self.runner.cleanup()
        await self.proxy.close()


async def start(proxy: Proxy, sock: socket.socket) -> Running:
    """Serve ``proxy`` on ``sock`` (a listening socket, see :func:`bind`)."""
    runner = web.ServerRunner(proxy.server())
    await runner.setup()
    await web.SockSite(runner, sock).start()
    return Running(proxy, runner)


def run(config: ProxyConfig, ready: Callable[[str], None] | None = None) -> None:
    """Run the proxy in this thread until interrupted, on uvloop when it is installed
    (part of the extra on POSIX: a faster event loop for both the server and client side)."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(config, ready))
    else:
        uvloop.run(serve(config, ready))


async def serve(config: ProxyConfig, ready: Callable[[str], None] | None = None) -> None:
    """Run the proxy until cancelled; ``ready`` is called with the URL once it listens."""
    sock = bind(config.host, config.port)
    runner = await start(Proxy(config), sock)
    host, port = sock.getsockname()[:2]
    if ready is not None:
        ready(f"http://{f'[{host}]' if ':' in host else host}:{port}")
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
