"""Small helpers shared by the adapters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from ctxwin.errors import InputError
from ctxwin.estimate import Estimator, Kind
from ctxwin.view import USER, Item, Problem, View


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


def required_str(obj: dict[str, Any], key: str, where: str) -> str:
    """``obj[key]``, which must be present and a string (``where`` is ``obj``'s path)."""
    if key not in obj:
        raise InputError(f'missing "{key}"', f"{where}.{key}")
    return expect_str(obj[key], f"{where}.{key}")


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


def add_json(cost: list[int], value: Any, estimator: Estimator) -> None:
    """Count a JSON value by its serialized bytes, as dense text."""
    estimator.add_bytes(cost, orjson.dumps(value), Kind.DENSE)


def replace_key(body: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A copy of ``body`` with ``key`` set to ``value``, key order kept."""
    return {k: (value if k == key else v) for k, v in body.items()}


def adjacency_problems(view: View, keep: Sequence[int]) -> list[Problem]:
    """Rules of formats whose tool results sit in the message right after their calls.

    Among the kept items: the first is a user message; every result answers a
    call made by the kept message immediately before it; and every model
    message that makes calls, unless it is the last, is followed by a message
    answering all of them.
    """
    items = view.items
    problems: list[Problem] = []
    if keep and items[keep[0]].role != USER:
        first = keep[0]
        problems.append(
            Problem(
                first,
                view.where(first),
                "first-is-user",
                "the first message must be a user message",
            )
        )
    prev: Item | None = None
    last = len(keep) - 1
    for pos, i in enumerate(keep):
        item = items[i]
        if item.answers:
            made = prev.calls if prev is not None else ()
            for call_id in item.answers:
                if call_id not in made:
                    problems.append(
                        Problem(
                            i,
                            view.where(i),
                            "result-follows-call",
                            f"the result for call {call_id!r} is not in the message right "
                            "after the one that made the call",
                        )
                    )
        if item.calls and pos < last:
            answered = items[keep[pos + 1]].answers
            for call_id in item.calls:
                if call_id not in answered:
                    problems.append(
                        Problem(
                            i,
                            view.where(i),
                            "call-answered-next",
                            f"call {call_id!r} has no result in the next message",
                        )
                    )
        prev = item
    return problems


def unknown_documents_note(paths: list[str], each: int) -> str:
    """A warning for documents known only by URL or file id (their size is a guess)."""
    shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3:,} more" if len(paths) > 3 else "")
    return (
        f"{len(paths):,} document(s) known only by URL or file id ({shown}): size unknown, "
        f"counted as {each:,} tokens each"
    )
