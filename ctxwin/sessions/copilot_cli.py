"""GitHub Copilot CLI session logs (``~/.copilot/session-state/<session>/events.jsonl``).

One event a line: ``{"type", "data", "id", "parentId", "timestamp"}`` (the session
events of the Copilot SDK's ``session-events.schema.json``; events marked ``ephemeral``
there, such as ``assistant.usage``, are never written to the file). Read by type:

* ``system.message``: the system prompt (``content``), logged again before each user
  turn; the requests carry the last one;
* ``user.message``: ``transformedContent`` is what the model is sent (the typed
  ``content`` wrapped with the date and reminders), else ``content``;
* ``assistant.message``: one model response: ``content``, ``toolRequests``
  (``toolCallId``, ``name``, ``arguments``), ``reasoningText`` with its
  ``reasoningOpaque`` signature (Claude), ``model``, ``outputTokens``; messages that
  share an ``apiCallId`` are chunks of one response, so one call;
* ``tool.execution_complete``: a tool's result: ``result.content`` (what the model is
  sent) or, when it failed, ``error.message``; a result that answers no call (a tool the
  user ran) is sent as text;
* ``assistant.turn_start``: the call is sent (its time);
* ``session.model_change``: the model of the calls that follow;
* ``session.compaction_complete`` (``success``): the conversation restarts from
  ``summaryContent``, with the last ``preCompactionMessagesLength − messagesRemoved``
  messages kept; ``session.truncation``: the oldest
  ``messagesRemovedDuringTruncation`` messages are dropped; ``session.context_cleared``:
  the conversation restarts empty. Each starts a new segment (a run);
* events with an ``agentId`` (or, in older versions, ``data.parentToolCallId``) are a
  subagent's: a run of their own (``agent-<id>``);
* ``session.shutdown``: Copilot's own count of the context at the end
  (``currentTokens`` = ``systemTokens`` + ``conversationTokens`` +
  ``toolDefinitionsTokens``), kept on the run as a warning to check the estimate by;
* hooks, ``session.info``, ``abort``, ``tool.execution_start`` and the others: not
  sent.

Input usage per call is not logged (``assistant.usage`` is ephemeral): the calls have
no usage, so nothing is learned, and the tool definitions (never logged) are only in
``session.shutdown``'s count. Requests are Anthropic Messages bodies for responses with
an Anthropic id (``msg_…``) or a Claude model, OpenAI Chat bodies for the others, with
the system prompt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxwin.errors import InputError
from ctxwin.recorded import Run
from ctxwin.sessions._common import as_dict, as_int, as_str, line_time, need, need_dict
from ctxwin.sessions._wire import ANTHROPIC, CHAT, Conversation, Part, write

NAME = "copilot-cli"

_MESSAGES = frozenset(("system.message", "user.message", "assistant.message"))


def _is_event(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("type"), str)
        and isinstance(value.get("data"), dict)
        and "id" in value
        and "parentId" in value
    )


def detect(entries: Sequence[Any], jsonl: bool) -> bool:
    """JSON Lines of Copilot session events (``type``, ``data``, ``id``, ``parentId``),
    a ``session.start`` or a message event among the first ones."""
    if not jsonl:
        return False
    head = [v for v in entries[:50] if isinstance(v, dict)]
    return (
        bool(head)
        and all(_is_event(v) for v in head)
        and any(v["type"] == "session.start" or v["type"] in _MESSAGES for v in head)
    )


@dataclass(slots=True)
class _Item:
    """One message of the conversation as Copilot counts them (each result is one)."""

    role: str
    """``user``, ``assistant`` or ``result``."""
    parts: list[Part]
    key: str | None = None
    """An assistant message's ``apiCallId`` (chunks of one response share it)."""


@dataclass(slots=True)
class _Call:
    item: int
    model: str
    api_id: str | None
    at: float | None


@dataclass(slots=True)
class _Segment:
    items: list[_Item]
    system: str | None
    calls: list[_Call] = field(default_factory=list)


@dataclass(slots=True)
class _Agent:
    """What one agent (the main one, or a subagent) has said so far."""

    model: str | None
    segments: list[_Segment] = field(default_factory=list)
    items: list[_Item] = field(default_factory=list)
    calls: list[_Call] = field(default_factory=list)
    system: str | None = None
    systems: set[str] = field(default_factory=set)
    made: set[str] = field(default_factory=set)
    """The tool calls made (ids)."""
    sent_at: float | None = None

    def cut(self, kept: list[_Item]) -> None:
        """End the segment; the next one starts from ``kept``."""
        if self.calls:
            self.segments.append(_Segment(list(self.items), self.system, self.calls))
        self.items = kept
        self.calls = []


def read(entries: Sequence[Any], labels: Sequence[str]) -> list[Run]:
    """The runs of one ``events.jsonl`` (see the module docstring)."""
    agents: dict[str | None, _Agent] = {}
    shutdown: Mapping[str, Any] | None = None
    model: str | None = None
    for label, value in zip(labels, entries, strict=True):
        if not isinstance(value, dict):
            raise InputError("expected an object", label)
        kind = as_str(value.get("type"))
        data = need_dict(value, "data", label)
        if kind == "session.start":
            model = as_str(data.get("selectedModel")) or model
            continue
        key = as_str(value.get("agentId")) or as_str(data.get("parentToolCallId"))
        agent = agents.get(key)
        if agent is None:
            agent = agents[key] = _Agent(model)
        if kind == "session.model_change":
            model = as_str(data.get("newModel")) or model
            for a in agents.values():
                a.model = model
        elif kind == "session.shutdown":
            shutdown = data
        else:
            _event(agent, kind, data, value, f"{label}.data")
    runs: list[Run] = []
    for key, agent in agents.items():
        agent.cut([])
        found = _agent_runs(agent, "main" if key is None else f"agent-{key}")
        for run in found:
            if key is not None:
                run.current = False  # a subagent's conversation is not the session's
            elif run.current and shutdown is not None and (note := _shutdown_note(shutdown)):
                run.warnings.append(note)
        runs.extend(found)
    return runs


def _event(
    agent: _Agent, kind: str | None, data: Mapping[str, Any], value: Mapping[str, Any], where: str
) -> None:
    if kind == "system.message":
        agent.system = str(data.get("content", ""))
        agent.systems.add(agent.system)
    elif kind == "user.message":
        text = as_str(data.get("transformedContent"))
        if text is None:
            text = str(need(data, "content", where))
        agent.items.append(_Item("user", [{"type": "text", "text": text}]))
    elif kind == "assistant.turn_start":
        stamp = line_time(value)
        agent.sent_at = stamp.timestamp() if stamp is not None else None
    elif kind == "assistant.message":
        _assistant(agent, data, where)
    elif kind == "tool.execution_complete":
        call = str(need(data, "toolCallId", where))
        result = as_dict(data.get("result"))
        content = as_str(result.get("content"))
        error = as_dict(data.get("error"))
        failed = data.get("success") is False
        text = content if content is not None else as_str(error.get("message")) or ""
        if call in agent.made:
            part: Part = {"type": "result", "id": call, "name": "", "content": text}
            if failed:
                part["is_error"] = True
            agent.items.append(_Item("result", [part]))
        else:  # a tool the user ran: what it returned is sent as text
            agent.items.append(_Item("user", [{"type": "text", "text": text}]))
    elif kind == "session.compaction_complete" and data.get("success") is True:
        before = as_int(data.get("preCompactionMessagesLength"))
        removed = as_int(data.get("messagesRemoved"))
        keep = before - removed if before is not None and removed is not None else 0
        summary = _Item("user", [{"type": "text", "text": str(data.get("summaryContent", ""))}])
        agent.cut([summary, *_tail(agent.items, keep)])
    elif kind == "session.truncation":
        removed = as_int(data.get("messagesRemovedDuringTruncation")) or 0
        agent.cut(_tail(agent.items, len(agent.items) - removed, after="user"))
    elif kind == "session.context_cleared":
        agent.cut([])
    # hooks, session.info, abort, tool.execution_start, ...: not sent


def _tail(items: list[_Item], keep: int, after: str = "result") -> list[_Item]:
    """The last ``keep`` items, less the results left without their call at the start
    (``after="result"``: they follow the summary, a user message), or everything before
    the first user message among them (``after="user"``: the conversation sent opens
    with the user)."""
    if keep <= 0:
        return []
    tail = items[-keep:] if keep < len(items) else list(items)
    while tail and (tail[0].role == "result" or (after == "user" and tail[0].role != "user")):
        tail.pop(0)
    return tail


def _assistant(agent: _Agent, data: Mapping[str, Any], where: str) -> None:
    parts: list[Part] = []
    thinking = as_str(data.get("reasoningText"))
    if thinking:
        parts.append(
            {
                "type": "thinking",
                "thinking": thinking,
                "signature": as_str(data.get("reasoningOpaque")),
            }
        )
    text = as_str(data.get("content"))
    if text:
        parts.append({"type": "text", "text": text})
    requests = data.get("toolRequests")
    for k, request in enumerate(requests if isinstance(requests, list) else []):
        at = f"{where}.toolRequests[{k}]"
        request = as_dict(request)
        call = str(need(request, "toolCallId", at))
        agent.made.add(call)
        arguments = request.get("arguments")
        parts.append(
            {
                "type": "call",
                "id": call,
                "name": str(need(request, "name", at)),
                "input": arguments if isinstance(arguments, dict) else {"input": arguments},
            }
        )
    key = as_str(data.get("apiCallId"))
    last = agent.items[-1] if agent.items else None
    if key is not None and last is not None and last.role == "assistant" and last.key == key:
        last.parts.extend(parts)  # another chunk of the same response
        return
    agent.items.append(_Item("assistant", parts, key))
    named = as_str(data.get("model")) or agent.model or "unknown"
    agent.calls.append(_Call(len(agent.items) - 1, named, key, agent.sent_at))


def _fmt(call: _Call) -> str:
    if call.api_id is not None and call.api_id.startswith("msg_"):
        return ANTHROPIC
    if call.api_id is not None and call.api_id.startswith(("chatcmpl", "resp_")):
        return CHAT
    return ANTHROPIC if "claude" in call.model.lower() else CHAT


def _agent_runs(agent: _Agent, name: str) -> list[Run]:
    """One agent's runs, segment by segment; the first run of the last segment (its last
    call's model) is the one the session goes on with."""
    runs: list[Run] = []
    segments = agent.segments
    for n, seg in enumerate(segments, 1):
        seg_name = name if len(segments) == 1 else f"{name} segment {n}"
        found = _segment_runs(seg, seg_name, agent.systems)
        if n == len(segments) and found:
            found[0].current = True
        runs.extend(found)
    return runs


def _segment_runs(seg: _Segment, name: str, systems: set[str]) -> list[Run]:
    """One run per model, the model of the last call first."""
    models = list(dict.fromkeys(c.model for c in reversed(seg.calls)))
    conv, at = Conversation.of(seg.items)  # the same messages whatever the model
    runs: list[Run] = []
    for k, model in enumerate(models):
        mine = [c for c in seg.calls if c.model == model]
        fmt = _fmt(mine[-1])
        messages, where = write(fmt, conv.msgs)
        body: dict[str, Any] = {"model": model}
        if seg.system is not None:
            if fmt == ANTHROPIC:
                body["system"] = seg.system
            else:
                messages.insert(0, {"role": "system", "content": seg.system})
        body["messages"] = messages
        shift = 1 if seg.system is not None and fmt == CHAT else 0
        calls_at: set[int] = set()
        sent_at: dict[int, float] = {}
        for call in mine:
            index = where[at[call.item]]
            if index is None:
                continue
            calls_at.add(index + shift)
            if call.at is not None:
                sent_at[index + shift] = call.at
        warnings = []
        if len(systems) > 1:
            warnings.append(
                f"the system prompt changed during the session ({len(systems)} versions): "
                "each segment's requests carry its last one"
            )
        runs.append(
            Run(
                name if k == 0 else f"{name} {model}",
                NAME,
                body=body,
                sent_at=sent_at,
                fmt=fmt,
                calls_at=frozenset(calls_at),
                warnings=warnings,
            )
        )
    return runs


def _shutdown_note(data: Mapping[str, Any]) -> str | None:
    """Copilot's count of the context at shutdown, to check the estimate by."""
    current = as_int(data.get("currentTokens"))
    if current is None:
        return None
    parts = [
        f"{label} {n:,}"
        for label, key in (
            ("system", "systemTokens"),
            ("conversation", "conversationTokens"),
            ("tool definitions", "toolDefinitionsTokens"),
        )
        if (n := as_int(data.get(key))) is not None
    ]
    detail = f" ({', '.join(parts)})" if parts else ""
    return (
        f"Copilot counted {current:,} tokens in the context at shutdown{detail}; the tool "
        "definitions are not logged, so they are not in this estimate"
    )
