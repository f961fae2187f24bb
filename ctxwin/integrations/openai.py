"""Fit every request an OpenAI client sends: ``wrap(client, **settings)``.

::

    from openai import OpenAI
    from ctxwin.integrations.openai import wrap

    client = wrap(OpenAI(), context_length=128_000)
    response = client.chat.completions.create(model="gpt-4o", messages=history)

The wrapped client's ``chat.completions.create`` and ``responses.create``
(on :class:`openai.OpenAI` and :class:`openai.AsyncOpenAI`, streamed or not):

* fit the request before sending it: the oldest whole turns of ``messages``
  (``input``) are left out of what is sent when the request would not fit
  the model's window; ``history`` itself is never changed;
* raise :class:`ctxwin.ContextTruncated` before anything is sent when even
  the system prompt, the first user message and the newest turn do not fit;
* learn from the ``usage`` each response reports (from a stream: the final
  chunk when ``stream_options={"include_usage": True}``, the Responses
  ``response.completed`` event), so estimates track the model's tokenizer.

Everything else is the client's own. ``settings`` are the library's own (see
:func:`ctxwin.integrations._common.settings_for`): ``context_length=``,
``model=``, ``spec=``, ``max_output_tokens=``, ``max_tokens=``,
``calibration=``, ``estimator=``, ``strategy=``. ``client.ctxwin`` holds the
wrapper's state: ``client.ctxwin.last`` (the last fit), ``client.ctxwin.reset()``
(a new agent run). This module never imports ``openai`` itself.
"""

from __future__ import annotations

from typing import Any

from ctxwin.integrations._common import Record, Wrapped, fitted_call, settings_for


def _usage(response: Any) -> Any:
    return getattr(response, "usage", None)


def _chat_stream_usage(chunk: Any) -> Any:
    return getattr(chunk, "usage", None)


def _responses_stream_usage(event: Any) -> Any:
    if getattr(event, "type", None) in ("response.completed", "response.incomplete"):
        return getattr(getattr(event, "response", None), "usage", None)
    return None


def wrap(client: Any, **settings: Any) -> Any:
    """``client`` (an ``openai.OpenAI`` or ``openai.AsyncOpenAI``) with its
    ``chat.completions.create`` and ``responses.create`` fitted (see the module
    docstring)."""
    options = settings_for(**settings)
    record = Record()
    chat = record.add("openai-chat", "messages", options, __name__)
    responses = record.add("openai-responses", "input", options, __name__)
    calls: dict[tuple[str, ...], Any] = {
        ("chat", "completions", "create"): fitted_call(
            chat, client.chat.completions.create, _usage, _chat_stream_usage
        ),
        ("responses", "create"): fitted_call(
            responses, client.responses.create, _usage, _responses_stream_usage
        ),
    }
    return Wrapped(client, calls, record)
