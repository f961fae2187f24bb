"""Anthropic Messages: ``{"model", "system", "messages", "tools", "max_tokens", ...}``.

``system`` (a string or text blocks) is outside the message list: it is
counted in the view's base and always kept. ``messages`` alternate ``user``
and ``assistant``; content is a string or blocks: ``text``, ``image``,
``document``, ``tool_use`` (assistant), ``tool_result`` (user),
``thinking`` / ``redacted_thinking``, ``server_tool_use`` and its
``*_tool_result`` blocks (both in the same assistant message, so they pair
inside it and never across messages).

Provider rules the output keeps (checked by :meth:`Anthropic.problems`):

* the first message is a user message;
* every ``tool_result`` sits in the user message right after the assistant
  message holding its ``tool_use``, and an assistant message with
  ``tool_use`` blocks is followed by a message answering all of them (unless
  it is the last);
* thinking blocks stay in their assistant message (messages are never split).

Head, turns and drop units: the head is the first user message. Each
assistant message opens a turn and the user messages after it (its tool
results, possibly with new user text) join that turn. So every turn starts
with an assistant message and ends before the next one: dropping the oldest
whole units leaves ``head (user) + assistant …``, which keeps the first
message a user message, keeps user/assistant alternation wherever the input
had it, and keeps each ``tool_result`` right after its ``tool_use``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ctxwin.errors import InputError
from ctxwin.formats import _util as u
from ctxwin.formats import media
from ctxwin.formats.base import (
    CALL,
    MEDIA,
    RESULT,
    SYSTEM_PROMPT,
    THINKING,
    TOOL_DEFINITIONS,
    Edits,
    Part,
    Path,
    extend_plain,
)
from ctxwin.tokens.base import Estimator, Kind
from ctxwin.tokens.framing import ANTHROPIC_TOOL_PROMPT
from ctxwin.view import ASSISTANT, USER, Item, Problem, View

ROLES = {"user": USER, "assistant": ASSISTANT}

_ANTHROPIC_BLOCKS = frozenset(
    {
        "tool_use",
        "tool_result",
        "image",
        "document",
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "mcp_tool_use",
        "search_result",
        "container_upload",
        "compaction",
    }
)


_ANTHROPIC_KEYS = ("system", "anthropic_version", "stop_sequences", "top_k", "thinking")
"""Top-level keys of a Messages body that a Chat Completions body never has."""

_CHAT_KEYS = frozenset(
    {
        "n",
        "frequency_penalty",
        "presence_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "response_format",
        "seed",
        "max_completion_tokens",
        "stream_options",
        "parallel_tool_calls",
        "user",
        "modalities",
        "reasoning_effort",
        "prediction",
        "audio",
        "web_search_options",
        "functions",
        "function_call",
        "store",
        "stop",
    }
)
"""Top-level keys of a Chat Completions body that a Messages body never has."""

_CHAT_MESSAGE_KEYS = ("name", "tool_call_id", "refusal", "audio")
"""Message keys that only Chat Completions defines."""

_CHAT_PARTS = frozenset({"image_url", "input_audio", "file", "refusal"})
"""Content part types that only Chat Completions defines."""

_CLAUDE = r"(?:[a-z0-9-]+\.)*claude"
# a pattern, compiled (and cached by re) on first use: compiling costs every start
"""A model id as the Anthropic API (``claude-…``), Bedrock (``anthropic.claude-…``) or
Vertex AI names it; not a router's ``anthropic/claude-…``, which takes Chat bodies."""


def _messages_request(body: dict[str, Any]) -> bool:
    """Whether a body of plain user/assistant messages is a Messages request as the API
    takes it: an integer ``max_tokens`` (which the API requires), a Claude ``model`` id,
    and nothing that only Chat Completions has (top-level keys, message keys, content
    parts, tools or a string ``tool_choice``). Pruning keeps every top-level key and only
    drops messages, so an Anthropic body's output keeps being read as Anthropic when its
    Anthropic-only blocks were all in dropped turns."""
    model = body.get("model")
    max_tokens = body.get("max_tokens")
    if not isinstance(model, str) or not re.match(_CLAUDE, model, re.IGNORECASE):
        return False
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        return False
    if not _CHAT_KEYS.isdisjoint(body) or body.get("tools") or "tool_choice" in body:
        return False
    for m in body["messages"]:
        if not isinstance(m, dict) or any(k in m for k in _CHAT_MESSAGE_KEYS):
            return False
        content = m.get("content")
        if isinstance(content, list) and any(
            isinstance(b, dict) and isinstance(t := b.get("type"), str) and t in _CHAT_PARTS
            for b in content
        ):
            return False
    return True


def _role(message: dict[str, Any]) -> str | None:
    role = message.get("role")
    return ROLES.get(role) if isinstance(role, str) else None


def _is_anthropic_block(block: Any) -> bool:
    if not isinstance(block, dict):
        return False
    t = block.get("type")
    return isinstance(t, str) and (t in _ANTHROPIC_BLOCKS or t.endswith("_tool_result"))


class Anthropic:
    name = "anthropic"
    items_key = "messages"
    format_rules = True
    local_rules = True
    description = (
        'Anthropic Messages body {"messages": [...]} with a top-level "system" or '
        "content blocks (tool_use, tool_result, image, thinking, ...)"
    )

    def detect(self, body: Any) -> bool:
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return False
        messages = body["messages"]
        for m in messages:
            if isinstance(m, dict) and (
                _role(m) is None
                or (isinstance(m.get("tool_calls"), list) and m["tool_calls"])
                or (isinstance(m.get("function_call"), dict) and "name" in m["function_call"])
            ):
                # system/developer/tool/function roles or tool calls: Chat. A ``tool_calls``
                # that is not a list of calls (null, false, []) or a ``function_call`` that
                # is not a named call says nothing: reading such a body as Chat miscounts its
                # Anthropic blocks, and the pruned output (without that message) reads as
                # Anthropic again, over the budget.
                return False
        if any(key in body for key in _ANTHROPIC_KEYS):
            return True
        tools = body.get("tools")
        if isinstance(tools, list) and any(
            isinstance(t, dict) and ("input_schema" in t or "function" not in t) for t in tools
        ):
            return True
        choice = body.get("tool_choice")
        if isinstance(choice, dict) and choice.get("type") in ("auto", "any", "tool", "none"):
            return True
        for m in messages:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, list) and any(_is_anthropic_block(b) for b in content):
                return True
        return _messages_request(body)

    def read(self, body: Any, estimator: Estimator) -> View:
        body = u.expect_dict(body, "(body)")
        if "messages" not in body:
            raise InputError('missing "messages" (expected an Anthropic Messages body)', "messages")
        messages = u.expect_list(body["messages"], "messages")
        width = estimator.width
        base = [0] * width
        refs: list[str] = []
        ctx = _Context(refs)
        system = body.get("system")
        if system is not None:
            base[0] += estimator.per_message
            if isinstance(system, str):
                estimator.add_text(base, system, Kind.PROSE)
            else:
                for k, block in enumerate(u.expect_list(system, "system")):
                    self._block(
                        block, f"system[{k}]", base, estimator, None, [], [], Kind.PROSE, ctx
                    )
        tools = body.get("tools")
        if tools is not None:
            u.add_json(base, u.expect_list(tools, "tools"), estimator)
            for tool in tools:
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    ctx.tools[tool["name"]] = tool
        base[0] += estimator.framing(self.name, has_tools=tools is not None)
        max_tokens = u.optional_int(body, "max_tokens", "max_tokens")
        view = View(self.name, [], base, u.optional_model(body), max_tokens, "messages")
        compaction: tuple[int, int] | None = None
        for i, m in enumerate(messages):
            where = view.where(i)
            if not isinstance(m, dict):
                raise InputError(f"expected a message object, got {u.kind_of(m)}", where)
            expected = 'user or assistant; the system prompt goes in the top-level "system"'
            role = u.role_of(m, ROLES, where, expected)
            cost = [0] * width
            cost[0] = estimator.per_message
            if "content" not in m:
                raise InputError('missing "content"', f"{where}.content")
            content = m["content"]
            calls: list[str] = []
            answers: list[str] = []
            if isinstance(content, str):
                estimator.add_text(cost, content, Kind.PROSE)
            else:
                for k, block in enumerate(u.expect_list(content, f"{where}.content")):
                    self._block(
                        block,
                        f"{where}.content[{k}]",
                        cost,
                        estimator,
                        role,
                        calls,
                        answers,
                        Kind.PROSE,
                        ctx,
                    )
                    if ctx.compacted:
                        ctx.compacted = False
                        compaction = (i, k)
                        after = [0] * width  # the API reads only what follows the block
                        after[0] = estimator.per_message
                        cost = after
                        self._block(block, "", cost, estimator, role, [], [], Kind.PROSE, ctx)
                        ctx.compacted = False
            view.items.append(Item(role, cost, tuple(calls), tuple(answers)))
        if compaction is not None:
            _compacted(view, compaction)
        if ctx.tool_search:
            base[0] += TOOL_SEARCH_TOKENS
        return u.noted(view, refs, media.anthropic_cost)

    def _block(
        self,
        block: Any,
        at: str,
        cost: list[int],
        est: Estimator,
        role: str | None,
        calls: list[str],
        answers: list[str],
        kind: Kind,
        ctx: _Context,
    ) -> None:
        block = u.expect_dict(block, at)
        t = block.get("type")
        if not isinstance(t, str):
            raise InputError('content block without a string "type"', f"{at}.type")
        if t == "text":
            est.add_text(cost, u.expect_str(block.get("text"), f"{at}.text"), kind)
        elif t == "image":
            cost[0] += media.anthropic_cost(_source(block.get("source"), f"{at}.source", "image"))
        elif t == "document":
            self._document(block, at, cost, est, ctx)
        elif t == "tool_use":
            if role is not ASSISTANT:
                raise InputError("a tool_use block belongs in an assistant message", f"{at}.type")
            call_id = u.required_str(block, "id", at)
            est.add_text(cost, u.required_str(block, "name", at), Kind.PROSE)
            if "input" not in block:
                raise InputError('missing "input"', f"{at}.input")
            u.add_json(cost, block["input"], est)
            est.add_text(cost, call_id, Kind.DENSE)
            cost[0] += est.per_tool_call
            calls.append(call_id)
        elif t == "tool_result":
            if role is not USER:
                raise InputError("a tool_result block belongs in a user message", f"{at}.type")
            call_id = u.required_str(block, "tool_use_id", at)
            est.add_text(cost, call_id, Kind.DENSE)
            is_error = block.get("is_error")
            if is_error is not None and not isinstance(is_error, bool):
                raise InputError(f"expected a boolean, got {u.kind_of(is_error)}", f"{at}.is_error")
            content = block.get("content")
            if isinstance(content, str):
                est.add_text(cost, content, Kind.DENSE)
            elif content is not None:
                for j, inner in enumerate(u.expect_list(content, f"{at}.content")):
                    self._block(
                        inner, f"{at}.content[{j}]", cost, est, None, [], [], Kind.DENSE, ctx
                    )
            answers.append(call_id)
        elif t == "thinking":
            est.add_text(cost, u.expect_str(block.get("thinking"), f"{at}.thinking"), Kind.PROSE)
        elif t == "redacted_thinking":
            est.add_text(cost, u.expect_str(block.get("data"), f"{at}.data"), Kind.DENSE)
        elif t in ("server_tool_use", "mcp_tool_use"):
            est.add_text(cost, u.required_str(block, "id", at), Kind.DENSE)
            est.add_text(cost, u.required_str(block, "name", at), Kind.PROSE)
            u.add_json(cost, block.get("input"), est)
            cost[0] += est.per_tool_call
        elif t.endswith("_tool_result"):
            est.add_text(cost, u.required_str(block, "tool_use_id", at), Kind.DENSE)
            u.add_json(cost, block.get("content"), est)
        elif t == "compaction":
            # The summary the API reads in place of everything before the block.
            summary = block.get("content")
            if summary is not None:
                est.add_text(cost, u.expect_str(summary, f"{at}.content"), Kind.PROSE)
            ctx.compacted = True
        elif t == "tool_reference":
            # The provider replaces the block with the named tool's full definition.
            name = u.required_str(block, "tool_name", at)
            u.add_json(cost, ctx.tools.get(name, block), est)
            ctx.tool_search = True
        else:
            u.add_json(cost, block, est)

    def _document(
        self, block: dict[str, Any], at: str, cost: list[int], est: Estimator, ctx: _Context
    ) -> None:
        for key in ("title", "context"):
            value = block.get(key)
            if isinstance(value, str):
                est.add_text(cost, value, Kind.PROSE)
        where = f"{at}.source"
        source = u.expect_dict(block.get("source"), where)
        st = source.get("type")
        if st == "text":
            est.add_text(cost, u.expect_str(source.get("data"), f"{where}.data"), Kind.PROSE)
        elif st == "content":
            content = source.get("content")
            if isinstance(content, str):
                est.add_text(cost, content, Kind.PROSE)
            else:
                for j, inner in enumerate(u.expect_list(content, f"{where}.content")):
                    self._block(
                        inner, f"{where}.content[{j}]", cost, est, None, [], [], Kind.PROSE, ctx
                    )
        else:
            found = _source(source, where, "pdf")
            if found.nbytes is None:
                ctx.refs.append(at)
            cost[0] += media.anthropic_cost(found)

    def write(self, body: Any, keep: Sequence[int]) -> Any:
        return u.keep_entries(body, "messages", keep)

    def problems(self, view: View, keep: Sequence[int]) -> list[Problem]:
        return u.adjacency_problems(view, keep)

    def reads_alone(self, message: Any) -> bool:
        """Every message reads the same alone as in its list (``ctxwin.fitting.incremental``):
        what spans messages (tool search, unknown documents) shows in the base cost
        and the notes, which the incremental reader compares."""
        return True

    def extend_view(self, view: View, part: View) -> bool:
        return extend_plain(view, part)

    def parts(self, body: Any, view: View, estimator: Estimator) -> list[Part]:
        """Each ``tool_result`` block's content, and the ``thinking`` /
        ``redacted_thinking`` blocks of earlier turns (the API lets a client omit
        them; those of the current turn must be sent back) where the message keeps
        another block. A result holding a ``tool_reference`` is left alone (it
        brings in a tool definition)."""
        names: dict[str, str] = {}
        found: list[Part] = []
        current = u.current_turn_start(view)
        ctx = _Context([])
        for i, m in enumerate(body["messages"]):
            content = m["content"]
            if isinstance(content, str):
                continue
            thoughts = []
            for k, block in enumerate(content):
                t = block["type"]
                if t == "tool_use":
                    names[block["id"]] = block["name"]
                elif t in ("thinking", "redacted_thinking"):
                    thoughts.append(k)
                elif t == "tool_result" and block.get("content") is not None:
                    inner = block["content"]
                    cost = [0] * estimator.width
                    if isinstance(inner, str):
                        estimator.add_text(cost, inner, Kind.DENSE)
                        text: str | None = inner
                    else:
                        if any(b.get("type") == "tool_reference" for b in inner):
                            continue
                        for b in inner:
                            self._block(b, "", cost, estimator, None, [], [], Kind.DENSE, ctx)
                        text = u.only_text(inner, _TEXT_BLOCKS)
                    tool = names.get(block["tool_use_id"])
                    found.append(Part(i, ("content", k, "content"), RESULT, tool, cost, text))
            if i < current and thoughts and len(thoughts) < len(content):
                for k in thoughts:
                    block = content[k]
                    cost = [0] * estimator.width
                    if block["type"] == "thinking":
                        estimator.add_text(cost, block["thinking"], Kind.PROSE)
                    else:
                        estimator.add_text(cost, block["data"], Kind.DENSE)
                    found.append(Part(i, ("content", k), THINKING, None, cost, None))
        found.sort(key=lambda p: p.index)
        return found

    def kinds(self, body: Any, view: View, estimator: Estimator) -> list[Part]:
        """The ``system`` prompt and ``tools``; in each message its ``tool_use`` (and
        server and MCP tool use) blocks, their results, its thinking and its images and
        documents, each block priced alone as :meth:`read` prices it. Blocks before a
        ``compaction`` block cost nothing (the API drops them), so they are no piece."""
        width = estimator.width
        found: list[Part] = []
        ctx = _Context([])
        system = body.get("system")
        if system is not None:
            cost = [0] * width
            cost[0] = estimator.per_message
            if isinstance(system, str):
                estimator.add_text(cost, system, Kind.PROSE)
            else:
                for block in system:
                    self._block(block, "", cost, estimator, None, [], [], Kind.PROSE, ctx)
            found.append(Part(-1, ("system",), SYSTEM_PROMPT, None, cost, None))
        tools = body.get("tools")
        if tools is not None:
            cost = [0] * width
            u.add_json(cost, tools, estimator)
            found.append(Part(-1, ("tools",), TOOL_DEFINITIONS, None, cost, None))
        names: dict[str, str] = {}
        for i, m in enumerate(body["messages"]):
            content = m["content"]
            if isinstance(content, str):
                continue
            role = view.items[i].role
            start = len(found)
            for k, block in enumerate(content):
                t = block["type"]
                if t == "compaction":
                    del found[start:]  # the API reads only what follows the block
                    continue
                if t in ("tool_use", "server_tool_use", "mcp_tool_use"):
                    names[block["id"]] = block["name"]
                    kind, tool = CALL, block["name"]
                elif t == "tool_result" or t.endswith("_tool_result"):
                    kind, tool = RESULT, names.get(block["tool_use_id"])
                elif t in ("thinking", "redacted_thinking"):
                    kind, tool = THINKING, None
                elif t in ("image", "document"):
                    kind, tool = MEDIA, None
                else:
                    continue
                cost = [0] * width
                self._block(block, "", cost, estimator, role, [], [], Kind.PROSE, ctx)
                found.append(Part(i, ("content", k), kind, tool, cost, None))
        return found

    def replaced_cost(self, part: Part, text: str, estimator: Estimator) -> list[int]:
        return u.dense_cost(text if part.kind == RESULT else "", estimator)

    def edit(self, body: Any, edits: Edits) -> Any:
        return u.edit_entries(body, "messages", edits, _put)


_TEXT_BLOCKS = frozenset({"text"})


def _put(old: Any, path: Path, new: str | None) -> Any:
    """The new value at ``path``: a removed block, or a result's new text. A result whose
    content blocks carry a ``cache_control`` mark keeps it: its text becomes one text
    block with the last mark (a mark on the ``tool_result`` block itself is outside the
    path and stays as it is)."""
    if new is None:
        return u.REMOVE
    if isinstance(old, list):
        marks = [b["cache_control"] for b in old if isinstance(b, dict) and "cache_control" in b]
        if marks:
            return [{"type": "text", "text": new, "cache_control": marks[-1]}]
    return new


TOOL_SEARCH_TOKENS = ANTHROPIC_TOOL_PROMPT
"""Added once to a request whose messages hold a ``tool_reference`` block.

With tool search the provider expands each ``tool_reference`` into the named
tool's full definition (charged in place, from ``tools``) and brings in its
tool-search instructions, which the body never shows and Anthropic does not
publish a size for. They are charged as a second tool-use system prompt
(:data:`ctxwin.tokens.ANTHROPIC_TOOL_PROMPT`, 346 tokens) — an assumption that
errs high. The one recorded ``count_tokens`` answer for such a body (641 tokens; in
the fit part of the provider calls, ``python -m fidelity.provider``) needs 47 of them
at ``content``'s seed and 22 at ``bound``'s; the held-out part holds no such call.
"""


class _Context:
    """What one ``read`` gathers across blocks."""

    __slots__ = ("compacted", "refs", "tool_search", "tools")

    def __init__(self, refs: list[str]) -> None:
        self.refs = refs
        self.tools: dict[str, Any] = {}
        self.tool_search = False
        self.compacted = False
        """Set by a ``compaction`` block: the read restarts the message's cost there."""


def _compacted(view: View, at: tuple[int, int]) -> None:
    """The API drops every block before the last ``compaction`` block (``at``: message,
    block): the messages before it cost nothing and join the head, never dropped (the
    head runs on through the next user message)."""
    index, block = at
    items = view.items
    for item in items[:index]:
        item.cost = [0] * len(item.cost)
    pinned = index + 1
    if items[index].role == ASSISTANT:  # the head ends with a user message, as always
        while pinned < len(items) and items[pinned].role != USER:
            pinned += 1
        pinned = min(pinned + 1, len(items))
    view.pinned = pinned
    if index or block:
        view.notes.append(
            f"a compaction block at {view.where(index)}.content[{block}]: the "
            f"{index:,} message(s) and {block:,} block(s) before it are not counted "
            "(the API drops them) and are kept as they are"
        )


def _source(source: Any, where: str, kind: str) -> media.Media:
    """The media behind an image or document ``source``."""
    source = u.expect_dict(source, where)
    st = source.get("type")
    if st == "base64":
        data = u.expect_str(source.get("data"), f"{where}.data")
        mt = source.get("media_type")
        found = media.sniff(data, mt if isinstance(mt, str) else None)
        if found.kind != kind and kind == "image":
            return media.Media("image", nbytes=found.nbytes)
        return found
    if st in ("url", "file"):
        return media.unknown(kind)
    raise InputError(
        f"unknown source type {st!r} (expected base64, url, file, text or content)",
        f"{where}.type",
    )


MAX_CACHE_MARKS = 4
"""Anthropic's limit of ``cache_control`` breakpoints in one request."""
STABLE_MARK = {"type": "ephemeral"}
"""The mark :func:`with_stable_mark` adds (Anthropic's default five-minute lifetime)."""
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


def cache_marks(body: Any) -> int:
    """How many ``cache_control`` breakpoints ``body`` (a Messages request) holds: on its
    tools, its system blocks, its messages' blocks and the blocks inside a result."""

    if not isinstance(body, dict):
        return 0
    marks = 0
    stack = [body.get("tools"), body.get("system"), body.get("messages")]
    while stack:  # iterative: blocks inside results nest as deep as the body does
        value = stack.pop()
        if isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, dict):
            marks += value.get("cache_control") is not None
            stack.append(value.get("content"))
    return marks


def with_stable_mark(body: Any) -> Any | None:
    """``body`` with one ``cache_control`` mark (:data:`STABLE_MARK`) on the last block of
    its last message, where the prefix the next request of a growing run re-sends ends;
    ``None`` when nothing is added: the body holds :data:`MAX_CACHE_MARKS` marks already,
    that block is marked already, or it cannot carry a mark (no message, an empty text,
    only thinking). A string content becomes one text block. Only the last message is
    copied; every other value is the body's own."""
    if not isinstance(body, dict):
        return None
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return None
    last = messages[-1]
    content = last.get("content")
    if isinstance(content, str):
        if not content:
            return None
        blocks: list[Any] = [{"type": "text", "text": content}]
        k = 0
    elif isinstance(content, list):
        blocks = list(content)
        k = len(blocks) - 1
        while k >= 0 and isinstance(blocks[k], dict) and blocks[k].get("type") in _UNMARKABLE:
            k -= 1
        if k < 0 or not isinstance(blocks[k], dict):
            return None
    else:
        return None
    block = blocks[k]
    empty = block.get("type") == "text" and not block.get("text")
    if block.get("cache_control") is not None or empty:
        return None
    if cache_marks(body) >= MAX_CACHE_MARKS:
        return None
    blocks[k] = {**block, "cache_control": dict(STABLE_MARK)}
    return {**body, "messages": [*messages[:-1], {**last, "content": blocks}]}
