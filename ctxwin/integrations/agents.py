"""Fit every model call of an OpenAI Agents SDK run: a ``call_model_input_filter``.

::

    from agents import Agent, RunConfig, Runner
    from ctxwin.integrations.agents import ContextWindowFilter

    fit = ContextWindowFilter(context_length=128_000)
    result = await Runner.run(
        agent, task, run_config=RunConfig(call_model_input_filter=fit), hooks=fit
    )

:class:`ContextWindowFilter` is called by the runner right before each model call with
the call's input items (Responses-shaped, whatever the model: the Chat Completions
model converts them after the filter) and instructions:

* when they would not fit the model's window (the instructions, the agent's function
  tools and handoffs, and ``model_settings.max_tokens`` counted too), the oldest whole
  turns are left out of the input sent: a turn is a model response with all the tool
  outputs that answer it; the instructions, the first user input and the newest turn always go.
  The items are the runner's own objects, returned untouched; a strategy that clears
  old tool outputs sends edited copies of those items only;
* when even that floor does not fit, it raises :class:`ctxwin.ContextTruncated` and
  the model is not called (the run ends with that exception);
* passed as the run's ``hooks`` too (it is a ``RunHooks``), it learns from the usage
  of each model response: what the provider counted beyond the estimate becomes an
  overhead of every call (hosted and MCP tools, an output schema: what the filter
  cannot see), and new content is estimated from the last report on.

The settings are the library's own (see :func:`ctxwin.integrations._common.settings_for`).
Each conversation gets its own :class:`~ctxwin.manager.ContextWindowManager`, named
by its instructions and first input (see :class:`~ctxwin.integrations._common.Conversations`).
Importing this module imports ``agents``.
"""

from __future__ import annotations

from typing import Any

from ctxwin.errors import truncated
from ctxwin.extras import needs_extra
from ctxwin.integrations._common import Conversations, sent_items, settings_for
from ctxwin.manager import ManagedFit

with needs_extra("ctxwin.integrations.agents", "agents"):
    from agents import (
        Agent,
        FunctionTool,
        Handoff,
        ModelResponse,
        RunContextWrapper,
        RunHooks,
        handoff,
    )
    from agents.run_config import CallModelData, ModelInputData


def _model_name(agent: Agent[Any]) -> str | None:
    model = agent.model
    if isinstance(model, str):
        return model
    name = getattr(model, "model", None)  # OpenAIResponsesModel, OpenAIChatCompletionsModel
    return name if isinstance(name, str) else None


def _tools(agent: Agent[Any]) -> list[dict[str, Any]]:
    """The function tools and handoffs the model is shown, as the Responses API declares
    them (hosted and MCP tools are not counted)."""
    tools = [
        {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.params_json_schema,
        }
        for tool in agent.tools
        if isinstance(tool, FunctionTool)
    ]
    for target in agent.handoffs:
        h = target if isinstance(target, Handoff) else handoff(target)
        tools.append(
            {
                "type": "function",
                "name": h.tool_name,
                "description": h.tool_description,
                "parameters": h.input_json_schema,
            }
        )
    return tools


class ContextWindowFilter(RunHooks[Any]):
    """A ``call_model_input_filter`` that fits each model call to the model's window, and
    the ``RunHooks`` that learn from its usage (see the module docstring). ``settings``:
    ``context_length=``, ``model=``, ``spec=``, ``max_output_tokens=``,
    ``max_tokens=``, ``calibration=``, ``estimator=``, ``strategy=``. ``conversations``
    bounds how many conversations' managers are kept. ``learn_overhead`` (default)
    learns what usage reports beyond the estimate as an overhead (what the filter cannot
    see); ``False`` learns a calibration factor only."""

    def __init__(
        self, *, conversations: int = 1024, learn_overhead: bool = True, **settings: Any
    ) -> None:
        self.options = settings_for(**settings)
        # the items are what is sent; what the filter cannot see (hosted and MCP tools,
        # an output schema) is learned from usage as an overhead
        self.conversations = Conversations(
            "openai-responses", self.options, conversations, learn_overhead, logger=__name__
        )
        self.managers = self.conversations.managers
        """The manager of each conversation, by model and name."""
        self.last: ManagedFit | None = None
        """The fit of the last model call."""

    def reset(self) -> None:
        """Forget every conversation."""
        self.conversations.clear()
        self.last = None

    def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        """The filter: ``data.model_data`` with the input fitted. Raises
        :class:`ctxwin.ContextTruncated` when even the floor does not fit."""
        items = data.model_data.input
        instructions = data.model_data.instructions
        if not items:
            return data.model_data
        agent = data.agent
        model = _model_name(agent)
        # the runner rebuilds the input items for every call: the items equal to the last
        # call's are known already, and only the new ones are read
        manager, entries = self.conversations.entries(model, items, extra=instructions)
        body: dict[str, Any] = {"model": model, "input": entries}
        if instructions is not None:
            body["instructions"] = instructions
        tools = _tools(agent)
        if tools:
            body["tools"] = tools
        max_tokens = agent.model_settings.max_tokens
        if max_tokens is not None:
            body["max_output_tokens"] = max_tokens
        fitted = manager.before_send(body)
        if fitted.result.overflow_at_floor:
            raise truncated(fitted.result, fitted.budget)
        self.last = fitted
        self.conversations.sent((id(agent), id(data.context)), manager, fitted)
        if not fitted.changed:
            return data.model_data
        return ModelInputData(input=sent_items(items, fitted), instructions=instructions)

    def learn(self, context: Any, agent: Agent[Any], usage: Any) -> None:
        """Learn from the ``usage`` of the model response to ``agent``'s last call in the
        run whose context is ``context`` (the user's context object)."""
        self.conversations.learn((id(agent), id(context)), usage)

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        usage = response.usage
        self.learn(context.context, agent, {"input_tokens": usage.input_tokens})
