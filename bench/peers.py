"""Run a peer library's transcript trimmer on a request body, as a user would.

    python bench/peers.py langchain IN.json OUT.json --max-tokens B
    python bench/peers.py litellm   IN.json OUT.json --max-tokens B [--model gpt-4o]

Runs inside ``bench/.venv-peers`` (see ``bench/run.py``). The whole process is what
the runner times; this script also prints one JSON line on stdout with its own phase
times (``import``, ``load``, ``trim``, ``dump`` in seconds) and the kept message count.

* ``langchain``: ``convert_to_messages`` (OpenAI dicts -> ``BaseMessage``), then
  ``trim_messages(max_tokens=B, token_counter=count_tokens_approximately,
  strategy="last", include_system=True, start_on="human", allow_partial=False)``, then
  ``convert_to_openai_messages`` back to dicts so the output is a sendable body. Both
  conversions are part of ``trim``: a user pays for them.
* ``litellm``: ``litellm.utils.trim_messages(messages, model=M, max_tokens=B)``, which
  counts with the model's tokenizer (tiktoken, shipped inside litellm). The model cost
  map is read from litellm's bundled copy (``LITELLM_LOCAL_MODEL_COST_MAP=True``): this
  machine has no network, and the default remote fetch would add retry sleeps.

File I/O uses orjson for every tool, so the comparison is about trimming.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

Trim = Callable[[list[dict[str, Any]], int, str], list[dict[str, Any]]]


def _langchain() -> Trim:
    from langchain_core.messages import (  # type: ignore[import-not-found, unused-ignore]
        convert_to_messages,
        convert_to_openai_messages,
        trim_messages,
    )
    from langchain_core.messages.utils import (  # type: ignore[import-not-found, unused-ignore]
        count_tokens_approximately,
    )

    def trim(messages: list[dict[str, Any]], max_tokens: int, model: str) -> list[dict[str, Any]]:
        lc_messages = convert_to_messages(messages)
        kept = trim_messages(
            lc_messages,
            max_tokens=max_tokens,
            token_counter=count_tokens_approximately,
            strategy="last",
            include_system=True,
            start_on="human",
            allow_partial=False,
        )
        out: list[dict[str, Any]] = convert_to_openai_messages(kept)
        return out

    return trim


def _litellm() -> Trim:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from litellm.utils import trim_messages  # type: ignore[import-not-found, unused-ignore]

    def trim(messages: list[dict[str, Any]], max_tokens: int, model: str) -> list[dict[str, Any]]:
        out = trim_messages(messages, model=model, max_tokens=max_tokens)
        if isinstance(out, tuple):  # only with return_response_tokens=True
            out = out[0]
        result: list[dict[str, Any]] = out
        return result

    return trim


PEERS: dict[str, Callable[[], Trim]] = {"langchain": _langchain, "litellm": _litellm}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run a peer trimmer on a request body.")
    ap.add_argument("peer", choices=sorted(PEERS))
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    ap.add_argument("--max-tokens", type=int, required=True, help="token budget")
    ap.add_argument("--model", default="gpt-4o", help="model name passed to litellm")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    trim = PEERS[args.peer]()
    t1 = time.perf_counter()
    body = orjson.loads(args.src.read_bytes())
    messages = body["messages"] if isinstance(body, dict) else body
    t2 = time.perf_counter()
    kept = trim(messages, args.max_tokens, args.model)
    t3 = time.perf_counter()
    out: Any = {**body, "messages": kept} if isinstance(body, dict) else kept
    args.dst.write_bytes(orjson.dumps(out))
    t4 = time.perf_counter()
    report = {
        "peer": args.peer,
        "import": round(t1 - t0, 4),
        "load": round(t2 - t1, 4),
        "trim": round(t3 - t2, 4),
        "dump": round(t4 - t3, 4),
        "messages_in": len(messages),
        "messages_out": len(kept),
    }
    sys.stdout.buffer.write(orjson.dumps(report) + b"\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
