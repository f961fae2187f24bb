"""The neutral view of a transcript that the estimator and pruner work on.

An adapter (``ctxwin.formats``) reads a provider's request body into a
:class:`View`: one :class:`Item` per entry of the body's message list, in
order, each with its role, its cost vector (see ``ctxwin.tokens``), the
tool-call ids it makes and the ids it answers. The body itself is never
modified; the adapter writes the kept entries back from the original objects.

The three records are plain classes with slots, written out: what a dataclass would
generate (``__init__``, ``__eq__``, ``__repr__``; for :class:`Problem`, frozen and
hashable) without compiling it at every start. ``_fields`` names the fields in order,
and :meth:`View._replace` copies a view with some fields changed (as
``dataclasses.replace`` would).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Self

SYSTEM = "system"
USER = "user"
ASSISTANT = "assistant"
TOOL = "tool"

_NO_IDS: tuple[str, ...] = ()


class _Record:
    """What the records below share: ``_fields``, their names in order, and the
    ``__eq__`` and ``__repr__`` a dataclass would write over them."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in self._fields])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, _Record)
        return self._values() == other._values()

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__qualname__}({fields})"


class Item(_Record):
    """One entry of the message list, as the pruner sees it.

    ``role`` is normalized: ``system`` (also developer), ``user``, ``assistant``
    (any model output), ``tool`` (any tool or function result). ``joins`` marks
    a model item that continues the previous model response instead of opening
    a new turn (formats where one response spans several items).
    """

    __slots__ = _fields = __match_args__ = ("role", "cost", "calls", "answers", "joins")

    role: str
    cost: list[int]
    calls: tuple[str, ...]
    answers: tuple[str, ...]
    joins: bool

    def __init__(
        self,
        role: str,
        cost: list[int],
        calls: tuple[str, ...] = _NO_IDS,
        answers: tuple[str, ...] = _NO_IDS,
        joins: bool = False,
    ) -> None:
        self.role, self.cost, self.calls = role, cost, calls
        self.answers, self.joins = answers, joins


class View(_Record):
    """A request body as sizes and pairings, ready to estimate and prune."""

    __slots__ = __match_args__ = (
        *("format", "items", "base", "model", "max_tokens", "items_path", "notes"),
        *("pinned", "superseded", "tighten"),
    )
    _fields: tuple[str, ...] = __slots__

    format: str
    items: list[Item]
    base: list[int]
    """Cost of everything outside the message list (tool schemas, top-level system, framing)."""
    model: str | None
    """The body's model name, if it has one."""
    max_tokens: int | None
    """The response allocation the body declares, if any."""
    items_path: str
    """JSON path of the message list, for error messages (``""`` for a bare list)."""
    notes: list[str]
    """Non-fatal remarks made while reading (shown as warnings)."""
    pinned: int
    """Items ``[0, pinned)`` join the head and are never dropped: the provider already
    ignores them (they precede an Anthropic ``compaction`` block) and they cost nothing,
    or they run through the latest OpenAI Responses ``compaction`` item."""
    superseded: tuple[int, int] | None
    """Items ``[start, end)`` that a fit may drop as one block before any turn: they
    precede the latest OpenAI Responses ``compaction`` item, which carries their context
    (the items themselves are still read and billed, so they are counted)."""
    tighten: Callable[[Iterable[int]], None] | None
    """Set when the items were priced at a cheap upper bound of the estimator's price
    (:meth:`ctxwin.tokens.tiered.TieredBound.lazy`): prices the items at the given indices
    at the estimator's own price, in place. Every cost is an upper bound of that price
    either way; a fit prices what it keeps (:func:`ctxwin.fitting.pruning.fit`)."""

    def __init__(
        self,
        format: str,
        items: list[Item],
        base: list[int],
        model: str | None = None,
        max_tokens: int | None = None,
        items_path: str = "messages",
        notes: list[str] | None = None,
        pinned: int = 0,
        superseded: tuple[int, int] | None = None,
        tighten: Callable[[Iterable[int]], None] | None = None,
    ) -> None:
        self.format, self.items, self.base, self.model = format, items, base, model
        self.max_tokens, self.items_path = max_tokens, items_path
        self.notes = [] if notes is None else notes
        self.pinned, self.superseded, self.tighten = pinned, superseded, tighten

    def _replace(self, **changes: Any) -> Self:
        """This view (of the same class: a Responses view keeps its reasoning items) with
        ``changes`` to its fields; the rest are shared, not copied."""
        fields = {name: getattr(self, name) for name in self._fields}
        fields.update(changes)
        return type(self)(**fields)

    def where(self, index: int) -> str:
        """JSON path of item ``index`` (``messages[4]``)."""
        return f"{self.items_path}[{index}]"


class Problem(_Record):
    """One structural problem of a transcript: where, which rule, and what. Frozen."""

    __slots__ = _fields = __match_args__ = ("index", "where", "rule", "message")

    index: int
    where: str
    rule: str
    message: str

    def __init__(self, index: int, where: str, rule: str, message: str) -> None:
        for name, value in zip(self._fields, (index, where, rule, message), strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a Problem is frozen: {name} cannot be set")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"a Problem is frozen: {name} cannot be deleted")

    def __reduce__(self) -> tuple[type[Problem], tuple[int, str, str, str]]:
        return Problem, (self.index, self.where, self.rule, self.message)

    def __hash__(self) -> int:
        return hash(self._values())

    def __str__(self) -> str:
        return f"{self.where}: {self.message} [{self.rule}]"
