"""OpenAI Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

One ``{"timestamp", "type", "payload"}`` object per line:

* ``session_meta``: the session; ``base_instructions.text`` (or
  ``instructions``) becomes the body's ``instructions``;
* ``turn_context``: per turn, the ``model``;
* ``response_item``: a Responses-API item (``message``, ``reasoning``,
  ``function_call``, ``function_call_output``, ``custom_tool_call``, ...) in
  the order the conversation holds them; consecutive model items are one
  response, so one call;
* ``event_msg`` of type ``token_count``: ``info.last_token_usage.input_tokens``
  is the prompt of the response just finished (repeated events that change
  nothing are ignored); other events repeat what the items hold and are skipped;
* ``compacted``: the history restarts from ``replacement_history`` (or the
  summary ``message``), so what follows is a run of its own.

The whole rollout reads as an OpenAI Responses body with usage per call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxwin.recorded import Run
from ctxwin.sessions._common import as_dict, as_int, as_str, need

NAME = "codex"

_TYPES = frozenset(("session_meta", "turn_context", "response_item", "event_msg", "compacted"))
_MODEL_ITEMS = frozenset(
    (
        "reasoning",
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "web_search_call",
        "tool_search_call",
        "image_generation_call",
    )
)


def detect(entries: Sequence[Any], jsonl: bool) -> bool:
    """JSONL of ``{"type", "payload"}`` lines with Codex's line types."""
    if not jsonl:
        return False
    head = [v for v in entries[:20] if isinstance(v, dict)]
    return bool(head) and all(
        as_str(v.get("type")) in _TYPES and isinstance(v.get("payload"), dict) for v in head
    )


def _is_model(item: Mapping[str, Any]) -> bool:
    t = item.get("type")
    if t == "message" or t is None:
        return item.get("role") == "assistant"
    return isinstance(t, str) and t in _MODEL_ITEMS


class _Segment:
    def __init__(self) -> None:
        self.items: list[Any] = []
        self.usage_at: dict[int, Mapping[str, Any]] = {}
        self.open: int | None = None
        """Index of the first item of the response waiting for its token count."""


def read(entries: Sequence[Any], labels: Sequence[str]) -> list[Run]:
    """One run per history segment (a ``compacted`` line starts a new one)."""
    instructions: str | None = None
    model: str | None = None
    session = ""
    segments = [_Segment()]
    last_total: Any = None
    context_length: int | None = None
    for label, value in zip(labels, entries, strict=True):
        if not isinstance(value, dict):
            continue
        t = value.get("type")
        payload = as_dict(value.get("payload"))
        seg = segments[-1]
        if t == "session_meta":
            session = as_str(payload.get("id")) or session
            base = payload.get("base_instructions")
            text = as_str(as_dict(base).get("text")) or as_str(payload.get("instructions"))
            if text is not None:
                instructions = text
        elif t == "event_msg" and payload.get("type") == "task_started":
            window = as_int(payload.get("model_context_window"))
            context_length = window or context_length
        elif t == "turn_context":
            model = as_str(payload.get("model")) or model
        elif t == "response_item":
            item = dict(payload)
            if not isinstance(need(payload, "type", f"{label}.payload"), str):
                continue
            if _is_model(item) and not (seg.items and _is_model(seg.items[-1])):
                seg.open = len(seg.items)
            seg.items.append(item)
        elif t == "event_msg" and payload.get("type") == "token_count":
            info = as_dict(payload.get("info"))
            total = info.get("total_token_usage")
            last = as_dict(info.get("last_token_usage"))
            prompt = as_int(last.get("input_tokens"))
            if prompt is None or total == last_total:
                continue
            last_total = total
            if seg.open is not None and seg.open not in seg.usage_at:
                seg.usage_at[seg.open] = {"input_tokens": prompt}
        elif t == "compacted":
            fresh = _Segment()
            history = payload.get("replacement_history")
            if isinstance(history, list):
                fresh.items.extend(dict(h) for h in history if isinstance(h, dict))
            elif isinstance(payload.get("message"), str):
                fresh.items.append(
                    {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": payload["message"]}],
                    }
                )
            segments.append(fresh)
    runs = []
    kept = [s for s in segments if s.items]
    for n, seg in enumerate(kept, 1):
        body: dict[str, Any] = {}
        if model:
            body["model"] = model
        if instructions is not None:
            body["instructions"] = instructions
        body["input"] = seg.items
        name = session or "session"
        if len(kept) > 1:
            name = f"{name} segment {n}"
        runs.append(
            Run(
                name,
                NAME,
                body=body,
                usage_at=seg.usage_at,
                fmt="openai-responses",
                context_length=context_length,
                current=n == len(kept),
            )
        )
    return runs
