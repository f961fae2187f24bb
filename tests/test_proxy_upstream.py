"""The proxy's upstream client against scripted HTTP servers on 127.0.0.1: what it
writes, how it frames and relays responses, when it reuses a connection, its errors."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import subprocess
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from ctxwin.proxy import upstream as upstream_module
from ctxwin.proxy.upstream import Upstream, UpstreamError

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Scripted:
    """A TCP server on 127.0.0.1 that runs ``script`` per connection and records what it
    read (every request head, with its body) and how many connections it accepted."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.connections = 0
        self.heads: list[bytes] = []
        self.bodies: list[bytes] = []
        self.closed = asyncio.Event()  # a connection saw the client close it
        self.server: asyncio.Server | None = None

    async def read_request(self, reader: asyncio.StreamReader) -> bytes:
        head = await reader.readuntil(b"\r\n\r\n")
        self.heads.append(head)
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = await reader.readexactly(length) if length else b""
        self.bodies.append(body)
        return head

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.script(reader, writer)
            if not await reader.read(1):  # the client closed its end
                self.closed.set()
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed.set()
        finally:
            writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()


def run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(asyncio.wait_for(coro, 30))


def answer(*responses: bytes, close: bool = False) -> Callable[[Scripted], Script]:
    """A script: read one request per response and write that response, as is; then
    close the connection (``close``) or wait for the client to."""

    def make(server: Scripted) -> Script:
        async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            for response in responses:
                await server.read_request(reader)
                writer.write(response)
                await writer.drain()
            if close:
                writer.close()

        return script

    return make


def scripted(make: Callable[[Scripted], Script]) -> Scripted:
    server = Scripted(lambda r, w: asyncio.sleep(0))
    server.script = make(server)
    return server


OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


def test_writes_the_request_as_given_and_reads_a_sized_response_on_one_connection() -> None:
    async def main() -> None:
        server = scripted(answer(OK, OK, OK))
        async with server as url:
            up = Upstream(url + "/prefix/", 5, 5)
            headers = [("Authorization", "Bearer k"), ("X-Two", "a"), ("x-two", "b")]
            r = await up.request("POST", "/v1/chat?x=1", headers, b'{"a":1}')
            assert (r.status, r.reason, await r.read()) == (200, "OK", b"{}")
            assert r.content_length == 2 and r.content_type == "application/json"
            r.close()
            r = await up.request("GET", "/v1/models", [], None)
            assert await r.read() == b"{}"
            r.close()
            r = await up.request("POST", "/empty", [], b"")
            r.close()
            await up.close()
        port = url.rsplit(":", 1)[1]
        assert server.heads[0] == (
            b"POST /prefix/v1/chat?x=1 HTTP/1.1\r\nHost: 127.0.0.1:" + port.encode() + b"\r\n"
            b"Authorization: Bearer k\r\nX-Two: a\r\nx-two: b\r\nContent-Length: 7\r\n\r\n"
        )
        assert server.bodies[0] == b'{"a":1}'
        assert b"content-length" not in server.heads[1].lower()
        assert b"Content-Length: 0\r\n" in server.heads[2]
        assert server.connections == 1  # kept alive and reused

    run(main())


def test_chunked_responses_are_decoded_in_any_split_and_the_connection_reused() -> None:
    body = b"data: one\n\n" * 3
    wire = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n"
        b"Content-Length: 5\r\n\r\n"
        + b"b;ext=1\r\n"
        + body[:11]
        + b"\r\n16\r\n"
        + body[11:]
        + b"\r\n0\r\nX-Trailer: t\r\n\r\n"
    )

    def make(server: Scripted) -> Script:
        async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            for step in (1, 7):  # one byte at a time, then seven
                await server.read_request(reader)
                for i in range(0, len(wire), step):
                    writer.write(wire[i : i + step])
                    await writer.drain()
                    await asyncio.sleep(0)

        return script

    async def main() -> None:
        server = scripted(make)
        async with server as url:
            up = Upstream(url, 5, 5)
            for _ in range(2):
                r = await up.request("POST", "/", [], b"x")
                assert r.content_length is None and r.content_type == "text/event-stream"
                assert "Content-Length" not in r.headers  # chunked framing overrides it
                chunks = [c async for c in r.iter_chunks()]
                assert b"".join(chunks) == body
                r.close()
            await up.close()
        assert server.connections == 1

    run(main())


@pytest.mark.parametrize(
    ("wire", "method", "body", "reused"),
    [
        (b"HTTP/1.1 200 OK\r\n\r\nuntil the end", "GET", b"until the end", False),
        (
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
            "GET",
            b"ok",
            False,
        ),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", "GET", b"ok", False),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", "HEAD", b"", True),
        (b"HTTP/1.1 204 No Content\r\n\r\n", "DELETE", b"", True),
        (
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            "GET",
            b"ok",
            True,
        ),
    ],
)
def test_response_framing_and_when_a_connection_is_kept(
    wire: bytes, method: str, body: bytes, reused: bool
) -> None:
    def make(server: Scripted) -> Script:
        async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while True:
                await server.read_request(reader)
                writer.write(wire)
                await writer.drain()
                if not reused:  # framed by the end of the connection, or told to close
                    writer.close()
                    break

        return script

    async def main() -> None:
        server = scripted(make)
        async with server as url:
            up = Upstream(url, 5, 5)
            for _ in range(2):
                r = await up.request(method, "/", [], None)
                assert r.status == 200 or r.status == 204
                assert await r.read() == body
                r.close()
            await up.close()
        assert server.connections == (1 if reused else 2)

    run(main())


def test_repeated_headers_and_their_order_are_kept() -> None:
    wire = (
        b"HTTP/1.1 201 Created here\r\nSet-Cookie: a=1\r\nX-Id: 7\r\nSet-Cookie: b=2\r\n"
        b"Content-Length: 0\r\n\r\n"
    )

    async def main() -> None:
        async with scripted(answer(wire)) as url:
            up = Upstream(url, 5, 5)
            r = await up.request("GET", "/", [], None)
            assert (r.status, r.reason) == (201, "Created here")
            assert list(r.headers.items())[:3] == [
                ("Set-Cookie", "a=1"),
                ("X-Id", "7"),
                ("Set-Cookie", "b=2"),
            ]
            assert await r.read() == b""
            r.close()
            await up.close()

    run(main())


@pytest.mark.parametrize("value", ["a\r\nX-Injected: 1", "a\nb", "a\rb", "a\x00b"])
def test_a_header_with_a_control_character_is_refused_before_anything_is_sent(
    value: str,
) -> None:
    async def main() -> None:
        server = scripted(answer(OK))
        async with server as url:
            up = Upstream(url, 5, 5)
            with pytest.raises(ValueError, match="control character"):
                await up.request("GET", "/", [("X-Bad", value)], None)
            await up.close()
        assert server.connections == 0

    run(main())


def test_silence_before_the_head_is_a_timeout_and_closes_the_connection() -> None:
    def make(server: Scripted) -> Script:
        async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await server.read_request(reader)
            await reader.read(1)  # until the client closes

        return script

    async def main() -> None:
        server = scripted(make)
        async with server as url:
            up = Upstream(url, 5, 0.2)
            with pytest.raises(TimeoutError):
                await up.request("POST", "/", [], b"x")
            await asyncio.wait_for(server.closed.wait(), 5)
            await up.close()

    run(main())


def test_silence_mid_body_is_a_timeout() -> None:
    def make(server: Scripted) -> Script:
        async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await server.read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf")
            await writer.drain()
            await asyncio.sleep(5)

        return script

    async def main() -> None:
        async with scripted(make) as url:
            up = Upstream(url, 5, 0.2)
            r = await up.request("GET", "/", [], None)
            chunks = r.iter_chunks()
            assert await anext(chunks) == b"half"
            with pytest.raises(TimeoutError):
                await anext(chunks)
            r.close()
            await up.close()

    run(main())


@pytest.mark.parametrize(
    "wire",
    [
        b"",  # closed without a byte
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 2x0 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        # digits int() refuses or reads otherwise than a parser must: never a crash
        "HTTP/1.1 200 OK\r\nContent-Length: \u00b2\r\n\r\nok".encode(),
        "HTTP/1.1 200 OK\r\nContent-Length: \u0663\r\n\r\nok".encode(),
        "HTTP/1.1 2\u00b2\u00b2 OK\r\n\r\n".encode(),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\nok\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+2\r\nok\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0_2\r\nok\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX: " + b"x" * (upstream_module.MAX_HEAD + 10),
    ],
)
def test_a_broken_or_foreign_answer_is_an_upstream_error(
    wire: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    def make(server: Scripted) -> Script:
        async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await server.read_request(reader)
            writer.write(wire)
            await writer.drain()
            if b"chunked" not in wire:
                writer.close()

        return script

    async def main() -> None:
        server = scripted(make)
        async with server as url:
            up = Upstream(url, 5, 5)
            with pytest.raises(UpstreamError):
                r = await up.request("GET", "/", [], None)
                await r.read()
            await up.close()
        assert server.connections == 1  # a new connection's failure is not retried

    with caplog.at_level(logging.ERROR):
        run(main())
    # refused by the parser, not by an exception escaping it (the loop logs those)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


def test_a_body_cut_short_is_an_upstream_error() -> None:
    async def main() -> None:
        wire = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf"

        def make(server: Scripted) -> Script:
            async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                await server.read_request(reader)
                writer.write(wire)
                await writer.drain()
                writer.close()

            return script

        async with scripted(make) as url:
            up = Upstream(url, 5, 5)
            r = await up.request("GET", "/", [], None)
            with pytest.raises(UpstreamError):
                await r.read()
            r.close()
            await up.close()

    run(main())


def test_nothing_listening_is_an_upstream_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def main() -> None:
        up = Upstream(f"http://127.0.0.1:{port}", 5, 5)
        with pytest.raises(UpstreamError, match="cannot connect"):
            await up.request("GET", "/", [], None)

    run(main())


def test_a_response_closed_before_its_end_closes_its_connection() -> None:
    def make(server: Scripted) -> Script:
        async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await server.read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nmore\r\n")
            await writer.drain()
            await reader.read(1)  # until the client closes

        return script

    async def main() -> None:
        server = scripted(make)
        async with server as url:
            up = Upstream(url, 5, 5)
            r = await up.request("GET", "/", [], None)
            assert await anext(r.iter_chunks()) == b"more"
            r.close()  # as when the proxy's client goes away
            await asyncio.wait_for(server.closed.wait(), 5)
            await up.close()

    run(main())


def test_a_large_body_arrives_whole_through_flow_control() -> None:
    body = bytes(range(256)) * (3 * upstream_module.HIGH_WATER // 256 + 7)
    wire = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body

    async def main() -> None:
        async with scripted(answer(wire, wire)) as url:
            up = Upstream(url, 5, 5)
            for _ in range(2):
                r = await up.request("GET", "/", [], None)
                got = bytearray()
                async for chunk in r.iter_chunks():
                    got += chunk
                    await asyncio.sleep(0.001)  # a slow reader: the buffer fills
                assert got == body
                r.close()
            await up.close()

    run(main())


def test_idle_connections_closed_by_the_upstream_or_too_old_are_not_reused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def main() -> None:
        server = scripted(answer(OK, close=True))  # one response per connection
        async with server as url:
            up = Upstream(url, 5, 5)
            for _ in range(3):
                r = await up.request("GET", "/", [], None)
                assert await r.read() == b"{}"
                r.close()
                await asyncio.sleep(0.05)  # the upstream's close arrives
            assert server.connections == 3
            monkeypatch.setattr(upstream_module, "IDLE_SECONDS", 0.0)
            old = Scripted(lambda r, w: asyncio.sleep(0))
            old.script = answer(OK, OK)(old)
        async with old as url:
            up = Upstream(url, 5, 5)
            for _ in range(2):
                r = await up.request("GET", "/", [], None)
                r.close()
            await up.close()
        assert old.connections == 2

    run(main())


@pytest.mark.parametrize(("method", "retried"), [("GET", True), ("POST", False)])
def test_a_kept_alive_connection_closed_unanswered_is_retried_only_when_repeatable(
    method: str, retried: bool
) -> None:
    def make(server: Scripted) -> Script:
        async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            first = server.connections == 1
            await server.read_request(reader)
            writer.write(OK)
            await writer.drain()
            await server.read_request(reader)
            if first:  # as an upstream that timed the idle connection out just then
                writer.close()
                return
            writer.write(OK)
            await writer.drain()

        return script

    async def main() -> None:
        server = scripted(make)
        async with server as url:
            up = Upstream(url, 5, 5)
            r = await up.request(method, "/", [], b"x")
            await r.read()
            r.close()
            if retried:
                r = await up.request(method, "/", [], b"x")
                assert await r.read() == b"{}"
                r.close()
            else:
                with pytest.raises(UpstreamError):
                    await up.request(method, "/", [], b"x")
            await up.close()
        assert server.connections == (2 if retried else 1)

    run(main())


def test_https_upstreams_are_verified(tmp_path: Path) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subject = ["-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)]
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", *subject],
        check=True,
        capture_output=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    async def main() -> None:
        seen = asyncio.Event()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            seen.set()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=context)
        port = server.sockets[0].getsockname()[1]
        up = Upstream(f"https://127.0.0.1:{port}", 5, 5)
        assert up.host_header == f"127.0.0.1:{port}"
        with pytest.raises(UpstreamError, match="SSL"):  # self-signed: refused
            await up.request("GET", "/", [], None)
        server.close()

    run(main())


def test_host_headers_and_bad_upstream_urls() -> None:
    assert Upstream("https://api.example.com", 1, 1).host_header == "api.example.com"
    assert Upstream("http://example.com:80/x", 1, 1).host_header == "example.com"
    assert Upstream("http://[::1]:8080", 1, 1).host_header == "[::1]:8080"
    assert Upstream("http://h:1/base/", 1, 1).prefix == "/base"
    with pytest.raises(ValueError, match="http"):
        Upstream("ftp://example.com", 1, 1)
