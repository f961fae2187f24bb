"""Load test of ``ctxwin proxy`` on loopback against a local fake upstream (``make bench``).

    python bench/proxy.py [--turns 30,300] [--requests 300] [--concurrency 8] [--out FILE]

Three processes on 127.0.0.1: a fake upstream (aiohttp, answers every request at once
with a small JSON body carrying usage), the proxy in front of it (``ctxwin proxy`` when
the command exists, else ``ctxwin.proxy.serve``), and this client. For each body size
(agent runs of ``--turns`` turns from ``bench/gen.py``, model ``gpt-4o``: 30 turns fit
its window and are forwarded as they came, 300 turns are pruned):

* **in-process fit**: median time of what the proxy does to a body, done in this
  process — ``ctxwin.parse`` + ``ctxwin.prune`` (+ ``orjson.dumps`` of the output
  when pruned);
* **latency**: sequential requests over one keep-alive connection, direct (client →
  fake) and proxied (client → proxy → fake); *added* = proxied − direct, at p50 and p99.
  Fits and both paths are measured in the same ``--rounds`` interleaved rounds, so
  machine noise hits all alike; "quietest round" repeats the ratio for the round whose
  proxied median was lowest (the least disturbed by other work on the machine);
* **throughput**: requests per second through the proxy with ``--concurrency``
  clients in flight (and direct, for reference).

Target: added p50 ≤ 1 ms at 30 turns (absolute: what a proxy adds is one more loopback
exchange and its own receiving and relaying, which do not shrink as the fit gets faster;
the ratio to the in-process fit is printed for comparison).
Requests are bounded in number and time; everything stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

import gen  # noqa: E402  (bench/gen.py)

import ctxwin  # noqa: E402
from ctxwin.codec import dumps  # noqa: E402

MODEL = "gpt-4o"
PATH = "/v1/chat/completions"
REPLY = orjson.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 1, "total_tokens": 1001},
    }
)


def body_for(turns: int, seed: int = 1) -> bytes:
    """A Chat Completions body of ``turns`` agent turns (gen.py's messages, cut at a turn)."""
    messages: list[Any] = []
    seen = 0
    for msg in gen.Generator(seed).messages(turns * 6 + 50):
        if msg.get("role") == "assistant":
            seen += 1
            if seen > turns:
                break
        messages.append(msg)
    return orjson.dumps({"model": MODEL, "messages": messages, "tools": gen.tools_block()})


# --- the fake upstream (run in its own process) ------------------------------------------


def run_fake() -> None:
    from aiohttp import web

    async def handle(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=REPLY, content_type="application/json")

    async def main() -> None:
        from ctxwin.proxy.server import bind

        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        sock = bind("127.0.0.1", 0)
        await web.SockSite(runner, sock).start()
        print(f"http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
        await asyncio.sleep(3600)

    _run(main())


def _run(coro: Any) -> None:
    try:  # the same event loop the proxy picks (ctxwin.proxy.server.run)
        import uvloop
    except ImportError:
        asyncio.run(coro)
    else:
        uvloop.run(coro)


def run_proxy(upstream: str) -> None:
    from ctxwin.proxy import ProxyConfig
    from ctxwin.proxy.server import run

    run(ProxyConfig(upstream=upstream, port=0), ready=lambda url: print(url, flush=True))


@contextlib.contextmanager
def child(argv: list[str]) -> Iterator[tuple[str, int]]:
    """Start ``python ARGV`` in a child process; yield the URL it prints first and its pid."""
    proc = subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            raise SystemExit(f"bench: child {argv} did not start")
        yield url, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def spawn(*args: str) -> Iterator[str]:
    """Start ``bench/proxy.py ARGS`` in a child process; yield the URL it prints."""
    with child([__file__, *args]) as (url, _):
        yield url


# --- measurements -------------------------------------------------------------------------


def fit_once(raw: bytes) -> tuple[float, bool]:
    """In-process time of parse + prune (+ dumps when pruned), and whether it pruned."""
    t0 = time.perf_counter()
    body = ctxwin.parse(raw)
    out, plan = ctxwin.prune(body, fmt="openai-chat")
    if plan.result.pruned:
        dumps(out)
    return time.perf_counter() - t0, plan.result.pruned


class Client:
    """One keep-alive HTTP/1.1 connection (the standard library's: little overhead)."""

    def __init__(self, url: str) -> None:
        host, _, port = url.removeprefix("http://").partition(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=60)

    def post(self, raw: bytes) -> tuple[float, dict[str, str]]:
        t0 = time.perf_counter()
        self.conn.request(
            "POST",
            PATH,
            raw,
            {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"},
        )
        response = self.conn.getresponse()
        response.read()
        elapsed = time.perf_counter() - t0
        if response.status != 200:
            raise SystemExit(f"bench/proxy.py: HTTP {response.status} from the server")
        return elapsed, dict(response.getheaders())

    def close(self) -> None:
        self.conn.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k]


@dataclass
class Round:
    """One round's samples: in-process fits, direct and proxied request latencies."""

    fit: list[float] = field(default_factory=list)
    direct: list[float] = field(default_factory=list)
    proxied: list[float] = field(default_factory=list)


def measure(direct: str, proxied: str, raw: bytes, n: int, rounds: int) -> list[Round]:
    """``rounds`` rounds, each: ``n`` fits in this process, ``n`` direct and ``n`` proxied
    requests (the two paths in alternating order), so every round sees the same machine."""
    a, b = Client(direct), Client(proxied)
    try:
        for _ in range(5):  # warm both paths (connections, caches, calibration)
            a.post(raw)
            b.post(raw)
            fit_once(raw)
        out = []
        for r in range(rounds):
            got = Round()
            got.fit = [fit_once(raw)[0] for _ in range(n)]
            pair = [(a, got.direct), (b, got.proxied)]
            for client, samples in pair if r % 2 == 0 else pair[::-1]:
                samples.extend(client.post(raw)[0] for _ in range(n))
            out.append(got)
        return out
    finally:
        a.close()
        b.close()


async def _throughput(url: str, raw: bytes, concurrency: int, seconds: float) -> float:
    import aiohttp

    done = 0
    stop = time.perf_counter() + seconds
    headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"}

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal done
        while time.perf_counter() < stop:
            async with session.post(url + PATH, data=raw, headers=headers) as r:
                await r.read()
                if r.status != 200:
                    raise SystemExit(f"bench/proxy.py: HTTP {r.status} under load")
            done += 1

    start = time.perf_counter()
    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
    return done / (time.perf_counter() - start)


def throughput(url: str, raw: bytes, concurrency: int, seconds: float) -> float:
    return asyncio.run(_throughput(url, raw, concurrency, seconds))


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", default="30,300", help="body sizes in agent turns")
    parser.add_argument("--requests", type=int, default=300, help="latency samples per path")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each load run")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds")
    parser.add_argument("--out", type=Path, help="also write the Markdown table here")
    parser.add_argument("--fake-upstream", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--proxy", metavar="UPSTREAM", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.fake_upstream:
        run_fake()
        return 0
    if args.proxy:
        run_proxy(args.proxy)
        return 0
    turns = [int(t) for t in args.turns.split(",")]
    rows = []
    with spawn("--fake-upstream") as upstream, spawn("--proxy", upstream) as proxy:
        for t in turns:
            raw = body_for(t)
            pruned = fit_once(raw)[1]
            n = max(5, (args.requests if t <= 100 else args.requests // 3) // args.rounds)
            rounds = measure(upstream, proxy, raw, n, args.rounds)
            action = Client(proxy).post(raw)[1].get("x-ctxwin-action", "?")
            assert pruned == (action == "pruned"), "in-process fit and proxy disagree"
            rps_proxy = throughput(proxy, raw, args.concurrency, args.seconds)
            rps_direct = throughput(upstream, raw, args.concurrency, args.seconds)
            fit = statistics.median([x for r in rounds for x in r.fit])
            direct = [x for r in rounds for x in r.direct]
            proxied = [x for r in rounds for x in r.proxied]
            p50 = statistics.median(proxied) - statistics.median(direct)
            p99 = percentile(proxied, 0.99) - percentile(direct, 0.99)
            quiet = min(rounds, key=lambda r: statistics.median(r.proxied))
            quiet_added = statistics.median(quiet.proxied) - statistics.median(quiet.direct)
            quiet_ratio = quiet_added / statistics.median(quiet.fit)
            rows.append(
                (
                    t,
                    f"{len(raw) / 1024:,.0f} KiB",
                    action,
                    ms(fit),
                    ms(statistics.median(direct)),
                    ms(statistics.median(proxied)),
                    ms(p50),
                    ms(p99),
                    f"{p50 / fit:.2f}×",
                    f"{quiet_ratio:.2f}×",
                    f"{rps_proxy:,.0f}",
                    f"{rps_direct:,.0f}",
                )
            )
    header = (
        "| turns | body | proxy action | in-process fit ms | direct p50 ms | proxied p50 ms "
        "| added p50 ms | added p99 ms | added p50 ÷ fit | same, quietest round "
        "| req/s proxied | req/s direct |"
    )
    lines = [header, "|" + "---|" * 12]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    cpu = platform.processor() or platform.machine()
    note = (
        f"\n{args.requests} samples per path and of the fit (÷3 above 100 turns), in "
        f"{args.rounds} interleaved rounds; "
        f"{args.concurrency} clients × {args.seconds:g} s for req/s; Python "
        f"{platform.python_version()}, {os.cpu_count()} cores ({cpu}), "
        f"load average {os.getloadavg()[0]:.1f} at the end."
    )
    table = "\n".join(lines) + "\n" + note + "\n"
    print(table)
    if args.out:
        args.out.write_text(table, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
