"""Gemini CLI histories: the ``Content[]`` trajectory and ChatRecording session files.

* ``Content[]`` (``/chat save``, ``trajectory.json``): a JSON array of
  ``{"role": "user" | "model", "parts": [...]}``, exactly the ``contents`` of
  the requests; no usage is recorded.
* ChatRecording (``~/.gemini/tmp/<project>/chats/session-*.json``):
  ``{"sessionId", "messages": [...]}`` where a ``user`` message holds
  ``content`` (text or parts) and a ``gemini`` message holds ``content``,
  ``toolCalls`` (each with ``name``, ``args`` and the ``result`` parts sent
  back), ``thoughts`` (not sent back) and ``tokens`` (``input`` is the prompt,
  ``cached`` tokens included; ``tool`` the tool-use prompt; ``output`` and
  ``thoughts`` the output billed). ``info``, ``error``
  and ``warning`` messages are the CLI's own and are skipped.
* ChatRecording JSONL (``~/.gemini/tmp/<project>/chats/session-*.jsonl``, a
  subagent's as ``chats/<parent session>/<id>.jsonl``), which newer versions
  write instead, appending one record a line:

  - the header ``{"sessionId", "projectHash", "startTime", "lastUpdated",
    "kind", "directories"}`` (a resumed ``.json`` session is migrated by
    writing a header and then all its messages);
  - a message record (the same ``{"id", "type", "content", ...}`` as above);
    a record with an ``id`` already seen re-writes that message in its place
    (the CLI writes a ``gemini`` message again when its ``tokens`` or tool
    ``result`` parts arrive);
  - ``{"$set": {...}}``: an update of the conversation's fields
    (``lastUpdated``, ``summary``, ``directories``, ``sessionId``, ...); a
    ``$set`` of ``messages`` replaces the whole list (history rewritten, e.g.
    tool outputs masked), later records apply to it;
  - ``{"$rewindTo": id}``: the message ``id`` and every one after it are
    removed (all of them when ``id`` is unknown).

  Records apply in file order, so each message reads as last written; records
  of other shapes are skipped.

All read as a Gemini ``generateContent`` body.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxwin.codec import dumps
from ctxwin.errors import InputError
from ctxwin.recorded import Run
from ctxwin.sessions._common import as_dict, as_int, as_str, need, need_list

NAME = "gemini-cli"

_ROLES = frozenset(("user", "model"))


_USAGE_KEYS = (
    ("cached", "cachedContentTokenCount"),
    ("output", "candidatesTokenCount"),
    ("thoughts", "thoughtsTokenCount"),
)
"""A ChatRecording message's ``tokens`` keys and the ``usageMetadata`` field each is."""


def _is_content(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and as_str(value.get("role")) in _ROLES
        and isinstance(value.get("parts"), list)
    )


def _is_recording(value: Any) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("messages"), list):
        return False
    msgs = [m for m in value["messages"] if isinstance(m, dict)]
    return "sessionId" in value or (
        bool(msgs) and all("type" in m and "role" not in m for m in msgs)
    )


_MESSAGE_TYPES = frozenset(("user", "gemini", "info", "error", "warning"))


def _is_header(value: Mapping[str, Any]) -> bool:
    return isinstance(value.get("sessionId"), str) and isinstance(value.get("projectHash"), str)


def _is_message(value: Mapping[str, Any]) -> bool:
    return isinstance(value.get("id"), str) and as_str(value.get("type")) in _MESSAGE_TYPES


def _is_record(value: Any) -> bool:
    """A line the JSONL ChatRecording writer writes."""
    if not isinstance(value, dict):
        return False
    return (
        isinstance(value.get("$rewindTo"), str)
        or isinstance(value.get("$set"), dict)
        or _is_message(value)
        or _is_header(value)
    )


def detect(entries: Sequence[Any], jsonl: bool) -> bool:
    """A ``Content[]`` array, an object with ``sessionId`` and typed ``messages``, or
    JSONL of ChatRecording records: a header first, or only records (a header or a
    message among them)."""
    if jsonl:
        if entries and isinstance(entries[0], dict) and _is_header(entries[0]):
            return True
        head = [v for v in entries[:20] if isinstance(v, dict)]
        return (
            bool(head)
            and all(_is_record(v) for v in head)
            and any(_is_header(v) or _is_message(v) for v in head)
        )
    if len(entries) != 1:
        return False
    value = entries[0]
    if isinstance(value, list):
        return bool(value) and all(_is_content(v) for v in value)
    return _is_recording(value)


def read(entries: Sequence[Any], labels: Sequence[str]) -> list[Run]:
    if len(entries) != 1 or any(labels):
        run = _records(entries, labels)
        run.warnings.extend(_orphans_as_text(run.body["contents"]))
        return [run]
    value = entries[0]
    label = labels[0]
    if isinstance(value, list):
        contents = [dict(c, parts=list(c["parts"])) for c in value]
        notes = _orphans_as_text(contents)
        return [
            Run(label or "history", NAME, body={"contents": contents}, fmt="gemini", warnings=notes)
        ]
    listed = need_list(value, "messages", label)
    run = _recording(
        as_str(value.get("sessionId")), [(f"messages[{i}]", m) for i, m in enumerate(listed)], label
    )
    run.warnings.extend(_orphans_as_text(run.body["contents"]))
    return [run]


def _orphans_as_text(contents: list[dict[str, Any]]) -> list[str]:
    """Turn ``functionResponse`` parts that answer no earlier call into text parts.

    Gemini CLI records the output of a shell command the user ran itself
    (``!cmd``) as a ``functionResponse`` no model call asked for. It costs the
    same as text, and as text it does not break the pairing of tool calls.
    """
    made: set[Any] = set()
    moved = 0
    for content in contents:
        parts = content.get("parts")
        if not isinstance(parts, list):
            continue
        for k, part in enumerate(parts):
            if not isinstance(part, dict):
                continue
            call = part.get("functionCall")
            if isinstance(call, dict):
                made.add(call.get("id", call.get("name")))
            answer = part.get("functionResponse")
            if isinstance(answer, dict) and answer.get("id", answer.get("name")) not in made:
                response = dumps(answer.get("response", {})).decode()
                parts[k] = {"text": f"{answer.get('name', '')}: {response}"}
                moved += 1
    if not moved:
        return []
    return [f"{moved} function responses answer no call (commands the user ran) and count as text"]


_END = object()


def _parts(content: Any, where: str) -> list[Any]:
    if isinstance(content, str):
        return [{"text": content}] if content else []
    if isinstance(content, dict):
        return [content]
    if isinstance(content, list):  # lists in lists flattened, iteratively
        out: list[Any] = []
        stack = [iter(content)]
        while stack:
            part = next(stack[-1], _END)
            if part is _END:
                stack.pop()
            elif isinstance(part, list):
                stack.append(iter(part))
            else:
                out.extend(_parts(part, where))
        return out
    if content is None:
        return []
    raise InputError("expected text or parts", where)


def _results(call: Mapping[str, Any], where: str) -> list[Any]:
    """The parts a tool call sent back (``functionResponse`` parts)."""
    result = call.get("result")
    if result is None:
        name = call.get("name")
        return [{"functionResponse": {"name": name, "response": {}}}]
    return _parts(result, f"{where}.result")


def _records(entries: Sequence[Any], labels: Sequence[str]) -> Run:
    """The conversation a JSONL ChatRecording holds once its records are applied in order."""
    session: str | None = None
    messages: dict[str, tuple[str, Any]] = {}
    """Each message by id, as last written, with where it was written; in first-written order."""
    for label, value in zip(labels, entries, strict=True):
        if not isinstance(value, dict):
            raise InputError("expected an object", label)
        if "$rewindTo" in value:
            target = value["$rewindTo"]
            if not isinstance(target, str):
                raise InputError("expected a message id", f"{label}.$rewindTo")
            ids = list(messages)
            cut = ids.index(target) if target in messages else 0
            for gone in ids[cut:]:
                del messages[gone]
        elif "id" in value and "type" in value:
            ident = value["id"]
            if not isinstance(ident, str):
                raise InputError("expected a string", f"{label}.id")
            messages[ident] = (label, value)
        elif "$set" in value:
            update = value["$set"]
            if not isinstance(update, dict):
                raise InputError("expected an object", f"{label}.$set")
            session = as_str(update.get("sessionId")) or session
            if "messages" in update:
                listed = need_list(update, "messages", f"{label}.$set")
                messages = {}
                for k, msg in enumerate(listed):
                    where = f"{label}.$set.messages[{k}]"
                    ident = as_dict(msg).get("id")
                    messages[ident if isinstance(ident, str) else where] = (where, msg)
        elif _is_header(value):
            session = session or value["sessionId"]
        # other records: not the conversation
    return _recording(session, list(messages.values()), "")


def _recording(session: str | None, messages: Sequence[tuple[str, Any]], label: str) -> Run:
    name = session or label or "session"
    contents: list[dict[str, Any]] = []
    usage_at: dict[int, Mapping[str, Any]] = {}
    model: str | None = None
    for where, msg in messages:
        if not isinstance(msg, dict):
            continue
        kind = need(msg, "type", where)
        if kind == "user":
            parts = _parts(msg.get("content"), f"{where}.content")
            if contents and contents[-1]["role"] == "user":
                contents[-1]["parts"].extend(parts)
            else:
                contents.append({"role": "user", "parts": parts})
        elif kind in ("gemini", "model"):
            model = as_str(msg.get("model")) or model
            parts = _parts(msg.get("content"), f"{where}.content")
            calls = msg.get("toolCalls")
            calls = calls if isinstance(calls, list) else []
            for k, call in enumerate(calls):
                call = as_dict(call)
                fc: dict[str, Any] = {"name": need(call, "name", f"{where}.toolCalls[{k}]")}
                if "id" in call:
                    fc["id"] = call["id"]
                fc["args"] = call.get("args", {})
                parts.append({"functionCall": fc})
            tokens = as_dict(msg.get("tokens"))
            prompt = as_int(tokens.get("input"))
            if prompt is not None:
                usage: dict[str, Any] = {
                    "promptTokenCount": prompt,
                    "toolUsePromptTokenCount": as_int(tokens.get("tool")) or 0,
                }
                # the rest as the API's usageMetadata names it: cached prompt tokens
                # (implicit caching), the answer and the thinking (billed as output)
                for logged, field_name in _USAGE_KEYS:
                    value = as_int(tokens.get(logged))
                    if value is not None:
                        usage[field_name] = value
                usage_at[len(contents)] = usage
            contents.append({"role": "model", "parts": parts or [{"text": ""}]})
            answers: list[Any] = []
            for k, call in enumerate(calls):
                answers.extend(_results(as_dict(call), f"{where}.toolCalls[{k}]"))
            if answers:
                contents.append({"role": "user", "parts": answers})
        # info, error, warning: the CLI's own messages, never sent
    body: dict[str, Any] = {}
    if model:
        body["model"] = model
    body["contents"] = contents
    return Run(name, NAME, body=body, usage_at=usage_at, fmt="gemini")
