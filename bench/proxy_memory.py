"""What the proxy's remembered conversations hold in memory (docs/proxy.md).

    python bench/proxy_memory.py [--conversations 10000] [--turns 30]

Fits one Chat Completions request for each of N conversations of T turns (an assistant
tool call and its ~1.1 KB result per turn) through the proxy's :class:`Fitter`, as
``ctxwin proxy`` would, and prints what stays allocated afterwards (``tracemalloc``),
per conversation and against the request's size in JSON, and the allocations that hold
most of it. No network: the fitter is called directly.
"""

from __future__ import annotations

import argparse
import gc
import tracemalloc

import orjson

from ctxwin.proxy.fitting import Fitter, ProxyConfig
from ctxwin.proxy.routes import CHAT
from ctxwin.settings import Settings


def body(conversation: int, turns: int) -> bytes:
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
        messages.append({"role": "tool", "tool_call_id": call, "content": f"line {k} " * 120})
    return orjson.dumps({"model": "gpt-4o", "messages": messages})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=30)
    args = parser.parse_args()
    n = args.conversations
    config = ProxyConfig(
        upstream="http://127.0.0.1:9", settings=Settings(context_length=128_000), conversations=n
    )
    fitter = Fitter(config)
    bodies = [body(c, args.turns) for c in range(n)]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for raw in bodies:
        fitter.fit(CHAT, raw)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    request = sum(map(len, bodies)) / n
    print(
        f"{n:,} conversations of {args.turns} turns: {held / 2**20:,.1f} MiB held, "
        f"{held / n / 1024:.1f} KiB each; a request is {request / 1024:.1f} KiB of JSON "
        f"({held / n / request:.1f}x); {len(fitter.conversations.managers):,} remembered"
    )
    for stat in tracemalloc.take_snapshot().statistics("lineno")[:5]:
        print(f"  {stat}")


if __name__ == "__main__":
    main()
