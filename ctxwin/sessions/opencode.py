"""OpenCode sessions as ``opencode export <session>`` writes them (JSON).

``{"info": {...session}, "messages": [{"info": {...}, "parts": [...]}]}`` (OpenCode's
``MessageV2``). A user message's parts are ``text`` (``ignored`` ones are not sent; the
``synthetic`` ones OpenCode adds, such as a file's content read for an ``@`` mention,
are), ``file`` (images are sent as images), ``compaction`` (sent as ``What did we do so
far?``) and ``subtask``. An assistant message (``info``: ``modelID``, ``providerID``,
``tokens``, ``summary``, ``error``) holds one or more **steps**, each one model call:
``step-start``, then ``reasoning``, ``text`` and ``tool`` parts (``callID``, ``tool``,
``state``: ``input`` and, once it ran, ``output`` or ``error``), then ``step-finish`` with
the call's ``tokens`` (``input`` without the cached tokens, ``cache.read``,
``cache.write``, ``output``): the prompt is ``input + cache.read + cache.write``. The next
step's request holds the earlier steps' calls and their results.

What OpenCode sends again (``toModelMessages``): a tool's ``output`` (``[Old tool result
content cleared]`` once OpenCode pruned it, ``state.time.compacted``), its ``error``, or
``[Tool execution was interrupted]`` for a call that never finished; an assistant
message that failed with nothing in it is not sent. After a compaction (a user message
with a ``compaction`` part and the ``summary`` assistant message that answers it), the
conversation restarts from that pair: each compaction starts a run (``session segment
2``); the summary is the last call of the run before it. Each model's calls are a run of
their own over the same conversation, in the wire format of its provider (Anthropic
Messages for Anthropic and Claude models, OpenAI Chat for the others). The export holds
no system prompt and no tool definitions (the learned overhead counts them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxwin.errors import InputError
from ctxwin.recorded import Run
from ctxwin.sessions._common import as_dict, as_int, as_str, need, need_dict, need_list
from ctxwin.sessions._wire import Conversation, Part, anthropic_usage, wire_format, write

NAME = "opencode"

COMPACTION_TEXT = "What did we do so far?"
CLEARED = "[Old tool result content cleared]"
INTERRUPTED = "[Tool execution was interrupted]"


def _is_message(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("info"), dict)
        and isinstance(value.get("parts"), list)
    )


def detect(entries: Sequence[Any], jsonl: bool) -> bool:
    """An object with ``info`` and ``messages`` of ``{info, parts}``."""
    if jsonl or len(entries) != 1 or not isinstance(entries[0], dict):
        return False
    value = entries[0]
    messages = value.get("messages")
    return (
        isinstance(value.get("info"), dict)
        and isinstance(messages, list)
        and bool(messages)
        and all(_is_message(m) for m in messages[:20])
    )


@dataclass(slots=True)
class _Item:
    role: str
    """``user``, ``assistant`` or ``result``."""
    parts: list[Part]


@dataclass(slots=True)
class _Call:
    item: int
    model: str
    provider: str | None
    usage: dict[str, Any] | None
    at: float | None


@dataclass(slots=True)
class _Segment:
    items: list[_Item] = field(default_factory=list)
    calls: list[_Call] = field(default_factory=list)


def read(entries: Sequence[Any], labels: Sequence[str]) -> list[Run]:
    """The runs of one exported session (see the module docstring)."""
    value = entries[0]
    label = labels[0]
    info = need_dict(value, "info", label)
    del info  # the session's own fields (title, times) name nothing the requests hold
    name = "session"
    segments = [_Segment()]
    model: str | None = None
    provider: str | None = None
    listed = need_list(value, "messages", label)
    for k, message in enumerate(listed):
        where = f"messages[{k}]"
        if not isinstance(message, dict):
            raise InputError("expected an object", where)
        minfo = need_dict(message, "info", where)
        parts = need_list(message, "parts", where)
        role = need(minfo, "role", f"{where}.info")
        if role == "user":
            user_model = as_dict(minfo.get("model"))
            model = as_str(user_model.get("modelID")) or model
            provider = as_str(user_model.get("providerID")) or provider
            said = _user_parts(parts, where)
            if any(as_dict(p).get("type") == "compaction" for p in parts):
                # a compaction: the next run starts from this message and its summary
                segments.append(_Segment())
                segments[-2].items.append(_Item("user", said))
            if said:
                segments[-1].items.append(_Item("user", said))
        elif role == "assistant":
            model = as_str(minfo.get("modelID")) or model
            provider = as_str(minfo.get("providerID")) or provider
            _assistant(segments, minfo, parts, where, model or "unknown", provider)
    segments = [s for s in segments if s.calls]
    runs: list[Run] = []
    for n, seg in enumerate(segments, 1):
        seg_name = name if len(segments) == 1 else f"{name} segment {n}"
        found = _segment_runs(seg, seg_name)
        if n == len(segments) and found:
            found[0].current = True
        runs.extend(found)
    return runs


def _user_parts(parts: Sequence[Any], where: str) -> list[Part]:
    out: list[Part] = []
    for k, part in enumerate(parts):
        part = as_dict(part)
        kind = part.get("type")
        if kind == "text" and part.get("ignored") is not True:
            out.append({"type": "text", "text": str(need(part, "text", f"{where}.parts[{k}]"))})
        elif kind == "file":
            mime = as_str(part.get("mime")) or ""
            url = as_str(part.get("url")) or ""
            if mime.startswith("image/") and url.startswith("data:"):
                out.append({"type": "image", "media_type": mime, "data": url.partition(",")[2]})
        elif kind == "compaction":
            out.append({"type": "text", "text": COMPACTION_TEXT})
        elif kind == "subtask":
            out.append({"type": "text", "text": str(part.get("prompt", ""))})
    return out


def _tokens(tokens: Mapping[str, Any]) -> dict[str, Any] | None:
    cache = as_dict(tokens.get("cache"))
    prompt = as_int(tokens.get("input"))
    if prompt is None:
        return None
    reads, writes = as_int(cache.get("read")) or 0, as_int(cache.get("write")) or 0
    if prompt + reads + writes == 0:
        return None  # no usage reported (an aborted step)
    return anthropic_usage(prompt, reads, writes, output_tokens=as_int(tokens.get("output")))


def _assistant(
    segments: list[_Segment],
    info: Mapping[str, Any],
    parts: Sequence[Any],
    where: str,
    model: str,
    provider: str | None,
) -> None:
    steps: list[list[dict[str, Any]]] = [[]]
    for part in parts:
        part = as_dict(part)
        if part.get("type") == "step-start" and steps[-1]:
            steps.append([])
        steps[-1].append(part)
    created = as_int(as_dict(info.get("time")).get("created"))
    sent = any(p.get("type") in ("text", "reasoning", "tool") for step in steps for p in step)
    if not sent and info.get("error") is not None:
        return  # failed with nothing in it: not sent again, and no call made it
    summary = info.get("summary") is True and len(segments) > 1
    segment = segments[-2] if summary else segments[-1]  # a summary is the old run's call
    for n, step in enumerate(steps):
        said: list[Part] = []
        results: list[Part] = []
        usage: dict[str, Any] | None = None
        for k, part in enumerate(step):
            kind = part.get("type")
            at = f"{where}.parts[{k}]"
            if kind == "text" and part.get("ignored") is not True:
                said.append({"type": "text", "text": str(part.get("text", ""))})
            elif kind == "reasoning":
                meta = as_dict(part.get("metadata"))
                signature = as_str(as_dict(meta.get("anthropic")).get("signature"))
                said.append(
                    {
                        "type": "thinking",
                        "thinking": str(part.get("text", "")),
                        "signature": signature,
                    }
                )
            elif kind == "tool":
                call, result = _tool(part, at)
                said.append(call)
                results.append(result)
            elif kind == "step-finish":
                usage = _tokens(as_dict(part.get("tokens")))
        if (
            usage is None
            and n == len(steps) - 1
            and not any(p.get("type") == "step-finish" for p in step)
        ):
            usage = _tokens(as_dict(info.get("tokens")))  # a version without steps
        if not said and usage is None:
            continue
        segment.items.append(_Item("assistant", said))
        stamp = as_int(as_dict(step[0].get("time")).get("start")) if step else None
        stamp = stamp or created
        segment.calls.append(
            _Call(
                len(segment.items) - 1,
                model,
                provider,
                usage,
                stamp / 1000 if stamp is not None else None,
            )
        )
        if results:
            segment.items.append(_Item("result", results))
    if summary:  # the next run starts from the compaction and the summary that answers it
        answer = next((i for i in reversed(segment.items) if i.role == "assistant"), None)
        if answer is not None:
            segments[-1].items.append(_Item("assistant", list(answer.parts)))


def _tool(part: Mapping[str, Any], where: str) -> tuple[Part, Part]:
    call_id = str(need(part, "callID", where))
    name = str(need(part, "tool", where))
    state = as_dict(part.get("state"))
    status = as_str(state.get("status"))
    arguments = state.get("input")
    call: Part = {
        "type": "call",
        "id": call_id,
        "name": name,
        "input": arguments if isinstance(arguments, dict) else {},
    }
    result: Part = {"type": "result", "id": call_id, "name": name}
    if status == "completed":
        compacted = as_dict(state.get("time")).get("compacted") is not None
        result["content"] = CLEARED if compacted else str(state.get("output", ""))
    elif status == "error":
        result["content"] = str(state.get("error", ""))
        result["is_error"] = True
    else:  # pending or running: it never finished
        result["content"] = INTERRUPTED
        result["is_error"] = True
    return call, result


def _segment_runs(seg: _Segment, name: str) -> list[Run]:
    models = list(dict.fromkeys(c.model for c in reversed(seg.calls)))
    conv, at = Conversation.of(seg.items)  # the same messages whatever the model
    runs: list[Run] = []
    for k, model in enumerate(models):
        mine = [c for c in seg.calls if c.model == model]
        fmt = wire_format(model, "anthropic" if mine[-1].provider == "anthropic" else None)
        messages, where = write(fmt, conv.msgs)
        usage_at: dict[int, Mapping[str, Any]] = {}
        sent_at: dict[int, float] = {}
        calls_at: set[int] = set()
        for call in mine:
            index = where[at[call.item]]
            if index is None:
                continue
            calls_at.add(index)
            if call.usage is not None:
                usage_at[index] = call.usage
            if call.at is not None:
                sent_at[index] = call.at
        runs.append(
            Run(
                name if k == 0 else f"{name} {model}",
                NAME,
                body={"model": model, "messages": messages},
                usage_at=usage_at,
                sent_at=sent_at,
                fmt=fmt,
                calls_at=frozenset(calls_at),
            )
        )
    return runs
