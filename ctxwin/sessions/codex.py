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
  is the prompt of one response (repeated events that change nothing are
  ignored). Newer versions write it after the response's model items (before the
  tools' outputs); Codex 0.36-0.42 wrote it before them, after the outputs of the
  response before. So a count that comes while the open response has had no
  input item after it is that response's; any other is the next response's.
  Other events repeat what the items hold and are skipped;
* ``compacted``: the history restarts from ``replacement_history`` (or the
  summary ``message``), so what follows is a run of its own.

Resumed and forked rollouts. A fresh rollout has one ``session_meta`` line, and
resuming it in place appends to the same file. A rollout that starts from
another one's history (a fork, a subagent given its parent's history, a resume
written to a new file) opens with its own ``session_meta`` (with
``forked_from_id``) and then replays the parent's lines as they are: the parent's
``session_meta`` (and its ancestors' in a rollout resumed more than once),
``turn_context``, ``response_item``, ``compacted`` and ``event_msg`` lines,
``token_count`` events included, all stamped with the time of the copy. The
replayed items are the context the new calls carry, so they stay in the body;
their ``token_count`` events are the parent's calls, already counted in the
parent's file, so they are no call here. The replay begins at the first
``session_meta`` with another ``id`` than the first line's and ends at a
``session_meta`` with the rollout's own ``id`` (newer versions write it again
after the copy) or, when none follows, at the first line stamped later than
the copy (more than :data:`COPY_GAP` after the line before it). A history
segment that lies wholly in the replay is the parent's run, not one of this file.

The whole rollout reads as an OpenAI Responses body with usage per call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from ctxwin.runs.recorded import Run
from ctxwin.sessions._common import as_dict, as_int, as_str, line_time, need

NAME = "codex"

COPY_GAP = timedelta(seconds=1)
"""Replayed lines are written at once; a longer pause before a line ends the replay."""

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
        self.answered = False
        """Whether an input item (a tool's output, a user message) came after the open
        response: a count that comes now is the next response's."""
        self.pending: Mapping[str, Any] | None = None
        """A count that came before its response's items (as Codex 0.36-0.42 write them)."""
        self.own = False
        """Whether any line of this segment is the rollout's own (not replayed)."""
        self.calls: set[int] = set()
        """Where this rollout's own responses start (replayed ones are no call)."""
        self.replayed = False
        """Whether a response of this segment was replayed."""


class _Replay:
    """Tells the lines a rollout replayed from its parent from its own."""

    def __init__(self) -> None:
        self.own_id: str | None = None
        self.metas = 0
        self.active = False
        self.last: datetime | None = None

    def step(self, t: Any, payload: Mapping[str, Any], value: Mapping[str, Any]) -> bool:
        """Whether this line was replayed (the parent's) rather than written by this rollout."""
        stamp = line_time(value)
        if t == "session_meta":
            ident = as_str(payload.get("id"))
            self.metas += 1
            if self.metas == 1:
                self.own_id = ident
            else:
                self.active = ident is None or ident != self.own_id
        elif self.active and (stamp is None or self.last is None or stamp - self.last > COPY_GAP):
            self.active = False
        if stamp is not None:
            self.last = stamp
        return self.active or (t == "session_meta" and self.metas > 1)


def read(entries: Sequence[Any], labels: Sequence[str]) -> list[Run]:
    """One run per history segment (a ``compacted`` line starts a new one); replayed
    lines are context, never calls."""
    instructions: str | None = None
    replayed_instructions: str | None = None
    model: str | None = None
    session = ""
    segments = [_Segment()]
    last_total: Any = None
    context_length: int | None = None
    replay = _Replay()
    for label, value in zip(labels, entries, strict=True):
        if not isinstance(value, dict):
            continue
        t = value.get("type")
        payload = as_dict(value.get("payload"))
        copied = replay.step(t, payload, value)
        seg = segments[-1]
        if t == "session_meta":
            if not copied:
                session = session or as_str(payload.get("id")) or ""
            base = payload.get("base_instructions")
            text = as_str(as_dict(base).get("text")) or as_str(payload.get("instructions"))
            if text is not None and not copied:
                instructions = text
            elif text is not None:
                replayed_instructions = replayed_instructions or text
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
                seg.answered = False
                if copied:
                    seg.replayed = True
                else:
                    seg.calls.add(seg.open)
                    if seg.pending is not None:
                        seg.usage_at[seg.open] = seg.pending
                seg.pending = None
            elif not _is_model(item):
                seg.answered = True
            seg.items.append(item)
        elif t == "event_msg" and payload.get("type") == "token_count":
            info = as_dict(payload.get("info"))
            total = info.get("total_token_usage")
            last = as_dict(info.get("last_token_usage"))
            prompt = as_int(last.get("input_tokens"))
            if prompt is None or total == last_total:
                continue
            last_total = total
            if copied:
                seg.open = None  # the parent's call, counted in its own file
                seg.pending = None
            elif seg.open is not None and seg.open not in seg.usage_at and not seg.answered:
                seg.usage_at[seg.open] = {"input_tokens": prompt}
            else:  # written before its response's items: the next response's count
                seg.pending = {"input_tokens": prompt}
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
        if not copied and t in ("response_item", "compacted"):
            segments[-1].own = True
    runs = []
    if instructions is None:
        instructions = replayed_instructions
    kept = [s for s in segments if s.items and s.own]
    if not kept and segments[-1].items:
        kept = [segments[-1]]  # only replayed history (a fork with no turn yet)
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
                calls_at=frozenset(seg.calls) if seg.replayed else None,
                context_length=context_length,
                current=n == len(kept),
            )
        )
    return runs
