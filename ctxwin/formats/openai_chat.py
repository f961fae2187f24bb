"""OpenAI Chat Completions: ``{"model", "messages", "tools", "max_tokens", ...}``.

Also accepts a bare ``messages`` array. Roles: ``system``/``developer`` (head),
``user``, ``assistant`` (with ``tool_calls``), ``tool`` (answers one
``tool_call_id``). The provider rejects a ``tool`` message whose id no earlier
assistant call made.

Content is a string or a list of parts: ``text``, ``refusal``, ``image_url``
(a URL or a ``data:`` URI, with ``detail``), ``input_audio`` {data, format},
``file`` {file_data | file_id, filename}. Media are priced by
:mod:`ctxwin.formats.media`, never by their base64 bytes.

The legacy function-calling shape is read too: top-level ``functions``, an
assistant ``function_call`` {name, arguments} and a ``function`` message
{name, content} holding its result. Those carry no ids: a ``function``
message answers the oldest unanswered call of the same name, and each call
gets a synthetic id (``<name>#<message index>``) so pairing works as for
``tool_calls``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxwin.codec import dumps
from ctxwin.errors import InputError
from ctxwin.formats import _util as u
from ctxwin.formats import media
from ctxwin.formats.base import (
    CALL,
    MEDIA,
    RESULT,
    TOOL_DEFINITIONS,
    Edits,
    Part,
    Path,
    extend_plain,
)
from ctxwin.tokens.base import Estimator, Kind
from ctxwin.view import ASSISTANT, SYSTEM, TOOL, USER, Item, Problem, View

ROLES = {
    "system": SYSTEM,
    "developer": SYSTEM,
    "user": USER,
    "assistant": ASSISTANT,
    "tool": TOOL,
    "function": TOOL,
}

_PLAIN_ROLES = {"user": USER, "system": SYSTEM, "developer": SYSTEM}

MEDIA_PART_TOKENS = 1105
"""Conservative flat cost of a non-text content part whose size is unknown."""


class OpenAIChat:
    name = "openai-chat"
    items_key = "messages"
    local_rules = True
    format_rules = False  # Chat Completions has no rules beyond pairing
    description = 'OpenAI Chat Completions body {"messages": [...]} or a bare messages array'

    def detect(self, body: Any) -> bool:
        if isinstance(body, list):
            return all(isinstance(m, dict) and "role" in m for m in body[:3])
        return isinstance(body, dict) and isinstance(body.get("messages"), list)

    def read(self, body: Any, estimator: Estimator) -> View:
        base = [0] * estimator.width
        if isinstance(body, list):
            messages: list[Any] = body
            prefix = "messages"  # a bare array reads as the body's messages
            model = None
            max_tokens = None
            has_tools = False
        else:
            body = u.expect_dict(body, "(body)")
            if "messages" not in body:
                raise InputError(
                    'missing "messages" (expected a Chat Completions body)', "messages"
                )
            messages = u.expect_list(body["messages"], "messages")
            prefix = "messages"
            model = u.optional_model(body)
            max_tokens = u.optional_int(body, "max_completion_tokens", "max_completion_tokens")
            if max_tokens is None:
                max_tokens = u.optional_int(body, "max_tokens", "max_tokens")
            tools = body.get("tools")
            has_tools = tools is not None
            if has_tools:
                u.expect_list(tools, "tools")
                estimator.add_bytes(base, dumps(tools), Kind.DENSE)
            functions = body.get("functions")
            if functions is not None:
                u.add_json(base, u.expect_list(functions, "functions"), estimator)
                has_tools = True
        base[0] += estimator.framing(self.name, has_tools=has_tools, model=model)
        view = View(self.name, [], base, model, max_tokens, prefix)
        items = view.items
        append = items.append
        add_text = estimator.add_text
        blank = [estimator.per_message] + [0] * (estimator.width - 1)
        per_tool_call = estimator.per_tool_call
        prose, dense = Kind.PROSE, Kind.DENSE
        pending = u.Pending()
        refs: list[str] = []
        for i, m in enumerate(messages):
            # Fast path for the common shapes: string or null content, well-formed
            # tool calls and results. Strings of one kind are measured together
            # (estimators are additive over concatenation). Anything else takes
            # the checked path below, which also names the bad field.
            if type(m) is dict:
                role_name = m.get("role")
                content = m.get("content")
                if content is None:
                    content = ""
                if type(content) is str and type(role_name) is str:
                    if role_name == "tool":
                        call_id = m.get("tool_call_id")
                        if type(call_id) is str:
                            cost = blank.copy()
                            add_text(cost, content + call_id, dense)
                            append(Item(TOOL, cost, (), (call_id,)))
                            continue
                    elif role_name == "assistant":
                        calls = m.get("tool_calls")
                        if m.get("function_call") is None and (calls is None or calls == []):
                            cost = blank.copy()
                            add_text(cost, content, prose)
                            append(Item(ASSISTANT, cost))
                            continue
                        if type(calls) is list and m.get("function_call") is None:
                            read = _fast_calls(calls)
                            if read is not None:
                                ids, names, args = read
                                cost = blank.copy()
                                cost[0] += per_tool_call * len(ids)
                                add_text(cost, content + names, prose)
                                add_text(cost, args, dense)
                                append(Item(ASSISTANT, cost, ids))
                                continue
                    elif role_name in _PLAIN_ROLES:
                        cost = blank.copy()
                        add_text(cost, content, prose)
                        append(Item(_PLAIN_ROLES[role_name], cost))
                        continue
            append(self._read_message(m, i, view, estimator, pending, refs))
        return u.noted(view, refs, media.openai_cost)

    def _read_message(
        self,
        m: Any,
        i: int,
        view: View,
        estimator: Estimator,
        pending: u.Pending,
        refs: list[str],
    ) -> Item:
        """Read one message with every check, naming the field that is wrong."""
        add_text = estimator.add_text
        width = estimator.width
        per_message = estimator.per_message
        if not isinstance(m, dict):
            raise InputError(f"expected a message object, got {u.kind_of(m)}", view.where(i))
        role = u.role_of(m, ROLES, view.where(i), f"one of: {', '.join(ROLES)}")
        cost = [0] * width
        cost[0] = per_message
        kind = Kind.DENSE if role is TOOL else Kind.PROSE
        content = m.get("content")
        if isinstance(content, str):
            add_text(cost, content, kind)
        elif content is not None:
            self._parts(content, kind, cost, estimator, f"{view.where(i)}.content", refs)
        item = Item(role, cost)
        if role is ASSISTANT:
            calls = m.get("tool_calls")
            if calls is not None:
                item.calls = self._calls(calls, cost, estimator, f"{view.where(i)}.tool_calls")
            legacy = m.get("function_call")
            if legacy is not None:
                at = f"{view.where(i)}.function_call"
                legacy = u.expect_dict(legacy, at)
                name = u.expect_str(legacy.get("name"), f"{at}.name")
                add_text(cost, name, Kind.PROSE)
                args = legacy.get("arguments", "")
                add_text(cost, u.expect_str(args, f"{at}.arguments"), Kind.DENSE)
                cost[0] += estimator.per_tool_call
                synthetic = f"{name}#{i}"
                pending.add(name, synthetic)
                item.calls = (*item.calls, synthetic)
        elif m["role"] == "function":
            at = f"{view.where(i)}.name"
            if "name" not in m:
                raise InputError('missing "name" on a function message', at)
            name = u.expect_str(m["name"], at)
            add_text(cost, name, Kind.PROSE)
            taken = pending.take(name)
            item.answers = (f"{name} (by name)" if taken is None else taken,)
        elif role is TOOL:
            call_id = m.get("tool_call_id")
            where = f"{view.where(i)}.tool_call_id"
            if call_id is None:
                raise InputError('missing "tool_call_id" on a tool message', where)
            add_text(cost, u.expect_str(call_id, where), Kind.DENSE)
            item.answers = (call_id,)
        return item

    @staticmethod
    def _calls(calls: Any, cost: list[int], estimator: Estimator, where: str) -> tuple[str, ...]:
        ids = []
        for j, call in enumerate(u.expect_list(calls, where)):
            at = f"{where}[{j}]"
            call = u.expect_dict(call, at)
            call_id = u.expect_str(call.get("id"), f"{at}.id")
            fn = u.expect_dict(call.get("function"), f"{at}.function")
            estimator.add_text(
                cost, u.expect_str(fn.get("name"), f"{at}.function.name"), Kind.PROSE
            )
            args = fn.get("arguments", "")
            estimator.add_text(cost, u.expect_str(args, f"{at}.function.arguments"), Kind.DENSE)
            estimator.add_text(cost, call_id, Kind.DENSE)
            cost[0] += estimator.per_tool_call
            ids.append(call_id)
        return tuple(ids)

    @staticmethod
    def _parts(
        content: Any, kind: Kind, cost: list[int], estimator: Estimator, where: str, refs: list[str]
    ) -> None:
        for k, part in enumerate(u.expect_list(content, where)):
            at = f"{where}[{k}]"
            part = u.expect_dict(part, at)
            ptype = part.get("type")
            if ptype == "text":
                estimator.add_text(cost, u.expect_str(part.get("text"), f"{at}.text"), kind)
            elif ptype == "refusal":
                estimator.add_text(cost, u.expect_str(part.get("refusal"), f"{at}.refusal"), kind)
            elif ptype == "image_url":
                cost[0] += _image_cost(part, at)
            elif ptype == "input_audio":
                audio = u.expect_dict(part.get("input_audio"), f"{at}.input_audio")
                data = u.expect_str(audio.get("data"), f"{at}.input_audio.data")
                fmt = audio.get("format")
                found = media.sniff(data, None, fmt if isinstance(fmt, str) else "audio")
                cost[0] += media.openai_cost(found)
            elif ptype == "file":
                found = _file_media(part, at)
                if found.nbytes is None:
                    refs.append(at)
                cost[0] += media.openai_cost(found)
            elif isinstance(ptype, str):
                cost[0] += MEDIA_PART_TOKENS
            else:
                raise InputError('content part without a string "type"', f"{at}.type")

    def write(self, body: Any, keep: Sequence[int]) -> Any:
        return u.keep_entries(body, "messages", keep)

    def problems(self, view: View, keep: Sequence[int]) -> list[Problem]:
        return []

    def reads_alone(self, message: Any) -> bool:
        """Whether ``message`` reads the same alone as in its list (``ctxwin.fitting.incremental``):
        all but the legacy ``function_call`` and ``function`` messages, paired by name (a
        ``function_call`` of ``null``, as LiteLLM writes on every assistant message, is
        none)."""
        return type(message) is not dict or (
            message.get("function_call") is None and message.get("role") != "function"
        )

    def extend_view(self, view: View, part: View) -> bool:
        return extend_plain(view, part)

    def parts(self, body: Any, view: View, estimator: Estimator) -> list[Part]:
        """Each ``tool`` (or legacy ``function``) message's content; Chat has no thinking."""
        messages = body if isinstance(body, list) else body["messages"]
        names: dict[str, str] = {}
        found: list[Part] = []
        for i, m in enumerate(messages):
            role = m.get("role")
            if role == "assistant":
                for call in m.get("tool_calls") or ():
                    names[call["id"]] = call["function"]["name"]
                continue
            content = m.get("content")
            if role not in ("tool", "function") or content is None:
                continue
            cost = [0] * estimator.width
            if isinstance(content, str):
                estimator.add_text(cost, content, Kind.DENSE)
                text: str | None = content
            else:
                self._parts(content, Kind.DENSE, cost, estimator, "", [])
                text = u.only_text(content, _TEXT_PARTS)
            tool = m["name"] if role == "function" else names.get(m["tool_call_id"])
            found.append(Part(i, ("content",), RESULT, tool, cost, text))
        return found

    def kinds(self, body: Any, view: View, estimator: Estimator) -> list[Part]:
        """The ``tools`` (and legacy ``functions``); each assistant message's tool calls
        (and legacy ``function_call``); each ``tool`` or ``function`` message whole, as
        its tool's result; and the media parts of the other messages. System and
        developer messages are entries of the list: their role's text."""
        width = estimator.width
        found: list[Part] = []
        messages = body if isinstance(body, list) else body["messages"]
        if isinstance(body, dict):
            cost = [0] * width
            for key in ("tools", "functions"):
                if body.get(key) is not None:
                    estimator.add_bytes(cost, dumps(body[key]), Kind.DENSE)
            if any(cost):
                found.append(Part(-1, ("tools",), TOOL_DEFINITIONS, None, cost, None))
        names: dict[str, str] = {}
        for i, m in enumerate(messages):
            role = m.get("role")
            if role in ("tool", "function"):
                tool = m.get("name") if role == "function" else names.get(m["tool_call_id"])
                cost = list(view.items[i].cost)
                found.append(Part(i, (), RESULT, tool, cost, None))
                continue
            content = m.get("content")
            if isinstance(content, list):
                for k, part in enumerate(content):
                    if part.get("type") in ("text", "refusal"):
                        continue
                    cost = [0] * width
                    self._parts([part], Kind.PROSE, cost, estimator, "", [])
                    found.append(Part(i, ("content", k), MEDIA, None, cost, None))
            if role != "assistant":
                continue
            for k, call in enumerate(m.get("tool_calls") or ()):
                cost = [0] * width
                self._calls([call], cost, estimator, "")
                name = call["function"]["name"]
                names[call["id"]] = name
                found.append(Part(i, ("tool_calls", k), CALL, name, cost, None))
            legacy = m.get("function_call")
            if legacy is not None:
                cost = [0] * width
                estimator.add_text(cost, legacy["name"], Kind.PROSE)
                estimator.add_text(cost, legacy.get("arguments", ""), Kind.DENSE)
                cost[0] += estimator.per_tool_call
                found.append(Part(i, ("function_call",), CALL, legacy["name"], cost, None))
        return found

    def replaced_cost(self, part: Part, text: str, estimator: Estimator) -> list[int]:
        return u.dense_cost(text, estimator)

    def edit(self, body: Any, edits: Edits) -> Any:
        return u.edit_entries(body, "messages", edits, _put)


_TEXT_PARTS = frozenset({"text"})


def _put(old: Any, path: Path, new: str | None) -> Any:
    return new


def _image_cost(part: dict[str, Any], at: str) -> int:
    image = part.get("image_url")
    if isinstance(image, str):  # some clients send the URL directly
        url: Any = image
        detail: Any = None
    else:
        image = u.expect_dict(image, f"{at}.image_url")
        url = u.expect_str(image.get("url"), f"{at}.image_url.url")
        detail = image.get("detail")
    found = media.unknown("image")
    parsed = media.parse_data_uri(url)
    if parsed is not None:
        sniffed = media.sniff(parsed[1], parsed[0])
        if sniffed.kind == "image":
            found = sniffed
    return media.openai_image_tokens(found.size, detail if isinstance(detail, str) else None)


def _file_media(part: dict[str, Any], at: str) -> media.Media:
    file = u.expect_dict(part.get("file"), f"{at}.file")
    data = file.get("file_data")
    if data is None:
        return media.unknown("pdf")
    data = u.expect_str(data, f"{at}.file.file_data")
    parsed = media.parse_data_uri(data)
    if parsed is not None:
        return media.sniff(parsed[1], parsed[0])
    return media.sniff(data, None)


def _fast_calls(calls: list[Any]) -> tuple[tuple[str, ...], str, str] | None:
    """``(ids, names, arguments + ids)`` of well-formed ``tool_calls``, else None."""
    ids: list[str] = []
    names: list[str] = []
    dense: list[str] = []
    for call in calls:
        if type(call) is not dict:
            return None
        call_id = call.get("id")
        fn = call.get("function")
        if type(call_id) is not str or type(fn) is not dict:
            return None
        name = fn.get("name")
        args = fn.get("arguments", "")
        if type(name) is not str or type(args) is not str:
            return None
        ids.append(call_id)
        names.append(name)
        dense.append(args)
        dense.append(call_id)
    return tuple(ids), "".join(names), "".join(dense)
