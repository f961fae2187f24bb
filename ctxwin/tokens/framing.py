"""Request-level tokens a provider adds around the body, which the body does not show.

Every estimator's :meth:`~ctxwin.tokens.base.Estimator.framing` answers from here.
"""

from __future__ import annotations

from functools import lru_cache

from ctxwin.tokens.models import name_family

TOOL_PROMPT_TOKENS = {"anthropic": 346}
"""Tokens a provider adds to the prompt when the request has tools.

Anthropic documents a tool-use system prompt of 346 tokens (``tool_choice``
auto or none; 313 for any or tool) for its current models ("Tool use
pricing" in the tool-use overview); the larger figure is used.
"""


ANTHROPIC_TOOL_PROMPT = TOOL_PROMPT_TOKENS["anthropic"]
"""Anthropic's hidden tool-use system prompt (see :data:`TOOL_PROMPT_TOKENS`):
its tool-use pricing table lists 346 tokens for ``tool_choice`` auto/none and
313 for any/tool on Claude Opus 4.x, Sonnet 4.x, Sonnet 3.7 and Haiku 4.5
(older models fewer); the body never shows them."""

OPENAI_REPLY_PRIMING = 3
"""``<|start|>assistant<|message|>``: every Chat Completions prompt ends with
it (OpenAI cookbook, "How to count tokens with tiktoken")."""

OPENAI_TOOLS_PREAMBLE = 16
"""OpenAI renders ``tools`` inside the system message under a
``# Tools`` / ``namespace functions`` header the body does not show. Its size
is not published. 16 was set when it kept the ``content`` estimate of every recorded
gpt-4o, gpt-4o-mini and gpt-5.4-mini request with tools covered (1 token short with
12 and 14). No recorded call binds it any longer (``python -m fidelity.provider``):
the gpt-4o and gpt-4o-mini requests with tools, counted exactly, are 32 tokens or more
over their reported prompt without it, and the gpt-5.4-mini requests bind only its sum
with :data:`OPENAI_REASONING_PREAMBLE`; it is kept."""


OPENAI_REASONING_PREAMBLE = 13
"""OpenAI's reasoning models (GPT-5 and 5.x, o1, o3, o4-mini) put a header of their own
before the conversation (the reasoning effort, the channels a reply may use) that the
body does not show. Its size is not published. It is the most tokens a recorded call of
the fit part (``python -m fidelity.provider``) reported over the exact o200k_base count of
its body with the rest of this framing: every gpt-5.4-mini request of one user message
and two tools, 265 against 252. All eight recorded gpt-5.4-mini calls are one run, so
all are in the fit part and none is held out. The o-series share the header format and
get it too; no call of theirs is recorded."""

REASONING_FAMILIES = ("gpt-5", "o1", "o3", "o4")
"""Name prefixes of OpenAI's reasoning models (:func:`reasoning_model`)."""


@lru_cache(maxsize=256)
def reasoning_model(model: str | None) -> bool:
    """Whether ``model`` is one of OpenAI's reasoning models: its name, after any
    ``provider/`` part, is one of :data:`REASONING_FAMILIES` or starts with one followed
    by ``-``, ``.``, ``:``, ``@`` or ``_`` (``gpt-5.4-mini``, ``o3-pro``, ``openai/o1``).
    Remembered: every body of a run names the same model, and ``replay`` reads
    thousands."""
    if not model:
        return False
    return name_family(model, REASONING_FAMILIES, "-.:@_") is not None


def provider_framing(fmt: str, *, has_tools: bool, model: str | None = None) -> int:
    """Request-level tokens a provider adds around the body (documented above).

    ``fmt`` is an adapter name. Every format gets the reply priming;
    ``anthropic*`` formats with tools add Anthropic's tool-use system prompt,
    ``openai*`` formats with tools OpenAI's tools header, and ``openai*`` formats for
    a reasoning ``model`` (:func:`reasoning_model`) its header.
    """
    tokens = OPENAI_REPLY_PRIMING
    if has_tools:
        if fmt.startswith("anthropic"):
            tokens += ANTHROPIC_TOOL_PROMPT
        elif fmt.startswith("openai"):
            tokens += OPENAI_TOOLS_PREAMBLE
    if fmt.startswith("openai") and reasoning_model(model):
        tokens += OPENAI_REASONING_PREAMBLE
    return tokens
