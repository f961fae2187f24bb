"""Adversarial request bodies of a chosen size, and the ways in that read them.

Each body is a valid Chat Completions request whose bulk is one hostile pattern
(a run of backslashes, quotes, digits, whitespace, deep nesting, many keys or
numbers or turns) in an old turn that pruning drops, in string content, in keys
or in numbers. Every body also holds ``"seed": 1e+20``: a kept number written in
exponent form, so fitting it always takes the slowest way out (the output may hold
a rewritten big integer, and the whole input is scanned for one,
:func:`ctxwin.codec.find_big_integer`).

Used by ``tests/test_linear.py`` (time linear in size) and ``bench/linear.py``.
"""

from __future__ import annotations

import gc
import io
import sys
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from time import process_time

CONTEXT_LENGTH = 16_000
"""The window every body is fitted to: the old turn, which holds the bulk, is dropped."""

DEPTH = 1000
"""How deep the nesting of the ``nesting`` bodies goes, counted from the body's top
(orjson reads up to 1024 levels)."""

_HEAD = (
    b'{"model":"gpt-4o","messages":[{"role":"system","content":"You are terse."},'
    b'{"role":"user","content":"the task"},{"role":"assistant","content":"ok"},'
)
_TAIL = b'{"role":"assistant","content":"ok"},{"role":"user","content":"newest"}],"seed":1e+20}'
_ANTHROPIC_HEAD = (
    b'{"model":"claude-sonnet-4-5","max_tokens":1000,"system":"You are terse.",'
    b'"messages":[{"role":"user","content":"the task"},'
)
_ANTHROPIC_TAIL = (
    b'{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"done"}]},'
    b'{"role":"assistant","content":"ok"},{"role":"user","content":"newest"}],"seed":1e+20}'
)


def _repeat(unit: bytes, size: int) -> bytes:
    return unit * max(1, size // len(unit))


def _content(unit: bytes) -> Callable[[int], bytes]:
    """An old user message whose content is ``unit`` (JSON string text) repeated."""
    return lambda size: b'{"role":"user","content":"' + _repeat(unit, size) + b'"},'


def _tool_input(fields: bytes) -> bytes:
    """An old assistant message (Anthropic) whose tool call's input has ``fields``
    (the tool call and its result are dropped together)."""
    return (
        b'{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{'
        + fields
        + b"}}]},"
    )


def _key(unit: bytes) -> Callable[[int], bytes]:
    """A tool call's input has one key made of ``unit`` repeated."""
    return lambda size: _tool_input(b'"' + _repeat(unit, size) + b'":1')


def _keys(unit: bytes) -> Callable[[int], bytes]:
    """A tool call's input has many keys, each ``unit`` and a counter."""

    def build(size: int) -> bytes:
        n = max(1, size // (len(unit) + 12))
        return _tool_input(b",".join(b'"%s%d":0' % (unit, i) for i in range(n)))

    return build


def _array(unit: bytes) -> Callable[[int], bytes]:
    """A tool call's input has an array of ``unit`` (JSON values) repeated."""
    return lambda size: _tool_input(b'"data":[' + _repeat(unit + b",", size)[:-1] + b"]")


def _nested(depth: int, obj: bool) -> Callable[[int], bytes]:
    """A tool call's input has many values each nested ``depth`` levels below the
    body's top (arrays, or objects with one key)."""
    inner = depth - 7  # body, messages, message, content, block, input, "data"
    opening, closing = (b'{"a":', b"}") if obj else (b"[", b"]")
    one = opening * inner + b"0" + closing * inner
    return lambda size: _tool_input(b'"data":[' + _repeat(one + b",", size)[:-1] + b"]")


def _turns(size: int) -> bytes:
    """Many small turns in the middle of the conversation."""
    turn = (
        b'{"role":"user","content":"q \\" \\\\ 12345678901234567890"},'
        b'{"role":"assistant","content":"a"},'
    )
    return _repeat(turn, size)


def _tool_turns(size: int) -> bytes:
    """Many tool calls and their results (the pairing rules' bookkeeping)."""
    turn = (
        b'{"role":"assistant","content":null,"tool_calls":[{"id":"c%d","type":"function",'
        b'"function":{"name":"f","arguments":"{\\"p\\":\\"\\\\\\\\\\"}"}}]},'
        b'{"role":"tool","tool_call_id":"c%d","content":"r \\\\\\" 1234567890123456789"},'
    )
    n = max(1, size // len(turn % (10**6, 10**6)))
    return b"".join(turn % (i, i) for i in range(n))


def _function_turns(size: int) -> bytes:
    """Many legacy function calls of one name, then their results, answered in order."""
    calls = b'{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}},'
    answer = b'{"role":"function","name":"f","content":"r"},'
    n = max(1, size // (len(calls) + len(answer)))
    return calls * n + answer * n


CHAT = "openai-chat"
ANTHROPIC = "anthropic"

KINDS: dict[str, tuple[str, Callable[[int], bytes]]] = {
    "content: backslash run": (CHAT, _content(b"\\\\")),
    "content: backslash-quote": (CHAT, _content(b'\\\\\\"')),
    "content: quotes": (CHAT, _content(b'\\"')),
    "content: digit run": (CHAT, _content(b"1")),
    "content: digit tokens": (CHAT, _content(b'\\"n\\": 12345678901234567890123, ')),
    "content: whitespace, digits": (
        CHAT,
        _content(b"some words, " * 40 + b":" + b" " * 400 + b"12345678901234567890123"),
    ),
    "key: backslash run": (ANTHROPIC, _key(b"\\\\")),
    "keys: quotes and digits": (ANTHROPIC, _keys(b'\\"12345678901234567890123\\\\')),
    "numbers: 20-digit integers": (ANTHROPIC, _array(b"12345678901234567890")),
    "numbers: long floats": (ANTHROPIC, _array(b"-0.123456789012345678901234567890e-12")),
    "numbers: whitespace before": (ANTHROPIC, _array(b"\n" + b" " * 200 + b"-9223372036854775808")),
    "nesting: arrays 250 deep": (ANTHROPIC, _nested(250, obj=False)),
    "nesting: objects 250 deep": (ANTHROPIC, _nested(250, obj=True)),
    f"nesting: arrays {DEPTH} deep": (ANTHROPIC, _nested(DEPTH, obj=False)),
    f"nesting: objects {DEPTH} deep": (ANTHROPIC, _nested(DEPTH, obj=True)),
    "turns: many small": (CHAT, _turns),
    "turns: many tool calls": (CHAT, _tool_turns),
    "turns: legacy function calls": (CHAT, _function_turns),
}
"""Each kind's format and builder: the bytes between the conversation's head and tail."""


def body(kind: str, size: int) -> bytes:
    """A body of about ``size`` bytes whose bulk is ``kind``."""
    fmt, build = KINDS[kind]
    head, tail = (_HEAD, _TAIL) if fmt == CHAT else (_ANTHROPIC_HEAD, _ANTHROPIC_TAIL)
    return head + build(size - len(head) - len(tail)) + tail


def cli(args: list[str]) -> int:
    """Run a plain ``ctxwin estimate``/``prune`` command line in-process (the console
    script's own way in, without its process exit); the exit code. Its output is
    dropped."""
    from ctxwin.cli.fastargs import parse
    from ctxwin.cli.main import run_plain

    plain = parse(args)
    assert plain is not None, args
    gc.disable()  # as the console script runs these commands (ctxwin.cli.main.run)
    try:
        out, err = io.TextIOWrapper(io.BytesIO()), io.TextIOWrapper(io.BytesIO())
        with redirect_stdout(out), redirect_stderr(err):  # ctxwin writes bytes to .buffer
            return run_plain(*plain)
    finally:
        gc.enable()


def prune(path: Path) -> Callable[[], object]:
    """``ctxwin prune`` of the body to a file; its exit code."""
    out = path.with_suffix(".out")
    return lambda: cli(["prune", str(path), str(out), "-c", str(CONTEXT_LENGTH), "-q"])


def estimate(path: Path) -> Callable[[], object]:
    """``ctxwin estimate --json`` of the body; its exit code."""
    return lambda: cli(["estimate", str(path), "-c", str(CONTEXT_LENGTH), "--json"])


def fitter(path: Path) -> Callable[[], object]:
    """The proxy's decision for the body (a new :class:`~ctxwin.proxy.fitting.Fitter`
    each time, as for a new conversation)."""
    from ctxwin.proxy import routes
    from ctxwin.proxy.fitting import Fitter, ProxyConfig
    from ctxwin.settings import Settings

    raw = path.read_bytes()
    route = routes.MESSAGES if raw.startswith(_ANTHROPIC_HEAD) else routes.CHAT
    settings = Settings(context_length=CONTEXT_LENGTH)
    config = ProxyConfig(upstream="http://127.0.0.1:9", settings=settings)
    return lambda: Fitter(config).fit(route, raw).action


PATHS: dict[str, Callable[[Path], Callable[[], object]]] = {
    "prune": prune,
    "estimate": estimate,
    "fitter": fitter,
}


def body_file(kind: str, size: int, tmp: Path) -> Path:
    """The body of ``kind`` and ``size`` written under ``tmp`` (once)."""
    path = tmp / f"{KIND_NAMES[kind]}-{size}.json"
    if not path.exists():
        path.write_bytes(body(kind, size))
    return path


KIND_NAMES = {kind: f"kind{i}" for i, kind in enumerate(KINDS)}


def best_times(
    kind: str, way: str, sizes: list[int], tmp: Path, reps: int = 3
) -> tuple[list[float], list[object]]:
    """The best of ``reps`` times of ``kind`` read by ``way`` (a key of :data:`PATHS`)
    at each of ``sizes``, and what each run returned. The sizes run in turn, so a busy
    machine slows each alike, and a time is the CPU time the process spent
    (``process_time``, every thread of it): what a run waits for a busy machine's cores
    is not counted.

    The cyclic garbage collector is off while a run is timed, as the console script
    runs these commands: its full collections come after a count of allocations,
    which at these sizes falls in one run and not in another (a step, not a slope:
    over many requests it is amortized linear)."""
    runs = [PATHS[way](body_file(kind, n, tmp)) for n in sizes]
    best = [float("inf")] * len(sizes)
    results: list[object] = [None] * len(sizes)
    for _ in range(reps):
        for i, run in enumerate(runs):
            gc.collect()
            gc.disable()
            try:
                start = process_time()
                results[i] = run()
                best[i] = min(best[i], process_time() - start)
            finally:
                gc.enable()
    return best, results


if __name__ == "__main__":  # write one body: python -m tests.adversarial KIND SIZE OUT
    Path(sys.argv[3]).write_bytes(body(sys.argv[1], int(sys.argv[2])))
