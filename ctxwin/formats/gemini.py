"""Google Gemini ``generateContent``: ``{"systemInstruction", "contents", "tools", ...}``.

``systemInstruction`` is outside the content list: counted in the view's
base and always kept. ``contents`` is a list of ``{"role": "user" | "model",
"parts": [...]}``; parts hold ``text`` (``thought: true`` marks thinking),
``functionCall`` {name, args, id?}, ``functionResponse`` {name, response,
id?}, ``inlineData`` {mimeType, data}, ``fileData`` {mimeType, fileUri},
``executableCode``, ``codeExecutionResult``. The REST API also takes the
snake_case spellings (``system_instruction``, ``function_call``,
``inline_data``, ``generation_config.max_output_tokens``, ...); both are read.
The model name is in the request URL, not the body.

Pairing: a ``functionResponse`` answers the call with its ``id`` when it
has one, else the oldest unanswered call of the same ``name`` (by order).
Calls without an id get a synthetic one (``<name>#<content>.<part>``).

Head, turns and drop units: the head is the first user content. Each model
content opens a turn; the user contents after it (its function responses,
new user text) join it. Provider rules the output keeps (checked by
:meth:`Gemini.problems`): the first content is a user content, and function
responses sit in the content right after the model content that made the
calls, answering all of them.
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
    SYSTEM_PROMPT,
    THINKING,
    TOOL_DEFINITIONS,
    Edits,
    Part,
    Path,
    extend_plain,
)
from ctxwin.tokens.base import Estimator, Kind
from ctxwin.view import ASSISTANT, USER, Item, Problem, View

ROLES = {"user": USER, "model": ASSISTANT, "function": USER}


def _get(obj: dict[str, Any], camel: str, snake: str) -> tuple[str, Any]:
    """The value under the camelCase or the snake_case key, and the key used."""
    if camel in obj:
        return camel, obj[camel]
    return snake, obj.get(snake)


def _blob(
    part: dict[str, Any], at: str, camel: str, snake: str
) -> tuple[str, dict[str, Any], str, Any] | None:
    """A media part's object (``inlineData`` or ``fileData``, either spelling): its path,
    the object, and its MIME type's key and value; ``None`` when ``part`` has none."""
    key, value = _get(part, camel, snake)
    if value is None:
        return None
    where = f"{at}.{key}"
    obj = u.expect_dict(value, where)
    mkey, mime = _get(obj, "mimeType", "mime_type")
    return where, obj, mkey, mime


def _function_part(
    value: Any, where: str, placed: bool, what: str, role: str
) -> tuple[dict[str, Any], str]:
    """A ``functionCall`` or ``functionResponse`` object and its ``name``; ``placed``:
    whether it is in a content of the ``role`` it belongs in."""
    if not placed:
        raise InputError(f"{what} belongs in a {role} content", where)
    obj = u.expect_dict(value, where)
    return obj, u.required_str(obj, "name", where)


class Gemini:
    name = "gemini"
    items_key = "contents"
    format_rules = True
    local_rules = True
    description = 'Google Gemini generateContent body {"contents": [{"role", "parts"}, ...]}'

    def reads_alone(self, content: Any) -> bool:
        """Whether ``content`` reads the same alone as in its list (``ctxwin.fitting.incremental``):
        unless a function call or response in it lacks an ``id``. Gemini pairs those by
        name and order across contents, and names an unnamed call by its position."""
        parts = content.get("parts") if type(content) is dict else None
        if type(parts) is not list:
            return False  # read as part of the whole body, which says what is wrong
        for part in parts:
            if type(part) is not dict:
                return False
            for key in ("functionCall", "function_call", "functionResponse", "function_response"):
                value = part.get(key)
                if value is not None and (type(value) is not dict or "id" not in value):
                    return False
        return True

    def extend_view(self, view: View, part: View) -> bool:
        return extend_plain(view, part)

    def detect(self, body: Any) -> bool:
        return isinstance(body, dict) and isinstance(body.get("contents"), list)

    def read(self, body: Any, estimator: Estimator) -> View:
        body = u.expect_dict(body, "(body)")
        if "contents" not in body:
            raise InputError(
                'missing "contents" (expected a Gemini generateContent body)', "contents"
            )
        contents = u.expect_list(body["contents"], "contents")
        width = estimator.width
        base = [0] * width
        refs: list[str] = []
        key, system = _get(body, "systemInstruction", "system_instruction")
        if system is not None:
            base[0] += estimator.per_message
            if isinstance(system, str):
                estimator.add_text(base, system, Kind.PROSE)
            else:
                system = u.expect_dict(system, key)
                parts = system.get("parts")
                if parts is not None:
                    for k, part in enumerate(u.expect_list(parts, f"{key}.parts")):
                        self._part(
                            part,
                            f"{key}.parts[{k}]",
                            base,
                            estimator,
                            None,
                            u.Pending(),
                            [],
                            [],
                            "",
                            refs,
                        )
        tools = body.get("tools")
        if tools is not None:
            u.add_json(base, tools, estimator)
        base[0] += estimator.framing(self.name, has_tools=tools is not None)
        max_tokens = None
        gkey, config = _get(body, "generationConfig", "generation_config")
        if config is not None:
            config = u.expect_dict(config, gkey)
            mkey, value = _get(config, "maxOutputTokens", "max_output_tokens")
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise InputError(
                        f"expected a non-negative integer, got {u.kind_of(value)}", f"{gkey}.{mkey}"
                    )
                max_tokens = value
        view = View(self.name, [], base, u.optional_model(body), max_tokens, "contents")
        pending = u.Pending()
        for i, content in enumerate(contents):
            where = view.where(i)
            if not isinstance(content, dict):
                raise InputError(f"expected a content object, got {u.kind_of(content)}", where)
            role_name = content.get("role", "user")
            role = ROLES.get(role_name) if isinstance(role_name, str) else None
            if role is None:
                raise InputError(
                    f"unknown role {role_name!r} (expected user or model)", f"{where}.role"
                )
            cost = [0] * width
            cost[0] = estimator.per_message
            if "parts" not in content:
                raise InputError('missing "parts"', f"{where}.parts")
            calls: list[str] = []
            answers: list[str] = []
            for k, part in enumerate(u.expect_list(content["parts"], f"{where}.parts")):
                self._part(
                    part,
                    f"{where}.parts[{k}]",
                    cost,
                    estimator,
                    role,
                    pending,
                    calls,
                    answers,
                    f"#{i}.{k}",
                    refs,
                )
            view.items.append(Item(role, cost, tuple(calls), tuple(answers)))
        return u.noted(view, refs, media.gemini_cost)

    def _part(
        self,
        part: Any,
        at: str,
        cost: list[int],
        est: Estimator,
        role: str | None,
        pending: u.Pending,
        calls: list[str],
        answers: list[str],
        synthetic: str,
        refs: list[str],
    ) -> None:
        part = u.expect_dict(part, at)
        if "text" in part:
            est.add_text(cost, u.expect_str(part["text"], f"{at}.text"), Kind.PROSE)
            return
        key, call = _get(part, "functionCall", "function_call")
        if call is not None:
            where = f"{at}.{key}"
            call, name = _function_part(call, where, role == ASSISTANT, "a function call", "model")
            call_id = call.get("id")
            if call_id is None:
                call_id = f"{name}{synthetic}"
            else:
                call_id = u.expect_str(call_id, f"{where}.id")
                est.add_text(cost, call_id, Kind.DENSE)
            est.add_text(cost, name, Kind.PROSE)
            u.add_json(cost, call.get("args"), est)
            cost[0] += est.per_tool_call
            pending.add(name, call_id)
            calls.append(call_id)
            return
        key, response = _get(part, "functionResponse", "function_response")
        if response is not None:
            where = f"{at}.{key}"
            response, name = _function_part(
                response, where, role == USER, "a function response", "user"
            )
            response_id = response.get("id")
            if response_id is not None:
                answered = u.expect_str(response_id, f"{where}.id")
                est.add_text(cost, answered, Kind.DENSE)
                pending.answer(name, answered)
            else:
                taken = pending.take(name)
                answered = f"{name} (by name)" if taken is None else taken
            est.add_text(cost, name, Kind.PROSE)
            u.add_json(cost, response.get("response"), est)
            inner = response.get("parts")
            if inner is not None:
                for j, p in enumerate(u.expect_list(inner, f"{where}.parts")):
                    self._part(
                        p, f"{where}.parts[{j}]", cost, est, None, u.Pending(), [], [], "", refs
                    )
            answers.append(answered)
            return
        blob = _blob(part, at, "inlineData", "inline_data")
        if blob is not None:
            where, inline, mkey, mime = blob
            mime = u.expect_str(mime, f"{where}.{mkey}")
            data = u.expect_str(inline.get("data"), f"{where}.data")
            cost[0] += media.gemini_cost(media.sniff(data, mime))
            return
        blob = _blob(part, at, "fileData", "file_data")
        if blob is not None:
            where, _, _, mime = blob
            kind = media.sniff("", mime if isinstance(mime, str) else None).kind
            if kind in ("pdf", "other"):
                kind = "pdf"
                refs.append(where)
            cost[0] += media.gemini_cost(media.unknown(kind))
            return
        # executableCode, codeExecutionResult, thoughtSignature-only parts, unknown parts
        for name, value in part.items():
            if name in ("thoughtSignature", "thought_signature", "thought", "videoMetadata"):
                continue
            u.add_json(cost, value, est)

    def write(self, body: Any, keep: Sequence[int]) -> Any:
        return u.keep_entries(body, "contents", keep)

    def problems(self, view: View, keep: Sequence[int]) -> list[Problem]:
        return u.adjacency_problems(view, keep)

    def parts(self, body: Any, view: View, estimator: Estimator) -> list[Part]:
        """Each ``functionResponse``'s ``response`` (and its inner parts), and the
        ``thought: true`` text parts of earlier turns' model contents that keep
        another part (thought summaries need not be sent back).

        A response ``{"key": "text"}`` is edited in place (its text replaced);
        any other becomes ``{"result": text}``, its inner parts removed.
        """
        found: list[Part] = []
        current = u.current_turn_start(view)
        for i, content in enumerate(body["contents"]):
            parts = content["parts"]
            thoughts: list[int] = []
            for k, part in enumerate(parts):
                if part.get("thought") is True and isinstance(part.get("text"), str):
                    thoughts.append(k)
                    continue
                key, response = _get(part, "functionResponse", "function_response")
                if response is None:
                    continue
                value = response.get("response")
                inner = response.get("parts")
                cost = [0] * estimator.width
                u.add_json(cost, value, estimator)
                for p in inner or ():
                    self._part(p, "", cost, estimator, None, u.Pending(), [], [], "", [])
                path: Path = ("parts", k, key)
                text: str | None = None
                if not inner:
                    single = _single_text(value)
                    if single is not None:
                        path = (*path, "response", single)
                        text = value[single]
                    else:
                        text = dumps(value).decode()
                found.append(Part(i, path, RESULT, response["name"], cost, text))
            if i < current and thoughts and len(thoughts) < len(parts):
                for k in thoughts:
                    cost = [0] * estimator.width
                    estimator.add_text(cost, parts[k]["text"], Kind.PROSE)
                    found.append(Part(i, ("parts", k), THINKING, None, cost, None))
        found.sort(key=lambda p: p.index)
        return found

    def kinds(self, body: Any, view: View, estimator: Estimator) -> list[Part]:
        """The ``systemInstruction`` and ``tools``; in each content its function calls
        and responses, its ``thought`` text and its inline and file data, each part
        priced alone as :meth:`read` prices it."""
        width = estimator.width
        found: list[Part] = []
        key, system = _get(body, "systemInstruction", "system_instruction")
        if system is not None:
            cost = [0] * width
            cost[0] = estimator.per_message
            if isinstance(system, str):
                estimator.add_text(cost, system, Kind.PROSE)
            else:
                for part in system.get("parts") or ():
                    self._part(part, "", cost, estimator, None, u.Pending(), [], [], "", [])
            found.append(Part(-1, (key,), SYSTEM_PROMPT, None, cost, None))
        if body.get("tools") is not None:
            cost = [0] * width
            u.add_json(cost, body["tools"], estimator)
            found.append(Part(-1, ("tools",), TOOL_DEFINITIONS, None, cost, None))
        for i, content in enumerate(body["contents"]):
            role = view.items[i].role
            for k, part in enumerate(content["parts"]):
                if "text" in part:
                    if part.get("thought") is not True:
                        continue
                    kind, tool = THINKING, None
                elif (call := _get(part, "functionCall", "function_call")[1]) is not None:
                    kind, tool = CALL, call["name"]
                elif (answer := _get(part, "functionResponse", "function_response")[1]) is not None:
                    kind, tool = RESULT, answer["name"]
                elif not _MEDIA_KEYS.isdisjoint(part):
                    kind, tool = MEDIA, None
                else:
                    continue
                cost = [0] * width
                self._part(part, "", cost, estimator, role, u.Pending(), [], [], "", [])
                found.append(Part(i, ("parts", k), kind, tool, cost, None))
        return found

    def replaced_cost(self, part: Part, text: str, estimator: Estimator) -> list[int]:
        cost = [0] * estimator.width
        if part.kind == RESULT:
            u.add_json(cost, _new_response(part.path, text), estimator)
        return cost

    def edit(self, body: Any, edits: Edits) -> Any:
        return u.edit_entries(body, "contents", edits, _put)


_MEDIA_KEYS = frozenset(("inlineData", "inline_data", "fileData", "file_data"))


def _single_text(value: Any) -> str | None:
    """The key of a response object holding exactly one value, a string."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, text),) = value.items()
        if isinstance(text, str):
            return str(key)
    return None


def _new_response(path: Path, text: str) -> dict[str, Any]:
    if len(path) > 3:
        return {str(path[-1]): text}
    return {"result": text}


def _put(old: Any, path: Path, new: str | None) -> Any:
    if new is None:
        return u.REMOVE
    if len(path) > 3:
        return new
    out = {k: v for k, v in old.items() if k != "parts"}
    out["response"] = _new_response(path, new)
    return out
