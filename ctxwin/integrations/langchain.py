"""Fit a LangChain v1 agent's or a LangGraph ReAct agent's messages to the model's window.

::

    from langchain.agents import create_agent
    from ctxwin.integrations.langchain import ContextWindowMiddleware

    agent = create_agent(model, tools, middleware=[ContextWindowMiddleware(model="gpt-4o")])

    from langgraph.prebuilt import create_react_agent
    from ctxwin.integrations.langchain import pre_model_hook

    agent = create_react_agent(model, tools, pre_model_hook=pre_model_hook(model="gpt-4o"))

Before each model call the state's messages are read into a Chat Completions
view (``AIMessage.tool_calls`` are the assistant's ``tool_calls``, a
``ToolMessage`` answers its ``tool_call_id``), fitted with ctxwin's planner,
and the *original* message objects that survive are what the model gets: the
oldest whole turns are left out (a tool call never without its results), the
system messages, the first human message and the newest turn always stay.

* :class:`ContextWindowMiddleware` (``create_agent(middleware=[...])``): its
  ``before_model`` hook replaces the state's messages with those kept
  (``RemoveMessage(REMOVE_ALL_MESSAGES)`` and the kept messages, as LangChain's
  summarization middleware does), only when something was left out; with
  ``keep_state=True`` its ``wrap_model_call`` hook fits only the model call's
  messages (the state keeps the whole history) and costs the request's system
  message, tools and chat model too;
* :func:`pre_model_hook` (``create_react_agent(pre_model_hook=...)``): returns
  the kept messages as ``llm_input_messages``, so the graph state keeps the
  whole history (``keep_state=False``: the ``RemoveMessage`` form instead).

Both raise :class:`ctxwin.ContextTruncated` before the model is called when
even the floor does not fit, and learn from the ``usage_metadata`` of each
``AIMessage`` the model answered (the system prompt and tool schemas the state
does not show are learned as an overhead). ``settings`` are the library's own
(``context_length=``, ``model=``, ``spec=``, ``max_tokens=``,
``max_output_tokens=``, ``calibration=``, ``estimator=``, ``strategy=``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import orjson

from ctxwin.extras import needs_extra
from ctxwin.integrations._common import settings_for
from ctxwin.integrations._history import Converted, Entry, Fitted, HistoryFit

with needs_extra("ctxwin.integrations.langchain", "langchain"):
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ExtendedModelResponse,
        ModelRequest,
        ModelResponse,
    )
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        ChatMessage,
        FunctionMessage,
        HumanMessage,
        RemoveMessage,
        SystemMessage,
        ToolMessage,
    )
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.graph.message import REMOVE_ALL_MESSAGES
    from langgraph.runtime import Runtime


def _data_uri(block: Mapping[str, Any], default: str) -> str | None:
    url = block.get("url")
    if isinstance(url, str):
        return url
    data = block.get("base64", block.get("data"))
    if isinstance(data, str):
        mime = block.get("mime_type") or default
        return f"data:{mime};base64,{data}"
    return None


def _block(block: Any) -> Entry | None:
    """One content block as a Chat content part (``None``: not sent as content)."""
    if isinstance(block, str):
        return {"type": "text", "text": block}
    if not isinstance(block, Mapping):
        return {"type": "text", "text": str(block)}
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": str(block.get("text") or "")}
    if kind in ("tool_call", "tool_call_chunk", "invalid_tool_call"):
        return None  # the message's tool_calls say it
    if kind == "image_url":
        image = block.get("image_url")
        return {
            "type": "image_url",
            "image_url": {"url": image} if isinstance(image, str) else image,
        }
    if kind == "image" and (url := _data_uri(block, "image/png")) is not None:
        return {"type": "image_url", "image_url": {"url": url}}
    if kind == "file" and (url := _data_uri(block, "application/pdf")) is not None:
        return {"type": "file", "file": {"file_data": url}}
    if kind in ("reasoning", "thinking"):
        return {"type": "text", "text": str(block.get(kind) or "")}
    text = block.get("text")
    if isinstance(text, str):
        return {"type": "text", "text": text}
    return {"type": "text", "text": orjson.dumps(block, default=str).decode()}


def _content(content: Any) -> Any:
    """A message's content as Chat content (a string, or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return [p for p in map(_block, content) if p is not None]
    return str(content)


def _arguments(args: Any) -> str:
    return args if isinstance(args, str) else orjson.dumps(args, default=str).decode()


def to_chat(message: BaseMessage) -> Entry:
    """``message`` as a Chat Completions message (what ctxwin estimates and fits)."""
    content = _content(message.content)
    if isinstance(message, AIMessage):
        entry: Entry = {"role": "assistant", "content": content}
        calls = [
            {
                "id": call.get("id") or "",
                "type": "function",
                "function": {"name": call.get("name") or "", "arguments": _arguments(args)},
            }
            for call, args in [(c, c.get("args")) for c in message.tool_calls]
            + [(c, c.get("args")) for c in message.invalid_tool_calls]
        ]
        if calls:
            entry["tool_calls"] = calls
        return entry
    if isinstance(message, ToolMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": content}
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": content}
    if isinstance(message, HumanMessage):
        return {"role": "user", "content": content}
    if isinstance(message, FunctionMessage):
        return {"role": "function", "name": message.name, "content": content}
    if isinstance(message, ChatMessage) and message.role in ("system", "developer", "assistant"):
        return {"role": message.role, "content": content}
    return {"role": "user", "content": content}


def _convert(message: Any) -> Converted:
    return [(to_chat(message), None)]


def _rebuild(message: Any, parts: list[Any], replaced: dict[Any, Entry]) -> Any:
    """A message whose content a clearing strategy replaced: a copy with the new content."""
    entry = replaced.get(None)
    if entry is None:
        return message
    return message.model_copy(update={"content": entry.get("content")})


def _usage(message: Any) -> int | None:
    """The input tokens an ``AIMessage`` says its request counted."""
    usage = getattr(message, "usage_metadata", None) if isinstance(message, AIMessage) else None
    if not usage:
        return None
    tokens = usage.get("input_tokens")
    return tokens if isinstance(tokens, int) and tokens > 0 else None


def _fitting(settings: dict[str, Any], learn_overhead: bool) -> HistoryFit:
    return HistoryFit(
        _convert,
        _rebuild,
        _usage,
        settings_for(**settings),
        learn_overhead=learn_overhead,
        logger=__name__,
    )


def _messages(state: Any) -> list[Any]:
    found = state.get("messages") if isinstance(state, Mapping) else state.messages
    return list(found or [])


def _unchanged(kept: Sequence[Any], messages: Sequence[Any]) -> bool:
    return len(kept) == len(messages) and all(a is b for a, b in zip(kept, messages, strict=True))


def _replace_all(kept: Sequence[Any]) -> list[Any]:
    return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *kept]


class ContextWindowMiddleware(AgentMiddleware[AgentState[Any], Any, Any], Fitted):
    """A LangChain v1 agent middleware (``create_agent(middleware=[...])``) that fits
    the messages to the model's window before each model call.

    By default its ``before_model`` hook does: when turns must be left out, the
    state's messages become the kept ones (the original objects), so the next call
    starts from them and dropped turns stay dropped; the system prompt and the tool
    schemas, which the state does not show, are learned from usage as an overhead.
    With ``keep_state=True`` its ``wrap_model_call`` hook does instead: only the
    model call's messages are fitted (the state keeps the whole history), and the
    request's system message, tools and model are costed from the first call on.
    ``last`` is the last fit; ``reset()`` starts over.
    """

    def __init__(
        self, *, keep_state: bool = False, learn_overhead: bool = True, **settings: Any
    ) -> None:
        super().__init__()
        self.keep_state = keep_state
        self.fitting = _fitting(settings, learn_overhead)
        self._tools: tuple[list[Any], list[Entry]] = ([], [])
        self._system: dict[str, Entry] = {}

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        if self.keep_state:
            return None
        messages = _messages(state)
        kept, _ = self.fitting.fit(messages)
        if _unchanged(kept, messages):
            return None
        return {"messages": _replace_all(kept)}

    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return self.before_model(state, runtime)

    def _fitted(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """``request`` with its messages fitted (its system message, tools and model
        costed too); the request itself when nothing is left out."""
        fields: dict[str, Any] = {}
        tools = self._tool_entries(request.tools)
        if tools:
            fields["tools"] = tools
        model = request.model
        max_tokens = request.model_settings.get("max_tokens", getattr(model, "max_tokens", None))
        if isinstance(max_tokens, int):
            fields["max_tokens"] = max_tokens
        name = getattr(model, "model_name", None)
        kept, _ = self.fitting.fit(
            request.messages,
            model=name if isinstance(name, str) else None,
            fields=fields,
            leading=self._leading(request.system_message),
        )
        if _unchanged(kept, request.messages):
            return request
        return request.override(messages=kept)

    def _leading(self, system: SystemMessage | None) -> list[Entry]:
        """The system message as the first entry (one object per text)."""
        if system is None:
            return []
        key = orjson.dumps(system.content, default=str).decode()
        entry = self._system.get(key)
        if entry is None:
            entry = to_chat(system)
            self._system = {key: entry}
        return [entry]

    def _tool_entries(self, tools: Sequence[Any]) -> list[Entry]:
        """The request's tools as Chat ``tools`` (converted once per list of tools)."""
        seen, entries = self._tools
        if len(seen) != len(tools) or any(a is not b for a, b in zip(seen, tools, strict=False)):
            entries = [convert_to_openai_tool(t) for t in tools]
            self._tools = (list(tools), entries)
        return entries

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        return handler(self._fitted(request) if self.keep_state else request)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        return await handler(self._fitted(request) if self.keep_state else request)


class PreModelHook(Fitted):
    """A LangGraph ``pre_model_hook`` (``create_react_agent(pre_model_hook=...)``): the
    state's messages fitted, as ``llm_input_messages`` (the state keeps the whole
    history) or, with ``keep_state=False``, as the state's new messages."""

    def __init__(self, *, keep_state: bool = True, learn_overhead: bool = True, **settings: Any):
        self.keep_state = keep_state
        self.fitting = _fitting(settings, learn_overhead)

    def __call__(self, state: Any) -> dict[str, Any]:
        messages = _messages(state)
        kept, _ = self.fitting.fit(messages)
        if self.keep_state:
            return {"llm_input_messages": kept}
        if _unchanged(kept, messages):
            return {"messages": []}
        return {"messages": _replace_all(kept)}


def pre_model_hook(*, keep_state: bool = True, **settings: Any) -> PreModelHook:
    """A LangGraph ``pre_model_hook`` that fits the messages (see :class:`PreModelHook`)."""
    return PreModelHook(keep_state=keep_state, **settings)
