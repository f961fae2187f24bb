"""pi coding agent sessions (``~/.pi/agent/sessions/--<cwd>--/<time>_<id>.jsonl``).

One JSON object per line (``packages/coding-agent/src/core/session-manager.ts``): a
``session`` header (``id``, ``cwd``, ``version``; version 1 also names the ``provider``
and ``modelId``), then entries. Since version 2 every entry has an ``id`` and the
``parentId`` of the entry it follows: the session is a tree, and the conversation is
the path from the last entry (the leaf) to the root; version 1 entries follow each other
in file order. Entries:

* ``message``: a message of the agent: ``user`` (text and images), ``assistant`` (text,
  ``thinking``, ``toolCall`` parts; ``api``, ``provider``, ``model``, ``usage``
  ``{input, output, cacheRead, cacheWrite}``, ``stopReason``, ``timestamp`` in ms),
  ``toolResult`` (``toolCallId``, ``toolName``, text and images, ``isError``),
  ``bashExecution`` (a command the user ran with ``!``: sent as ``Ran `cmd```` and its
  output, unless ``excludeFromContext``), ``custom`` (``hookMessage`` before version 3);
* ``custom_message`` (sent as a user message), ``branch_summary`` (the summary of a
  branch left, sent as a user message);
* ``compaction``: ``summary``, ``firstKeptEntryId`` (``firstKeptEntryIndex`` in version
  1): from then on the conversation is the summary, the entries from the first kept one
  up to the compaction, and what follows it;
* ``model_change``, ``thinking_level_change``, ``label``, ``session_info``, ``custom``:
  not sent.

What pi sends (``convertToLlm``, ``transformMessages`` in pi-ai): every message of the
path in order; an assistant message whose ``stopReason`` is ``error`` or ``aborted`` is
never sent again; a tool call without a result before the next assistant or user message
gets a ``No result provided`` error result; ``thinking`` of the same model is sent as
it was, of another model as text. A call's prompt is ``input + cacheRead + cacheWrite``
(pi-ai keeps ``input`` without the cached tokens for every provider).

Runs, by branch, compaction segment and model:

* the path to the last entry is ``main``; every other leaf's path is a ``branch N`` run
  of the calls not already on an earlier run's path;
* a path is cut at each compaction: each segment is a run (``main segment 2``) whose
  calls are the assistant messages after its compaction, over the summary and the kept
  messages;
* each model's calls are a run of their own over the same conversation (``main
  gpt-5.1-codex``); the requests are Anthropic Messages bodies for Anthropic APIs and
  Claude models, OpenAI Chat bodies for the others (:mod:`ctxwin.sessions._wire`);
* an assistant message pi never sends again (aborted, failed, or with nothing in it) is
  a call all the same: the calls of a segment's such messages are a run of recorded
  calls (``main aborted``), each the request as it was when that call was made, with its
  usage when it reported a prompt (an aborted call that reported none has no usage);
* a forked session (a header naming its ``parentSession``) starts with the parent's
  entries, copied as they were (written before its header): they are the context of its
  calls, and their calls are the parent's.

pi records no system prompt and no tool definitions: the learned overhead counts them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxwin.errors import InputError
from ctxwin.recorded import Call, Run
from ctxwin.sessions._common import as_dict, as_int, as_str, line_time, need, need_dict
from ctxwin.sessions._wire import Conversation, Part, anthropic_usage, wire_format, write

NAME = "pi"

_TYPES = frozenset(
    (
        "session",
        "message",
        "model_change",
        "thinking_level_change",
        "compaction",
        "branch_summary",
        "custom",
        "custom_message",
        "label",
        "session_info",
    )
)
_ROLES = frozenset(
    (
        "user",
        "assistant",
        "toolResult",
        "bashExecution",
        "custom",
        "hookMessage",
        "branchSummary",
        "compactionSummary",
    )
)
_NOT_SENT = frozenset(("error", "aborted"))
"""Stop reasons of assistant messages pi never sends again."""

COMPACTION_PREFIX = (
    "The conversation history before this point was compacted into the following summary:"
    "\n\n<summary>\n"
)
COMPACTION_SUFFIX = "\n</summary>"
BRANCH_PREFIX = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)
BRANCH_SUFFIX = "</summary>"


def detect(entries: Sequence[Any], jsonl: bool) -> bool:
    """JSON Lines opening with a ``session`` header (``type: session`` and an ``id``), or
    whose first lines are all pi entries, a ``message`` with a pi role among them."""
    if not jsonl or not entries:
        return False
    first = entries[0]
    if isinstance(first, dict) and first.get("type") == "session" and "id" in first:
        return isinstance(first["id"], str) and "cwd" in first
    head = [v for v in entries[:50] if isinstance(v, dict)]
    return (
        bool(head)
        and all(as_str(v.get("type")) in _TYPES and "uuid" not in v for v in head)
        and any(
            v.get("type") == "message" and as_str(as_dict(v.get("message")).get("role")) in _ROLES
            for v in head
        )
    )


@dataclass(slots=True)
class _Entry:
    id: str
    parent: str | None
    label: str
    value: dict[str, Any]
    index: int
    """Its place among the file's records (the header is 0)."""

    @property
    def kind(self) -> str | None:
        return as_str(self.value.get("type"))


def read(entries: Sequence[Any], labels: Sequence[str]) -> list[Run]:
    """The runs of one pi session file (see the module docstring)."""
    header: Mapping[str, Any] = {}
    nodes: list[_Entry] = []
    tree = any(isinstance(v, dict) and "parentId" in v for v in entries)
    previous: str | None = None
    for index, (label, value) in enumerate(zip(labels, entries, strict=True)):
        if not isinstance(value, dict):
            raise InputError("expected an object", label)
        if value.get("type") == "session":
            header = header or value
            continue
        ident = as_str(value.get("id")) if tree else None
        if ident is None:  # version 1: entries follow each other
            ident = f"#{index}"
            parent = previous
        else:
            parent = as_str(value.get("parentId"))
        nodes.append(_Entry(ident, parent, label, value, index))
        previous = ident
    if not nodes:
        return []
    by_id = {n.id: n for n in nodes}
    by_index = {n.index: n for n in nodes}
    has_child = {n.parent for n in nodes if n.parent is not None}
    leaves = [nodes[-1], *(n for n in nodes[:-1] if n.id not in has_child)]
    model = as_str(header.get("modelId"))
    done = _inherited(header, nodes)
    runs: list[Run] = []
    branch = 0
    for k, leaf in enumerate(leaves):
        path = _path(leaf, by_id)
        name = "main" if k == 0 else f"branch {branch + 1}"
        found = _path_runs(path, name, done, by_index, model, current=k == 0)
        if found and k > 0:
            branch += 1
        runs.extend(found)
    return runs


def _inherited(header: Mapping[str, Any], nodes: Sequence[_Entry]) -> set[str]:
    """The entries a forked session copied from its ``parentSession`` (pi's
    ``createBranchedSession`` and ``forkFrom`` write the new header, then the parent's
    entries as they were): those written before the header. Their assistant messages
    are the parent's calls, counted in its file: context here, no call."""
    if not header.get("parentSession"):
        return set()
    start = line_time(header)
    if start is None:
        return set()
    return {n.id for n in nodes if (at := line_time(n.value)) is not None and at < start}


def _path(leaf: _Entry, by_id: Mapping[str, _Entry]) -> list[_Entry]:
    """The entries from the root to ``leaf`` (a parent that is missing ends the walk, as
    a cycle does)."""
    path: list[_Entry] = []
    seen: set[str] = set()
    node: _Entry | None = leaf
    while node is not None and node.id not in seen:
        seen.add(node.id)
        path.append(node)
        node = by_id.get(node.parent) if node.parent is not None else None
    path.reverse()
    return path


def _kept_from(
    comp: _Entry, path: Sequence[_Entry], end: int, by_index: Mapping[int, _Entry]
) -> int:
    """Where the entries a compaction keeps start on ``path`` (before ``end``, the
    compaction); ``end`` when the first kept entry is not on it (nothing is kept)."""
    first = as_str(comp.value.get("firstKeptEntryId"))
    if first is None:  # version 1: the index of the first kept record
        old = as_int(comp.value.get("firstKeptEntryIndex"))
        kept = by_index.get(old) if old is not None else None
        first = kept.id if kept is not None else None
    for i in range(end):
        if path[i].id == first:
            return i
    return end


@dataclass(slots=True)
class _Call:
    """An assistant message of a segment: one call."""

    entry: _Entry
    model: str
    api: str | None
    provider: str | None
    usage: dict[str, Any] | None
    at: float | None
    sent: bool
    """pi sends it again (not aborted, failed or empty)."""


@dataclass(slots=True)
class _Segment:
    name: str
    entries: list[_Entry]
    """What the conversation holds: the kept entries and those after the compaction."""
    summary: str | None
    calls: list[_Call] = field(default_factory=list)
    """The calls of this segment (after its compaction, not on an earlier run's path)."""


def _path_runs(
    path: list[_Entry],
    name: str,
    done: set[str],
    by_index: Mapping[int, _Entry],
    model: str | None,
    *,
    current: bool,
) -> list[Run]:
    cuts = [i for i, e in enumerate(path) if e.kind == "compaction"]
    segments: list[_Segment] = []
    starts = [0, *(c + 1 for c in cuts)]
    ends = [*cuts, len(path)]
    for n, (start, end) in enumerate(zip(starts, ends, strict=True)):
        seg_name = name if not cuts else f"{name} segment {n + 1}"
        if n == 0:
            seg = _Segment(seg_name, path[start:end], None)
        else:
            comp = path[start - 1]
            kept = _kept_from(comp, path, start - 1, by_index)
            seg = _Segment(
                seg_name,
                path[kept : start - 1] + path[start:end],
                str(comp.value.get("summary", "")),
            )
        for e in path[start:end]:
            if e.kind == "model_change":
                model = as_str(e.value.get("modelId")) or model
            elif e.kind == "message":
                msg = need_dict(e.value, "message", e.label)
                if msg.get("role") == "assistant":
                    call = _call(e, msg, model)
                    model = call.model
                    if e.id not in done:
                        done.add(e.id)
                        seg.calls.append(call)
        segments.append(seg)
    runs: list[Run] = []
    for n, seg in enumerate(segments):
        last = current and n == len(segments) - 1
        if seg.calls or last:
            runs.extend(_segment_runs(seg, model if not seg.calls else None, current=last))
    return runs


def _call(entry: _Entry, msg: Mapping[str, Any], model: str | None) -> _Call:
    named = as_str(msg.get("model")) or model or "unknown"
    usage = as_dict(msg.get("usage"))
    counts = {k: as_int(usage.get(k)) or 0 for k in ("input", "output", "cacheRead", "cacheWrite")}
    prompt = counts["input"] + counts["cacheRead"] + counts["cacheWrite"]
    stop = as_str(msg.get("stopReason"))
    reported: dict[str, Any] | None = None
    if prompt or (counts["output"] and stop not in _NOT_SENT):
        reported = anthropic_usage(
            counts["input"],
            counts["cacheRead"],
            counts["cacheWrite"],
            output_tokens=counts["output"],
        )
    stamp = msg.get("timestamp")
    at = stamp / 1000 if isinstance(stamp, int | float) and not isinstance(stamp, bool) else None
    return _Call(
        entry,
        named,
        as_str(msg.get("api")),
        as_str(msg.get("provider")),
        reported,
        at,
        stop not in _NOT_SENT,
    )


def _segment_runs(seg: _Segment, model: str | None, *, current: bool) -> list[Run]:
    """The runs of one segment: one per model, the one that made the last call first;
    ``model`` is the model of a segment that made no call yet (its next request's)."""
    models = list(dict.fromkeys(c.model for c in seg.calls))
    if seg.calls:
        main = next((c.model for c in reversed(seg.calls) if c.sent), seg.calls[-1].model)
        models.remove(main)
        models.insert(0, main)
    elif model is not None:
        models = [model]
    else:
        models = ["unknown"]
    api = {c.model: c.api for c in seg.calls}
    runs: list[Run] = []
    for k, m in enumerate(models):
        fmt = wire_format(m, api.get(m))
        label = seg.name if k == 0 else f"{seg.name} {m}"
        mine = {c.entry.id: c for c in seg.calls if c.model == m}
        conv, at_msg, unsent = _conversation(seg, m, mine)
        messages, where = write(fmt, conv.msgs)
        usage_at: dict[int, Mapping[str, Any]] = {}
        sent_at: dict[int, float] = {}
        calls_at: set[int] = set()
        for index, call in at_msg:
            body_index = where[index]
            if body_index is None:  # nothing in it is sent: a call all the same
                unsent.append((index, call))
                continue
            calls_at.add(body_index)
            if call.usage is not None:
                usage_at[body_index] = call.usage
            if call.at is not None:
                sent_at[body_index] = call.at
        body: dict[str, Any] = {"model": m, "messages": messages}
        if calls_at or not unsent:
            runs.append(
                Run(
                    label,
                    NAME,
                    body=body,
                    usage_at=usage_at,
                    sent_at=sent_at,
                    fmt=fmt,
                    calls_at=frozenset(calls_at),
                    current=current and k == 0,
                )
            )
        if unsent:
            unsent.sort(key=lambda u: u[0])
            recorded = [
                Call(
                    {"model": m, "messages": write(fmt, conv.msgs[:index])[0]},
                    call.usage,
                    call.entry.label,
                    m,
                    call.at,
                )
                for index, call in unsent
            ]
            runs.append(Run(f"{label} aborted", NAME, recorded=recorded, fmt=fmt))
    return runs


def _conversation(
    seg: _Segment, model: str, mine: Mapping[str, _Call]
) -> tuple[Conversation, list[tuple[int, _Call]], list[tuple[int, _Call]]]:
    """The segment's messages as ``model`` is sent them; where each of its calls that pi
    sends again is (index in the messages), and where each one it never sends again
    would have been (the messages before it were its request)."""
    conv = Conversation()
    at_msg: list[tuple[int, _Call]] = []
    unsent: list[tuple[int, _Call]] = []
    if seg.summary is not None:
        conv.user([_text(COMPACTION_PREFIX + seg.summary + COMPACTION_SUFFIX)])
    for e in seg.entries:
        kind = e.kind
        if kind == "custom_message":
            conv.user(_parts(e.value.get("content"), f"{e.label}.content"))
        elif kind == "branch_summary" and e.value.get("summary"):
            conv.user([_text(BRANCH_PREFIX + str(e.value["summary"]) + BRANCH_SUFFIX)])
        elif kind == "message":
            _message(conv, e, model, mine, at_msg, unsent)
    return conv, at_msg, unsent


def _message(
    conv: Conversation,
    e: _Entry,
    model: str,
    mine: Mapping[str, _Call],
    at_msg: list[tuple[int, _Call]],
    unsent: list[tuple[int, _Call]],
) -> None:
    msg = need_dict(e.value, "message", e.label)
    where = f"{e.label}.message"
    role = need(msg, "role", where)
    if role == "user":
        conv.user(_parts(need(msg, "content", where), f"{where}.content"))
    elif role == "assistant":
        stop = as_str(msg.get("stopReason"))
        call = mine.get(e.id)
        if stop in _NOT_SENT:
            conv.flush()  # pi answers pending calls before it skips the message
            if call is not None:
                unsent.append((len(conv.msgs), call))
            return
        same = as_str(msg.get("model")) == model
        parts = _assistant_parts(need(msg, "content", where), f"{where}.content", same)
        index = conv.assistant(parts)
        if call is not None:
            at_msg.append((index, call))
    elif role == "toolResult":
        conv.results(
            [
                {
                    "type": "result",
                    "id": str(need(msg, "toolCallId", where)),
                    "name": as_str(msg.get("toolName")) or "",
                    "content": _parts(msg.get("content"), f"{where}.content"),
                    "is_error": msg.get("isError") is True,
                }
            ]
        )
    elif role == "bashExecution":
        if msg.get("excludeFromContext") is not True:
            conv.user([_text(_bash_text(msg))])
    elif role in ("custom", "hookMessage"):
        conv.user(_parts(msg.get("content"), f"{where}.content"))
    elif role == "branchSummary":
        conv.user([_text(BRANCH_PREFIX + str(msg.get("summary", "")) + BRANCH_SUFFIX)])
    elif role == "compactionSummary":
        conv.user([_text(COMPACTION_PREFIX + str(msg.get("summary", "")) + COMPACTION_SUFFIX)])
    # another role: not one pi sends


def _text(text: str) -> Part:
    return {"type": "text", "text": text}


def _parts(content: Any, where: str) -> list[Part]:
    """Text and image parts of a user message, a result or a custom message."""
    if isinstance(content, str):
        return [_text(content)]
    if content is None:
        return []
    if not isinstance(content, list):
        raise InputError("expected text or an array of parts", where)
    out: list[Part] = []
    for part in content:
        part = as_dict(part)
        if part.get("type") == "text":
            out.append(_text(str(part.get("text", ""))))
        elif part.get("type") == "image":
            out.append(
                {
                    "type": "image",
                    "media_type": as_str(part.get("mimeType")),
                    "data": as_str(part.get("data")) or "",
                }
            )
    return out


def _assistant_parts(content: Any, where: str, same_model: bool) -> list[Part]:
    if not isinstance(content, list):
        raise InputError("expected an array of parts", where)
    out: list[Part] = []
    for k, part in enumerate(content):
        part = as_dict(part)
        kind = part.get("type")
        if kind == "text":
            out.append(_text(str(part.get("text", ""))))
        elif kind == "thinking":
            signature = as_str(part.get("thinkingSignature"))
            if part.get("redacted") is True:
                if same_model:
                    out.append({"type": "thinking", "redacted": True, "signature": signature})
            elif same_model:
                out.append(
                    {
                        "type": "thinking",
                        "thinking": part.get("thinking", ""),
                        "signature": signature,
                    }
                )
            else:  # another model's thinking is sent as text
                out.append(_text(str(part.get("thinking", ""))))
        elif kind == "toolCall":
            at = f"{where}[{k}]"
            out.append(
                {
                    "type": "call",
                    "id": str(need(part, "id", at)),
                    "name": str(need(part, "name", at)),
                    "input": as_dict(part.get("arguments")),
                }
            )
    return out


def _bash_text(msg: Mapping[str, Any]) -> str:
    """A ``!`` command as pi sends it (``bashExecutionToText``)."""
    text = f"Ran `{msg.get('command', '')}`\n"
    output = msg.get("output")
    text += f"```\n{output}\n```" if output else "(no output)"
    code = msg.get("exitCode")
    if msg.get("cancelled") is True:
        text += "\n\n(command cancelled)"
    elif isinstance(code, int) and code != 0:
        text += f"\n\nCommand exited with code {code}"
    if msg.get("truncated") is True and msg.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {msg['fullOutputPath']}]"
    return text
