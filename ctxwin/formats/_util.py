"""Small helpers shared by the adapters."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from ctxwin.codec import dumps
from ctxwin.errors import InputError
from ctxwin.formats import media
from ctxwin.formats.base import Edits, Path
from ctxwin.tokens.base import Estimator, Kind
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


class Pending:
    """The calls made and not yet answered, per function name, oldest first: a result
    that names no call id answers its name's oldest call (:meth:`take`); one that names
    an id answers that call. Every step is O(1) (amortized), so a run of calls answered
    long after, in any order, is read in linear time."""

    __slots__ = ("_live", "_queues", "_skip")

    def __init__(self) -> None:
        self._queues: dict[str, deque[str]] = {}
        self._live: Counter[tuple[str, str]] = Counter()
        self._skip: Counter[tuple[str, str]] = Counter()
        """Calls answered by id and still in their queue (dropped when they reach its front)."""

    def add(self, name: str, call_id: str) -> None:
        self._queues.setdefault(name, deque()).append(call_id)
        self._live[name, call_id] += 1

    def answer(self, name: str, call_id: str) -> bool:
        """Mark the call ``call_id`` of ``name`` answered; whether it was pending."""
        key = (name, call_id)
        if self._live[key] <= 0:
            return False
        self._live[key] -= 1
        self._skip[key] += 1
        return True

    def take(self, name: str) -> str | None:
        """The oldest pending call of ``name``, now answered (``None``: none pending)."""
        queue = self._queues.get(name)
        while queue:
            call_id = queue.popleft()
            key = (name, call_id)
            if self._skip[key] > 0:
                self._skip[key] -= 1
                continue
            self._live[key] -= 1
            return call_id
        return None


def add_json(cost: list[int], value: Any, estimator: Estimator) -> None:
    """Count a JSON value by its serialized bytes, as dense text."""
    estimator.add_bytes(cost, dumps(value), Kind.DENSE)


def dense_cost(text: str, estimator: Estimator) -> list[int]:
    """The cost vector of ``text`` counted as dense text (what a tool result is)."""
    cost = [0] * estimator.width
    estimator.add_text(cost, text, Kind.DENSE)
    return cost


def replace_key(body: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A copy of ``body`` with ``key`` set to ``value``, key order kept."""
    return {k: (value if k == key else v) for k, v in body.items()}


def keep_entries(body: Any, key: str, keep: Sequence[int]) -> Any:
    """``body`` (a dict with its entries under ``key``, or a bare list of them) with only
    the entries at ``keep``: what an adapter's ``write`` gives."""
    if isinstance(body, list):
        return [body[i] for i in keep]
    entries = body[key]
    return replace_key(body, key, [entries[i] for i in keep])


def adjacency_problems(view: View, keep: Sequence[int]) -> list[Problem]:
    """Rules of formats whose tool results sit in the message right after their calls.

    Among the kept items: the first is a user message; every result answers a
    call made by the kept message immediately before it; and every model
    message that makes calls, unless it is the last, is followed by a message
    answering all of them.
    """
    items = view.items
    problems: list[Problem] = []

    def flag(i: int, rule: str, message: str) -> None:
        problems.append(Problem(i, view.where(i), rule, message))

    if keep and items[keep[0]].role != USER:
        flag(keep[0], "first-is-user", "the first message must be a user message")
    prev: Item | None = None
    last = len(keep) - 1
    for pos, i in enumerate(keep):
        item = items[i]
        if item.answers:
            made = prev.calls if prev is not None else ()
            for call_id in item.answers:
                if call_id not in made:
                    flag(
                        i,
                        "result-follows-call",
                        f"the result for call {call_id!r} is not in the message right "
                        "after the one that made the call",
                    )
        if item.calls and pos < last:
            answered = items[keep[pos + 1]].answers
            for call_id in item.calls:
                if call_id not in answered:
                    message = f"call {call_id!r} has no result in the next message"
                    flag(i, "call-answered-next", message)
        prev = item
    return problems


def role_of(
    obj: dict[str, Any],
    roles: Mapping[str, str],
    where: str,
    expected: str,
    missing: str = 'missing "role"',
) -> str:
    """The neutral role of the message ``obj`` at ``where`` (its ``role``, a key of
    ``roles``); :class:`~ctxwin.errors.InputError` at ``where.role`` saying ``missing``
    when it has none, and what it may be (``expected``) when it is another."""
    name = obj.get("role")
    role = roles.get(name) if isinstance(name, str) else None
    if role is None:
        if name is None:
            raise InputError(missing, f"{where}.role")
        raise InputError(f"unknown role {name!r} (expected {expected})", f"{where}.role")
    return role


def noted(view: View, paths: list[str], cost: Callable[[media.Media], int]) -> View:
    """``view`` with the warning for documents known only by URL or file id (their size
    is a guess, priced by ``cost`` as an unknown PDF) added to its notes, when ``paths``
    names any: the end of an adapter's ``read``."""
    if paths:
        each = cost(media.unknown("pdf"))
        more = f" and {len(paths) - 3:,} more" if len(paths) > 3 else ""
        view.notes.append(
            f"{len(paths):,} document(s) known only by URL or file id "
            f"({', '.join(paths[:3])}{more}): size unknown, counted as {each:,} tokens each"
        )
    return view


REMOVE: Any = object()
"""What an edit function returns to remove the list element it was given."""


def _path_key(step: int | str) -> tuple[int, int | str]:
    return (0, step) if isinstance(step, int) else (1, step)


def _update_at(obj: Any, path: Path, fn: Callable[[Any, Path], Any], full: Path) -> Any:
    """A copy of ``obj`` with the value at ``path`` replaced by ``fn(value, full)``
    (removed when it returns :data:`REMOVE`); only the containers on the path are copied."""
    key = path[0]
    old = obj[key]
    new = fn(old, full) if len(path) == 1 else _update_at(old, path[1:], fn, full)
    if isinstance(obj, list):
        out: Any = list(obj)
        if new is REMOVE:
            del out[key]
        else:
            out[key] = new
        return out
    if new is REMOVE:
        return {k: v for k, v in obj.items() if k != key}
    return replace_key(obj, str(key), new)


def _call_put(
    put: Callable[[Any, Path, str | None], Any], value: str | None, old: Any, path: Path
) -> Any:
    return put(old, path, value)


def edit_entries(
    body: Any, key: str, edits: Edits, put: Callable[[Any, Path, str | None], Any]
) -> Any:
    """``body`` (a dict with its entries under ``key``, or a bare list of them) with
    ``put(old, path, new)`` written at each edited ``(index, path)``.

    Paths inside one entry are applied last-first, so removing a list element
    never shifts the index of another edit.
    """
    entries = body if isinstance(body, list) else body[key]
    out = list(entries)
    grouped: dict[int, list[tuple[Path, str | None]]] = {}
    for (index, path), value in edits.items():
        grouped.setdefault(index, []).append((path, value))
    for index, changes in grouped.items():
        entry = entries[index]
        changes.sort(key=lambda c: [_path_key(s) for s in c[0]], reverse=True)
        for path, value in changes:
            entry = _update_at(entry, path, partial(_call_put, put, value), path)
        out[index] = entry
    return out if isinstance(body, list) else replace_key(body, key, out)


def current_turn_start(view: View) -> int:
    """Index of the last user message that answers no call (where the current turn
    begins), or 0. Thinking before it belongs to earlier turns."""
    for i in range(len(view.items) - 1, -1, -1):
        item = view.items[i]
        if item.role == USER and not item.answers:
            return i
    return 0


def only_text(parts: list[Any], text_types: frozenset[str]) -> str | None:
    """The joined text of ``parts`` when every part is a text part, else ``None``."""
    texts: list[str] = []
    for part in parts:
        if not isinstance(part, dict) or part.get("type") not in text_types:
            return None
        text = part.get("text")
        if not isinstance(text, str):
            return None
        texts.append(text)
    return "".join(texts)
