"""Fit a pydantic-ai agent's message history to the model's window: a history processor.

::

    from pydantic_ai import Agent
    from pydantic_ai.capabilities import ProcessHistory
    from ctxwin.integrations.pydantic_ai import history_processor

    agent = Agent(model, capabilities=[ProcessHistory(history_processor(context_length=128_000))])

(pydantic-ai 1.x took ``Agent(history_processors=[...])``; 2.x takes the same processor
wrapped in ``ProcessHistory``.) Before each model request the history is read into a
Chat Completions view (a ``ModelResponse`` is an assistant message whose
``ToolCallPart``\\ s are its ``tool_calls``; a ``ModelRequest``'s ``SystemPromptPart``,
``UserPromptPart`` and ``ToolReturnPart``\\ s are system, user and tool messages, the
latter answering their ``tool_call_id``), fitted with ctxwin's planner, and the
*original* message objects that survive are returned: the oldest whole turns are left
out, so a ``ToolReturnPart`` always follows its ``ToolCallPart``; the first request
(system prompt and task) and the newest turn always stay. A request of which only some
parts survive is a copy with those parts (the same part objects); under a clearing
strategy a ``ToolReturnPart`` may be a copy whose content is ctxwin's placeholder.

It raises :class:`ctxwin.ContextTruncated` before the model is called when even that
floor does not fit, and learns from each ``ModelResponse.usage`` (its ``input_tokens``).
The model's name, its ``max_tokens`` setting, the run's tool definitions and the
request's instructions are read from the run; what the history does not show is learned
from usage as an overhead. ``settings`` are the library's own (``context_length=``,
``model=``, ``spec=``, ``max_tokens=``, ``max_output_tokens=``, ``calibration=``,
``estimator=``, ``strategy=``).
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

import orjson

from ctxwin.extras import needs_extra
from ctxwin.integrations._common import settings_for
from ctxwin.integrations._history import Converted, Entry, Fitted, HistoryFit

with needs_extra("ctxwin.integrations.pydantic_ai", "pydantic-ai"):
    from pydantic_ai import RunContext
    from pydantic_ai.messages import (
        BaseToolCallPart,
        BaseToolReturnPart,
        BinaryContent,
        ImageUrl,
        ModelMessage,
        ModelRequest,
        ModelResponse,
        NativeToolCallPart,
        NativeToolReturnPart,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ThinkingPart,
        ToolReturnPart,
        UserPromptPart,
    )


def _json(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value, default=str).decode()


def _user_item(item: Any) -> Entry:
    """One item of a user prompt as a Chat content part."""
    if isinstance(item, str):
        return {"type": "text", "text": item}
    if isinstance(item, ImageUrl):
        return {"type": "image_url", "image_url": {"url": item.url}}
    if isinstance(item, BinaryContent):
        uri = f"data:{item.media_type};base64,{base64.b64encode(item.data).decode()}"
        if item.is_image:
            return {"type": "image_url", "image_url": {"url": uri}}
        return {"type": "file", "file": {"file_data": uri}}
    url = getattr(item, "url", None)
    if isinstance(url, str):  # a document, audio or video URL: priced as one media part
        return {"type": type(item).__name__}
    return {"type": "text", "text": str(item)}


def _user_content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    return [_user_item(item) for item in content]


def _request_part(part: Any) -> Entry | None:
    """One part of a ``ModelRequest`` as a Chat message (``None``: nothing is sent)."""
    if isinstance(part, SystemPromptPart):
        return {"role": "system", "content": part.content}
    if isinstance(part, UserPromptPart):
        return {"role": "user", "content": _user_content(part.content)}
    if isinstance(part, BaseToolReturnPart):
        return {
            "role": "tool",
            "tool_call_id": part.tool_call_id,
            "content": part.model_response_str(),
        }
    if isinstance(part, RetryPromptPart):
        text = part.model_response()
        if part.tool_name is not None:
            return {"role": "tool", "tool_call_id": part.tool_call_id, "content": text}
        return {"role": "user", "content": text}
    content = getattr(part, "content", None)
    if isinstance(content, str) and content:  # retry feedback and other prompt parts
        return {"role": "user", "content": content}
    return None


def _response(message: ModelResponse) -> Entry:
    """A ``ModelResponse`` as one assistant message."""
    texts: list[str] = []
    calls: list[Entry] = []
    for part in message.parts:
        if isinstance(part, BaseToolCallPart) and not isinstance(part, NativeToolCallPart):
            function = {"name": part.tool_name, "arguments": part.args_as_json_str()}
            calls.append({"id": part.tool_call_id, "type": "function", "function": function})
        elif isinstance(part, TextPart | ThinkingPart):
            texts.append(part.content)
        elif isinstance(part, NativeToolCallPart):
            texts.append(part.tool_name + part.args_as_json_str())
        elif isinstance(part, NativeToolReturnPart):
            texts.append(_json(part.content))
        else:
            content = getattr(part, "content", None)
            if content is not None:
                texts.append(_json(content))
    entry: Entry = {"role": "assistant", "content": "\n".join(texts) if texts else None}
    if calls:
        entry["tool_calls"] = calls
    return entry


def to_chat(message: ModelMessage) -> Converted:
    """``message`` as Chat Completions messages, each with the index of the part it
    reads (``None``: the whole response)."""
    if isinstance(message, ModelResponse):
        return [(_response(message), None)]
    out: Converted = []
    for k, part in enumerate(message.parts):
        entry = _request_part(part)
        if entry is not None:
            out.append((entry, k))
    return out


def _rebuild(message: Any, parts: list[Any], replaced: dict[Any, Entry]) -> Any:
    """``message`` (a ``ModelRequest``) with only the kept parts, a cleared result's part
    a copy with its new content; parts that are not sent (no entry) stay."""
    if not isinstance(message, ModelRequest):
        return message
    sent = {k for _, k in to_chat(message)}
    kept = set(parts)
    new = []
    for k, part in enumerate(message.parts):
        if k in sent and k not in kept:
            continue
        entry = replaced.get(k)
        if entry is not None and type(part) is ToolReturnPart:
            # a typed return part (tool search, capability load) keeps its typed content
            plain: ToolReturnPart[Any] = part
            part = dataclasses.replace(plain, content=entry.get("content"))
        new.append(part)
    return dataclasses.replace(message, parts=new)


def _usage(message: Any) -> int | None:
    """The input tokens a ``ModelResponse`` says its request counted."""
    if not isinstance(message, ModelResponse):
        return None
    tokens = getattr(message.usage, "input_tokens", None)
    return tokens if isinstance(tokens, int) and tokens > 0 else None


def _tools(ctx: RunContext[Any]) -> list[Entry]:
    """The run's tool definitions as Chat ``tools`` (costed like the provider's schema)."""
    try:
        defs = ctx.tool_manager.tool_defs if ctx.tool_manager is not None else []
    except ValueError:  # not prepared for this step
        return []
    return [
        {
            "type": "function",
            "function": {
                "name": d.name,
                "description": d.description or "",
                "parameters": d.parameters_json_schema,
            },
        }
        for d in defs
    ]


class HistoryProcessor(Fitted):
    """A pydantic-ai history processor that fits the history to the model's window
    (see the module docstring). ``last`` is the last fit; ``reset()`` starts over."""

    def __init__(self, *, learn_overhead: bool = True, **settings: Any) -> None:
        self.fitting = HistoryFit(
            to_chat,
            _rebuild,
            _usage,
            settings_for(**settings),
            learn_overhead=learn_overhead,
            logger=__name__,
        )
        self._instructions: dict[str, Entry] = {}

    def _leading(self, messages: list[ModelMessage]) -> list[Entry]:
        """The newest request's instructions, as a system message (one object per text,
        so a history that grows reads incrementally)."""
        for message in reversed(messages):
            if isinstance(message, ModelRequest) and message.instructions:
                text = message.instructions
                entry = self._instructions.get(text)
                if entry is None:
                    entry = {"role": "system", "content": text}
                    self._instructions = {text: entry}
                return [entry]
        return []

    def __call__(self, ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        fields: dict[str, Any] = {}
        max_tokens = (ctx.model_settings or {}).get("max_tokens")
        if isinstance(max_tokens, int):
            fields["max_tokens"] = max_tokens
        tools = _tools(ctx)
        if tools:
            fields["tools"] = tools
        name = getattr(ctx.model, "model_name", None)
        kept, _ = self.fitting.fit(
            messages,
            model=name if isinstance(name, str) else None,
            fields=fields,
            leading=self._leading(messages),
        )
        return kept


def history_processor(*, learn_overhead: bool = True, **settings: Any) -> HistoryProcessor:
    """A history processor that fits the history (see :class:`HistoryProcessor`)."""
    return HistoryProcessor(learn_overhead=learn_overhead, **settings)
