"""What fitting costs an agent loop in LangChain / LangGraph and pydantic-ai.

An agent loop of N steps (each: a tool call and its result, ~600 tokens) is fitted
before every model call, as the agent does: by the LangGraph ``pre_model_hook`` (the
state keeps the whole history), by the LangChain middleware's logic (the state becomes
what was kept) and by the pydantic-ai history processor (the history becomes what was
kept). Printed per loop: the total fitting time, the time of the last call, and the
time of one fit of the last history by a fresh hook (a whole read), for a window that
holds everything and one that forces pruning.

    .venv/bin/python bench/frameworks.py --steps 250,1000

``--callbacks`` measures the LiteLLM callback and the Agents SDK filter instead: one
conversation grown to 2,000 messages, each call given a fresh deep copy of the history
(as LiteLLM and the Agents SDK runner give it); printed: the fit of one call in the loop
at 200 and at 2,000 messages, and a fresh callback's fit of the same call (a whole read).

``--loops`` runs the end-to-end tests' agent loops instead (30 tool steps, a 4,000-token
window, the stand-in provider of ``tests/provider_standin.py`` on 127.0.0.1) unwrapped
and wrapped, and prints what the provider saw.

Not part of ``make test``: figures, not a check.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
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


def loops() -> None:
    """The end-to-end tests' agent loops, unwrapped and wrapped: what the provider saw."""
    import warnings

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    warnings.simplefilter("ignore")  # create_react_agent is deprecated
    from langchain.agents import create_agent
    from langgraph.prebuilt import create_react_agent

    from ctxwin.integrations.langchain import ContextWindowMiddleware
    from tests import test_integrations_langchain as lc
    from tests import test_integrations_pydantic_ai as pa
    from tests.provider_standin import Standin, serve

    def build_lc(url: str, middleware: list[Any]) -> Any:
        return create_agent(
            lc.chat_model(url), [lc.read_file], system_prompt=lc.SYSTEM, middleware=middleware
        )

    settings: dict[str, Any] = {
        "model": lc.MODEL,
        "context_length": lc.WINDOW,
        "max_tokens": lc.REPLY,
    }
    middleware = ContextWindowMiddleware(**settings)
    whole = ContextWindowMiddleware(keep_state=True, context_length=lc.WINDOW)
    hook = pre_model_hook(**settings)
    processor = history_processor(context_length=lc.WINDOW)
    cases: list[tuple[str, Callable[[str], Any], Callable[[Any], Any], Any]] = [
        ("create_agent", lambda u: build_lc(u, []), lambda a: a.invoke(lc.task(), lc.LIMIT), None),
        (
            "create_agent + middleware",
            lambda u: build_lc(u, [middleware]),
            lambda a: a.invoke(lc.task(), lc.LIMIT),
            middleware,
        ),
        (
            "create_agent + middleware(keep_state=True)",
            lambda u: build_lc(u, [whole]),
            lambda a: a.invoke(lc.task(), lc.LIMIT),
            whole,
        ),
        (
            "create_react_agent",
            lambda u: create_react_agent(lc.chat_model(u), [lc.read_file], prompt=lc.SYSTEM),
            lambda a: a.invoke(lc.task(), lc.LIMIT),
            None,
        ),
        (
            "create_react_agent + pre_model_hook",
            lambda u: lc.react_agent(u, hook),
            lambda a: a.invoke(lc.task(), lc.LIMIT),
            hook,
        ),
        ("pydantic-ai Agent", pa.agent, lambda a: a.run_sync(pa.TASK), None),
        (
            "pydantic-ai Agent + history processor",
            lambda u: pa.agent(u, processor),
            lambda a: a.run_sync(pa.TASK),
            processor,
        ),
    ]
    print(
        "| agent | model calls | refused (400) | largest prompt | last fit: entries kept, "
        "estimate / budget | overhead learned |"
    )
    print("|---|---:|---:|---:|---|---:|")
    for name, build, run, fitted in cases:
        standin = Standin(window=lc.WINDOW, final_after=lc.TURNS)
        with serve(standin) as url:
            try:
                run(build(url))
            except Exception as exc:  # the unwrapped loops end in the provider's 400
                name += f" ({type(exc).__name__})"
        last = "—"
        overhead = "—"
        if fitted is not None and fitted.last is not None:
            r = fitted.last.result
            last = f"{r.kept_count} of {r.items}, {r.estimated_tokens_after:,} / {r.budget:,}"
            overhead = f"{fitted.fitting.manager.overhead}"
        print(
            f"| {name} | {len(standin.bodies)} | {standin.refused} "
            f"| {max(standin.prompts):,} | {last} | {overhead} |"
        )


def callbacks(sizes: list[int], reps: int = 5) -> None:
    """The LiteLLM callback and the Agents SDK filter over one conversation of
    ``max(sizes)`` messages (a tool call and its result a step), each call given a
    fresh deep copy of the history, as LiteLLM and the runner give them: the fit of
    one call at each size in the loop (the median of the last few calls up to that
    size), and a fresh callback's fit of that call (a whole read: what each call
    cost when every call was read whole)."""
    import copy
    import os
    import statistics

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch at import
    os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
    from agents import Agent, function_tool
    from agents.run_config import CallModelData, ModelInputData

    from ctxwin.integrations.agents import ContextWindowFilter
    from ctxwin.integrations.litellm import ContextWindowCallback

    @function_tool
    def read_file(path: str) -> str:
        """Read a source file."""
        return RESULT

    agent: Agent[Any] = Agent(name="coder", instructions="Read files.", tools=[read_file])
    tools = [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
    ]

    def chat_step(i: int) -> list[Any]:
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "read_file", "arguments": f'{{"path": "src/{i}.py"}}'},
        }
        return [
            {"role": "assistant", "content": None, "tool_calls": [call], "function_call": None},
            {"role": "tool", "tool_call_id": f"c{i}", "content": RESULT},
        ]

    def responses_step(i: int) -> list[Any]:
        return [
            {
                "type": "function_call",
                "call_id": f"c{i}",
                "name": "read_file",
                "arguments": f'{{"path": "src/{i}.py"}}',
            },
            {"type": "function_call_output", "call_id": f"c{i}", "output": RESULT},
        ]

    def litellm_fit(fit: Any) -> Callable[[list[Any]], None]:
        return lambda h: fit.fit({"model": "gpt-4o", "messages": h, "tools": tools})

    def agents_fit(fit: Any) -> Callable[[list[Any]], None]:
        def call(h: list[Any]) -> None:
            fit(CallModelData(ModelInputData(h, "Read files."), agent, None))

        return call

    cases: list[tuple[str, list[Any], Callable[[int], list[Any]], Callable[..., Any], Any]] = [
        (
            "LiteLLM callback",
            [{"role": "system", "content": "Read files."}, {"role": "user", "content": "Go."}],
            chat_step,
            ContextWindowCallback,
            litellm_fit,
        ),
        (
            "Agents SDK filter",
            [{"role": "user", "content": "Go."}],
            responses_step,
            ContextWindowFilter,
            agents_fit,
        ),
    ]
    print("| integration | window | messages | fit per call, in the loop | fresh whole read |")
    print("|---|---:|---:|---:|---:|")
    for window in (10_000_000, 32_000):
        for name, head, step, make_fit, adapt in cases:
            fit = adapt(make_fit(context_length=window, max_tokens=1000))
            history = list(head)
            times: list[tuple[int, float]] = []
            pending = sorted(sizes)
            i = 0
            while pending:
                history += step(i)
                i += 1
                given = copy.deepcopy(history)  # the framework's copy: not timed
                start = time.perf_counter()
                fit(given)
                times.append((len(history), time.perf_counter() - start))
                if len(history) >= pending[0]:
                    pending.pop(0)
                    n = len(history)
                    near = [t for m, t in times if n - 2 * reps < m <= n]
                    whole = []
                    for _ in range(reps):
                        fresh = adapt(make_fit(context_length=window, max_tokens=1000))
                        given = copy.deepcopy(history)
                        start = time.perf_counter()
                        fresh(given)
                        whole.append(time.perf_counter() - start)
                    print(
                        f"| {name} | {window:,} | {n:,} | "
                        f"{statistics.median(near) * 1e6:,.0f} µs | "
                        f"{statistics.median(whole) * 1e6:,.0f} µs |"
                    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", default="250,1000")
    parser.add_argument("--loops", action="store_true", help="run the agent loops instead")
    parser.add_argument(
        "--callbacks",
        default=None,
        const="200,2000",
        nargs="?",
        metavar="SIZES",
        help="measure the LiteLLM callback and the Agents SDK filter at these message counts",
    )
    args = parser.parse_args()
    if args.loops:
        loops()
        return
    if args.callbacks:
        callbacks([int(s) for s in args.callbacks.split(",")])
        return
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
