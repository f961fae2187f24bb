"""Builders for OpenAI Chat Completions transcripts used across the tests."""

from __future__ import annotations

from typing import Any

Message = dict[str, Any]


def system(text: str = "sys") -> Message:
    return {"role": "system", "content": text}


def user(text: str = "do the task") -> Message:
    return {"role": "user", "content": text}


def call(call_id: str, name: str = "fetch", arguments: str = '{"q":"x"}') -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def assistant(*call_ids: str, content: str | None = None) -> Message:
    msg: Message = {"role": "assistant", "content": content}
    if call_ids:
        msg["tool_calls"] = [call(c) for c in call_ids]
    return msg


def tool(call_id: str, content: str = "ok") -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def adr_transcript() -> list[Message]:
    """The ADR's worked example: three fetch turns, the first two with 6000-byte results."""
    messages = [system(), user()]
    for i, result in enumerate(("x" * 6000, "x" * 6000, "the newest result"), start=1):
        messages += [assistant(f"call_{i}"), tool(f"call_{i}", result)]
    return messages
