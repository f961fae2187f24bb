"""The floor: the least work a ctxwin command must do on the same input and output.

Read the file's bytes, ``orjson.loads``, ``orjson.dumps``, write the result. Run it
with the same interpreter as ctxwin so interpreter start-up is the same too::

    python bench/floor.py [--no-gc] [--parse-only | --drop A:B] IN.json OUT.json

``--no-gc`` turns the cyclic collector off first, as ``ctxwin`` does. The floor of a
command does the same output as the command it is compared with, so that no ratio
credits ctxwin with work it skipped:

* ``--drop A:B`` writes the body without ``messages[A:B]`` (``A:B,C:D`` for several
  ranges): what ``ctxwin prune`` writes when it drops those messages;
* ``--parse-only`` reads and parses, and writes nothing (OUT is not touched): the floor
  of ``estimate``, ``check`` and ``replay``, which write a report, not a body.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import orjson


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--no-gc"]:
        gc.disable()
        args = args[1:]
    parse_only = args[:1] == ["--parse-only"]
    if parse_only:
        args = args[1:]
    drop: list[tuple[int, int]] = []
    if args[:1] == ["--drop"] and len(args) > 1:
        for part in args[1].split(","):
            a, _, b = part.partition(":")
            drop.append((int(a), int(b)))
        args = args[2:]
    if len(args) != 2:
        print(
            "usage: floor.py [--no-gc] [--parse-only | --drop A:B] IN.json OUT.json",
            file=sys.stderr,
        )
        return 2
    src, dst = Path(args[0]), Path(args[1])
    body = orjson.loads(src.read_bytes())
    if parse_only:
        return 0
    if drop:
        messages = body["messages"]
        gone = set()
        for a, b in drop:
            gone.update(range(a, b))
        body = {**body, "messages": [m for i, m in enumerate(messages) if i not in gone]}
    dst.write_bytes(orjson.dumps(body))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
