"""Fit every request an Anthropic client sends: ``wrap(client, **settings)``.

::

    from anthropic import Anthropic
    from ctxwin.integrations.anthropic import wrap

    client = wrap(Anthropic(), context_length=200_000)
    message = client.messages.create(model="claude-sonnet-4-5", max_tokens=4096,
                                     messages=history, tools=tools)

The wrapped client's ``messages.create`` (streamed or not) and
``messages.stream`` (on :class:`anthropic.Anthropic` and
:class:`anthropic.AsyncAnthropic`):

* fit the request before sending it: the oldest whole turns of ``messages``
  are left out of what is sent when the request would not fit the model's
  window (``max_tokens`` is the response's allocation); ``history`` itself
  is never changed;
* raise :class:`ctxwin.ContextTruncated` before anything is sent when even
  the first user message and the newest turn do not fit;
* learn from the ``usage`` each response reports (input, cache creation and
  cache read tokens; from a stream, its ``message_start`` event).

Everything else is the client's own. ``settings`` are the library's own:
``context_length=``, ``model=``, ``spec=``, ``max_output_tokens=``,
``max_tokens=``, ``calibration=``, ``estimator=``, ``strategy=``.
``client.ctxwin`` holds the wrapper's state (``last``, ``reset()``). This
module never imports ``anthropic`` itself.
"""

from __future__ import annotations

import inspect
from typing import Any

from ctxwin.integrations._common import Fitting, Record, Wrapped, fitted_call, settings_for
from ctxwin.manager import ManagedFit


def _usage(message: Any) -> Any:
    return getattr(message, "usage", None)


def _stream_usage(event: Any) -> Any:
    if getattr(event, "type", None) == "message_start":
        return getattr(getattr(event, "message", None), "usage", None)
    return None


def wrap(client: Any, **settings: Any) -> Any:
    """``client`` (an ``anthropic.Anthropic`` or ``anthropic.AsyncAnthropic``) with
    its ``messages.create`` and ``messages.stream`` fitted (see the module docstring)."""
    record = Record()
    fitting = record.add("anthropic", "messages", settings_for(**settings), __name__)
    messages = client.messages
    calls: dict[tuple[str, ...], Any] = {
        ("messages", "create"): fitted_call(fitting, messages.create, _usage, _stream_usage),
        ("messages", "stream"): _fitted_stream(fitting, messages.stream),
    }
    return Wrapped(client, calls, record)


def _fitted_stream(fitting: Fitting, stream: Any) -> Any:
    def call(**kwargs: Any) -> StreamManager:
        sent, fitted = fitting.fit(kwargs)
        return StreamManager(stream(**sent), fitting, kwargs.get("model"), fitted)

    return call


class StreamManager:
    """``messages.stream(...)``'s manager (sync or async): the stream is the SDK's
    own; when the block ends, the usage of the message it streamed is learned."""

    def __init__(self, manager: Any, fitting: Fitting, model: Any, fitted: ManagedFit) -> None:
        self._manager = manager
        self._fitting = fitting
        self._model = model
        self._fitted = fitted
        self._stream: Any = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._manager, name)

    def _learn(self) -> None:
        try:
            snapshot = self._stream.current_message_snapshot
        except Exception:  # no message started: nothing to learn
            return
        self._fitting.learn(self._model, getattr(snapshot, "usage", None), self._fitted)

    def __enter__(self) -> Any:
        self._stream = self._manager.__enter__()
        return self._stream

    def __exit__(self, *exc: object) -> Any:
        self._learn()
        return self._manager.__exit__(*exc)

    async def __aenter__(self) -> Any:
        self._stream = await self._manager.__aenter__()
        return self._stream

    async def __aexit__(self, *exc: object) -> Any:
        self._learn()
        result = self._manager.__aexit__(*exc)
        return await result if inspect.isawaitable(result) else result
