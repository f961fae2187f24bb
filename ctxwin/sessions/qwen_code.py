"""Qwen Code chats (``~/.qwen/projects/<project>/chats/<session>.jsonl``).

Qwen Code (a fork of Gemini CLI) records a session as JSON Lines of ``ChatRecord``
(``packages/core/src/services/chatRecordingService.ts``): each record has a ``uuid``,
the ``parentUuid`` of the record before it (a tree, for rewinds and branches), a
``type`` and, for the conversation, ``message``: the Gemini ``Content`` (``role``,
``parts``) as it is sent:

* ``user``: the user's turn; ``tool_result``: the ``functionResponse`` parts of the tools'
  results; ``assistant``: a model response (``role: model``: text, ``thought`` parts, one
  ``functionCall`` per call) with its ``usageMetadata`` (``promptTokenCount``: the prompt,
  cached tokens included), ``model`` and ``contextWindowSize`` (the model's window as
  Qwen Code knew it: the run's ``context_length``);
* ``system`` records are not sent, except ``chat_compression``: its
  ``systemPayload.compressedHistory`` is the history from then on (summary turns and
  the kept tail), so each compression starts a run (``main segment 2``);
* records with ``isSidechain`` (a subagent, ``agentId``) are runs of their own.

The conversation is the ``parentUuid`` path to the last record of the main chain (a
rewound turn is off it). ``thought`` parts are not sent back. Requests are Gemini
``generateContent`` bodies without the system instruction and tools (not recorded).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxwin.errors import InputError
from ctxwin.recorded import Run
from ctxwin.sessions._common import as_dict, as_int, as_str, line_time, need, need_dict

NAME = "qwen-code"

_TYPES = frozenset(("user", "assistant", "tool_result", "system"))


def _is_record(value: Any) -> bool:
    if not isinstance(value, dict) or as_str(value.get("type")) not in _TYPES:
        return False
    if "uuid" not in value or "sessionId" not in value:
        return False
    message = value.get("message")
    return message is None or (isinstance(message, dict) and "parts" in message)


def detect(entries: Sequence[Any], jsonl: bool) -> bool:
    """JSON Lines of Qwen Code ``ChatRecord``: ``uuid``, ``sessionId``, a ``type`` and a
    Gemini ``message`` (``parts``, where Claude Code's has ``content``)."""
    if not jsonl:
        return False
    head = [v for v in entries[:50] if isinstance(v, dict)]
    return (
        bool(head)
        and all(_is_record(v) for v in head)
        and any(isinstance(v.get("message"), dict) for v in head)
    )


@dataclass(slots=True)
class _Segment:
    contents: list[dict[str, Any]] = field(default_factory=list)
    usage_at: dict[int, Mapping[str, Any]] = field(default_factory=dict)
    sent_at: dict[int, float] = field(default_factory=dict)
    calls: list[int] = field(default_factory=list)
    model: str | None = None
    window: int | None = None


def read(entries: Sequence[Any], labels: Sequence[str]) -> list[Run]:
    """The runs of one chat file (see the module docstring)."""
    chains: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    parents: dict[str, str | None] = {}
    for label, value in zip(labels, entries, strict=True):
        if not isinstance(value, dict):
            raise InputError("expected an object", label)
        uuid = str(need(value, "uuid", label))
        parents[uuid] = as_str(value.get("parentUuid"))
        key = "main"
        if value.get("isSidechain") is True:
            key = f"agent-{as_str(value.get('agentId')) or 'sidechain'}"
        chains.setdefault(key, []).append((label, value))
    runs: list[Run] = []
    for key, records in chains.items():
        runs.extend(_chain_runs(_on_path(records, parents), key))
    return runs


def _on_path(
    records: list[tuple[str, dict[str, Any]]], parents: Mapping[str, str | None]
) -> list[tuple[str, dict[str, Any]]]:
    """The records on the ``parentUuid`` path to the chain's last record, in file order."""
    path: set[str] = set()
    node: str | None = str(records[-1][1]["uuid"])
    while node is not None and node not in path:
        path.add(node)
        node = parents.get(node)
    return [(label, v) for label, v in records if str(v["uuid"]) in path]


def _chain_runs(records: list[tuple[str, dict[str, Any]]], name: str) -> list[Run]:
    segments = [_Segment()]
    for label, value in records:
        kind = value.get("type")
        if kind == "system":
            if value.get("subtype") == "chat_compression":
                payload = as_dict(value.get("systemPayload"))
                history = payload.get("compressedHistory")
                if not isinstance(history, list):
                    raise InputError(
                        "expected an array", f"{label}.systemPayload.compressedHistory"
                    )
                segments.append(
                    _Segment(
                        [_content(c, f"{label}.systemPayload") for c in history],
                        model=segments[-1].model,
                        window=segments[-1].window,
                    )
                )
            continue
        message = value.get("message")
        if message is None:
            continue
        content = _content(need_dict(value, "message", label), f"{label}.message")
        seg = segments[-1]
        if kind == "assistant":
            seg.model = as_str(value.get("model")) or seg.model
            seg.window = as_int(value.get("contextWindowSize")) or seg.window
            usage = as_dict(value.get("usageMetadata"))
            index = len(seg.contents)
            seg.calls.append(index)
            if as_int(usage.get("promptTokenCount")) is not None:
                seg.usage_at[index] = usage
            stamp = line_time(value)
            if stamp is not None:
                seg.sent_at[index] = stamp.timestamp()
            content["parts"] = [p for p in content["parts"] if not as_dict(p).get("thought")]
            seg.contents.append(content)
        elif seg.contents and seg.contents[-1]["role"] == content["role"]:
            seg.contents[-1]["parts"].extend(content["parts"])  # a turn's results and text
        else:
            seg.contents.append(content)
    segments = [s for s in segments if s.calls]
    runs: list[Run] = []
    for n, seg in enumerate(segments, 1):
        body: dict[str, Any] = {"model": seg.model} if seg.model else {}
        body["contents"] = [dict(c, parts=c["parts"] or [{"text": ""}]) for c in seg.contents]
        runs.append(
            Run(
                name if len(segments) == 1 else f"{name} segment {n}",
                NAME,
                body=body,
                usage_at=seg.usage_at,
                sent_at=seg.sent_at,
                fmt="gemini",
                calls_at=frozenset(seg.calls),
                context_length=seg.window,
                current=name == "main" and n == len(segments),
            )
        )
    return runs


def _content(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError("expected a Content object", where)
    role = as_str(value.get("role")) or "user"
    parts = value.get("parts")
    if not isinstance(parts, list):
        raise InputError("expected an array of parts", f"{where}.parts")
    return {"role": "model" if role == "model" else "user", "parts": list(parts)}
