"""Summarize a (pruned) request body: message count and tool-call pairing.

    python bench/check.py OUT.json   # prints one JSON object

``orphan_results`` counts tool messages whose ``tool_call_id`` has no matching call
earlier in the transcript; ``unanswered_calls`` counts calls with no tool message.
Providers reject a request with either, so both should be 0 for a correct pruner.
``first_roles`` shows how the kept transcript starts (the head should survive).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson


def summarize(body: Any) -> dict[str, Any]:
    messages = body["messages"] if isinstance(body, dict) else body
    seen_calls: set[str] = set()
    answered: set[str] = set()
    orphans = 0
    for msg in messages:
        role = msg.get("role")
        if role == "assistant":
            for call in msg.get("tool_calls") or ():
                seen_calls.add(call["id"])
        elif role == "tool":
            cid = msg.get("tool_call_id")
            if cid in seen_calls:
                answered.add(cid)
            else:
                orphans += 1
    return {
        "messages": len(messages),
        "orphan_results": orphans,
        "unanswered_calls": len(seen_calls - answered),
        "first_roles": [m.get("role") for m in messages[:3]],
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: check.py FILE.json", file=sys.stderr)
        return 2
    summary = summarize(orjson.loads(Path(args[0]).read_bytes()))
    sys.stdout.buffer.write(orjson.dumps(summary) + b"\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
