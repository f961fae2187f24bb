"""Cline, Roo Code and Kilo Code task folders (``globalStorage/<extension>/tasks/<id>/``).

A task keeps its conversation in ``api_conversation_history.json``: the Anthropic
``MessageParam[]`` the extension sends (for every provider; it converts at send time),
each message possibly with the extension's own fields:

* Cline: ``ts``, ``id``, ``modelInfo`` (``modelId``, ``providerId``) and, in newer
  versions, ``metrics.tokens`` on a response (``prompt``: the whole prompt, cached
  tokens included; ``completion``; ``cached``);
* Roo Code and Kilo Code: ``ts``; a condensed history keeps its messages, tagged with
  the ``condenseParent`` of the summary (``isSummary``, ``condenseId``) that replaces
  them, and a sliding-window truncation tags them with the ``truncationParent`` of its
  marker (``isTruncationMarker``, ``truncationId``): a tagged message is not sent once
  its summary or marker is there (``getEffectiveApiHistory``), nor a ``tool_result``
  whose call is no longer sent. The summary and the marker are no calls.

``ui_messages.json`` beside it holds, for each request, an ``api_req_started`` message
whose ``text`` is JSON with ``tokensIn``, ``tokensOut``, ``cacheReads``, ``cacheWrites``
(and Roo's ``apiProtocol``): the usage of files without ``metrics``. Each request is
paired with the first response after its ``conversationHistoryIndex`` (the history's
last index when the request started), or, without one, in order; a request that failed
and was sent again gives its response to the later one. ``tokensIn`` leaves the cached
tokens out for Anthropic (``apiProtocol: "anthropic"``, or Cline's Anthropic, Bedrock,
Vertex and Claude Code providers) and holds them for the others. Cline's context
truncation is ``conversationHistoryDeletedRange`` (``[start, end]``, inclusive) on each
UI message: those history messages are not sent from then on. ``task_metadata.json``
names the model (``model_usage``) where the messages do not.

Runs: each stretch of calls with the same history sent (no new summary, marker or
deleted range) is a run (``task``, then ``task segment 2`` ...), over the history as it
was sent; the last one is the task's next request. Read from
``api_conversation_history.json`` with the files beside it; ``ui_messages.json`` and
``task_metadata.json`` are read with it, not on their own. No system prompt or tool
definitions are logged (the learned overhead counts them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ctxwin.errors import InputError
from ctxwin.recorded import Run
from ctxwin.sessions._common import Beside, Besides, as_dict, as_int, as_str, need
from ctxwin.sessions._wire import anthropic_usage

NAME = "cline"
READS_BESIDE = True

HISTORY = "api_conversation_history.json"
UI = "ui_messages.json"
METADATA = "task_metadata.json"

_MARKS = frozenset(
    (
        "ts",
        "metrics",
        "modelInfo",
        "isSummary",
        "condenseId",
        "condenseParent",
        "truncationParent",
        "isTruncationMarker",
        "truncationId",
    )
)
"""Fields the extensions add to a ``MessageParam``."""
_ANTHROPIC_PROVIDERS = frozenset(("anthropic", "bedrock", "vertex", "claude-code"))
"""Cline providers whose ``tokensIn`` leaves the cached tokens out."""


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content[:4] if isinstance(b, dict))
    return ""


def _is_history(value: Any) -> bool:
    if not isinstance(value, list) or not value:
        return False
    if not all(isinstance(m, dict) and m.get("role") in ("user", "assistant") for m in value):
        return False
    if any(not _MARKS.isdisjoint(m) for m in value[:50]):
        return True
    first = _text_of(value[0].get("content"))
    return "<task>" in first or "<environment_details>" in first


def _is_ui(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(m, dict) and m.get("type") in ("ask", "say") and "ts" in m
            for m in value[:50]
        )
    )


def _is_metadata(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("files_in_context"), list)


def detect(entries: Sequence[Any], jsonl: bool) -> bool:
    """A task's ``api_conversation_history.json`` (a message list with the extensions'
    fields, or whose first message holds ``<task>`` or ``<environment_details>``), or one
    of the files that go with it (``ui_messages.json``, ``task_metadata.json``)."""
    if jsonl or len(entries) != 1:
        return False
    value = entries[0]
    return _is_history(value) or _is_ui(value) or _is_metadata(value)


def read(entries: Sequence[Any], labels: Sequence[str], beside: Beside | None = None) -> list[Run]:
    """The runs of one task (see the module docstring)."""
    value = entries[0]
    if _is_ui(value) or _is_metadata(value):
        raise Besides(HISTORY)
    if not isinstance(value, list):
        raise InputError("expected an array of messages", labels[0] or None)
    ui = beside(UI) if beside is not None else None
    metadata = beside(METADATA) if beside is not None else None
    return _task(value, ui if isinstance(ui, list) else [], as_dict(metadata))


@dataclass(slots=True)
class _Request:
    """One ``api_req_started`` of ``ui_messages.json``."""

    after: int | None
    """``conversationHistoryIndex``: the history's last index when it started."""
    usage: dict[str, Any] | None
    deleted: tuple[int, int] | None
    at: float | None


def _requests(ui: Sequence[Any], provider: str | None) -> list[_Request]:
    out: list[_Request] = []
    for message in ui:
        if not isinstance(message, dict) or message.get("say") != "api_req_started":
            continue
        try:
            info = as_dict(orjson.loads(str(message.get("text") or "{}")))
        except orjson.JSONDecodeError:
            info = {}
        tokens_in = as_int(info.get("tokensIn"))
        usage: dict[str, Any] | None = None
        if tokens_in is not None:
            reads = as_int(info.get("cacheReads")) or 0
            writes = as_int(info.get("cacheWrites")) or 0
            out_tokens = as_int(info.get("tokensOut"))
            protocol = as_str(info.get("apiProtocol"))
            if protocol == "openai" or (
                protocol is None and provider is not None and provider not in _ANTHROPIC_PROVIDERS
            ):
                usage = {
                    "prompt_tokens": tokens_in,
                    "prompt_tokens_details": {"cached_tokens": reads},
                    "completion_tokens": out_tokens,
                }
            else:
                usage = anthropic_usage(tokens_in, reads, writes, output_tokens=out_tokens)
        span = message.get("conversationHistoryDeletedRange")
        deleted = None
        if isinstance(span, list) and len(span) == 2 and all(isinstance(x, int) for x in span):
            deleted = (span[0], span[1])
        stamp = as_int(message.get("ts"))
        out.append(
            _Request(
                as_int(message.get("conversationHistoryIndex")),
                usage,
                deleted,
                stamp / 1000 if stamp is not None else None,
            )
        )
    return out


def _metrics_usage(message: Mapping[str, Any]) -> dict[str, Any] | None:
    tokens = as_dict(as_dict(message.get("metrics")).get("tokens"))
    prompt = as_int(tokens.get("prompt"))
    if prompt is None:
        return None
    return {
        "prompt_tokens": prompt,
        "prompt_tokens_details": {"cached_tokens": as_int(tokens.get("cached")) or 0},
        "completion_tokens": as_int(tokens.get("completion")),
    }


def _is_call(message: Mapping[str, Any]) -> bool:
    return (
        message.get("role") == "assistant"
        and message.get("isSummary") is not True
        and message.get("isTruncationMarker") is not True
    )


def _task(history: list[Any], ui: Sequence[Any], metadata: Mapping[str, Any]) -> list[Run]:
    for i, message in enumerate(history):
        need(message, "content", f"[{i}]")
    usage_model = [as_dict(u) for u in metadata.get("model_usage") or [] if isinstance(u, dict)]
    last_info = next(
        (as_dict(m.get("modelInfo")) for m in reversed(history) if m.get("modelInfo")), {}
    )
    model = as_str(last_info.get("modelId")) or (
        as_str(usage_model[-1].get("model_id")) if usage_model else None
    )
    provider = as_str(last_info.get("providerId")) or (
        as_str(usage_model[-1].get("model_provider_id")) if usage_model else None
    )
    calls = [i for i, m in enumerate(history) if _is_call(m)]
    usage: dict[int, Mapping[str, Any]] = {}
    sent: dict[int, float] = {}
    deleted_at: dict[int, tuple[int, int] | None] = {}
    requests = _requests(ui, provider)
    ordered = all(r.after is None for r in requests)
    for k, request in enumerate(requests):
        if ordered:
            call = calls[k] if k < len(calls) else None
        else:
            after = request.after if request.after is not None else -1
            call = next((c for c in calls if c > after), None)
        if call is None:
            continue
        if request.usage is not None:
            usage[call] = request.usage  # a later request (sent again) wins
        if request.at is not None:
            sent.setdefault(call, request.at)
        deleted_at[call] = request.deleted
    for i in calls:
        own = _metrics_usage(history[i])
        if own is not None:
            usage[i] = own
        stamp = as_int(history[i].get("ts"))
        if stamp is not None and i not in sent:
            sent[i] = stamp / 1000
    # a stretch of calls sent the same history is one run
    groups: list[tuple[tuple[Any, ...], list[int]]] = []
    deleted: tuple[int, int] | None = None
    summaries: set[str] = set()
    markers: set[str] = set()
    seen = 0
    for i in calls:
        for m in history[seen:i]:  # the summaries and markers before this call
            if m.get("isSummary") and m.get("condenseId"):
                summaries.add(str(m["condenseId"]))
            if m.get("isTruncationMarker") and m.get("truncationId"):
                markers.add(str(m["truncationId"]))
        seen = i
        deleted = deleted_at.get(i, deleted)
        state = (frozenset(summaries), frozenset(markers), deleted)
        if groups and groups[-1][0] == state:
            groups[-1][1].append(i)
        else:
            groups.append((state, [i]))
    runs: list[Run] = []
    for n, ((done, hidden, span), members) in enumerate(groups, 1):
        end = groups[n][1][0] if n < len(groups) else len(history)
        kept = _sent(history, end, (done, hidden), span)
        messages, at = _messages(history, kept)
        body: dict[str, Any] = {"model": model} if model else {}
        body["messages"] = messages
        runs.append(
            Run(
                "task" if len(groups) == 1 else f"task segment {n}",
                NAME,
                body=body,
                usage_at={at[i]: usage[i] for i in members if i in at and i in usage},
                sent_at={at[i]: sent[i] for i in members if i in at and i in sent},
                fmt="anthropic",
                calls_at=frozenset(at[i] for i in members if i in at),
                current=n == len(groups),
            )
        )
    return runs


def _sent(
    history: Sequence[Any],
    end: int,
    marks: tuple[frozenset[str], frozenset[str]],
    span: tuple[int, int] | None,
) -> list[int]:
    """The indices of the history before ``end`` that are sent, given its summaries and
    markers (``marks``) and Cline's deleted range (``span``)."""
    summaries, markers = marks
    out = []
    for i in range(end):
        m = history[i]
        if span is not None and span[0] <= i <= span[1]:
            continue
        if m.get("condenseParent") is not None and str(m["condenseParent"]) in summaries:
            continue
        if m.get("truncationParent") is not None and str(m["truncationParent"]) in markers:
            continue
        out.append(i)
    return out


def _messages(
    history: Sequence[Any], kept: Sequence[int]
) -> tuple[list[dict[str, Any]], dict[int, int]]:
    """The history messages ``kept``, as they are sent (the ``MessageParam`` fields only,
    without a ``tool_result`` whose call is not sent: Roo's ``filterOrphanedToolResults``),
    and where each history index went."""
    calls: set[str] = set()
    for i in kept:
        content = history[i]["content"]
        if history[i]["role"] == "assistant" and isinstance(content, list):
            calls.update(
                str(b.get("id"))
                for b in content
                if isinstance(b, dict) and b.get("type") == "tool_use"
            )
    out: list[dict[str, Any]] = []
    at: dict[int, int] = {}
    for i in kept:
        role, content = history[i]["role"], history[i]["content"]
        if role == "user" and isinstance(content, list):
            content = [
                b
                for b in content
                if not (
                    isinstance(b, dict)
                    and b.get("type") == "tool_result"
                    and str(b.get("tool_use_id")) not in calls
                )
            ]
            if not content:
                continue
        at[i] = len(out)
        out.append({"role": role, "content": content})
    return out, at
