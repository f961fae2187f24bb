"""Claude Code session files (``~/.claude/projects/<project>/<session>.jsonl``).

One JSON object per line. ``user`` and ``assistant`` lines carry an Anthropic
message in ``message``; every line has a ``uuid`` and the ``parentUuid`` of
the line before it in the conversation. Read by field, tolerating unknown ones:

* the **main chain** (``isSidechain`` false) is one run: the lines on the
  ``parentUuid`` path to the last line, plus what that path skips: the other
  lines of a response on it (same ``message.id``) and the tool results that
  answer a kept line or a call a kept line made (parallel tool calls fork the
  path); a ``uuid`` written twice is read once;
* **sidechains** (subagents: ``isSidechain`` true, inline or in
  ``subagents/agent-*.jsonl``) are runs of their own, one per ``agentId``;
* **one API response is one assistant message and one call.** Claude Code
  writes a response as one line per content block (thinking, text, each
  ``tool_use``), all with its ``message.id``, and runs each tool as its block
  arrives: a tool's result line is written when the tool finishes, between the
  lines of the response still streaming, in the order the tools finish. So the
  lines of a ``message.id`` are joined in their logged order wherever they sit
  (a block logged twice, same tool-use id or thinking signature, counts once;
  a line with another ``requestId``, or without one another prompt count, is
  another response: a proxy that gives every response one id); its usage is
  that of its last line. The message after it holds every result of its calls,
  in the order of the calls, then what was logged with those results (a
  reminder in the same line) and the user lines that follow; a result logged
  twice counts once. A user's prompt ends the responses before it;
* ``progress``, ``system``, ``summary``, ``file-history-snapshot``,
  ``queue-operation`` and any other line type are skipped; a ``system`` line
  of subtype ``compact_boundary`` starts a new segment: after ``/compact`` the
  conversation restarts from its summary, so each segment is a run;
* responses of another model than the chain's main one (a small model for
  side tasks) are their own run over the same messages;
* each response's ``usage`` reports its prompt: ``input_tokens +
  cache_creation_input_tokens + cache_read_input_tokens``; its call was sent at the
  ``timestamp`` of its first line, as near as the log says (the request went out a few
  seconds before its first block was written).

The requests are Anthropic Messages bodies without the system prompt and tool
definitions Claude Code sends but never records (see the calibration overhead).
Reading is a pass over the lines to find the path and one to join them: linear
in the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxwin.errors import InputError
from ctxwin.recorded import Run
from ctxwin.sessions._common import as_dict, as_str, line_time, need, need_dict

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
_SERVICES = (
    ("msg_bdrk_", "Amazon Bedrock"),
    ("msg_vrtx_", "Google Vertex AI"),
    ("msg_", "Anthropic"),
)
"""How an Anthropic response id names the service that answered (first match)."""

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


def _block_ids(msg: Mapping[str, Any], kind: str, key: str) -> list[str]:
    """The ``key`` of every ``kind`` block of a message's content."""
    content = msg.get("content")
    if not isinstance(content, list):
        return []
    return [
        call
        for b in content
        if isinstance(b, dict)
        and b.get("type") == kind
        and (call := as_str(b.get(key))) is not None
    ]


def _result_ids(msg: Mapping[str, Any]) -> list[str]:
    """The ``tool_use_id`` of every ``tool_result`` block of a user message."""
    return _block_ids(msg, "tool_result", "tool_use_id")


def _call_ids(msg: Mapping[str, Any]) -> list[str]:
    """The ``id`` of every ``tool_use`` block of an assistant message."""
    return _block_ids(msg, "tool_use", "id")


def _select(
    lines: list[tuple[str, dict[str, Any]]], parents: dict[str, str | None]
) -> list[tuple[str, dict[str, Any]]]:
    """The lines of the conversation that led to the last line, in file order.

    Besides the path, the lines of a response on it (same ``message.id``) and the
    tool results that answer a kept line or a call it made; a ``uuid`` written
    twice is kept once. Lines without ``uuid`` (other versions) are all kept, in
    file order.
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
    calls: set[str] = set()
    out = []
    for label, value in lines:
        uuid = as_str(value.get("uuid")) or ""
        if uuid in kept:
            continue  # the same line written twice
        msg = as_dict(value.get("message"))
        keep = uuid in path or _is_boundary(value)
        if not keep and value.get("type") == "assistant":
            keep = as_str(msg.get("id")) in ids  # another line of a response on the path
        if not keep and value.get("type") == "user":
            # a parallel tool result: it names the line it answers, or answers a kept call
            answers = _result_ids(msg)
            keep = bool(answers) and (parents.get(uuid) in kept or any(c in calls for c in answers))
        if keep:
            kept.add(uuid)
            if value.get("type") == "assistant":
                calls.update(_call_ids(msg))
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
        summary = _compact_summary(segment) if n > 1 else None
        for run in seg_runs:
            run.summary = summary
        if n == len(segments) and seg_runs and name == "main":
            seg_runs[0].current = True  # the main model's run of the last segment
        runs.extend(seg_runs)
    return runs


def _compact_summary(segment: list[tuple[str, dict[str, Any]]]) -> str | None:
    """The text of the summary a segment after a ``compact_boundary`` starts from: its
    first line marked ``isCompactSummary`` (``None`` when there is none)."""
    for _, value in segment:
        if value.get("isCompactSummary") is not True:
            continue
        msg = value.get("message")
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            texts = [b.get("text") for b in content if isinstance(b, dict)]
            return "\n".join(t for t in texts if isinstance(t, str)) or None
        return None
    return None


@dataclass(slots=True)
class _Response:
    """One API response: the lines sharing its ``message.id``, and what answers it."""

    message: dict[str, Any]
    mid: str | None
    request: str | None
    prompt: int | None
    model: str | None
    at: float | None = None
    """When it was sent, as near as the log says: the ``timestamp`` of its first line."""
    usage: Mapping[str, Any] | None = None
    calls: list[str] = field(default_factory=list)
    """Its ``tool_use`` ids, in the order it made them."""
    seen: set[tuple[str, str, str]] = field(default_factory=set)
    """The blocks with an identity (a tool use's id, a thinking block's signature)."""
    results: dict[str, Any] = field(default_factory=dict)
    """The first ``tool_result`` of each of its calls."""
    after: list[Any] = field(default_factory=list)
    """Other blocks logged in the lines that hold its results (a reminder, a note)."""

    def joins(self, request: str | None, prompt: int | None) -> bool:
        """Whether a line of the same ``message.id`` is a piece of this response: its
        ``requestId`` is the same, or (without one) its prompt count is (a proxy that
        gives every response one id gives them different prompts)."""
        if request is not None and self.request is not None:
            return request == self.request
        return prompt is None or self.prompt is None or prompt == self.prompt

    def add(self, blocks: list[Any]) -> list[str]:
        """Append a line's blocks (not those it already holds); the calls they make."""
        content = self.message["content"]
        made: list[str] = []
        for block in blocks:
            key = _identity(block)
            if key is not None:
                if key in self.seen:
                    continue  # the same block logged again
                self.seen.add(key)
                if key[0] == "tool_use":
                    made.append(key[1])
            content.append(block)
        self.calls.extend(made)
        return made

    def answer(self) -> list[Any]:
        """The user message after it: its results in the order of its calls, the
        results it made no call for, then the other blocks logged with them."""
        order = {call: n for n, call in enumerate(self.calls)}
        ordered = sorted(self.results.items(), key=lambda kv: order.get(kv[0], len(order)))
        return [block for _, block in ordered] + self.after


def _identity(block: Any) -> tuple[str, str, str] | None:
    """What makes a block the same block when it is logged twice, if anything does."""
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    if not isinstance(kind, str):
        return None
    if kind == "thinking":
        sig = as_str(block.get("signature"))
        return (kind, sig, as_str(block.get("thinking")) or "") if sig else None
    if kind == "redacted_thinking":
        data = as_str(block.get("data"))
        return (kind, data, "") if data else None
    call = as_str(block.get("id"))
    return (kind, call, "") if call is not None else None


def _prompt(usage: Mapping[str, Any] | None) -> int | None:
    if usage is None:
        return None
    total = 0
    for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            total += value
    return total


def _segment_runs(lines: list[tuple[str, dict[str, Any]]], name: str) -> list[Run]:
    # file order interleaves a response's pieces with the results of the calls already
    # made (each tool's result is logged when it finishes): gather each response's
    # pieces and results, then write response, results, response, ...
    parts: list[_Response | list[Any]] = []
    by_id: dict[str, _Response] = {}  # responses by message.id
    by_call: dict[str, _Response] = {}  # responses by the tool_use ids they made
    for label, value in lines:
        msg = need_dict(value, "message", label)
        role = as_str(msg.get("role")) or as_str(value.get("type")) or ""
        content = _blocks(need(msg, "content", f"{label}.message"), f"{label}.message.content")
        if role == "assistant":
            mid = as_str(msg.get("id"))
            request = as_str(value.get("requestId"))
            usage = msg.get("usage") if isinstance(msg.get("usage"), Mapping) else None
            prompt = _prompt(usage)
            response = by_id.get(mid) if mid is not None else None
            if response is None or not response.joins(request, prompt):
                model = as_str(msg.get("model"))
                stamp = line_time(value)
                response = _Response(
                    {"role": "assistant", "content": []},
                    mid,
                    request,
                    prompt,
                    model,
                    None if stamp is None else stamp.timestamp(),
                )
                parts.append(response)
                if mid is not None:
                    by_id[mid] = response
            for call in response.add(content):
                by_call.setdefault(call, response)
            response.request = response.request or request
            if response.prompt is None:
                response.prompt = prompt
            if usage is not None:
                response.usage = usage  # one call: the last line carries the final count
        elif role == "user":
            owner: _Response | None = None
            rest: list[Any] = []
            for block in content:
                answers = (
                    as_str(block.get("tool_use_id"))
                    if isinstance(block, dict) and block.get("type") == "tool_result"
                    else None
                )
                answered = by_call.get(answers) if answers is not None else None
                if answers is None or answered is None:
                    rest.append(block)
                    continue
                owner = owner or answered
                answered.results.setdefault(answers, block)  # a result logged twice counts once
            if owner is not None:
                owner.after.extend(rest)
                continue
            if value.get("isMeta") is not True and not _result_ids(msg):
                by_id.clear()  # a prompt: the responses before it are complete
            if parts and isinstance(parts[-1], list):
                parts[-1].extend(rest)
            else:
                parts.append(rest)
        else:
            raise InputError(
                f"unknown role {role!r} (expected user or assistant)", f"{label}.message.role"
            )
    messages: list[dict[str, Any]] = []
    usage_at: dict[int, Mapping[str, Any]] = {}
    model_at: dict[int, str] = {}
    sent_at: dict[int, float] = {}
    for part in parts:
        if isinstance(part, _Response):
            messages.append(part.message)
            if part.model:
                model_at[len(messages) - 1] = part.model
            if part.usage is not None:
                usage_at[len(messages) - 1] = part.usage
            if part.at is not None:
                sent_at[len(messages) - 1] = part.at
            user = part.answer()
        else:
            user = part
        if not user:
            continue
        if messages and messages[-1]["role"] == "user":
            messages[-1]["content"].extend(user)
        else:
            messages.append({"role": "user", "content": user})
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
    served = _served_by(p.mid for p in parts if isinstance(p, _Response))
    if len(models) <= 1:
        return [
            Run(
                name,
                NAME,
                body=body,
                usage_at=usage_at,
                sent_at=sent_at,
                served_by=served,
                fmt="anthropic",
            )
        ]
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
                sent_at={i: t for i, t in sent_at.items() if i in mine},
                served_by=served,
                fmt="anthropic",
                calls_at=mine,
            )
        )
    return runs


def _served_by(ids: Iterable[str | None]) -> str | None:
    """The services the response ids name (:data:`_SERVICES`), in the order first named;
    ``None`` when none does."""
    names: dict[str, None] = {}
    for mid in ids:
        if mid is not None:
            name = next((n for prefix, n in _SERVICES if mid.startswith(prefix)), None)
            if name is not None:
                names[name] = None
    return ", ".join(names) or None
