"""Fitting a framework's own message list (LangChain, LangGraph, pydantic-ai).

A framework keeps its history as its own objects. :class:`HistoryFit` reads each
message once into Chat Completions entries (a *view*: the framework's objects
are never rebuilt from it), fits the view with the library's planner, and maps
the kept entries back to the original objects: a message survives as the very
object it was, is dropped, or (when only some of its parts survive, or a
clearing strategy replaced a tool result) is copied with those parts only.

Nothing here imports a framework: each integration passes its conversion.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import is_
from typing import Any

from ctxwin.errors import truncated
from ctxwin.manager import ContextWindowManager, ManagedFit

Entry = dict[str, Any]
"""One Chat Completions message of the view."""
Converted = list[tuple[Entry, Any]]
"""A message's entries, each with the key of the part it reads (``None``: the whole message)."""
Convert = Callable[[Any], Converted]
Rebuild = Callable[[Any, list[Any], dict[Any, Entry]], Any]
"""``rebuild(message, kept_parts, replaced)``: the message with only ``kept_parts``
(keys, in order), the parts in ``replaced`` carrying their edited entry's content."""
UsageOf = Callable[[Any], "int | None"]
"""The prompt tokens a message (a model's response) says its request counted."""


@dataclass(slots=True)
class _View:
    """A message list read into entries: ``origin[i]`` is ``(message index, part key)``
    of entry ``i`` (``None``: a leading entry); message ``k``'s entries start at
    ``starts[k]``; ``empty`` counts the messages with no entry."""

    messages: list[Any]
    leading: list[Entry]
    items: list[Entry]
    origin: list[tuple[int, Any] | None]
    starts: list[int]
    empty: int


def _same(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Whether ``a`` starts ``b``, object for object (at C speed)."""
    return len(a) <= len(b) and all(map(is_, a, b))


class HistoryFit:
    """One agent's fitting state: the manager, each message's entries (read once per
    object), and what the last fit sent (to learn from the usage its answer reports).

    A history that extends the last one (object for object) is read only for its new
    messages; the kept messages are found from the kept entries alone, so a call costs
    O(new + kept messages) besides a C-speed identity check of the history.
    """

    def __init__(
        self,
        convert: Convert,
        rebuild: Rebuild,
        usage_of: UsageOf,
        settings: dict[str, Any],
        *,
        learn_overhead: bool = True,
        logger: str = "ctxwin.integrations",
    ) -> None:
        self._convert = convert
        self._rebuild = rebuild
        self._usage_of = usage_of
        # the view shows every message as sent: new content costs what it reads as
        self.manager = ContextWindowManager(
            fmt="openai-chat",
            learn_overhead=learn_overhead,
            fresh_factor=1.0,
            logger=logger,
            **settings,
        )
        self._read: dict[int, tuple[Any, Converted]] = {}
        self._view: _View | None = None
        self._sent: tuple[list[Any], list[Any], int] | None = None
        self.last: ManagedFit | None = None
        """The fit of the last history fitted."""

    def reset(self) -> None:
        """Start over: forget the calibration and what was sent (a new agent)."""
        self.manager.reset()
        self._read.clear()
        self._view = None
        self._sent = None
        self.last = None

    def entries(self, message: Any) -> Converted:
        """``message`` read into Chat entries (once per message object)."""
        hit = self._read.get(id(message))
        if hit is None or hit[0] is not message:
            hit = (message, self._convert(message))
            self._read[id(message)] = hit
        return hit[1]

    def _learn(self, messages: list[Any]) -> None:
        """Learn from the usage reported for the last history sent: the answer is the
        first message after it (the history extends what was given or what was kept)."""
        sent = self._sent
        if sent is None:
            return
        for base in sent[:1] if sent[0] is sent[1] else sent[:2]:
            n = len(base)
            reported = self._usage_of(messages[n]) if n < len(messages) else None
            if reported and _same(base, messages):
                self.manager.observe({"prompt_tokens": reported}, raw_tokens=sent[2])
                self._sent = None
                return

    def _read_view(self, messages: list[Any], leading: list[Entry]) -> _View:
        """``messages`` read into entries: only the new ones when they extend the last."""
        last = self._view
        if (
            last is not None
            and len(last.leading) == len(leading)
            and _same(last.leading, leading)
            and _same(last.messages, messages)
        ):
            items, origin, starts = last.items[:], last.origin[:], last.starts[:]
            empty, first = last.empty, len(last.messages)
        else:
            if len(self._read) > 2 * len(messages) + 64:  # forget messages long gone
                self._read = {id(m): self._read[id(m)] for m in messages if id(m) in self._read}
            items, origin, starts = list(leading), [None] * len(leading), []
            empty, first = 0, 0
        for k in range(first, len(messages)):
            converted = self.entries(messages[k])
            starts.append(len(items))
            empty += not converted
            for entry, part in converted:
                items.append(entry)
                origin.append((k, part))
        view = _View(messages, leading, items, origin, starts, empty)
        self._view = view
        return view

    def fit(
        self,
        messages: Sequence[Any],
        *,
        model: str | None = None,
        fields: Mapping[str, Any] | None = None,
        leading: Sequence[Entry] = (),
    ) -> tuple[list[Any], ManagedFit]:
        """The messages to send (the originals that survive) and the fit.

        ``fields`` are other request fields (``max_tokens``, ``tools``); ``leading``
        entries (instructions) are costed before the messages and always kept.
        Raises :class:`~ctxwin.errors.ContextTruncated` when even the floor does
        not fit.
        """
        given = list(messages)
        self._learn(given)
        view = self._read_view(given, list(leading))
        body: dict[str, Any] = dict(fields or {})
        if model is not None:
            body["model"] = model
        body["messages"] = view.items
        fitted = self.manager.before_send(body)
        self.last = fitted
        if fitted.result.overflow_at_floor:
            self._sent = None
            raise truncated(fitted.result, fitted.budget)
        # the lists kept here are never the caller's: appending to what is returned
        # must not change what the next call is compared with
        if not fitted.changed:
            self._sent = (given, given, fitted.raw_tokens_sent)
            return list(given), fitted
        kept = self._survivors(view, fitted)
        self._sent = (given, kept, fitted.raw_tokens_sent)
        return list(kept), fitted

    def _survivors(self, view: _View, fitted: ManagedFit) -> list[Any]:
        """The messages of ``view`` that the fit keeps: the originals, or copies with the
        kept parts (and a strategy's replaced results)."""
        messages, items, origin, starts = view.messages, view.items, view.origin, view.starts
        sent = fitted.messages  # the kept entries, edited ones included, in keep order
        parts: dict[int, list[Any]] = {}
        replaced: dict[int, dict[Any, Entry]] = {}
        for j, i in enumerate(fitted.result.keep):
            where = origin[i]
            if where is None:
                continue
            k, part = where
            parts.setdefault(k, []).append(part)
            if sent[j] is not items[i]:
                replaced.setdefault(k, {})[part] = sent[j]
        # messages with no entry are kept where they are: walk them all only if any
        order = range(len(messages)) if view.empty else sorted(parts)
        out = []
        for k in order:
            total = (starts[k + 1] if k + 1 < len(starts) else len(items)) - starts[k]
            got = parts.get(k)
            if total == 0 or (got is not None and len(got) == total and k not in replaced):
                out.append(messages[k])  # nothing to read (kept as it is), or all of it kept
            elif got:
                out.append(self._rebuild(messages[k], got, replaced.get(k, {})))
        return out


class Fitted:
    """What each framework hook shows: its :class:`HistoryFit` (``fitting``), the last
    fit and ``reset()``."""

    fitting: HistoryFit

    @property
    def last(self) -> ManagedFit | None:
        """The fit of the last model call."""
        return self.fitting.last

    def reset(self) -> None:
        """Start over: forget what usage taught (another agent)."""
        self.fitting.reset()
