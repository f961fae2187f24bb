"""Wire-format adapters: detection by shape, or by name with ``--format``.

Detection order (the first adapter whose ``detect`` accepts the body wins):

1. ``anthropic``: ``messages`` with only ``user``/``assistant`` roles and no
   ``tool_calls``/``function_call``, plus a top-level ``system`` (Chat keeps its
   system prompt in ``messages``), ``stop_sequences``, ``top_k`` or
   ``thinking``; tools with an ``input_schema`` (Chat tools are
   ``{"type": "function", "function": ...}``); an Anthropic ``tool_choice``
   object (``auto``/``any``/``tool``); or an Anthropic-only content block
   (``tool_use``, ``tool_result``, ``image``, ``document``, ``thinking``, ...);
   or else, plain messages in a request as the Messages API takes it: a Claude
   ``model`` id, an integer ``max_tokens`` and nothing only Chat has (so a pruned
   Anthropic body whose blocks were all in dropped turns is still Anthropic);
2. ``openai-responses``: ``input`` and no ``messages``/``contents``, or a bare
   list of typed items (``function_call``, ``reasoning``, ...);
3. ``gemini``: ``contents``;
4. ``openai-chat``: ``messages``, or a bare list of ``role`` messages.

Any other body of only plain-text user/assistant messages reads the same either
way and is taken as ``openai-chat``; ``--format`` forces any adapter.
"""

from __future__ import annotations

from typing import Any

from ctxwin.errors import InputError
from ctxwin.formats._util import kind_of
from ctxwin.formats.anthropic import Anthropic
from ctxwin.formats.base import Adapter
from ctxwin.formats.gemini import Gemini
from ctxwin.formats.openai_chat import OpenAIChat
from ctxwin.formats.openai_responses import OpenAIResponses

ADAPTERS: dict[str, Adapter] = {
    a.name: a for a in (Anthropic(), OpenAIResponses(), Gemini(), OpenAIChat())
}
"""Every adapter by name, in detection order."""

AUTO = "auto"


def names() -> list[str]:
    """Format names accepted by ``--format`` (besides ``auto``)."""
    return list(ADAPTERS)


def get_adapter(body: Any, fmt: str = AUTO) -> Adapter:
    """The adapter for ``body``: the one named ``fmt``, or the first that detects it."""
    if fmt != AUTO:
        try:
            return ADAPTERS[fmt]
        except KeyError:
            raise InputError(
                f"unknown format {fmt!r} (choose from: {AUTO}, {', '.join(ADAPTERS)})"
            ) from None
    for adapter in ADAPTERS.values():
        if adapter.detect(body):
            return adapter
    if isinstance(body, dict):
        # Not a clean match, but the body names a format's message list: let that
        # adapter read it, so the error names the bad field.
        for adapter in reversed(ADAPTERS.values()):  # the most general reader first
            if adapter.items_key in body:
                return adapter
    _shape_hint(body)
    expected = "; ".join(a.description for a in ADAPTERS.values())
    raise InputError(f"not a transcript this tool knows: expected {expected}")


def _shape_hint(body: Any) -> None:
    """Name the first wrong value of a bare message list that no adapter detects."""
    if isinstance(body, list):
        for i, m in enumerate(body):
            if not isinstance(m, dict):
                raise InputError(f"expected a message object, got {kind_of(m)}", f"[{i}]")
            if "role" not in m:
                raise InputError('missing "role"', f"[{i}].role")


__all__ = ["ADAPTERS", "AUTO", "Adapter", "get_adapter", "names"]
