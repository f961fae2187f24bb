"""The proxy's HTTP/1.1 client to its one upstream: keep-alive connections on asyncio.

A general-purpose client (aiohttp's ``ClientSession``) spends more CPU per request than
the proxy needs to: URL handling, cookies, redirects, tracing, auto headers and
payload types, none of which a proxy to a single origin uses. This one does only
what forwarding needs:

* a pool of idle keep-alive connections to the origin (``http`` or ``https``; idle
  ones are closed after :data:`IDLE_SECONDS`), opened within ``connect_timeout``;
* the request written in one go: request line, the caller's headers as given (plus
  ``Host``, and ``Content-Length`` when there is a body), the body;
* the response head parsed here (status, reason, headers in order, repeats kept), the
  body framed by ``Content-Length``, ``Transfer-Encoding: chunked`` (decoded; trailers
  dropped) or the end of the connection, and handed over in the chunks it arrives
  in, reading paused while more than :data:`HIGH_WATER` bytes wait;
* ``read_timeout``: the longest wait for any byte of the response.

Errors: :class:`TimeoutError` for a connect or read timeout, :class:`UpstreamError`
for anything else (refused, reset, closed early, not HTTP); a kept-alive connection the
upstream closes before answering is retried once on a new one, for the methods that
may be repeated (:data:`IDEMPOTENT`; never ``POST``), as aiohttp's client does. A
response not read to its end, or closed on error, closes its connection, which ends the
request upstream.
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import cast

from ctxwin.extras import needs_extra

with needs_extra("ctxwin.proxy", "proxy"):  # aiohttp's own dependencies
    from multidict import CIMultiDict
    from yarl import URL

IDLE_SECONDS = 15.0
"""Idle pooled connections older than this are closed rather than reused."""
MAX_IDLE = 100
"""At most this many idle connections are kept."""
HIGH_WATER = 1 << 20
"""Bytes of response body buffered before reading from the upstream pauses."""
MAX_HEAD = 1 << 16
"""A response head (status line and headers) longer than this is an error."""

_FORBIDDEN = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # CR, LF: counted
_NO_BODY_STATUS = frozenset({204, 304})
_HEX = b"0123456789abcdefABCDEF"


def _digits(text: str) -> bool:
    """ASCII digits only (``str.isdigit`` also takes ``²`` and ``٣``, which ``int`` refuses)."""
    return text.isascii() and text.isdigit()


IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})


class UpstreamError(Exception):
    """The upstream could not be reached, or broke the HTTP exchange."""


class _Connection(asyncio.Protocol):
    """One connection: parses the response to the request in flight."""

    def __init__(self, pool: Upstream) -> None:
        self.pool = pool
        self.loop = pool.loop
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self.idle_since = 0.0
        self._reset(head_only=False)

    def _reset(self, head_only: bool) -> None:
        self.head_only = head_only
        self.received = False  # any byte of the response yet
        self.buf = bytearray()
        self.response: Response | None = None
        self.chunks: deque[bytes] = deque()
        self.buffered = 0
        self.paused = False
        self.done = False  # the whole response has arrived
        self.error: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.remaining = -1  # body bytes still to come (Content-Length), or chunk bytes
        self.mode = ""  # "length", "chunked", "eof" once the head is parsed
        self.chunk_state = "size"  # size, data, crlf, trailer

    # -- asyncio.Protocol ------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.mode == "eof" and self.error is None:
            self._finish()
        elif not self.done:
            self._fail(UpstreamError("the upstream closed the connection"))
        self._wake()

    def eof_received(self) -> bool | None:
        return False  # let the transport close; connection_lost follows

    def data_received(self, data: bytes) -> None:
        if self.done:  # the response has ended: nothing more may come before a request
            self._fail(UpstreamError("bytes after the response"))
            return
        if self.error is not None:
            return
        self.received = True
        try:
            if self.response is None:
                self.buf += data
                if not self._parse_head():
                    return
                data = bytes(self.buf)
                self.buf = bytearray()
            if data:
                self._body(data)
        except UpstreamError as exc:
            self._fail(exc)
        self._wake()

    def pause_writing(self) -> None:  # the request is written whole, not awaited
        pass

    def resume_writing(self) -> None:
        pass

    # -- parsing ----------------------------------------------------------------------

    def _parse_head(self) -> bool:
        """Parse the head in ``buf`` once complete (skipping 1xx); False until then."""
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > MAX_HEAD:
                    raise UpstreamError("response head too long")
                return False
            head = bytes(self.buf[:end]).decode("utf-8", "surrogateescape")
            del self.buf[: end + 4]
            lines = head.split("\r\n")
            version, _, rest = lines[0].partition(" ")
            code, _, reason = rest.partition(" ")
            if not version.startswith("HTTP/1.") or len(code) != 3 or not _digits(code):
                raise UpstreamError("not an HTTP/1.x response")
            status = int(code)
            pairs: list[tuple[str, str]] = []
            for line in lines[1:]:
                if line[:1] in (" ", "\t") and pairs:  # obsolete line folding
                    name, value = pairs[-1]
                    pairs[-1] = (name, f"{value} {line.strip()}")
                    continue
                name, sep, value = line.partition(":")
                if not sep or not name or name != name.strip():
                    raise UpstreamError("malformed response header")
                pairs.append((name, value.strip(" \t")))
            if 100 <= status < 200:
                continue  # an interim response (100 Continue, 103 Early Hints)
            break
        headers = CIMultiDict(pairs)
        keep_alive = version == "HTTP/1.1"
        for value in headers.getall("Connection", ()):
            tokens = {t.strip().lower() for t in value.split(",")}
            if "close" in tokens:
                keep_alive = False
            elif "keep-alive" in tokens:
                keep_alive = True
        length: int | None = None
        encoding = headers.get("Transfer-Encoding", "").lower()
        if self.head_only or status in _NO_BODY_STATUS:
            self.mode = "length"
            self.remaining = 0
        elif encoding:
            if encoding.rsplit(",", 1)[-1].strip() != "chunked":
                self.mode = "eof"
                keep_alive = False
            else:
                self.mode = "chunked"
                headers.popall("Content-Length", None)  # chunked framing overrides it
        elif "Content-Length" in headers:
            values = {v.strip() for v in headers.getall("Content-Length")}
            raw = values.pop()
            if values or not _digits(raw):
                raise UpstreamError("bad Content-Length")
            length = int(raw)
            self.mode = "length"
            self.remaining = length
        else:
            self.mode = "eof"
            keep_alive = False
        self.response = Response(self, status, reason, headers, length, keep_alive)
        if self.mode == "length" and self.remaining == 0:
            self._finish()
        return True

    def _body(self, data: bytes) -> None:
        if self.mode == "length":
            if len(data) > self.remaining:
                raise UpstreamError("more bytes than Content-Length")
            self.remaining -= len(data)
            self._push(data)
            if self.remaining == 0:
                self._finish()
        elif self.mode == "chunked":
            self._chunked(data)
        else:
            self._push(data)

    def _chunked(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = 0
        out: list[bytes] = []
        while not self.done:
            state = self.chunk_state
            if state == "data":
                take = min(self.remaining, len(buf) - pos)
                if take <= 0:
                    break
                out.append(bytes(buf[pos : pos + take]))
                pos += take
                self.remaining -= take
                if self.remaining == 0:
                    self.chunk_state = "crlf"
                continue
            end = buf.find(b"\r\n", pos)
            if end < 0:
                if len(buf) - pos > MAX_HEAD:
                    raise UpstreamError("chunk line too long")
                break
            line = bytes(buf[pos:end])
            pos = end + 2
            if state == "size":
                size = line.split(b";", 1)[0].strip(b" \t")
                if not size or size.strip(_HEX):  # int() would take "+1", "0x1", "1_0"
                    raise UpstreamError("bad chunk size")
                self.remaining = int(size, 16)
                self.chunk_state = "data" if self.remaining else "trailer"
            elif state == "crlf":
                if line:
                    raise UpstreamError("chunk not followed by CRLF")
                self.chunk_state = "size"
            elif not line:  # the empty line that ends the trailers
                if pos != len(buf):
                    raise UpstreamError("bytes after the response")
                for chunk in out:
                    self._push(chunk)
                out.clear()
                self._finish()
        del buf[:pos]
        for chunk in out:
            self._push(chunk)

    def _push(self, data: bytes) -> None:
        if not data:
            return
        self.chunks.append(data)
        self.buffered += len(data)
        if self.buffered > HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    def _finish(self) -> None:
        self.done = True

    def _fail(self, exc: BaseException) -> None:
        if self.error is None:
            self.error = exc
        if self.transport is not None:
            self.transport.close()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, timeout: float | None) -> None:
        """Wait for the next event (bytes, the end, an error) for at most ``timeout``."""
        waiter = self.waiter = self.loop.create_future()
        handle = self.loop.call_later(timeout, _expire, waiter) if timeout else None
        try:
            await waiter
        finally:
            self.waiter = None
            if handle is not None:
                handle.cancel()

    def take(self) -> bytes:
        """Every body byte buffered so far (b"" when none)."""
        if not self.chunks:
            return b""
        data = self.chunks.popleft() if len(self.chunks) == 1 else b"".join(self.chunks)
        self.chunks.clear()
        self.buffered = 0
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return data


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


@dataclass(eq=False)
class Response:
    """An upstream response: status, reason and headers; the body through :meth:`read`
    or :meth:`iter_chunks`; :meth:`close` when done (required)."""

    _conn: _Connection
    status: int
    reason: str
    headers: CIMultiDict[str]
    content_length: int | None
    keep_alive: bool
    _closed: bool = field(default=False, init=False)

    @property
    def content_type(self) -> str:
        """The media type of ``Content-Type``, lower case, without parameters."""
        return self.headers.get("Content-Type", "").partition(";")[0].strip().lower()

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        """The body, decoded from chunked framing, in the pieces it arrives in."""
        conn = self._conn
        timeout = conn.pool.read_timeout
        while True:
            data = conn.take()
            if data:
                yield data
                continue
            if conn.done:
                return
            if conn.error is not None:
                raise conn.error
            await conn.wait(timeout)

    async def read(self) -> bytes:
        """The whole body."""
        parts = [chunk async for chunk in self.iter_chunks()]
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def close(self) -> None:
        """Give the connection back to the pool if the exchange ended cleanly, else close
        it (which ends the request upstream)."""
        if self._closed:
            return
        self._closed = True
        conn = self._conn
        transport = conn.transport
        if transport is None:
            return
        if (
            self.keep_alive
            and conn.done
            and conn.error is None
            and not conn.lost
            and not conn.chunks
            and not transport.get_write_buffer_size()  # the whole request went out
        ):
            conn.pool._release(conn)
        else:
            transport.close()


class Upstream:
    """Keep-alive HTTP/1.1 connections to the origin of ``base`` (see the module doc)."""

    def __init__(self, base: str, connect_timeout: float, read_timeout: float) -> None:
        url = URL(base)
        if url.scheme not in ("http", "https") or not url.raw_host:
            raise ValueError(f"the upstream must be an http:// or https:// URL: {base!r}")
        self.host = url.raw_host
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.ssl: ssl.SSLContext | None = None
        if url.scheme == "https":
            self.ssl = ssl.create_default_context()
            self.ssl.set_alpn_protocols(("http/1.1",))
        name = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if url.scheme == "https" else 80
        self.host_header = name if self.port == default else f"{name}:{self.port}"
        self.prefix = url.raw_path.rstrip("/")
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._idle: list[_Connection] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    async def request(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes | None,
    ) -> Response:
        """Send ``method`` ``prefix + target`` with ``headers`` and ``body`` (None: no body,
        no ``Content-Length``); return once the response head has arrived.

        Raises :class:`ValueError` for a header with a control character in it.
        """
        lines = [f"{method} {self.prefix}{target} HTTP/1.1\r\nHost: {self.host_header}\r\n"]
        lines += [f"{k}: {v}\r\n" for k, v in headers]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}\r\n")
        lines.append("\r\n")
        text = "".join(lines)
        breaks = len(lines) + 1  # one per line, two in the first (request line and Host)
        if (
            text.count("\r\n") != breaks
            or text.count("\n") != breaks
            or text.count("\r") != breaks
            or _FORBIDDEN.search(text) is not None
        ):
            raise ValueError("control character in a request header")
        head = text.encode("utf-8", "surrogateescape")
        retry = method in IDEMPOTENT
        while True:
            conn, reused = await self._connection()
            try:
                return await self._exchange(conn, method, head, body)
            except UpstreamError:
                # a kept-alive connection the upstream closed before answering: once,
                # for a method that may be repeated, try a new connection (as aiohttp does)
                if not (retry and reused and not conn.received):
                    raise
                retry = False

    async def _exchange(
        self, conn: _Connection, method: str, head: bytes, body: bytes | None
    ) -> Response:
        conn._reset(head_only=method == "HEAD")
        try:
            assert conn.transport is not None
            if body:
                conn.transport.writelines((head, body))
            else:
                conn.transport.write(head)
            while conn.response is None:
                if conn.error is not None:
                    raise conn.error
                await conn.wait(self.read_timeout)
        except BaseException:
            if conn.transport is not None:
                conn.transport.close()
            raise
        return conn.response

    async def _connection(self) -> tuple[_Connection, bool]:
        """A connection to the upstream, and whether it was an idle one, kept alive."""
        loop = self.loop
        now = loop.time()
        while self._idle:
            conn = self._idle.pop()
            transport = conn.transport
            if (
                transport is not None
                and not transport.is_closing()
                and not conn.lost
                and conn.error is None
                and now - conn.idle_since < IDLE_SECONDS
            ):
                return conn, True
            if transport is not None:
                transport.close()
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, conn = await loop.create_connection(
                    lambda: _Connection(self),
                    self.host,
                    self.port,
                    ssl=self.ssl,
                    server_hostname=self.host.rstrip(".") if self.ssl is not None else None,
                )
        except (OSError, ssl.SSLError) as exc:
            raise UpstreamError(f"cannot connect ({type(exc).__name__})") from exc
        return conn, False

    def _release(self, conn: _Connection) -> None:
        if len(self._idle) >= MAX_IDLE:
            if conn.transport is not None:
                conn.transport.close()
            return
        conn.idle_since = self.loop.time()
        self._idle.append(conn)

    async def close(self) -> None:
        """Close the idle connections (those in use close with their responses)."""
        for conn in self._idle:
            if conn.transport is not None:
                conn.transport.close()
        self._idle.clear()
        await asyncio.sleep(0)
