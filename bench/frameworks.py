"""What fitting costs an agent loop in LangChain / LangGraph and pydantic-ai.

An agent loop of N steps (each: a tool call and its result, ~600 tokens) is fitted
before every model call, as the agent does: by the LangGraph ``pre_model_hook`` (the
state keeps the whole history), by the LangChain middleware's logic (the state becomes
what was kept) and by the pydantic-ai history processor (the history becomes what was
kept). Printed per loop: the total fitting time, the time of the last call, and the
time of one fit of the last history by a fresh hook (a whole read), for a window that
holds everything and one that forces pruning.

    .venv/bin/python bench/frameworks.py --steps 250,1000

Not part of ``make test``: figures, not a check.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from ctxwin.integrations.langchain import pre_model_hook
from ctxwin.integrations.pydantic_ai import history_processor

RESULT = "".join(
    f"def handler_{i}(request):\n    return request.backoff * {i}\n" for i in range(40)
)


def langchain_steps(n: int) -> tuple[list[BaseMessage], list[list[BaseMessage]]]:
    head: list[BaseMessage] = [SystemMessage("You are a coding agent."), HumanMessage("Go.")]
    steps = []
    for i in range(n):
        call = {"id": f"c{i}", "name": "read_file", "args": {"path": f"src/{i}.py"}}
        steps.append([AIMessage("", tool_calls=[call]), ToolMessage(RESULT, tool_call_id=f"c{i}")])
    return head, steps


def pydantic_steps(n: int) -> tuple[list[ModelMessage], list[list[ModelMessage]]]:
    head: list[ModelMessage] = [
        ModelRequest([SystemPromptPart("You are a coding agent."), UserPromptPart("Go.")])
    ]
    steps: list[list[ModelMessage]] = []
    for i in range(n):
        steps.append(
            [
                ModelResponse([ToolCallPart("read_file", {"path": f"src/{i}.py"}, f"c{i}")]),
                ModelRequest([ToolReturnPart("read_file", RESULT, f"c{i}")]),
            ]
        )
    return head, steps


def loop(
    head: list[Any],
    steps: list[list[Any]],
    fit: Callable[[list[Any]], list[Any]],
    keep_state: bool,
) -> tuple[float, float, list[Any]]:
    """Total and last-call seconds of fitting before each step's model call."""
    history = list(head)
    total = last = 0.0
    for step in steps:
        history += step
        start = time.perf_counter()
        kept = fit(list(history))
        last = time.perf_counter() - start
        total += last
        if not keep_state:
            history = list(kept)
    return total, last, history


def make(kind: str, options: dict[str, Any]) -> Callable[[list[Any]], list[Any]]:
    """A fresh fitting function: the LangGraph hook's, or the pydantic-ai processor's."""
    if kind == "hook":
        hook = pre_model_hook(**options)
        return lambda h: list(hook({"messages": h})["llm_input_messages"])
    processor = history_processor(**options)
    return lambda h: processor.fitting.fit(h)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", default="250,1000")
    args = parser.parse_args()
    print("| integration | steps | window | total fitting | last call | fresh whole read |")
    print("|---|---:|---:|---:|---:|---:|")
    for n in [int(s) for s in args.steps.split(",")]:
        for window in (10_000_000, 32_000):
            options: dict[str, Any] = {"context_length": window, "max_tokens": 1000}
            lc_head, lc_steps = langchain_steps(n)
            pa_head, pa_steps = pydantic_steps(n)
            cases: list[tuple[str, list[Any], list[list[Any]], Any, bool]] = [
                ("LangGraph hook (state kept)", lc_head, lc_steps, "hook", True),
                ("LangChain middleware (state rewritten)", lc_head, lc_steps, "hook", False),
                ("pydantic-ai processor", pa_head, pa_steps, "processor", False),
            ]
            for name, head, steps, kind, keep_state in cases:
                total, last, history = loop(head, steps, make(kind, options), keep_state)
                start = time.perf_counter()
                make(kind, options)(history)
                whole = time.perf_counter() - start
                print(
                    f"| {name} | {n:,} | {window:,} | {total * 1e3:,.0f} ms "
                    f"| {last * 1e6:,.0f} µs | {whole * 1e6:,.0f} µs |"
                )


if __name__ == "__main__":
    main()
