"""Wire-format adapters: detection by shape, or by name with ``--format``."""

from __future__ import annotations

from typing import Any

from ctxwin.errors import InputError
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
    if isinstance(body, dict):
        # Not a clean match, but the body names a format's message list: let that
        # adapter read it, so the error names the bad field.
        for adapter in ADAPTERS.values():
            if adapter.items_key in body:
                return adapter
    expected = "; ".join(a.description for a in ADAPTERS.values())
    raise InputError(f"not a transcript this tool knows: expected {expected}")


__all__ = ["ADAPTERS", "AUTO", "Adapter", "get_adapter", "names"]
