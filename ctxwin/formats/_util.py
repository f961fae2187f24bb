"""Small helpers shared by the adapters."""

from __future__ import annotations

from typing import Any

from ctxwin.errors import InputError


def kind_of(value: Any) -> str:
    """A JSON type name for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def expect_str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"expected a string, got {kind_of(value)}", where)
    return value


def expect_list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise InputError(f"expected a list, got {kind_of(value)}", where)
    return value


def expect_dict(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(f"expected an object, got {kind_of(value)}", where)
    return value


def optional_int(body: dict[str, Any], key: str, where: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"expected a non-negative integer, got {kind_of(value)}", where)
    return value


def optional_model(body: dict[str, Any]) -> str | None:
    model = body.get("model")
    if model is None:
        return None
    return expect_str(model, "model")
