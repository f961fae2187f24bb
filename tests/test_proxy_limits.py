"""The proxy under load it should not let hurt others: fitting a large body off the
event loop, deadlines for the request head and body, a cap on open connections, and no
inflating of a compressed body after its 413."""

from __future__ import annotations

import socket
import statistics
import threading
import time
import zlib
from typing import Any

import httpx2 as httpx
import orjson

from ctxwin.proxy.fitting import ProxyConfig
from tests.proxy_support import proxied
from tests.test_proxy_fitting import agent_body


def test_healthz_stays_fast_while_a_30_mb_body_is_fitted() -> None:
    raw = orjson.dumps(agent_body(9000, 3000))
    assert len(raw) > 27_000_000
    with proxied(context_length=128_000, max_tokens=1000) as (served, proxy, _):
        fit = proxy.fitter.fit
        span: dict[str, float] = {}

        def timed(*args: Any) -> Any:
            span["start"] = time.perf_counter()
            try:
                return fit(*args)
            finally:
                span["end"] = time.perf_counter()

        proxy.fitter.fit = timed  # type: ignore[method-assign,assignment]
        answer: dict[str, Any] = {}

        def post() -> None:
            r = httpx.post(served.url + "/v1/chat/completions", content=raw, timeout=300)
            answer["status"] = r.status_code
            answer["action"] = r.headers.get("x-ctxwin-action")

        big = threading.Thread(target=post)
        big.start()
        during: list[float] = []
        with httpx.Client(timeout=60) as client:
            client.get(served.url + "/healthz")  # the connection is open before the fit
            deadline = time.monotonic() + 300
            while "start" not in span and time.monotonic() < deadline:
                time.sleep(0.002)
            while "end" not in span and time.monotonic() < deadline:
                sent = time.perf_counter()
                assert client.get(served.url + "/healthz").status_code == 200
                if "end" not in span:  # answered while the fit was still running
                    during.append(time.perf_counter() - sent)
                time.sleep(0.01)
        big.join(300)
    assert answer == {"status": 200, "action": "pruned"}
    fitting = span["end"] - span["start"]
    # several answers came while it was fitting, each without waiting for the fit
    # (on the loop, the first would have waited for the whole of it: 1-3 s here)
    assert len(during) >= 3, (during, fitting)
    assert statistics.median(during) < 0.1, (during, fitting)
    assert max(during) < min(0.5, fitting / 2), (during, fitting)


# --- raw clients ----------------------------------------------------------------------


def connect(url: str) -> socket.socket:
    host, _, port = url.removeprefix("http://").partition(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    return sock


def read_until_closed(sock: socket.socket, timeout: float) -> tuple[bytes, float]:
    """Everything ``sock`` receives until the peer closes, and how long that took."""
    started = time.monotonic()
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data, time.monotonic() - started


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the peer closes ``sock`` within ``seconds`` (bytes before that are read)."""
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


def head(url: str) -> bytes:
    """The start of a chat request's head, with the proxy's own ``Host`` (host:port)."""
    host = url.split("://", 1)[1].split("/", 1)[0]
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\n"
        b"Content-Type: application/json\r\n" % host.encode()
    )


def test_a_client_dribbling_its_head_is_cut_off_at_the_head_deadline() -> None:
    with proxied(head_timeout=1.0) as (served, proxy, fake):
        sock = connect(served.url)
        started = time.monotonic()
        sock.sendall(head(served.url))
        got = b""
        sock.settimeout(0.3)
        for i in range(100):  # one header line every 0.3 s, for 30 s at most
            try:
                got = sock.recv(65536)
                break  # answered (or closed)
            except TimeoutError:
                pass
            try:
                sock.sendall(b"X-Dribble-%d: x\r\n" % i)
            except OSError:
                break
        rest, _ = read_until_closed(sock, 10)
        took = time.monotonic() - started
        sock.close()
        metrics = proxy.metrics.render().decode()
    assert (got + rest).startswith(b"HTTP/1.1 408 ")
    assert 1.0 <= took < 6.0, took  # at the deadline, with room for a busy machine
    assert "ctxwin_proxy_head_timeouts_total 1" in metrics
    assert fake.received == []


def test_the_head_deadline_counts_from_each_request_s_first_byte() -> None:
    """A kept-alive connection idle for longer than the head deadline (and less than the
    idle timeout) still serves its next request; once idle past the idle timeout it is
    closed."""
    with proxied(head_timeout=0.5, idle_timeout=3.0) as (served, _, _fake):
        with httpx.Client(timeout=30) as client:
            first = client.get(served.url + "/v1/models")
            time.sleep(1.2)
            second = client.get(served.url + "/v1/models")
        assert first.status_code == second.status_code == 200
        sock = connect(served.url)
        sock.sendall(
            b"GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n" % served.url.split("://")[1].encode()
        )
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
        started = time.monotonic()
        assert closed_within(sock, 20)
        assert 2.5 <= time.monotonic() - started < 15
        sock.close()


def test_a_body_that_does_not_arrive_in_time_is_a_408_in_the_provider_shape() -> None:
    with proxied(body_timeout=1.0) as (served, proxy, fake):
        sock = connect(served.url)
        sock.sendall(head(served.url) + b"Content-Length: 1000\r\n\r\n" + b'{"model": "gpt-4o", ')
        data, took = read_until_closed(sock, 20)
        sock.close()
        metrics = proxy.metrics.render().decode()
    answer, _, body = data.partition(b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert b"Connection: close" in answer
    assert orjson.loads(body)["error"]["code"] == "request_timeout"
    assert 1.0 <= took < 15, took
    assert "ctxwin_proxy_body_timeouts_total 1" in metrics
    assert fake.received == []


def test_open_connections_are_capped_and_half_sent_heads_do_not_stay() -> None:
    cap, extra = 10, 15
    with proxied(max_connections=cap, head_timeout=2.0) as (served, proxy, _fake):
        socks = []
        for _ in range(cap + extra):
            sock = connect(served.url)
            sock.sendall(head(served.url))  # a head never finished
            socks.append(sock)
            time.sleep(0.01)  # in order: the first ones are accepted first
        refused = [s for s in socks[cap:] if closed_within(s, 5)]
        assert len(refused) == extra  # the ones over the cap: closed at once
        assert proxy.limits.open == cap
        started = time.monotonic()
        assert all(closed_within(s, 20) for s in socks[:cap])  # then the head deadline
        took = time.monotonic() - started
        for s in socks:
            s.close()
        deadline = time.monotonic() + 10
        while proxy.limits.open and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proxy.limits.open == 0
        assert httpx.get(served.url + "/healthz").status_code == 200  # serving again
        metrics = httpx.get(served.url + "/metrics").text
    assert took < 15, took
    assert f"ctxwin_proxy_refused_connections_total {extra}" in metrics
    assert f"ctxwin_proxy_head_timeouts_total {cap}" in metrics


def test_the_defaults_are_bounded() -> None:
    config = ProxyConfig(upstream="http://127.0.0.1:9")
    assert 0 < config.head_timeout <= 30
    assert 0 < config.body_timeout <= 600
    assert 0 < config.idle_timeout <= 600
    assert 0 < config.max_connections <= 4096


def gzip_bomb(gib: int) -> bytes:
    """A gzip stream that unpacks to ``gib`` GiB of zeros (its trailer is not checked:
    it is never reached), made from one compressed MiB repeated."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    mib = bytes(1 << 20)
    first = packer.compress(mib) + packer.flush(zlib.Z_FULL_FLUSH)
    block = packer.compress(mib) + packer.flush(zlib.Z_FULL_FLUSH)  # independent of the rest
    return first + block * (gib * 1024 - 1) + packer.flush()


def thread_cpu(thread: threading.Thread) -> float:
    assert thread.ident is not None
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


def test_a_gzip_bomb_gets_its_413_and_is_not_unpacked_after_it() -> None:
    bomb = gzip_bomb(4)  # unpacking it all costs seconds of CPU
    unpacker = zlib.decompressobj(31)
    unpacked = len(unpacker.decompress(bomb[: len(bomb) // 64], 1 << 30))
    assert unpacked > 63 << 20  # the first 64th unpacks to 64 MiB: the bomb is real
    with proxied(max_body_bytes=1 << 20) as (served, proxy, fake):
        loop_thread = served._thread
        cpu = thread_cpu(loop_thread)
        sock = connect(served.url)
        head_ = head(served.url) + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(
            bomb
        )
        sock.sendall(head_ + bomb)  # the proxy keeps reading: the whole bomb goes out
        data, _ = read_until_closed(sock, 30)
        sock.close()
        used = thread_cpu(loop_thread) - cpu
        metrics = proxy.metrics.render().decode()
    assert data.startswith(b"HTTP/1.1 413 ")
    assert b"Connection: close" in data.partition(b"\r\n\r\n")[0]
    assert 'action="too_large"} 1' in metrics
    assert fake.received == []
    # 1 MiB was unpacked before the 413; unpacking the rest (4 GiB) would take seconds
    assert used < 1.0, used


def test_the_command_line_defaults_are_the_config_s() -> None:
    import dataclasses
    import inspect

    from ctxwin.cli.proxy import parse_size, proxy

    flags = inspect.signature(proxy).parameters
    config = ProxyConfig(upstream="http://127.0.0.1:9")
    skip = {"upstream", "max_memory"}  # required; a size in words (below)
    shared = [f.name for f in dataclasses.fields(config) if f.name in flags and f.name not in skip]
    assert {"head_timeout", "body_timeout", "idle_timeout", "max_connections"} <= set(shared)
    for name in shared:
        assert flags[name].default == getattr(config, name), name
    assert parse_size("--max-memory", flags["max_memory"].default) == config.max_memory


def test_small_fits_wait_for_the_fitting_thread_and_never_run_beside_it() -> None:
    """While a large body is fitted in the fitting thread, small fitted requests queue
    after it there (the fitter's state is used by one thread at a time); once the thread
    is idle, small bodies are fitted on the event loop again."""
    big = orjson.dumps(agent_body(1500, 3000))
    assert len(big) > 64 << 10
    with proxied(context_length=8000, max_tokens=500) as (served, proxy, _):
        fit = proxy.fitter.fit
        inside: list[int] = []
        overlaps: list[int] = []
        threads: list[str] = []
        lock = threading.Lock()

        def watched(*args: Any) -> Any:
            with lock:
                inside.append(1)
                if len(inside) > 1:
                    overlaps.append(len(inside))
            threads.append(threading.current_thread().name)
            try:
                return fit(*args)
            finally:
                with lock:
                    inside.pop()

        proxy.fitter.fit = watched  # type: ignore[method-assign,assignment]
        statuses: list[int] = []

        def post(raw: bytes) -> None:
            r = httpx.post(served.url + "/v1/chat/completions", content=raw, timeout=120)
            statuses.append(r.status_code)

        posts = [threading.Thread(target=post, args=(big,))]
        posts += [
            threading.Thread(target=post, args=(orjson.dumps(agent_body(3)),)) for _ in range(6)
        ]
        for t in posts:
            t.start()
            time.sleep(0.005)
        for t in posts:
            t.join(120)
        deadline = time.monotonic() + 30
        while proxy.queued and time.monotonic() < deadline:
            time.sleep(0.01)
        post(orjson.dumps(agent_body(4)))  # the thread is idle: fitted on the loop
    assert statuses == [200] * 8
    assert overlaps == []
    assert any(name.startswith("ctxwin-proxy-fit") for name in threads)
    assert not threads[-1].startswith("ctxwin-proxy-fit")
