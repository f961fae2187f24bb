"""Small helpers the session readers share: field access that names what is missing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from ctxwin.errors import InputError

Beside = Callable[[str], Any]
"""A file beside the session file, by name: its parsed JSON, or ``None`` when there is no
such file (or it is no JSON)."""


class Besides(Exception):
    """Raised by a reader for a file that only goes with another one beside it (a Cline
    task folder's ``ui_messages.json`` with its ``api_conversation_history.json``): the
    session is read from that one (``main``)."""

    def __init__(self, main: str) -> None:
        super().__init__(main)
        self.main = main


def need(obj: Mapping[str, Any], key: str, where: str) -> Any:
    """``obj[key]``; a missing field is an :class:`InputError` naming it."""
    if key not in obj:
        raise InputError(f'missing "{key}"', f"{where}.{key}" if where else key)
    return obj[key]


def need_dict(obj: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    """``obj[key]`` when it is an object; else an :class:`InputError` naming the field."""
    value = need(obj, key, where)
    if not isinstance(value, dict):
        raise InputError("expected an object", f"{where}.{key}" if where else key)
    return value


def need_list(obj: Mapping[str, Any], key: str, where: str) -> list[Any]:
    """``obj[key]`` when it is an array; else an :class:`InputError` naming the field."""
    value = need(obj, key, where)
    if not isinstance(value, list):
        raise InputError("expected an array", f"{where}.{key}" if where else key)
    return value


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is an object, else an empty one (for optional fields)."""
    return value if isinstance(value, dict) else {}


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def as_int(value: Any) -> int | None:
    """An integer from a number or a decimal string (OTLP writes ``intValue`` as text)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def line_time(value: Mapping[str, Any]) -> datetime | None:
    """A line's ``timestamp`` (ISO 8601 with its zone, ``Z`` for UTC), or ``None`` when it
    is absent or no such time."""
    text = as_str(value.get("timestamp"))
    if text is None:
        return None
    try:
        stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return stamp if stamp.tzinfo is not None else None
