"""Wire-format adapters: detection by shape, or by name with ``--format``."""

from __future__ import annotations

from typing import Any

from ctxwin.errors import InputError
from ctxwin.formats._util import kind_of
from ctxwin.formats.base import Adapter
from ctxwin.formats.openai_chat import OpenAIChat

ADAPTERS: dict[str, Adapter] = {a.name: a for a in (OpenAIChat(),)}
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
    _shape_hint(body)
    expected = "; ".join(a.description for a in ADAPTERS.values())
    raise InputError(f"not a transcript this tool knows: expected {expected}")


def _shape_hint(body: Any) -> None:
    """Name the first wrong value of a body that looks almost like a message list."""
    if isinstance(body, dict) and "messages" in body and not isinstance(body["messages"], list):
        raise InputError(f"expected a list, got {kind_of(body['messages'])}", "messages")
    if isinstance(body, list):
        for i, m in enumerate(body):
            if not isinstance(m, dict):
                raise InputError(f"expected a message object, got {kind_of(m)}", f"[{i}]")
            if "role" not in m:
                raise InputError('missing "role"', f"[{i}].role")


__all__ = ["ADAPTERS", "AUTO", "Adapter", "get_adapter", "names"]
