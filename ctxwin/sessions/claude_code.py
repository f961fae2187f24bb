"""Claude Code session files (``~/.claude/projects/<project>/<session>.jsonl``).

One JSON object per line. ``user`` and ``assistant`` lines carry an Anthropic
message in ``message``; every line has a ``uuid`` and the ``parentUuid`` of
the line before it in the conversation. Read by field, tolerating unknown ones:

* the **main chain** (``isSidechain`` false) is one run: the lines on the
  ``parentUuid`` path to the last line, plus the siblings that path skips
  (tool results and tool-use lines of one response each point at the line
  they answer, so parallel tool calls fork the path);
* **sidechains** (subagents: ``isSidechain`` true, inline or in
  ``subagents/agent-*.jsonl``) are runs of their own, one per ``agentId``;
* assistant lines sharing ``message.id`` are one API response (one call);
  consecutive user lines are one user message;
* ``progress``, ``system``, ``summary``, ``file-history-snapshot``,
  ``queue-operation`` and any other line type are skipped; a ``system`` line
  of subtype ``compact_boundary`` starts a new segment: after ``/compact`` the
  conversation restarts from its summary, so each segment is a run;
* responses of another model than the chain's main one (a small model for
  side tasks) are their own run over the same messages;
* each response's ``usage`` reports its prompt: ``input_tokens +
  cache_creation_input_tokens + cache_read_input_tokens``.

The requests are Anthropic Messages bodies without the system prompt and tool
definitions Claude Code sends but never records (see the calibration overhead).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxwin.errors import InputError
from ctxwin.recorded import Run
from ctxwin.sessions._common import as_dict, as_str, need, need_dict

NAME = "claude-code"

_MESSAGE_TYPES = ("user", "assistant")
_KNOWN_TYPES = frozenset(
    (
        "user",
        "assistant",
        "system",
        "summary",
        "progress",
        "file-history-snapshot",
        "queue-operation",
    )
)
_SYNTHETIC = "<synthetic>"
"""The model Claude Code names on messages it wrote itself (API errors): no call was made."""


def detect(entries: Sequence[Any], jsonl: bool) -> bool:
    """JSONL whose lines are typed Claude Code records with ``uuid``/``sessionId``."""
    if not jsonl:
        return False
    typed = 0
    for value in entries[:50]:
        if not isinstance(value, dict):
            continue
        t = as_str(value.get("type"))
        if t in _MESSAGE_TYPES and isinstance(value.get("message"), dict) and "uuid" in value:
            return True
        if t in _KNOWN_TYPES and ("sessionId" in value or "leafUuid" in value):
            typed += 1
    return typed > 0 and typed == sum(1 for v in entries[:50] if isinstance(v, dict))


_BULKY = frozenset(("file-history-snapshot", "progress"))


def slim(value: dict[str, Any]) -> dict[str, Any]:
    """A line without what the reader never uses (see :func:`ctxwin.sessions.slim`)."""
    if "toolUseResult" in value and "message" in value:
        del value["toolUseResult"]
    t = as_str(value.get("type"))
    if t in _BULKY:
        return {k: value[k] for k in ("type", "uuid", "parentUuid", "sessionId") if k in value}
    return value


@dataclass(slots=True)
class _Chain:
    lines: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def read(entries: Sequence[Any], labels: Sequence[str]) -> list[Run]:
    """The runs of one session file's lines (``labels[i]`` names line ``i``)."""
    main = _Chain()
    sides: dict[str, _Chain] = {}
    parents: dict[str, str | None] = {}
    for label, value in zip(labels, entries, strict=True):
        if not isinstance(value, dict):
            continue
        uuid = as_str(value.get("uuid"))
        if uuid is not None:
            parent = as_str(value.get("parentUuid"))
            if parent is None and _is_boundary(value):
                parent = as_str(value.get("logicalParentUuid"))
            parents[uuid] = parent
        t = value.get("type")
        if t not in _MESSAGE_TYPES and not _is_boundary(value):
            continue
        if t in _MESSAGE_TYPES:
            msg = need_dict(value, "message", label)
            if as_dict(msg).get("model") == _SYNTHETIC:
                continue
            value.pop("toolUseResult", None)  # a copy of the tool output: not sent, not kept
        if value.get("isSidechain") is True:
            key = as_str(value.get("agentId")) or as_str(value.get("sessionId")) or "sidechain"
            sides.setdefault(key, _Chain()).lines.append((label, value))
        else:
            main.lines.append((label, value))
    runs: list[Run] = []
    if main.lines:
        runs.extend(_chain_runs(main, "main", parents))

    for key, chain in sides.items():
        runs.extend(_chain_runs(chain, f"agent-{key}", parents))
    return runs


def _is_boundary(value: Mapping[str, Any]) -> bool:
    return value.get("type") == "system" and value.get("subtype") == "compact_boundary"


def _on_path(lines: list[tuple[str, dict[str, Any]]], parents: dict[str, str | None]) -> set[str]:
    """The uuids on the ``parentUuid`` path from the chain's last message line."""
    leaf = next(
        (as_str(v.get("uuid")) for _, v in reversed(lines) if v.get("type") in _MESSAGE_TYPES),
        None,
    )
    path: set[str] = set()
    node = leaf
    while node is not None and node not in path:
        path.add(node)
        node = parents.get(node)
    return path


def _is_tool_result(msg: Mapping[str, Any]) -> bool:
    content = msg.get("content")
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def _select(
    lines: list[tuple[str, dict[str, Any]]], parents: dict[str, str | None]
) -> list[tuple[str, dict[str, Any]]]:
    """The lines of the conversation that led to the last line, in file order.

    Lines without ``uuid`` (other versions) are all kept, in file order.
    """
    if any(as_str(v.get("uuid")) is None for _, v in lines):
        return lines
    path = _on_path(lines, parents)
    ids = {
        mid
        for _, v in lines
        if v.get("type") == "assistant"
        and (as_str(v.get("uuid")) or "") in path
        and (mid := as_str(as_dict(v.get("message")).get("id"))) is not None
    }
    kept: set[str] = set()
    out = []
    for label, value in lines:
        uuid = as_str(value.get("uuid")) or ""
        msg = as_dict(value.get("message"))
        keep = uuid in path or _is_boundary(value)
        if not keep and value.get("type") == "assistant":
            keep = as_str(msg.get("id")) in ids  # another line of a response on the path
        if not keep and value.get("type") == "user" and _is_tool_result(msg):
            keep = parents.get(uuid) in kept  # a parallel tool result answering a kept line
        if keep:
            kept.add(uuid)
            out.append((label, value))
    return out


def _blocks(content: Any, where: str) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return list(content)
    raise InputError("expected a string or an array of content blocks", where)


def _chain_runs(chain: _Chain, name: str, parents: dict[str, str | None]) -> list[Run]:
    """One run per compaction segment and per model of one chain (main model first)."""
    lines = _select(chain.lines, parents)
    segments: list[list[tuple[str, dict[str, Any]]]] = [[]]
    for label, value in lines:
        if _is_boundary(value):
            segments.append([])
        else:
            segments[-1].append((label, value))
    segments = [s for s in segments if s]
    runs: list[Run] = []
    for n, segment in enumerate(segments, 1):
        seg_name = name if len(segments) == 1 else f"{name} segment {n}"
        seg_runs = _segment_runs(segment, seg_name)
        if n == len(segments) and seg_runs and name == "main":
            seg_runs[0].current = True  # the main model's run of the last segment
        runs.extend(seg_runs)
    return runs


def _segment_runs(lines: list[tuple[str, dict[str, Any]]], name: str) -> list[Run]:
    messages: list[dict[str, Any]] = []
    usage_at: dict[int, Mapping[str, Any]] = {}
    model_at: dict[int, str] = {}
    last_id: str | None = None
    for label, value in lines:
        msg = need_dict(value, "message", label)
        role = as_str(msg.get("role")) or as_str(value.get("type")) or ""
        content = _blocks(need(msg, "content", f"{label}.message"), f"{label}.message.content")
        if role == "assistant":
            mid = as_str(msg.get("id"))
            if (
                messages
                and messages[-1]["role"] == "assistant"
                and mid is not None
                and mid == last_id
            ):
                messages[-1]["content"].extend(content)
            else:
                messages.append({"role": "assistant", "content": content})
                model = as_str(msg.get("model"))
                if model:
                    model_at[len(messages) - 1] = model
            usage = msg.get("usage")
            if isinstance(usage, Mapping):
                usage_at[len(messages) - 1] = usage
            last_id = mid
        elif role == "user":
            if messages and messages[-1]["role"] == "user":
                messages[-1]["content"].extend(content)
            else:
                messages.append({"role": "user", "content": content})
            last_id = None
        else:
            raise InputError(
                f"unknown role {role!r} (expected user or assistant)", f"{label}.message.role"
            )
    if not messages:
        return []
    counts: dict[str, int] = {}
    for m in model_at.values():
        counts[m] = counts.get(m, 0) + 1
    main_model = max(counts, key=lambda m: counts[m]) if counts else None
    body: dict[str, Any] = {}
    if main_model:
        body["model"] = main_model
    body["messages"] = messages
    calls = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    models = sorted(counts, key=lambda m: -counts[m])
    if len(models) <= 1:
        return [Run(name, NAME, body=body, usage_at=usage_at, fmt="anthropic")]
    runs = []
    for model in models:
        mine = frozenset(i for i in calls if model_at.get(i, main_model) == model)
        # the main model's run holds the whole segment (its next request); a side
        # model's ends at its last call
        end = len(messages) if model == main_model else max(mine) + 1
        sub: dict[str, Any] = {"model": model, "messages": messages[:end]}
        label = name if model == main_model else f"{name} {model}"
        runs.append(
            Run(
                label,
                NAME,
                body=sub,
                usage_at={i: u for i, u in usage_at.items() if i in mine},
                fmt="anthropic",
                calls_at=mine,
            )
        )
    return runs
