"""Cutting policies compared offline: ``ctxwin replay --compare`` on generated agent loops.

    python -m fidelity.compare [--out fidelity/compare.md]

Writes two runs to ``examples/`` and replays each with ``ctxwin replay --compare``
(the command itself, its ``--json``), one table per command:

* ``cache-loop-chat.json``: the loop of ``tests/test_cache_loop.py`` as one OpenAI Chat
  transcript (``gpt-4o-mini``, a system prompt, a task, 99 calls of ``read_file`` each
  answered by a generated source file of about 280 tokens, then a final answer: 100
  calls), replayed at a 6,000-token window under the default steps and under
  ``clear-results,drop-turns``. OpenAI caches prefixes by itself (from 1,024 tokens);
* ``cache-loop-anthropic.json``: the same kind of loop as an Anthropic Messages
  transcript (``claude-sonnet-4-5``, 59 calls and a final answer: 60 calls, results of
  about 190 tokens) at an 8,000-token window, without and with ``--cache-mark``.
  Anthropic caches only up to a ``cache_control`` mark, and the run has none.

Every figure is what the command printed; ``make docs`` writes this report and the
tables of ``docs/strategies.md`` (:mod:`tests.figures`), ``tests/test_figures.py`` writes
them again and compares, and ``tests/test_docs_compare.py`` checks the runs and what the
doc says of the tables.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from ctxwin.cli.replay import COMPARE_COLUMNS

ROOT = Path(__file__).resolve().parent.parent
CHAT_RUN = "examples/cache-loop-chat.json"
ANTHROPIC_RUN = "examples/cache-loop-anthropic.json"
POLICIES = "just-fit,block=0.25,block=0.35,block=0.4,block=0.45,block=0.5"
JUST_AND_DEFAULT = "just-fit,block=0.45"
COMMANDS: list[tuple[str, str, tuple[str, ...]]] = [
    ("the default steps (drop-turns)", CHAT_RUN, ("-c", "6000", "--compare", POLICIES)),
    (
        "clearing before dropping",
        CHAT_RUN,
        ("-c", "6000", "--strategy", "clear-results,drop-turns", "--compare", JUST_AND_DEFAULT),
    ),
    ("Anthropic, the run's own marks (none)", ANTHROPIC_RUN, ("-c", "8000", "--compare", POLICIES)),
    (
        "Anthropic, with --cache-mark",
        ANTHROPIC_RUN,
        ("-c", "8000", "--cache-mark", "--compare", POLICIES),
    ),
]
"""Each table: its title, the run, the flags of ``ctxwin replay RUN``."""

SYSTEM = "You are a coding agent. Read files with read_file until the task is done."
TASK = "Find where the retry budget is computed and explain it."
WORDS = [
    *("retry", "budget", "backoff", "handler", "request", "route", "attempt", "capped"),
    *("window", "token", "cache", "prefix", "value", "error", "config", "parse"),
    *("module", "loader", "result", "stream", "lock", "queue"),
]


READ_FILE = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a source file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}
"""The loop's one tool, as a Chat Completions tool (the stand-in provider answers with it)."""


def source_file(turn: int, functions: int = 8) -> str:
    """A generated source file (``functions`` functions of about 35 tokens), different at
    every turn: the loop's tool result (``tests/test_cache_loop.py`` reads the same)."""
    rng = random.Random(turn)
    out = []
    for _ in range(functions):
        a, b, c = (rng.choice(WORDS) for _ in range(3))
        out.append(
            f"def {a}_{b}(request, {c}=None):\n"
            f'    """Return the {a} {c} of the {b} for this request."""\n'
            f"    return request.{b}.get({c!r}) or {a}_{c}(request)\n"
        )
    return "".join(out)


def chat_run(calls: int = 100) -> dict[str, Any]:
    """The Chat loop's transcript: ``calls - 1`` tool calls and a final answer."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TASK},
    ]
    for turn in range(calls - 1):
        call = f"call_{turn:04d}"
        arguments = orjson.dumps({"path": f"src/module_{turn}.py"}).decode()
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "read_file", "arguments": arguments},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call, "content": source_file(turn)})
    messages.append({"role": "assistant", "content": "The retry budget is computed in route."})
    return {"model": "gpt-4o-mini", "messages": messages, "tools": [READ_FILE]}


def anthropic_run(calls: int = 60) -> dict[str, Any]:
    """The Anthropic loop's transcript: ``calls - 1`` tool calls and a final answer."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for turn in range(calls - 1):
        call = f"toolu_{turn:04d}"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": call,
                        "name": "read_file",
                        "input": {"path": f"src/module_{turn}.py"},
                    }
                ],
            }
        )
        result = {"type": "tool_result", "tool_use_id": call, "content": source_file(turn, 5)}
        messages.append({"role": "user", "content": [result]})
    final = {"type": "text", "text": "The retry budget is computed in route."}
    messages.append({"role": "assistant", "content": [final]})
    tool = {
        "name": "read_file",
        "description": "Read a source file",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1000,
        "system": SYSTEM,
        "tools": [tool],
        "messages": messages,
    }


def runs() -> dict[str, bytes]:
    """Each run file's path (from the repository's root) and bytes."""
    option = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE
    return {
        CHAT_RUN: orjson.dumps(chat_run(), option=option),
        ANTHROPIC_RUN: orjson.dumps(anthropic_run(), option=option),
    }


def replay(run: str, flags: Sequence[str]) -> dict[str, Any]:
    """What ``ctxwin replay RUN FLAGS --json`` prints (run from the repository's root)."""
    done = subprocess.run(
        [sys.executable, "-m", "ctxwin", "replay", run, *flags, "--json"],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    if done.returncode not in (0, 3):
        raise RuntimeError(done.stderr.decode())
    out: dict[str, Any] = orjson.loads(done.stdout)
    return out


COLUMNS = COMPARE_COLUMNS
"""The columns of ``replay --compare``'s table, with its labels (the command's own)."""


def _cell(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key == "input_cost":
        return f"{value:.4f}"
    return value if isinstance(value, str) else f"{value:,}"


def table(result: dict[str, Any]) -> str:
    """The policies of one ``--compare`` as a Markdown table."""
    lines = [
        "| " + " | ".join(COLUMNS.values()) + " |",
        "|---|" + "---:|" * (len(COLUMNS) - 1),
    ]
    for row in result["policies"]:
        lines.append("| " + " | ".join(_cell(k, row[k]) for k in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def ratios(result: dict[str, Any], policy: str = "block=0.45") -> str:
    """``policy``'s input cost and mean tokens sent, each ÷ just-fit's (one line)."""
    rows = {r["policy"]: r for r in result["policies"]}
    ours, just = rows[policy], rows["just-fit"]
    cost = ours["input_cost"] / just["input_cost"]
    sent = ours["mean_tokens_sent"] / just["mean_tokens_sent"]
    return f"{policy} ÷ just-fit: input USD {cost:.2f}, mean sent {sent:.2f}.\n"


def results() -> list[dict[str, Any]]:
    """What each of :data:`COMMANDS` printed, in order (the runs must be written)."""
    return [replay(run, flags) for _, run, flags in COMMANDS]


def section(title: str, run: str, flags: Sequence[str], result: dict[str, Any]) -> str:
    """One command of :data:`COMMANDS` and what it printed: the command, its table, the
    prices and the default share's ratios (``docs/strategies.md`` shows each)."""
    prices = "; ".join(
        f"{p['model']}: "
        + ", ".join(
            f"{k.replace('_', ' ')} {p['price'][k]:g}"
            for k in ("input", "cache_read", "cache_write", "cache_write_1h")
            if p["price"].get(k) is not None
        )
        + f" USD per million tokens; cache {p['cache_rules']['kind']}"
        for p in result["prices"]
    )
    return "\n".join(
        [
            f"```console\n$ ctxwin replay {run} {' '.join(flags)}\n```\n",
            table(result),
            f"Prices: {prices}.\n",
            ratios(result),
        ]
    )


def report(printed: Sequence[dict[str, Any]]) -> str:
    """The Markdown report of what :data:`COMMANDS` printed: each command and its table."""
    out = [
        "# Cutting policies compared offline: `ctxwin replay --compare`\n",
        "Written by `python -m fidelity.compare --out fidelity/compare.md` (the runs it\n"
        "replays are generated and written to `examples/`; see its docstring).\n",
    ]
    for (title, run, flags), result in zip(COMMANDS, printed, strict=True):
        out.append(f"## {title}\n")
        out.append(section(title, run, flags, result))
    return "\n".join(out)


def write_runs() -> None:
    for path, data in runs().items():
        (ROOT / path).write_bytes(data)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    write_runs()
    text = report(results())
    if args.out:
        args.out.write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
