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
from typing import Any

from ctxwin.errors import ContextTruncated
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


class HistoryFit:
    """One agent's fitting state: the manager, each message's entries (read once per
    object), and what the last fit sent (to learn from the usage its answer reports)."""

    def __init__(
        self,
        convert: Convert,
        rebuild: Rebuild,
        usage_of: UsageOf,
        settings: dict[str, Any],
        *,
        learn_overhead: bool = True,
    ) -> None:
        self._convert = convert
        self._rebuild = rebuild
        self._usage_of = usage_of
        # the view shows every message as sent: new content costs what it reads as
        self.manager = ContextWindowManager(
            fmt="openai-chat", learn_overhead=learn_overhead, fresh_factor=1.0, **settings
        )
        self._read: dict[int, tuple[Any, Converted]] = {}
        self._sent: tuple[list[Any], list[Any], int] | None = None
        self.last: ManagedFit | None = None
        """The fit of the last history fitted."""

    def reset(self) -> None:
        """Start over: forget the calibration and what was sent (a new agent)."""
        self.manager.reset()
        self._read.clear()
        self._sent = None
        self.last = None

    def entries(self, message: Any) -> Converted:
        """``message`` read into Chat entries (once per message object)."""
        hit = self._read.get(id(message))
        if hit is None or hit[0] is not message:
            hit = (message, self._convert(message))
        return hit[1]

    def _learn(self, messages: Sequence[Any]) -> None:
        """Learn from the usage reported for the last history sent: the answer is the
        first message after it (the history extends what was given or what was kept)."""
        sent = self._sent
        if sent is None:
            return
        for base in sent[:2]:
            n = len(base)
            if n < len(messages) and all(a is b for a, b in zip(base, messages, strict=False)):
                reported = self._usage_of(messages[n])
                if reported:
                    self.manager.observe({"prompt_tokens": reported}, raw_tokens=sent[2])
                    self._sent = None
                return

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
        self._learn(messages)
        read: dict[int, tuple[Any, Converted]] = {}
        items: list[Entry] = list(leading)
        origin: list[tuple[int, Any] | None] = [None] * len(items)
        for k, message in enumerate(messages):
            converted = self.entries(message)
            read[id(message)] = (message, converted)
            for entry, part in converted:
                items.append(entry)
                origin.append((k, part))
        self._read = read
        body: dict[str, Any] = dict(fields or {})
        if model is not None:
            body["model"] = model
        body["messages"] = items
        fitted = self.manager.evaluate(body)
        self.last = fitted
        if fitted.result.overflow_at_floor:
            self._sent = None
            raise ContextTruncated(fitted.result)
        given = list(messages)
        if not fitted.result.pruned and not fitted.applied.edits:
            self._sent = (given, given, fitted.raw_tokens_sent)
            return given, fitted
        kept = self._survivors(given, items, origin, fitted)
        self._sent = (given, kept, fitted.raw_tokens_sent)
        return kept, fitted

    def _survivors(
        self,
        messages: list[Any],
        items: list[Entry],
        origin: list[tuple[int, Any] | None],
        fitted: ManagedFit,
    ) -> list[Any]:
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
        out = []
        for k, message in enumerate(messages):
            total = len(self._read[id(message)][1])
            got = parts.get(k)
            if total == 0 or (got is not None and len(got) == total and k not in replaced):
                out.append(message)  # nothing to read (kept as it is), or all of it kept
            elif got:
                out.append(self._rebuild(message, got, replaced.get(k, {})))
        return out
