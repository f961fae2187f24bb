"""The adapter interface: one implementation per wire format."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ctxwin.tokens.base import Estimator
from ctxwin.view import Problem, View

RESULT = "result"
"""A :class:`Part` holding a tool result's content."""
THINKING = "thinking"
"""A :class:`Part` holding thinking or reasoning content."""
CALL = "call"
"""A :class:`Part` holding one tool call: its name, arguments, id and framing
(:meth:`Adapter.kinds` only: calls are never edited)."""
MEDIA = "media"
"""A :class:`Part` holding an image, a document or audio outside a tool result
(:meth:`Adapter.kinds` only)."""
SYSTEM_PROMPT = "system"
"""A :class:`Part` outside the message list holding the system prompt or instructions
(index ``-1``; :meth:`Adapter.kinds` only)."""
TOOL_DEFINITIONS = "tools"
"""A :class:`Part` outside the message list holding the tool definitions (index ``-1``;
:meth:`Adapter.kinds` only)."""

Path = tuple[int | str, ...]
"""Where a part sits inside its entry of the message list (keys and indices)."""


@dataclass(frozen=True, slots=True)
class Part:
    """One piece of an entry: a tool result's content, or a thinking block, which the
    strategies may edit (:meth:`Adapter.parts`); or, for saying what fills a request
    (:meth:`Adapter.kinds`), any piece of a kind other than its entry's role.

    ``cost`` is the cost vector the adapter counted for this content alone,
    so replacing it subtracts ``cost`` and adds :meth:`Adapter.replaced_cost`.
    """

    index: int
    """The entry (item) it belongs to; ``-1`` for what is outside the message list."""
    path: Path
    """Where it sits inside the entry (the content to replace, or the block to remove)."""
    kind: str
    """:data:`RESULT` or :data:`THINKING`; in :meth:`Adapter.kinds` also :data:`CALL`,
    :data:`MEDIA`, :data:`SYSTEM_PROMPT` and :data:`TOOL_DEFINITIONS`."""
    tool: str | None
    """The name of the tool whose result this is, when the body says it."""
    cost: list[int]
    text: str | None
    """The content as one string when it is text only (what truncation cuts), else ``None``."""


Edits = Mapping[tuple[int, Path], str | None]
"""New content per ``(index, path)``: a string replaces a result's content, ``None``
removes a thinking part."""


class Adapter(Protocol):
    """Detects, reads and writes one wire format.

    ``read`` never modifies ``body``; ``write`` returns a new body holding the
    kept entries of the message list (the original objects, untouched) and
    every other part of ``body`` unchanged.
    """

    name: str
    description: str
    items_key: str
    """Top-level key of the body's message list (``messages``, ``input``, ``contents``)."""
    format_rules: bool
    """Whether :meth:`problems` can find anything (False: the format has no rules beyond
    pairing, and :mod:`ctxwin.fitting.incremental` skips it)."""
    local_rules: bool
    """Whether :meth:`problems` at an item depends only on the items next to it, so the
    incremental reader re-checks only the newest ones."""

    def detect(self, body: Any) -> bool:
        """Whether ``body`` has this format's shape."""

    def read(self, body: Any, estimator: Estimator) -> View:
        """The neutral view of ``body``; ``InputError`` names the bad field."""

    def write(self, body: Any, keep: Sequence[int]) -> Any:
        """``body`` with only the message-list entries at indices ``keep``."""

    def problems(self, view: View, keep: Sequence[int]) -> list[Problem]:
        """Format-specific rule violations among the kept items (beyond pairing)."""

    def parts(self, body: Any, view: View, estimator: Estimator) -> list[Part]:
        """The tool results, and the thinking the provider lets a client leave out
        (earlier turns only), in body order; ``body`` must have been read into ``view``."""

    def kinds(self, body: Any, view: View, estimator: Estimator) -> list[Part]:
        """What fills ``body`` (read into ``view``), by kind, in body order: outside the
        message list (index ``-1``) its system prompt (:data:`SYSTEM_PROMPT`) and tool
        definitions (:data:`TOOL_DEFINITIONS`); in each entry its tool calls
        (:data:`CALL`, named), tool results (:data:`RESULT`, named where the body says
        which tool's), thinking (:data:`THINKING`) and media (:data:`MEDIA`; media inside
        a tool result are the result's). An entry that holds only one such piece gives its
        whole cost to it (the message's framing too). What an entry costs beyond its
        pieces is its role's text, and what the base costs beyond its pieces is request
        framing (:func:`ctxwin.breakdown.attribute`)."""

    def replaced_cost(self, part: Part, text: str, estimator: Estimator) -> list[int]:
        """The cost vector of ``part``'s content once replaced by ``text``."""

    def edit(self, body: Any, edits: Edits) -> Any:
        """``body`` with the parts named in ``edits`` replaced (or removed); nothing else
        changes, and the objects not on an edited path are the original ones."""

    def reads_alone(self, entry: Any) -> bool:
        """Whether ``entry`` of the message list reads the same alone as in its list
        (after the entries before it), so :mod:`ctxwin.fitting.incremental` may read only the
        entries a request appends; False sends it back to reading the whole body."""

    def extend_view(self, view: View, part: View) -> bool:
        """Append to ``view`` the items of ``part`` (the entries after ``view``'s, read
        alone), as reading them in one list gives; False (nothing done) when it cannot."""


def extend_plain(view: View, part: View) -> bool:
    """:meth:`Adapter.extend_view` of a format whose items need nothing from the items
    before them: ``part``'s items are appended as they are."""
    if type(view) is not View or type(part) is not View:
        return False
    view.items.extend(part.items)
    return True
