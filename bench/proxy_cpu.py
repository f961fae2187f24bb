"""CPU time ``ctxwin proxy`` spends per request, less noisy than wall-clock latency.

    python bench/proxy_cpu.py [--turns 30] [--requests 2000] [--rounds 5]
                              [--against DIR] [--profile FILE]

The same three processes as ``bench/proxy.py`` (a fake upstream, the proxy, this
client) on 127.0.0.1. This process sends sequential requests of one body over one
keep-alive connection, in ``--rounds`` rounds, and reads the proxy process's on-CPU
time (Linux: the sum of ``/proc/PID/task/*/schedstat``, nanoseconds, every thread)
before and after each round. Between rounds it times, on its own CPU clock, what the
proxy does to a body in-process (``ctxwin.parse`` + ``ctxwin.prune``, + ``dumps`` when
pruned: ``bench/proxy.py``'s "in-process fit"). Printed, as medians over rounds:

* **proxy CPU/request** — the proxy process's CPU time per request;
* **fit CPU** — the in-process fit, per body;
* **overhead** — the difference: what serving and forwarding a request costs the
  proxy beyond fitting it (HTTP parsing both ways, headers, the upstream client,
  the relay, metrics, logging, the fingerprint);
* **upstream CPU/request** — the fake upstream's, for scale (a minimal aiohttp
  server reading the body and answering).

CPU time is what other work on a shared machine disturbs least: it does not count the
time the proxy waits for a core. ``--against DIR`` also runs the proxy of another
source tree (``DIR/bench/proxy.py --proxy``), alternating rounds with this tree's, to
compare two versions on the same machine at the same time. ``--profile FILE`` runs
this tree's proxy under cProfile and writes its stats to FILE
(``python -m pstats FILE``); the CPU figures are then the profiler's, not the proxy's,
and its clock is the wall clock: time spent waiting for a core after a socket write
wakes another process is charged to the write.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import proxy as load  # noqa: E402  (bench/proxy.py: the fake upstream, bodies, the client)


def cpu_ns(pid: int) -> int:
    """On-CPU nanoseconds of every thread of process ``pid`` so far."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that just ended
            total += int((task / "schedstat").read_text().split()[0])
    return total


def run_profiled(upstream: str, out: str) -> None:
    """This tree's proxy under cProfile until SIGTERM; then the stats go to ``out``."""
    import cProfile

    from ctxwin.proxy import ProxyConfig
    from ctxwin.proxy.server import serve

    profiler = cProfile.Profile()  # wall clock (a CPU clock costs more than it measures)

    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        config = ProxyConfig(upstream=upstream, port=0)
        profiler.enable()
        try:
            await serve(config, ready=lambda url: print(url, flush=True))
        except asyncio.CancelledError:
            pass
        finally:
            profiler.disable()
            profiler.dump_stats(out)

    load._run(main())


def fit_cpu(raw: bytes, n: int) -> float:
    """CPU seconds per in-process fit of ``raw`` (mean of ``n``)."""
    t0 = time.process_time()
    for _ in range(n):
        load.fit_once(raw)
    return (time.process_time() - t0) / n


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=30, help="body size in agent turns")
    parser.add_argument("--requests", type=int, default=2000, help="requests per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--fits", type=int, default=300, help="in-process fits per round")
    parser.add_argument("--against", type=Path, metavar="DIR", help="also run DIR's proxy")
    parser.add_argument("--profile", metavar="FILE", help="profile this tree's proxy")
    parser.add_argument("--profiled-proxy", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.profiled_proxy:
        run_profiled(*args.profiled_proxy)
        return 0
    raw = load.body_for(args.turns)
    here = str(BENCH / "proxy.py")
    with contextlib.ExitStack() as stack:
        upstream, upstream_pid = stack.enter_context(load.child([here, "--fake-upstream"]))
        mine = (
            [__file__, "--profiled-proxy", upstream, args.profile]
            if args.profile
            else [here, "--proxy", upstream]
        )
        proxies = {"this tree": stack.enter_context(load.child(mine))}
        if args.against is not None:
            other = str(args.against.resolve() / "bench" / "proxy.py")
            proxies[str(args.against)] = stack.enter_context(
                load.child([other, "--proxy", upstream])
            )
        clients = {name: load.Client(url) for name, (url, _) in proxies.items()}
        for client in clients.values():  # warm up: connections, caches, calibration
            for _ in range(100):
                client.post(raw)
        fits: list[float] = []
        per: dict[str, list[float]] = {name: [] for name in proxies}
        up: dict[str, list[float]] = {name: [] for name in proxies}
        for r in range(args.rounds):
            fits.append(fit_cpu(raw, args.fits))
            order = list(proxies) if r % 2 == 0 else list(proxies)[::-1]
            for name in order:
                pid = proxies[name][1]
                p0, u0 = cpu_ns(pid), cpu_ns(upstream_pid)
                for _ in range(args.requests):
                    clients[name].post(raw)
                p1, u1 = cpu_ns(pid), cpu_ns(upstream_pid)
                per[name].append((p1 - p0) / 1e9 / args.requests)
                up[name].append((u1 - u0) / 1e9 / args.requests)
        for client in clients.values():
            client.close()
    fit = statistics.median(fits)
    print(
        f"{args.turns} turns ({len(raw) / 1024:,.0f} KiB), {args.rounds} rounds × "
        f"{args.requests} requests; µs of CPU per request, median of rounds "
        f"[min–max]; load average {os.getloadavg()[0]:.1f}"
    )
    print(f"  in-process fit CPU: {us(fit)} [{us(min(fits))}–{us(max(fits))}]")
    for name in proxies:
        cpu = per[name]
        over = [c - fit for c in cpu]
        print(
            f"  {name}: proxy CPU/request {us(statistics.median(cpu))} "
            f"[{us(min(cpu))}–{us(max(cpu))}], overhead {us(statistics.median(over))}, "
            f"upstream CPU/request {us(statistics.median(up[name]))}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
