"""mini-swe-agent trajectories (``*.traj.json``, ``trajectory_format: mini-swe-agent-1``).

``messages`` is the chat the model saw (system, user, assistant; the agent's
bash commands are code blocks in the assistant text); each assistant message
keeps the provider's answer in ``extra.response`` with its ``usage`` (or in
``extra.usage``). ``info.config.model.model_name`` names the model when the
responses do not. Read as one OpenAI Chat transcript with usage per call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxwin.recorded import Run
from ctxwin.sessions._common import as_dict, as_str, need, need_list

NAME = "mini-swe-agent"


def detect(entries: Sequence[Any], jsonl: bool) -> bool:
    """An object whose ``trajectory_format`` names mini-swe-agent, or whose
    ``messages`` keep the responses in ``extra``."""
    if jsonl or len(entries) != 1 or not isinstance(entries[0], dict):
        return False
    value = entries[0]
    fmt = value.get("trajectory_format")
    if isinstance(fmt, str) and fmt.startswith("mini-swe-agent"):
        return True
    messages = value.get("messages")
    return (
        isinstance(messages, list)
        and "info" in value
        and any(isinstance(m, dict) and isinstance(m.get("extra"), dict) for m in messages)
    )


def read(entries: Sequence[Any], labels: Sequence[str]) -> list[Run]:
    value = entries[0]
    label = labels[0]
    name = as_str(value.get("instance_id")) or label or "trajectory"
    messages: list[dict[str, Any]] = []
    usage_at: dict[int, Mapping[str, Any]] = {}
    model: str | None = None
    for i, msg in enumerate(need_list(value, "messages", label)):
        if not isinstance(msg, dict):
            continue
        where = f"messages[{i}]"
        out = {"role": need(msg, "role", where), "content": need(msg, "content", where)}
        extra = as_dict(msg.get("extra"))
        response = as_dict(extra.get("response"))
        usage = response.get("usage", extra.get("usage"))
        if out["role"] == "assistant":
            if isinstance(usage, Mapping):
                usage_at[len(messages)] = usage
            model = model or as_str(response.get("model"))
        messages.append(out)
    config = as_dict(as_dict(as_dict(value.get("info")).get("config")).get("model"))
    model = as_str(config.get("model_name")) or model
    body: dict[str, Any] = {}
    if model:
        body["model"] = model
    body["messages"] = messages
    return [Run(name, NAME, body=body, usage_at=usage_at, fmt="openai-chat")]
