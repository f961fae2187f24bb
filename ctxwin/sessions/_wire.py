"""Request bodies from the conversations agent tools log, in a wire format ctxwin reads.

Several tools keep their own message shapes (pi, OpenCode, GitHub Copilot CLI) and send
them through whichever provider the model needs. A reader turns its file into
:class:`Msg` (a user or assistant message of :data:`Part` dicts) and writes them here as
the body the provider was sent: an Anthropic Messages body for Claude models
(:func:`anthropic`), an OpenAI Chat Completions body for the others (:func:`chat`).

Parts (``type`` first):

* ``{"type": "text", "text"}``;
* ``{"type": "thinking", "thinking", "signature"}`` (``signature`` may be ``None``:
  the block is then sent as text, as the tools do; a ``redacted`` one carries only its
  ``signature``);
* ``{"type": "image", "media_type", "data"}`` (base64);
* ``{"type": "call", "id", "name", "input"}``: a tool call (``input`` an object);
* ``{"type": "result", "id", "name", "content", "is_error"}``: a tool's result, in a
  user message (``content`` text or a list of text and image parts).

Each writer returns the body's messages and, for each :class:`Msg`, the index of the
body message that holds it (``None`` when nothing of it is sent: an assistant message
with nothing in it), so a reader can say which body message each call produced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ctxwin.codec import dumps

Part = dict[str, Any]

ANTHROPIC = "anthropic"
CHAT = "openai-chat"


@dataclass(slots=True)
class Msg:
    """One message of a conversation, as a tool logged it."""

    role: str
    """``user`` or ``assistant``."""
    parts: list[Part] = field(default_factory=list)


def wire_format(model: str | None, api: str | None = None) -> str:
    """The wire format a request to ``model`` was sent in: Anthropic Messages for Claude
    models and Anthropic APIs (``api`` as the tool names it: ``anthropic-messages``),
    else OpenAI Chat Completions (what the others' bodies cost to read the same way)."""
    if api is not None and "anthropic" in api:
        return ANTHROPIC
    return ANTHROPIC if model is not None and "claude" in model.lower() else CHAT


def anthropic_usage(
    prompt: int | None, cache_read: int | None = None, cache_write: int | None = None, **out: Any
) -> dict[str, Any]:
    """A usage object in Anthropic's shape (``input_tokens`` without the cached prefix,
    ``cache_read_input_tokens``, ``cache_creation_input_tokens``): what
    :func:`ctxwin.fitting.calibration.prompt_tokens_from_usage` adds up to the prompt and
    the cost ledger reads as cache reads and writes. ``out`` adds other fields
    (``output_tokens``)."""
    usage: dict[str, Any] = {"input_tokens": prompt or 0}
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    if cache_write is not None:
        usage["cache_creation_input_tokens"] = cache_write
    usage.update({k: v for k, v in out.items() if v is not None})
    return usage


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _anthropic_content(content: Any) -> Any:
    """A result's or user message's parts as Anthropic content: one string for text alone,
    else text and image blocks."""
    if isinstance(content, str):
        return content
    parts = [p for p in content if isinstance(p, dict)] if isinstance(content, list) else []
    if not any(p.get("type") == "image" for p in parts):
        return "\n".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")
    blocks: list[Part] = []
    for p in parts:
        if p.get("type") == "image":
            blocks.append(
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": p.get("media_type") or "image/png",
                        "data": p.get("data") or "",
                    },
                }
            )
        elif p.get("type") == "text":
            blocks.append({"type": "text", "text": str(p.get("text", ""))})
    return blocks


def _anthropic_assistant(parts: Sequence[Part]) -> list[Part]:
    blocks: list[Part] = []
    for p in parts:
        kind = p.get("type")
        if kind == "text" and str(p.get("text", "")).strip():
            blocks.append({"type": "text", "text": p["text"]})
        elif kind == "thinking":
            signature = p.get("signature")
            if p.get("redacted"):
                if signature:
                    blocks.append({"type": "redacted_thinking", "data": signature})
            elif str(p.get("thinking", "")).strip():
                if signature:
                    blocks.append(
                        {"type": "thinking", "thinking": p["thinking"], "signature": signature}
                    )
                else:
                    blocks.append({"type": "text", "text": p["thinking"]})
        elif kind == "call":
            blocks.append(
                {"type": "tool_use", "id": p["id"], "name": p["name"], "input": p.get("input", {})}
            )
    return blocks


def anthropic(msgs: Sequence[Msg]) -> tuple[list[dict[str, Any]], list[int | None]]:
    """The messages of an Anthropic Messages body, and where each of ``msgs`` went.

    User messages in a row are one (results first, as logged, then what follows them),
    so the turns alternate; text alone is a string; empty text is left out, and so is
    an assistant message left with nothing."""
    out: list[dict[str, Any]] = []
    where: list[int | None] = []
    for msg in msgs:
        if msg.role == "assistant":
            blocks = _anthropic_assistant(msg.parts)
            if blocks:
                out.append({"role": "assistant", "content": blocks})
                where.append(len(out) - 1)
            else:
                where.append(None)
            continue
        content: list[Part] = []
        for p in msg.parts:
            if p.get("type") == "result":
                block: Part = {
                    "type": "tool_result",
                    "tool_use_id": p["id"],
                    "content": _anthropic_content(p.get("content", "")),
                }
                if p.get("is_error"):
                    block["is_error"] = True
                content.append(block)
            elif p.get("type") == "image":
                content.extend(_anthropic_content([p]))
            elif p.get("type") == "text" and str(p.get("text", "")).strip():
                content.append({"type": "text", "text": p["text"]})
        if not content:
            where.append(None)
            continue
        if out and out[-1]["role"] == "user":  # the turns alternate: one user message
            out[-1]["content"].extend(content)
        else:
            out.append({"role": "user", "content": content})
        where.append(len(out) - 1)
    for message in out:  # text alone is a string, as the tools send it
        blocks = message["content"]
        if message["role"] == "user" and all(b.get("type") == "text" for b in blocks):
            message["content"] = "\n".join(b["text"] for b in blocks)
    return out, where


def chat(msgs: Sequence[Msg]) -> tuple[list[dict[str, Any]], list[int | None]]:
    """The messages of an OpenAI Chat Completions body, and where each of ``msgs`` went.

    An assistant message's text is its ``content`` and its calls its ``tool_calls``
    (thinking is not sent back in this format); each result is a ``tool`` message, and
    the images of results follow them in a user message."""
    out: list[dict[str, Any]] = []
    where: list[int | None] = []
    for msg in msgs:
        if msg.role == "assistant":
            text = "".join(str(p.get("text", "")) for p in msg.parts if p.get("type") == "text")
            calls = [
                {
                    "id": p["id"],
                    "type": "function",
                    "function": {
                        "name": p["name"],
                        "arguments": dumps(p.get("input", {})).decode(),
                    },
                }
                for p in msg.parts
                if p.get("type") == "call"
            ]
            if not text and not calls:
                where.append(None)
                continue
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                message["tool_calls"] = calls
            out.append(message)
            where.append(len(out) - 1)
            continue
        first = len(out)
        images: list[Part] = []
        user: list[Part] = []
        for p in msg.parts:
            if p.get("type") == "result":
                content = p.get("content", "")
                out.append({"role": "tool", "tool_call_id": p["id"], "content": _text_of(content)})
                if isinstance(content, list):
                    images.extend(
                        x for x in content if isinstance(x, dict) and x.get("type") == "image"
                    )
            elif p.get("type") == "image" or (
                p.get("type") == "text" and str(p.get("text", "")).strip()
            ):
                user.append(p)
        user = images + user
        if user:
            if all(p.get("type") == "text" for p in user):
                out.append({"role": "user", "content": "\n".join(p["text"] for p in user)})
            else:
                out.append({"role": "user", "content": [_chat_part(p) for p in user]})
        where.append(first if len(out) > first else None)
    return out, where


def _chat_part(p: Mapping[str, Any]) -> Part:
    if p.get("type") == "image":
        url = f"data:{p.get('media_type') or 'image/png'};base64,{p.get('data') or ''}"
        return {"type": "image_url", "image_url": {"url": url}}
    return {"type": "text", "text": str(p.get("text", ""))}


def write(fmt: str, msgs: Sequence[Msg]) -> tuple[list[dict[str, Any]], list[int | None]]:
    """:func:`anthropic` or :func:`chat`, as ``fmt`` names."""
    return anthropic(msgs) if fmt == ANTHROPIC else chat(msgs)


class Said(Protocol):
    """A message of a session as a reader keeps it: its role (``user``, ``assistant`` or
    ``result``) and its parts."""

    role: str
    parts: list[Part]


class Conversation:
    """A conversation built message by message, as a tool sends it again: a tool call
    that no result answers before the next assistant or user message gets a result
    saying :data:`NO_RESULT` (an error), as tools add before they send (a provider
    refuses a call without its result). The calls of the last assistant message, whose
    results may still be coming, are left as they are."""

    __slots__ = ("msgs", "pending")

    def __init__(self) -> None:
        self.msgs: list[Msg] = []
        self.pending: dict[str, str] = {}
        """The calls of the last assistant message that no result has answered (id → name)."""

    def assistant(self, parts: list[Part]) -> int:
        """Add a model message; its index in :attr:`msgs`."""
        self.flush()
        self.msgs.append(Msg("assistant", parts))
        self.pending = {
            str(p["id"]): str(p.get("name", "")) for p in parts if p.get("type") == "call"
        }
        return len(self.msgs) - 1

    def results(self, parts: list[Part]) -> None:
        """Add tool results (``result`` parts)."""
        for p in parts:
            self.pending.pop(str(p.get("id")), None)
        self.msgs.append(Msg("user", parts))

    def user(self, parts: list[Part]) -> None:
        """Add what the user (or the tool for them) says."""
        self.flush()
        self.msgs.append(Msg("user", parts))

    @classmethod
    def of(cls, items: Sequence[Said]) -> tuple[Conversation, dict[int, int]]:
        """The conversation of ``items``, added in order, and, for each item that is a
        model message, its index in :attr:`msgs` (by the item's index)."""
        conv = cls()
        at: dict[int, int] = {}
        for i, item in enumerate(items):
            index = conv.add(item.role, list(item.parts))
            if index is not None:
                at[i] = index
        return conv, at

    def add(self, role: str, parts: list[Part]) -> int | None:
        """Add a message by its role: ``assistant`` (its index in :attr:`msgs`),
        ``result`` (tool results) or anything else (what the user says)."""
        if role == "assistant":
            return self.assistant(parts)
        if role == "result":
            self.results(parts)
        else:
            self.user(parts)
        return None

    def flush(self) -> None:
        """Answer the calls still pending (see the class)."""
        if self.pending:
            self.msgs.append(
                Msg(
                    "user",
                    [
                        {
                            "type": "result",
                            "id": i,
                            "name": n,
                            "content": NO_RESULT,
                            "is_error": True,
                        }
                        for i, n in self.pending.items()
                    ],
                )
            )
            self.pending = {}


NO_RESULT = "No result provided"
"""The result a tool sends for a call it has no result of (pi's, and OpenCode's wording
for an interrupted tool)."""
