"""The floor: the least work ``ctxwin prune IN OUT`` must do.

Read the file's bytes, ``orjson.loads``, ``orjson.dumps``, write the result. Run it
with the same interpreter as ctxwin so interpreter start-up is the same too::

    python bench/floor.py [--no-gc] IN.json OUT.json

``--no-gc`` turns the cyclic collector off first, as ``ctxwin`` does.
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
    if len(args) != 2:
        print("usage: floor.py [--no-gc] IN.json OUT.json", file=sys.stderr)
        return 2
    src, dst = Path(args[0]), Path(args[1])
    body = orjson.loads(src.read_bytes())
    dst.write_bytes(orjson.dumps(body))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
