"""What the proxy's remembered conversations hold in memory (docs/proxy.md).

    python bench/proxy_memory.py [--conversations 10000] [--turns 30]
    python bench/proxy_memory.py --shapes [--conversations 40]
    python bench/proxy_memory.py --served 6 [--megabytes 30]

Default: fits one Chat Completions request for each of N conversations of T turns (an
assistant tool call and its ~1.1 KB result per turn) through the proxy's :class:`Fitter`,
as ``ctxwin proxy`` would, and prints what stays allocated afterwards (``tracemalloc``),
per conversation and against the request's size in JSON, and the allocations that hold
most of it. No network: the fitter is called directly.

``--shapes``: the same for requests of several shapes (many tiny messages, one huge
string, a large ``tools`` block, content-part lists, integer arrays; pruned, cleared,
and a conversation extended five times), each measured against what the proxy accounts
for it (:func:`ctxwin.proxy.fitting.held_bytes`): the accounting must be at least what
is held.

``--served N``: starts a fake upstream and the proxy (default settings, so the default
``--max-memory``) in child processes on 127.0.0.1, posts N distinct conversations of
about ``--megabytes`` MB each (turns whose tool results are ``--result`` short lines),
and prints the proxy process's RSS (``/proc``) and the
``ctxwin_proxy_conversation_bytes`` gauge after each.
"""

from __future__ import annotations

import argparse
import gc
import http.client
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ctxwin.fitting.strategy import Strategy
from ctxwin.proxy.fitting import Fitter, ProxyConfig
from ctxwin.proxy.routes import CHAT, MESSAGES, Route
from ctxwin.settings import Settings

BENCH = Path(__file__).resolve().parent


def body(conversation: int, turns: int, result: int = 120) -> bytes:
    """A Chat Completions request of ``turns`` tool-call turns (results of ``result``
    repeats of a short line, ~1.1 KB at the default 120)."""
    messages: list[dict[str, object]] = [
        {"role": "system", "content": f"You are agent {conversation}."},
        {"role": "user", "content": f"task {conversation}: fix the bug in module {conversation}"},
    ]
    for k in range(turns):
        call = f"c{conversation}_{k}"
        arguments = orjson.dumps({"path": f"src/m{k}.py"}).decode()
        function = {"name": "read", "arguments": arguments}
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call, "type": "function", "function": function}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call, "content": f"line {k} " * result})
    return orjson.dumps({"model": "gpt-4o", "messages": messages})


def shapes(c: int) -> Iterator[tuple[str, Route, Settings, list[bytes]]]:
    """(name, route, settings, the requests of conversation ``c`` in order)."""
    roomy = Settings(context_length=128_000)
    tight = Settings(context_length=8000)
    clearing = Settings(context_length=8000, strategy=Strategy(("clear-results", "drop-turns")))
    yield "30 turns", CHAT, roomy, [body(c, 30)]
    yield "3 turns", CHAT, roomy, [body(c, 3)]
    yield "30 turns pruned", CHAT, tight, [body(c, 30)]
    yield "120 turns pruned", CHAT, tight, [body(c, 120)]
    yield "30 turns cleared", CHAT, clearing, [body(c, 30)]
    yield "extended 5x", CHAT, tight, [body(c, t) for t in (10, 12, 14, 16, 18)]
    tiny: list[Any] = [{"role": "system", "content": f"s{c}"}, {"role": "user", "content": "u"}]
    tiny += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"}] * 400
    yield "800 tiny", CHAT, roomy, [orjson.dumps({"model": "gpt-4o", "messages": tiny})]
    big = [{"role": "user", "content": f"u{c}"}, {"role": "assistant", "content": "x" * 200_000}]
    yield "one 200 KB string", CHAT, roomy, [orjson.dumps({"model": "gpt-4o", "messages": big})]
    schema = {"type": "object", "properties": {f"p{j}": {"type": "string"} for j in range(10)}}
    tools = [
        {
            "type": "function",
            "function": {"name": f"t{i}", "description": "d" * 50, "parameters": schema},
        }
        for i in range(100)
    ]
    request = orjson.loads(body(c, 5)) | {"tools": tools}
    yield "100 tools", CHAT, roomy, [orjson.dumps(request)]
    parts: list[Any] = [{"role": "user", "content": [{"type": "text", "text": f"a{c}"}]}]
    for k in range(100):
        parts.append({"role": "assistant", "content": [{"type": "text", "text": "b"}] * 5})
        parts.append({"role": "user", "content": [{"type": "text", "text": str(k)}]})
    anthropic = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": parts}
    yield "content parts", MESSAGES, roomy, [orjson.dumps(anthropic)]
    numbers = [
        {"role": "user", "content": f"u{c}"},
        {"role": "assistant", "content": "a", "metadata": {"n": list(range(1000, 6000))}},
    ]
    yield "5,000 integers", CHAT, roomy, [orjson.dumps({"model": "gpt-4o", "messages": numbers})]


def held(n: int, turns: int) -> None:
    config = ProxyConfig(
        upstream="http://127.0.0.1:9", settings=Settings(context_length=128_000), conversations=n
    )
    fitter = Fitter(config)
    bodies = [body(c, turns) for c in range(n)]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for raw in bodies:
        fitter.fit(CHAT, raw)
    gc.collect()
    total = tracemalloc.get_traced_memory()[0] - before
    request = sum(map(len, bodies)) / n
    print(
        f"{n:,} conversations of {turns} turns: {total / 2**20:,.1f} MiB held, "
        f"{total / n / 1024:.1f} KiB each; a request is {request / 1024:.1f} KiB of JSON "
        f"({total / n / request:.1f}x); {len(fitter.conversations.managers):,} remembered; "
        f"accounted {fitter.held_total / 2**20:,.1f} MiB ({fitter.held_total / total:.2f}x)"
    )
    for stat in tracemalloc.take_snapshot().statistics("lineno")[:5]:
        print(f"  {stat}")


def measure_shapes(n: int) -> bool:
    """Held and accounted bytes per conversation for each shape; False if any is under."""
    ok = True
    print(f"{'shape':<20} {'JSON':>9} {'held':>10} {'accounted':>10} {'ratio':>6}")
    for index, (name, route, settings, _) in enumerate(shapes(0)):
        runs = [list(shapes(c))[index][3] for c in range(n + 1)]
        config = ProxyConfig(upstream="http://127.0.0.1:9", settings=settings, conversations=n + 1)
        fitter = Fitter(config)
        for raw in runs[0]:  # the first conversation warms the shared state up
            fitter.fit(route, raw)
        first = fitter.held_total
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for requests in runs[1:]:
            for raw in requests:
                fitter.fit(route, raw)
        gc.collect()
        real = (tracemalloc.get_traced_memory()[0] - before) / n
        tracemalloc.stop()
        accounted = (fitter.held_total - first) / n
        assert len(fitter.conversations.managers) == n + 1
        ok &= accounted >= real
        print(
            f"{name:<20} {len(runs[1][-1]):>9,} {real:>10,.0f} {accounted:>10,.0f} "
            f"{accounted / real:>6.2f}"
        )
    return ok


def rss(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of process ``pid``, in bytes."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return tuple(int(fields[k].split()[0]) * 1024 for k in ("VmRSS", "VmHWM"))  # type: ignore[return-value]


def gauge(conn: http.client.HTTPConnection) -> tuple[int, int]:
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    values = dict(line.split() for line in text.splitlines() if not line.startswith("#"))
    return int(values["ctxwin_proxy_conversation_bytes"]), int(values["ctxwin_proxy_conversations"])


def served(n: int, megabytes: float, result: int) -> None:
    sys.path.insert(0, str(BENCH))
    from proxy import child, spawn  # bench/proxy.py: its fake upstream and proxy

    turns = max(1, int(megabytes * 1e6 / len(body(0, 1, result))))
    with (
        spawn("--fake-upstream") as upstream,
        child([str(BENCH / "proxy.py"), "--proxy", upstream]) as (url, pid),
    ):
        host, _, port = url.removeprefix("http://").partition(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=600)
        start = rss(pid)[0]
        print(f"proxy RSS at start {start / 2**20:,.0f} MiB")
        for c in range(n):
            raw = body(c, turns, result)
            conn.request("POST", "/v1/chat/completions", raw, {"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            action = response.getheader("x-ctxwin-action")
            del raw
            total, count = gauge(conn)
            now, peak = rss(pid)
            print(
                f"conversation {c + 1}: {response.status} {action}; gauge {total / 2**20:,.1f} MiB "
                f"over {count} conversations; RSS {now / 2**20:,.0f} MiB "
                f"(+{(now - start) / 2**20:,.0f}), peak {peak / 2**20:,.0f} MiB"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=None)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--shapes", action="store_true")
    parser.add_argument("--served", type=int, default=0, metavar="N")
    parser.add_argument("--megabytes", type=float, default=30.0)
    parser.add_argument("--result", type=int, default=40, help="tool result size, in lines")
    args = parser.parse_args()
    if args.served:
        served(args.served, args.megabytes, args.result)
    elif args.shapes:
        if not measure_shapes(args.conversations or 40):
            raise SystemExit("a shape holds more than is accounted for")
    else:
        held(args.conversations or 10_000, args.turns)


if __name__ == "__main__":
    main()
