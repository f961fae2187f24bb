"""An agent loop bounded by ctxwin.ContextWindowManager, against a scripted fake provider.

    python examples/agent_loop.py

No network: ``FakeProvider`` plays a model that calls a ``read_file`` tool again and
again, and the tool returns ever larger files. Before every send the manager bounds
the transcript (dropping the oldest whole turns) and learns from the usage the
previous call reported. The run ends when even the system prompt, the task and the
newest turn no longer fit: the loop stops with the reason ``context_truncated``
instead of sending a request the provider would reject.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

import ctxwin

SYSTEM = "You are a careful coding agent. Read files with read_file before answering."
TASK = "Find where the retry limit is configured and explain it."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file from the repository.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]
# The size of each file the tool returns: the last one is too big for the window.
FILE_SIZES = [900, 1500, 2500, 1200, 3000, 2200, 4000, 15000]


class FakeProvider:
    """A scripted model: one tool call per response; counts prompt tokens like a tokenizer
    that sees about 2 bytes per token (more tokens than ctxwin's raw estimate)."""

    def __init__(self) -> None:
        self.calls = 0

    def send(self, request: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        prompt_tokens = math.ceil(len(orjson.dumps(request)) / 2)
        call_id = f"call_{self.calls}"
        message = {
            "role": "assistant",
            "content": f"Reading file {self.calls}.",
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": "read_file",
                        "arguments": orjson.dumps({"path": f"src/mod{self.calls}.py"}).decode(),
                    },
                }
            ],
        }
        return {
            "choices": [{"message": message, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 20},
        }


def read_file(step: int) -> str:
    size = FILE_SIZES[min(step, len(FILE_SIZES) - 1)]
    line = f"RETRY_LIMIT = {step}  # configured in settings, module {step}\n"
    return (line * (size // len(line) + 1))[:size]


def run_agent(max_steps: int = 20) -> tuple[str, str]:
    """Run the loop; returns (termination reason, detail)."""
    provider = FakeProvider()
    manager = ctxwin.ContextWindowManager(context_length=6000, max_tokens=500)
    request: dict[str, Any] = {
        "model": "fake-agent-model",
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}],
        "tools": TOOLS,
    }
    usage = None  # None: a new run, calibration starts at the seed
    for step in range(max_steps):
        try:
            sent = manager.fit(request, last_usage=usage)
        except ctxwin.ContextTruncated as exc:
            r = exc.result
            detail = (
                f"step {step + 1}: even the head plus the newest turn need "
                f"{r.estimated_tokens_after:,} tokens, over the budget of {r.budget:,}"
            )
            return "context_truncated", detail
        print(
            f"step {step + 1:>2}: sent {len(sent.messages):>2} messages, "
            f"estimate {sent.estimated_tokens_after:>5,} of budget {sent.budget.budget:,}, "
            f"calibration {sent.calibration:.3f}, dropped turns {sent.dropped_turns}"
        )
        response = provider.send(sent.request)
        usage = response["usage"]
        message = response["choices"][0]["message"]
        call_id = message["tool_calls"][0]["id"]
        # Keep what fit returned: dropped turns stay dropped.
        request = dict(sent.request)
        request["messages"] = [
            *sent.request["messages"],
            message,
            {"role": "tool", "tool_call_id": call_id, "content": read_file(step)},
        ]
    return "max_steps", f"stopped after {max_steps} steps"


def main() -> None:
    reason, detail = run_agent()
    print(f"run ended: {reason} ({detail})")


if __name__ == "__main__":
    main()
