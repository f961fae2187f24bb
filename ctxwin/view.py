"""The neutral view of a transcript that the estimator and pruner work on.

An adapter (``ctxwin.formats``) reads a provider's request body into a
:class:`View`: one :class:`Item` per entry of the body's message list, in
order, each with its role, its cost vector (see ``ctxwin.tokens``), the
tool-call ids it makes and the ids it answers. The body itself is never
modified; the adapter writes the kept entries back from the original objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

SYSTEM = "system"
USER = "user"
ASSISTANT = "assistant"
TOOL = "tool"

_NO_IDS: tuple[str, ...] = ()


@dataclass(slots=True)
class Item:
    """One entry of the message list, as the pruner sees it.

    ``role`` is normalized: ``system`` (also developer), ``user``, ``assistant``
    (any model output), ``tool`` (any tool or function result). ``joins`` marks
    a model item that continues the previous model response instead of opening
    a new turn (formats where one response spans several items).
    """

    role: str
    cost: list[int]
    calls: tuple[str, ...] = _NO_IDS
    answers: tuple[str, ...] = _NO_IDS
    joins: bool = False


@dataclass(slots=True)
class View:
    """A request body as sizes and pairings, ready to estimate and prune."""

    format: str
    items: list[Item]
    base: list[int]
    """Cost of everything outside the message list (tool schemas, top-level system, framing)."""
    model: str | None = None
    """The body's model name, if it has one."""
    max_tokens: int | None = None
    """The response allocation the body declares, if any."""
    items_path: str = "messages"
    """JSON path of the message list, for error messages (``""`` for a bare list)."""
    notes: list[str] = field(default_factory=list)
    """Non-fatal remarks made while reading (shown as warnings)."""
    pinned: int = 0
    """Items ``[0, pinned)`` join the head and are never dropped: the provider already
    ignores them (they precede an Anthropic ``compaction`` block) and they cost nothing,
    or they run through the latest OpenAI Responses ``compaction`` item."""
    superseded: tuple[int, int] | None = None
    """Items ``[start, end)`` that a fit may drop as one block before any turn: they
    precede the latest OpenAI Responses ``compaction`` item, which carries their context
    (the items themselves are still read and billed, so they are counted)."""
    tighten: Callable[[Iterable[int]], None] | None = None
    """Set when the items were priced at a cheap upper bound of the estimator's price
    (:meth:`ctxwin.tokens.tiered.TieredBound.lazy`): prices the items at the given indices
    at the estimator's own price, in place. Every cost is an upper bound of that price
    either way; a fit prices what it keeps (:func:`ctxwin.fitting.pruning.fit`)."""

    def where(self, index: int) -> str:
        """JSON path of item ``index`` (``messages[4]``)."""
        return f"{self.items_path}[{index}]"


@dataclass(frozen=True, slots=True)
class Problem:
    """One structural problem of a transcript: where, which rule, and what."""

    index: int
    where: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message} [{self.rule}]"
