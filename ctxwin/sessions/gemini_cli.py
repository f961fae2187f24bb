"""Gemini CLI histories: the ``Content[]`` trajectory and ChatRecording session files.

* ``Content[]`` (``/chat save``, ``trajectory.json``): a JSON array of
  ``{"role": "user" | "model", "parts": [...]}``, exactly the ``contents`` of
  the requests; no usage is recorded.
* ChatRecording (``~/.gemini/tmp/<project>/chats/session-*.json``):
  ``{"sessionId", "messages": [...]}`` where a ``user`` message holds
  ``content`` (text or parts) and a ``gemini`` message holds ``content``,
  ``toolCalls`` (each with ``name``, ``args`` and the ``result`` parts sent
  back), ``thoughts`` (not sent back) and ``tokens`` (``input`` is the prompt,
  cached tokens included; ``tool`` the tool-use prompt). ``info``, ``error``
  and ``warning`` messages are the CLI's own and are skipped.

Both read as a Gemini ``generateContent`` body.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ctxwin.errors import InputError
from ctxwin.recorded import Run
from ctxwin.sessions._common import as_dict, as_int, as_str, need, need_list

NAME = "gemini-cli"

_ROLES = frozenset(("user", "model"))


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


def detect(entries: Sequence[Any], jsonl: bool) -> bool:
    """A ``Content[]`` array, or an object with ``sessionId`` and typed ``messages``."""
    if jsonl or len(entries) != 1:
        return False
    value = entries[0]
    if isinstance(value, list):
        return bool(value) and all(_is_content(v) for v in value)
    return _is_recording(value)


def read(entries: Sequence[Any], labels: Sequence[str]) -> list[Run]:
    value = entries[0]
    label = labels[0]
    if isinstance(value, list):
        contents = [dict(c, parts=list(c["parts"])) for c in value]
        notes = _orphans_as_text(contents)
        return [
            Run(label or "history", NAME, body={"contents": contents}, fmt="gemini", warnings=notes)
        ]
    run = _recording(value, label)
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
                response = orjson.dumps(answer.get("response", {})).decode()
                parts[k] = {"text": f"{answer.get('name', '')}: {response}"}
                moved += 1
    if not moved:
        return []
    return [f"{moved} function responses answer no call (commands the user ran) and count as text"]


def _parts(content: Any, where: str) -> list[Any]:
    if isinstance(content, str):
        return [{"text": content}] if content else []
    if isinstance(content, dict):
        return [content]
    if isinstance(content, list):
        out: list[Any] = []
        for part in content:
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


def _recording(value: dict[str, Any], label: str) -> Run:
    name = as_str(value.get("sessionId")) or label or "session"
    contents: list[dict[str, Any]] = []
    usage_at: dict[int, Mapping[str, Any]] = {}
    model: str | None = None
    for i, msg in enumerate(need_list(value, "messages", label)):
        where = f"messages[{i}]"
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
                usage_at[len(contents)] = {
                    "promptTokenCount": prompt,
                    "toolUsePromptTokenCount": as_int(tokens.get("tool")) or 0,
                }
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
