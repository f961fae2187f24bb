"""OpenAI Responses: ``{"model", "instructions", "input", "tools", "max_output_tokens", ...}``.

``instructions`` is outside the item list: counted in the view's base and
always kept. ``input`` is a string (one user message) or a list of items
(a bare list of items is accepted too): ``message`` items (``role`` user,
system, developer or assistant; content a string or ``input_text`` /
``output_text`` / ``input_image`` / ``input_file`` parts), ``function_call``
{call_id, name, arguments} and ``function_call_output`` {call_id, output},
``custom_tool_call`` / ``custom_tool_call_output``, ``reasoning``, built-in
tool call items (``*_call``, answered by ``*_call_output`` when they carry a
``call_id``), ``mcp_approval_request`` / ``mcp_approval_response``.

Head, turns and drop units: the head is the leading system/developer
messages plus everything through the first user message. One model response
spans consecutive model items (``reasoning``, ``message`` from the
assistant, tool calls): the first of them opens a turn and the rest join it,
and the tool outputs and user messages after them join the turn too. So a
``reasoning`` item is always in the same turn as the item that follows it.

Provider rules the output keeps (checked by :meth:`OpenAIResponses.problems`):
a ``reasoning`` item is immediately followed by the model item that followed
it in the input (the API rejects a reasoning item "provided without its
required following item"), and that item keeps its reasoning item (the API
also rejects a call "provided without its required reasoning item").
"""

from __future__ import annotations

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
)
from ctxwin.tokens.base import Estimator, Kind
from ctxwin.view import ASSISTANT, SYSTEM, TOOL, USER, Item, Problem, View

ROLES = {"user": USER, "system": SYSTEM, "developer": SYSTEM, "assistant": ASSISTANT}

ITEM_TYPES = frozenset(
    {
        "message",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "reasoning",
        "item_reference",
        "mcp_approval_request",
        "mcp_approval_response",
        "mcp_list_tools",
        "mcp_call",
        "web_search_call",
        "file_search_call",
        "computer_call",
        "computer_call_output",
        "code_interpreter_call",
        "image_generation_call",
        "local_shell_call",
        "local_shell_call_output",
        "compaction",
    }
)


class ResponsesView(View):
    """A view that also knows which items are ``reasoning`` items (a plain class, as
    :class:`~ctxwin.view.View` is: its fields follow the view's)."""

    _fields = (*View._fields, "reasoning", "refs", "compaction")
    __slots__ = _fields[len(View._fields) :]

    reasoning: set[int]
    refs: list[str]
    """Paths of documents known only by URL or file id."""
    compaction: int | None
    """Index of the latest ``compaction`` item."""

    def __init__(
        self,
        *fields: Any,
        reasoning: set[int] | None = None,
        refs: list[str] | None = None,
        compaction: int | None = None,
        **view: Any,
    ) -> None:
        super().__init__(*fields, **view)
        self.reasoning = set() if reasoning is None else reasoning
        self.refs = [] if refs is None else refs
        self.compaction = compaction


class OpenAIResponses:
    name = "openai-responses"
    items_key = "input"
    format_rules = True
    local_rules = True
    description = 'OpenAI Responses body {"input": "..." | [...], "instructions": ...}'

    def detect(self, body: Any) -> bool:
        if isinstance(body, list):
            return any(
                isinstance(x, dict) and isinstance(x.get("type"), str) and x["type"] in ITEM_TYPES
                for x in body[:50]
            ) and not any(isinstance(x, dict) and "parts" in x for x in body[:3])
        return (
            isinstance(body, dict)
            and "input" in body
            and "messages" not in body
            and "contents" not in body
        )

    def read(self, body: Any, estimator: Estimator) -> View:
        width = estimator.width
        base = [0] * width
        if isinstance(body, list):
            items: list[Any] | str = body
            prefix = ""
            model = None
            max_tokens = None
            has_tools = False
            notes: list[str] = []
        else:
            body = u.expect_dict(body, "(body)")
            if "input" not in body:
                raise InputError('missing "input" (expected an OpenAI Responses body)', "input")
            raw = body["input"]
            if not isinstance(raw, str):
                raw = u.expect_list(raw, "input")
            items = raw
            prefix = "input"
            model = u.optional_model(body)
            max_tokens = u.optional_int(body, "max_output_tokens", "max_output_tokens")
            instructions = body.get("instructions")
            if isinstance(instructions, str):
                base[0] += estimator.per_message
                estimator.add_text(base, instructions, Kind.PROSE)
            elif instructions is not None:
                u.add_json(base, u.expect_list(instructions, "instructions"), estimator)
            tools = body.get("tools")
            has_tools = tools is not None
            if has_tools:
                u.add_json(base, u.expect_list(tools, "tools"), estimator)
            notes = []
            if body.get("previous_response_id") is not None:
                notes.append(
                    "previous_response_id is set: the stored conversation it continues is "
                    "not in the body and is not counted"
                )
        base[0] += estimator.framing(self.name, has_tools=has_tools, model=model)
        view = ResponsesView(self.name, [], base, model, max_tokens, prefix, notes)
        if isinstance(items, str):
            cost = [0] * width
            cost[0] = estimator.per_message
            estimator.add_text(cost, items, Kind.PROSE)
            view.items.append(Item(USER, cost))
            return view
        prev_model = False
        for i, it in enumerate(items):
            item = self._item(it, view.where(i), estimator, view, i)
            is_model = item.role == ASSISTANT
            item.joins = is_model and prev_model
            prev_model = is_model
            view.items.append(item)
        if view.compaction is not None:
            _compacted(view, view.compaction)
        return u.noted(view, view.refs, media.openai_cost)

    def _item(self, it: Any, where: str, est: Estimator, view: ResponsesView, i: int) -> Item:
        if not isinstance(it, dict):
            raise InputError(f"expected an input item object, got {u.kind_of(it)}", where)
        cost = [0] * est.width
        cost[0] = est.per_message
        t = it.get("type")
        if t is None or t == "message":
            expected = f"one of: {', '.join(ROLES)}"
            role = u.role_of(
                it, ROLES, where, expected, 'missing "role" (or "type") on an input item'
            )
            content = it.get("content")
            if isinstance(content, str):
                est.add_text(cost, content, Kind.PROSE)
            elif content is not None:
                self._parts(content, f"{where}.content", cost, est, Kind.PROSE, view.refs)
            else:
                raise InputError('missing "content"', f"{where}.content")
            return Item(role, cost)
        if not isinstance(t, str):
            raise InputError(f"expected a string, got {u.kind_of(t)}", f"{where}.type")
        if t in ("function_call", "custom_tool_call"):
            call_id = u.required_str(it, "call_id", where)
            est.add_text(cost, u.required_str(it, "name", where), Kind.PROSE)
            key = "arguments" if t == "function_call" else "input"
            est.add_text(cost, u.required_str(it, key, where), Kind.DENSE)
            est.add_text(cost, call_id, Kind.DENSE)
            cost[0] += est.per_tool_call
            return Item(ASSISTANT, cost, calls=(call_id,))
        if t.endswith("_call_output"):
            call_id = u.required_str(it, "call_id", where)
            est.add_text(cost, call_id, Kind.DENSE)
            if "output" not in it:
                raise InputError('missing "output"', f"{where}.output")
            output = it["output"]
            if isinstance(output, str):
                est.add_text(cost, output, Kind.DENSE)
            elif isinstance(output, list):
                self._parts(output, f"{where}.output", cost, est, Kind.DENSE, view.refs)
            else:
                u.add_json(cost, output, est)
            return Item(TOOL, cost, answers=(call_id,))
        if t == "reasoning":
            for key in ("summary", "content"):
                parts = it.get(key)
                if parts is None:
                    continue
                for k, part in enumerate(u.expect_list(parts, f"{where}.{key}")):
                    part = u.expect_dict(part, f"{where}.{key}[{k}]")
                    text = part.get("text")
                    if text is not None:
                        est.add_text(
                            cost, u.expect_str(text, f"{where}.{key}[{k}].text"), Kind.PROSE
                        )
            add_reasoning(cost, it, est)
            view.reasoning.add(i)
            return Item(ASSISTANT, cost)
        if t == "compaction":
            # Opaque state the model reads in place of the items before it (which the
            # API still reads and bills when they are sent): costed by an upper bound.
            cost[0] += compaction_tokens(u.required_str(it, "encrypted_content", where))
            view.compaction = i
            return Item(ASSISTANT, cost)
        if t == "mcp_approval_request":
            u.add_json(cost, it, est)
            return Item(ASSISTANT, cost, calls=(u.required_str(it, "id", where),))
        if t == "mcp_approval_response":
            u.add_json(cost, it, est)
            return Item(TOOL, cost, answers=(u.required_str(it, "approval_request_id", where),))
        u.add_json(cost, it, est)
        if t.endswith("_call") or t in ("mcp_list_tools",):
            ref = it.get("call_id")
            calls = (ref,) if isinstance(ref, str) else ()
            return Item(ASSISTANT, cost, calls=calls)
        return Item(TOOL, cost)

    def _parts(
        self, parts: Any, where: str, cost: list[int], est: Estimator, kind: Kind, refs: list[str]
    ) -> None:
        for k, part in enumerate(u.expect_list(parts, where)):
            at = f"{where}[{k}]"
            part = u.expect_dict(part, at)
            t = part.get("type")
            if t in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
                est.add_text(cost, u.expect_str(part.get("text"), f"{at}.text"), kind)
            elif t == "refusal":
                est.add_text(cost, u.expect_str(part.get("refusal"), f"{at}.refusal"), kind)
            elif t == "input_image":
                detail = part.get("detail")
                url = part.get("image_url")
                found = media.unknown("image")
                if isinstance(url, str):
                    parsed = media.parse_data_uri(url)
                    if parsed is not None:
                        found = media.sniff(parsed[1], parsed[0])
                cost[0] += media.openai_cost(
                    found if found.kind == "image" else media.Media("image"),
                    detail if isinstance(detail, str) else None,
                )
            elif t == "input_file":
                found = _file_media(part, at)
                if found.nbytes is None:
                    refs.append(at)
                cost[0] += media.openai_cost(found)
            elif t == "input_audio":
                audio = u.expect_dict(part.get("input_audio"), f"{at}.input_audio")
                data = u.expect_str(audio.get("data"), f"{at}.input_audio.data")
                fmt = audio.get("format")
                cost[0] += media.openai_cost(
                    media.sniff(data, None, fmt if isinstance(fmt, str) else "audio")
                )
            elif isinstance(t, str):
                u.add_json(cost, part, est)
            else:
                raise InputError('content part without a string "type"', f"{at}.type")

    def write(self, body: Any, keep: Sequence[int]) -> Any:
        if isinstance(body, dict) and isinstance(body["input"], str):
            return body  # one user message, always kept
        return u.keep_entries(body, "input", keep)

    def reads_alone(self, item: Any) -> bool:
        """Every item reads the same alone as in its list (``ctxwin.fitting.incremental``), but
        for what :meth:`extend_view` puts right: whether a model item continues the
        model items before it, and which indices hold ``reasoning`` items."""
        return True

    def extend_view(self, view: View, part: View) -> bool:
        """Append to ``view`` the items of ``part`` (the entries after ``view``'s, read
        alone), as reading them in one list gives: the first joins a model item before
        it, and ``part``'s reasoning items are numbered after ``view``'s items. False
        (nothing done) when either is not a view of this format."""
        if not (isinstance(view, ResponsesView) and isinstance(part, ResponsesView)):
            return False
        offset = len(view.items)
        added = part.items
        if added and view.items:
            first = added[0]
            first.joins = first.role == ASSISTANT and view.items[-1].role == ASSISTANT
        view.items.extend(added)
        if part.reasoning:  # a new set: views taken of the shorter history keep theirs
            view.reasoning = view.reasoning | {offset + i for i in part.reasoning}
        return True

    def parts(self, body: Any, view: View, estimator: Estimator) -> list[Part]:
        """The ``output`` of each ``function_call_output`` and ``custom_tool_call_output``
        item. ``reasoning`` items are not offered: an item produced with one must keep it."""
        items = body if isinstance(body, list) else body["input"]
        if isinstance(items, str):
            return []
        names: dict[str, str] = {}
        found: list[Part] = []
        for i, it in enumerate(items):
            t = it.get("type")
            if t in ("function_call", "custom_tool_call"):
                names[it["call_id"]] = it["name"]
            elif t in _OUTPUTS:
                output = it["output"]
                cost = [0] * estimator.width
                text: str | None = None
                if isinstance(output, str):
                    estimator.add_text(cost, output, Kind.DENSE)
                    text = output
                elif isinstance(output, list):
                    self._parts(output, "", cost, estimator, Kind.DENSE, [])
                    text = u.only_text(output, _TEXT_PARTS)
                else:
                    u.add_json(cost, output, estimator)
                found.append(Part(i, ("output",), RESULT, names.get(it["call_id"]), cost, text))
        return found

    def kinds(self, body: Any, view: View, estimator: Estimator) -> list[Part]:
        """The ``instructions`` and ``tools``; each item whole by its type: a tool call
        (``function_call``, ``custom_tool_call``, a built-in ``*_call``, an MCP approval
        request), a tool's output (``*_call_output``, an approval response), a
        ``reasoning`` item (thinking); and the media parts of ``message`` items."""
        width = estimator.width
        found: list[Part] = []
        if isinstance(body, dict):
            instructions = body.get("instructions")
            if instructions is not None:
                cost = [0] * width
                if isinstance(instructions, str):
                    cost[0] += estimator.per_message
                    estimator.add_text(cost, instructions, Kind.PROSE)
                else:
                    u.add_json(cost, instructions, estimator)
                found.append(Part(-1, ("instructions",), SYSTEM_PROMPT, None, cost, None))
            if body.get("tools") is not None:
                cost = [0] * width
                u.add_json(cost, body["tools"], estimator)
                found.append(Part(-1, ("tools",), TOOL_DEFINITIONS, None, cost, None))
        items = body if isinstance(body, list) else body["input"]
        if isinstance(items, str):
            return found
        names: dict[str, str] = {}
        for i, it in enumerate(items):
            t = it.get("type")
            whole = view.items[i].cost
            if t is None or t == "message":
                content = it.get("content")
                if not isinstance(content, list):
                    continue
                for k, part in enumerate(content):
                    if part.get("type") not in ("input_image", "input_file", "input_audio"):
                        continue
                    cost = [0] * width
                    self._parts([part], "", cost, estimator, Kind.PROSE, [])
                    found.append(Part(i, ("content", k), MEDIA, None, cost, None))
            elif t in ("function_call", "custom_tool_call"):
                names[it["call_id"]] = it["name"]
                found.append(Part(i, (), CALL, it["name"], list(whole), None))
            elif t == "reasoning":
                found.append(Part(i, (), THINKING, None, list(whole), None))
            elif t.endswith("_call_output") or t == "mcp_approval_response":
                ref = it.get("call_id")
                tool = names.get(ref) if isinstance(ref, str) else None
                if tool is None and t != "function_call_output":
                    tool = t.removesuffix("_output")
                found.append(Part(i, (), RESULT, tool, list(whole), None))
            elif t.endswith("_call") or t in ("mcp_list_tools", "mcp_approval_request"):
                name = it.get("name") if t == "mcp_call" else None
                tool = name if isinstance(name, str) else t
                ref = it.get("call_id")
                if isinstance(ref, str):
                    names[ref] = tool
                found.append(Part(i, (), CALL, tool, list(whole), None))
        return found

    def replaced_cost(self, part: Part, text: str, estimator: Estimator) -> list[int]:
        return u.dense_cost(text, estimator)

    def edit(self, body: Any, edits: Edits) -> Any:
        return u.edit_entries(body, "input", edits, _put)

    def problems(self, view: View, keep: Sequence[int]) -> list[Problem]:
        reasoning = getattr(view, "reasoning", None)
        if not reasoning:
            return []
        items = view.items
        problems: list[Problem] = []
        for pos, i in enumerate(keep):
            if i - 1 in reasoning and (pos == 0 or keep[pos - 1] != i - 1):
                problems.append(
                    Problem(
                        i,
                        view.where(i),
                        "reasoning-kept",
                        "an item produced with a reasoning item must keep that reasoning "
                        "item right before it",
                    )
                )
            if i not in reasoning:
                continue
            ok = pos + 1 < len(keep) and keep[pos + 1] == i + 1 and items[i + 1].role == ASSISTANT
            if not ok:
                problems.append(
                    Problem(
                        i,
                        view.where(i),
                        "reasoning-followed",
                        "a reasoning item must be followed by the model item it was produced with",
                    )
                )
        return problems


_OUTPUTS = ("function_call_output", "custom_tool_call_output")
"""The result items whose ``output`` may be any string."""

_TEXT_PARTS = frozenset({"input_text", "output_text", "text"})


def _put(old: Any, path: Path, new: str | None) -> Any:
    return new


def _file_media(part: dict[str, Any], at: str) -> media.Media:
    data = part.get("file_data")
    if isinstance(data, str):
        parsed = media.parse_data_uri(data)
        if parsed is not None:
            return media.sniff(parsed[1], parsed[0])
        return media.sniff(data, None)
    if data is not None:
        raise InputError(f"expected a string, got {u.kind_of(data)}", f"{at}.file_data")
    return media.unknown("pdf")


REASONING_TOKENS = "ctxwin_reasoning_tokens"
"""The key of a ``reasoning`` item under which a reader that knows the usage of the
response that produced the item notes that response's reasoning tokens (the Codex
rollout reader does: ``reasoning_output_tokens``). Not an API field: a body that
carries it is a record, not a request to send as it is."""


def add_reasoning(cost: list[int], item: dict[str, Any], estimator: Estimator) -> None:
    """Add into ``cost`` what a ``reasoning`` item's ``encrypted_content`` costs when the
    item is sent back: an upper bound on what the provider counts for it.

    The ciphertext carries the reasoning tokens the model produced for the response the
    item came from, in an envelope (OpenAI's Codex client estimates the item at 3/4 of
    its length less 650 bytes, at 4 bytes a token): priced as text, it costs 4-87 times
    the reasoning tokens it carries (median 10.6 on the Codex samples). The provider
    reads those tokens back while the tool-calling sequence that produced the item goes
    on, and drops them once a new user message follows (OpenAI's reasoning guide and its
    "reasoning items" cookbook; a model that keeps reasoning across turns keeps the same
    tokens). Either way the item counts at most the reasoning tokens of its response,
    which the response's usage reports: the price when the item carries them under
    :data:`REASONING_TOKENS`. Several reasoning items of one response each carry that
    total, each an upper bound on its own share. Without it, the ciphertext is priced as
    dense text, as before: over the reasoning tokens on every sample not redacted."""
    known = item.get(REASONING_TOKENS)
    if isinstance(known, int) and not isinstance(known, bool) and known >= 0:
        cost[0] += known
        return
    encrypted = item.get("encrypted_content")
    if isinstance(encrypted, str):
        estimator.add_text(cost, encrypted, Kind.DENSE)


def compaction_tokens(encrypted: str) -> int:
    """An upper bound on what a ``compaction`` item's ``encrypted_content`` costs.

    The content is opaque (base64 of a ciphertext): it decodes to at most 3/4 of its
    length in bytes, encryption never makes the state it carries shorter, and no token
    covers less than one byte, so the model reads at most ``ceil(3/4 × length)``
    tokens from it. (OpenAI's Codex client estimates the same item at 3/4 × length
    less 650 bytes of envelope, at 4 bytes a token: about a quarter of this bound.)
    """
    return (3 * len(encrypted) + 3) // 4


def _compacted(view: ResponsesView, index: int) -> None:
    """The latest ``compaction`` item carries the context of the items before it, which
    a client may drop (OpenAI's compaction guide) but which the API still reads and
    bills when they are sent. So they are counted as they are; the compaction item (and
    the user or developer messages right after it) join the head and are never dropped or
    edited; the items between the leading system and
    developer messages and the compaction item are one block a fit drops before any turn
    (unless a call id links them to the items after it)."""
    items = view.items
    pinned = index + 1
    while pinned < len(items) and items[pinned].role in (USER, SYSTEM):
        pinned += 1  # the messages that follow it, up to the model's next item, too
    view.pinned = pinned
    start = 0
    while start < index and items[start].role == SYSTEM:
        start += 1
    if start == index:
        return
    inside = {c for item in items[start:index] for c in (*item.calls, *item.answers)}
    if any(c in inside for item in items[index:] for c in (*item.calls, *item.answers)):
        view.notes.append(
            f"a compaction item at {view.where(index)}: the items before it are counted "
            "and kept (a call id links them to the items after it)"
        )
        return
    view.superseded = (start, index)
    view.notes.append(
        f"a compaction item at {view.where(index)}: the {index - start:,} item(s) before it "
        "are counted (the API reads and bills them) and are dropped first when the request "
        "must shrink (the compaction item carries their context)"
    )
