"""Recorded runs as data: :class:`Run` (a transcript or recorded calls) and :class:`Call`.

The readers build these: :mod:`ctxwin.sessions` for the files agent tools write,
:mod:`ctxwin.runs` for request-body shapes; :mod:`ctxwin.runs.simulate` replays them.
It sits below both packages, so a session reader never imports :mod:`ctxwin.runs`:
the one direction between them is ``ctxwin.runs`` → ``ctxwin.sessions`` (detection,
:func:`ctxwin.runs.read_runs`, asks the session readers first).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxwin.core import Transcript, load
from ctxwin.errors import InputError
from ctxwin.formats import AUTO
from ctxwin.tokens.base import Estimator
from ctxwin.view import ASSISTANT, View

__all__ = ["Call", "Run", "calls_from_transcript", "prepared_calls"]


@dataclass(frozen=True, slots=True)
class Call:
    """One provider call: the request body sent and the usage reported."""

    request: Any
    usage: Mapping[str, Any] | None = None
    where: str = ""
    """Where the call is in its source (``interactions[2]``, ``messages[14]``)."""
    model: str | None = None
    """Model named outside the body (a request URI), for bodies that name none."""
    at: float | None = None
    """When it was sent (seconds since the epoch), where the recording says."""


@dataclass(slots=True)
class Run:
    """One recorded run: a transcript body, or recorded calls, or an error."""

    name: str
    """Label within its file (``line 3``, ``[17]``, an instance id); ``""`` for the whole file."""
    shape: str
    """Which recorded shape it came from (``chat``, ``pairs``, ``openhands``, ...)."""
    body: Any = None
    """The whole transcript, for transcript runs."""
    usage_at: dict[int, Mapping[str, Any]] = field(default_factory=dict)
    """Usage reported for the call that produced the model message at each index."""
    sent_at: dict[int, float] = field(default_factory=dict)
    """When the call that produced the model message at each index was sent (seconds
    since the epoch), where the recording says."""
    served_by: str | None = None
    """The service that answered the run's calls, where the recording shows it (an
    Anthropic response id names it: ``msg_bdrk_…`` Amazon Bedrock, ``msg_vrtx_…`` Google
    Vertex AI)."""
    recorded: list[Call] | None = None
    """The recorded calls, for runs that are lists of calls."""
    error: str | None = None
    """Why the entry could not be read (the run is then empty)."""
    fmt: str | None = None
    """The wire format of ``body`` when the reader knows it (``anthropic`` for Claude Code)."""
    calls_at: frozenset[int] | None = None
    """For transcripts: the model messages that are this run's calls (``None``: every one).

    A session that mixes models records both in one conversation; each model's
    calls are a run of their own over the same messages.
    """
    context_length: int | None = None
    """The context window the recording names (Codex's ``model_context_window``), if any."""
    summary: str | None = None
    """The summary a compaction restarted this run's conversation from (Claude Code's
    compact summary after a ``compact_boundary``, Codex's ``compacted`` message), when
    the recording has one: what the agent's own compaction wrote."""
    current: bool = False
    """The conversation a session file continues: its next request is this run's
    whole transcript (the last segment of the main chain, in its main model)."""
    warnings: list[str] = field(default_factory=list)
    """Non-fatal remarks made while reading (a cut-off last line, skipped entries)."""
    fits: list[dict[str, Any]] | None = None
    """For a run read from ctxwin's own spans (:mod:`ctxwin.sessions.otel`): what ctxwin
    did at each call, a replay row each (:class:`~ctxwin.fitting.rows.ReplayRow`'s keys).
    Such a run records no requests (``recorded`` is empty): ``replay`` reports these rows
    as they are (:mod:`ctxwin.runs.traced`) instead of fitting the calls again."""

    @property
    def is_transcript(self) -> bool:
        return self.recorded is None and self.error is None

    def requests(self) -> list[Any]:
        """The request bodies to check: the whole transcript, or every recorded call."""
        if self.error is not None:
            return []
        if self.recorded is not None:
            return [c.request for c in self.recorded]
        return [self.body]

    def next_request(self) -> Any:
        """The request the run's next call sends: the whole transcript, or the last
        recorded request. Raises :class:`~ctxwin.errors.InputError` for a run that
        has neither (an error, or no recorded call)."""
        if self.error is not None:
            raise InputError(self.error)
        if self.recorded is None:
            return self.body
        if not self.recorded:
            raise InputError("no requests in this run")
        return self.recorded[-1].request

    def calls(self, estimator: Estimator | None = None, fmt: str = AUTO) -> list[Call]:
        """The provider calls of this run, in order (see the module docstring).

        Raises :class:`~ctxwin.errors.InputError` when the transcript cannot be read.
        """
        if self.error is not None:
            raise InputError(self.error)
        if self.recorded is not None:
            return list(self.recorded)
        return calls_from_transcript(
            self.body, self.usage_at, estimator, self.format_for(fmt), self.calls_at
        )

    def format_for(self, fmt: str = AUTO) -> str:
        """The format to read ``body`` with: ``fmt`` when forced, else the reader's."""
        return self.fmt if fmt == AUTO and self.fmt else fmt


def calls_from_transcript(
    body: Any,
    usage_at: Mapping[int, Mapping[str, Any]] | None = None,
    estimator: Estimator | None = None,
    fmt: str = AUTO,
    calls_at: frozenset[int] | None = None,
) -> list[Call]:
    """One call per model message of ``body``: the request is everything before it."""
    return [call for call, _ in prepared_calls(body, usage_at, estimator, fmt, calls_at)]


def prepared_calls(
    body: Any,
    usage_at: Mapping[int, Mapping[str, Any]] | None = None,
    estimator: Estimator | None = None,
    fmt: str = AUTO,
    calls_at: frozenset[int] | None = None,
    sent_at: Mapping[int, float] | None = None,
) -> list[tuple[Call, Transcript]]:
    """The calls of a transcript, each with its request already read.

    ``body`` is read once; every call's view shares the items (and their
    cost vectors) of that one reading, so a run of *n* calls costs one
    estimate of the transcript, not *n* — unless it holds a provider compaction,
    when each call's request is read whole. ``calls_at`` keeps only the model
    messages at those indices as calls; ``sent_at`` gives their times.
    """
    t = load(body, fmt, estimator)
    view = t.view
    usage_at = usage_at or {}
    sent_at = sent_at or {}
    out = []
    for i in model_messages(view, calls_at):
        request = t.adapter.write(body, list(range(i)))
        call = Call(request, usage_at.get(i), view.where(i), at=sent_at.get(i))
        if view.pinned:
            # a compaction: what it discounts or pins depends on where the request ends,
            # and an earlier request may not hold it at all, so each is read whole
            out.append((call, load(request, t.format, t.estimator)))
            continue
        # _replace keeps the view's class (a Responses view knows its reasoning items)
        sub = view._replace(items=view.items[:i], notes=list(view.notes))
        out.append((call, Transcript(request, t.adapter, sub, t.estimator)))
    return out


def model_messages(view: View, calls_at: frozenset[int] | None = None) -> list[int]:
    """Index of every model message that opens a response: one provider call each
    (only those at ``calls_at``, when given)."""
    return [
        i
        for i, item in enumerate(view.items)
        if item.role == ASSISTANT and not item.joins and (calls_at is None or i in calls_at)
    ]
