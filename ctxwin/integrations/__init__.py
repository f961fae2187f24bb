"""Drop-in fitting for the SDKs and frameworks agent loops are written with.

Each integration is a module of its own that works on the SDK's or framework's
own objects, and is imported only when used; installing the matching extra
(``pip install 'ctxwin[openai]'``, ``'ctxwin[anthropic]'``, ...) brings the
package it wraps; imported without it, a module that needs the package raises
:class:`ctxwin.extras.MissingExtra` (a ``ModuleNotFoundError``) naming the extra.
See ``docs/integrations/``.

* :mod:`ctxwin.integrations.openai`: ``wrap(client, **settings)`` for
  ``chat.completions.create`` and ``responses.create`` (sync, async, streamed);
* :mod:`ctxwin.integrations.anthropic`: ``wrap(client, **settings)`` for
  ``messages.create`` and ``messages.stream`` (sync and async);
* :mod:`ctxwin.integrations.langchain`: ``ContextWindowMiddleware`` for a LangChain v1
  agent (``create_agent(middleware=[...])``) and ``pre_model_hook(**settings)`` for a
  LangGraph ReAct agent, on LangChain's own message objects;
* :mod:`ctxwin.integrations.pydantic_ai`: ``history_processor(**settings)`` for a
  pydantic-ai agent (``capabilities=[ProcessHistory(...)]``), on its own messages;
* :mod:`ctxwin.integrations.litellm`: ``ContextWindowCallback(**settings)``, a LiteLLM
  callback (async SDK calls, the Router, the proxy's pre-call hook; ``.completion`` for
  sync calls);
* :mod:`ctxwin.integrations.agents`: ``ContextWindowFilter(**settings)``, an OpenAI
  Agents SDK ``call_model_input_filter`` (and ``RunHooks`` that learn from usage).
"""
