"""Fit every chat call LiteLLM makes: a callback for the SDK, the Router and the proxy.

::

    import litellm
    from ctxwin.integrations.litellm import ContextWindowCallback

    fit = ContextWindowCallback(context_length=128_000)
    litellm.callbacks = [fit]
    response = await litellm.acompletion(model="openai/gpt-4o", messages=history)
    response = fit.completion(model="openai/gpt-4o", messages=history)  # sync calls

:class:`ContextWindowCallback` is a ``litellm.integrations.custom_logger.CustomLogger``:

* ``async_pre_call_deployment_hook`` fits ``messages`` (Chat Completions shape, which
  LiteLLM uses for every provider) right before an async call (``litellm.acompletion``,
  ``Router.acompletion``) goes to the provider: the oldest whole turns are left out of
  what is sent when the request would not fit the model's window;
* ``async_pre_call_hook`` does the same in the LiteLLM proxy (``litellm_settings:
  callbacks:``), before the request is routed;
* when even the floor (system prompt, first user message, newest turn) does not fit,
  or the budget is not positive (the window is at most reserve + safety), the call
  raises :class:`ContextWindowExceeded` before anything is sent: it is a
  :class:`ctxwin.ContextTruncated` and a ``litellm.ContextWindowExceededError`` (so a
  Router's ``context_window_fallbacks`` apply and the proxy answers 400);
* the callback learns from each response's ``usage``: what the provider counted
  beyond the estimate (a provider's own tool prompt after LiteLLM's translation, its
  framing) becomes an overhead of the conversation's later calls, and new content is
  estimated from the last report on.

LiteLLM's synchronous ``litellm.completion`` runs no callback that can change the
request (its ``log_pre_api_call`` only logs), so for sync code the callback offers
:meth:`ContextWindowCallback.completion`, ``litellm.completion`` with the same fit.

The settings are the library's own (see :func:`ctxwin.integrations._common.settings_for`).
Each conversation gets its own :class:`~ctxwin.manager.ContextWindowManager`: a
conversation is named by ``metadata={"ctxwin_conversation": ...}`` on the call, else
by its head (the system messages and the first user message, which ctxwin always
sends). Importing this module imports ``litellm``.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from ctxwin.errors import ContextTruncated, truncated
from ctxwin.extras import needs_extra
from ctxwin.fitting.budget import Budget
from ctxwin.fitting.pruning import FitResult
from ctxwin.integrations._common import Conversations, plain, remember, sent_items, settings_for
from ctxwin.manager import ManagedFit

with needs_extra("ctxwin.integrations.litellm", "litellm"):
    import litellm
    from litellm.exceptions import ContextWindowExceededError
    from litellm.integrations.custom_logger import CustomLogger

CONVERSATION_KEY = "ctxwin_conversation"
"""The ``metadata`` key that names a call's conversation."""
COMPLETION_CALLS = frozenset({"completion", "acompletion"})
"""The call types fitted (LiteLLM's chat completions, in Chat Completions shape)."""
BODY_FIELDS = ("tools", "functions", "max_tokens", "max_completion_tokens")
"""The fields besides ``messages`` that a request's estimate and budget read."""


class ContextWindowExceeded(ContextTruncated, ContextWindowExceededError):
    """Even the floor of a call does not fit: nothing was sent.

    Both a :class:`ctxwin.ContextTruncated` (``result`` is the fit of the floor) and a
    ``litellm.ContextWindowExceededError`` (status 400, code ``context_length_exceeded``).
    When the budget is not positive (``result.enforced`` is false) the message is the
    one of :class:`ctxwin.errors.NoBudget`, naming the window, reserve and safety.
    """

    def __init__(self, result: FitResult, model: str | None, budget: Budget | None = None) -> None:
        self.result = result
        error = ContextTruncated(result) if budget is None else truncated(result, budget)
        text = f"ctxwin: {error}"
        ContextWindowExceededError.__init__(
            self,
            message=text,
            model=model,
            llm_provider="ctxwin",
            body={
                "message": text,
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            },
        )


def _model_of(kwargs: Mapping[str, Any]) -> str | None:
    model = kwargs.get("model")
    return model if isinstance(model, str) else None


class ContextWindowCallback(CustomLogger):
    """A LiteLLM callback that fits each chat call to the model's window (see the module
    docstring). ``settings``: ``context_length=``, ``model=``, ``spec=``,
    ``max_output_tokens=``, ``max_tokens=``, ``calibration=``, ``estimator=``,
    ``strategy=``. ``conversations`` bounds how many conversations' managers are kept
    (the least recently used is forgotten). ``learn_overhead`` (default) learns what
    usage reports beyond the estimate as an overhead of every call; ``False`` learns a
    calibration factor only."""

    def __init__(
        self, *, conversations: int = 1024, learn_overhead: bool = True, **settings: Any
    ) -> None:
        super().__init__()
        self.instance = uuid.uuid4().hex
        """Unique per callback: LiteLLM registers one logger per class and public scalar
        attributes, and would route a second callback's events to the first."""
        self.options = settings_for(**settings)
        # what the provider counts beyond the messages (its own prompt for tools, a
        # provider's framing after LiteLLM's translation) is learned as an overhead
        self.conversations = Conversations(
            "openai-chat", self.options, conversations, learn_overhead, logger=__name__
        )
        self.managers = self.conversations.managers
        """The manager of each conversation, by model and name."""
        self._routed: OrderedDict[str, None] = OrderedDict()
        """The calls the proxy's pre-call hook fitted (not fitted again at the deployment)."""
        self.last: ManagedFit | None = None
        """The fit of the last call sent."""

    def reset(self) -> None:
        """Forget every conversation."""
        self.conversations.clear()
        self._routed.clear()
        self.last = None

    def fit(self, kwargs: Mapping[str, Any]) -> tuple[list[Any], ManagedFit] | None:
        """The messages to send for a call's ``kwargs`` and the fit; ``None`` for a call
        without a message list. Raises :class:`ContextWindowExceeded` when even the
        floor does not fit. The call is remembered by its ``litellm_call_id`` so that
        its usage is learned."""
        messages = kwargs.get("messages")
        if not isinstance(messages, list) or not messages:
            return None
        model = _model_of(kwargs)
        metadata = kwargs.get("metadata")
        named = metadata.get(CONVERSATION_KEY) if isinstance(metadata, Mapping) else None
        # LiteLLM deep-copies the messages of every call: the entries equal to the last
        # call's are known already, and only the new ones are read
        manager, entries = self.conversations.entries(model, messages, named)
        body: dict[str, Any] = {"model": model, "messages": entries}
        for k in BODY_FIELDS:
            if kwargs.get(k) is not None:
                body[k] = plain(kwargs[k])
        fitted = manager.before_send(body)
        if fitted.result.overflow_at_floor:
            raise ContextWindowExceeded(fitted.result, model, fitted.budget)
        self.last = fitted
        call_id = kwargs.get("litellm_call_id")
        if isinstance(call_id, str):
            self.conversations.sent(call_id, manager, fitted)
        return sent_items(messages, fitted), fitted

    def learn(self, call_id: Any, response: Any) -> None:
        """Learn from the ``usage`` of the response to the call ``call_id``."""
        if isinstance(call_id, str):
            self.conversations.learn(call_id, getattr(response, "usage", None))

    # -- the SDK and the Router (async calls) --------------------------------------------

    async def async_pre_call_deployment_hook(
        self, kwargs: dict[str, Any], call_type: Any
    ) -> dict[str, Any] | None:
        """Fit an async chat call right before it is sent to its deployment."""
        name = getattr(call_type, "value", call_type)
        if name not in COMPLETION_CALLS or kwargs.get("litellm_call_id") in self._routed:
            return None
        done = self.fit(kwargs)
        if done is None:
            return None
        return {**kwargs, "messages": done[0]}

    # -- the proxy ------------------------------------------------------------------------

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: Any
    ) -> dict[str, Any]:
        """Fit a chat request in the LiteLLM proxy, before it is routed. A floor that does
        not fit raises :class:`ContextWindowExceeded`, which the proxy answers with 400."""
        if getattr(call_type, "value", call_type) not in COMPLETION_CALLS:
            return data
        done = self.fit(data)
        if done is not None:
            data["messages"] = done[0]
            call_id = data.get("litellm_call_id")
            if isinstance(call_id, str):
                remember(self._routed, call_id, None, self.conversations.limit)
        return data

    # -- sync calls -----------------------------------------------------------------------

    def completion(self, **kwargs: Any) -> Any:
        """``litellm.completion(**kwargs)`` with the request fitted first (LiteLLM runs no
        request-changing callback for sync calls); usage is learned from the response
        (for ``stream=True``: from the final chunk, with ``stream_options={"include_usage":
        True}``). Raises :class:`ContextWindowExceeded` before sending when the floor
        does not fit."""
        call_id = kwargs.setdefault("litellm_call_id", str(uuid.uuid4()))
        done = self.fit(kwargs)
        if done is not None:
            kwargs = {**kwargs, "messages": done[0]}
        response = litellm.completion(**kwargs)
        if not kwargs.get("stream"):
            self.learn(call_id, response)
        return response

    # -- usage ----------------------------------------------------------------------------
    # An async call's usage is learned before the call returns (the deployment hooks);
    # the success events, which LiteLLM runs in the background, cover the rest. Each
    # call is learned once (the first to see it takes it).

    async def async_post_call_success_deployment_hook(
        self, request_data: dict[str, Any], response: Any, call_type: Any
    ) -> Any:
        self.learn(request_data.get("litellm_call_id"), response)
        return None

    async def async_post_call_streaming_deployment_hook(
        self, request_data: dict[str, Any], response_chunk: Any, call_type: Any
    ) -> Any:
        if getattr(response_chunk, "usage", None) is not None:
            self.learn(request_data.get("litellm_call_id"), response_chunk)
        return None

    def log_success_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self.learn(kwargs.get("litellm_call_id"), response_obj)

    async def async_log_success_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self.learn(kwargs.get("litellm_call_id"), response_obj)
