"""The library's front door: bytes or a parsed body in, a fitted body out.

Data flows one way: bytes → :func:`parse` → :func:`load` (adapter → view) →
:func:`plan` (budget → fit) → :meth:`Transcript.write` → bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from ctxwin.budget import Budget, compute_budget, resolve_spec
from ctxwin.errors import ContextTruncated, InputError
from ctxwin.estimate import Estimator, default_calibration, default_estimator
from ctxwin.formats import AUTO, get_adapter
from ctxwin.formats.base import Adapter
from ctxwin.prune import FitResult, fit
from ctxwin.view import View


def parse(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON; :class:`InputError` says what is wrong and where."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        head = data[:4096]
        text = head if isinstance(head, str) else bytes(head)
        if len(data) <= 4096 and not text.strip():
            raise InputError(
                "empty input (expected a JSON request body or messages array)"
            ) from None
        raise InputError(f"invalid JSON: {exc}") from None


@dataclass(slots=True)
class Transcript:
    """A parsed request body, its adapter, and its neutral view."""

    body: Any
    adapter: Adapter
    view: View
    estimator: Estimator

    @property
    def format(self) -> str:
        return self.adapter.name

    def write(self, keep: list[int]) -> Any:
        """The body with only the items at ``keep`` (the body itself when all are kept)."""
        if len(keep) == len(self.view.items):
            return self.body
        return self.adapter.write(self.body, keep)


def load(body: Any, fmt: str = AUTO, estimator: Estimator | None = None) -> Transcript:
    """Detect (or force) the format of ``body`` and read it into a view."""
    est = estimator or default_estimator()
    adapter = get_adapter(body, fmt)
    return Transcript(body, adapter, adapter.read(body, est), est)


@dataclass(frozen=True, slots=True)
class Plan:
    """A budget and what fitting the transcript to it does."""

    transcript: Transcript
    budget: Budget
    result: FitResult

    def output(self) -> Any:
        """The fitted body."""
        return self.transcript.write(self.result.keep)


def plan(
    transcript: Transcript,
    *,
    model: str | None = None,
    context_length: int | None = None,
    max_output_tokens: int | None = None,
    max_tokens: int | None = None,
    spec: Any = None,
    calibration: float | None = None,
) -> Plan:
    """Resolve the budget for ``transcript`` and fit it (never raises for overflow).

    ``calibration=None`` uses the estimator's default seed for the model
    (:func:`~ctxwin.estimate.default_calibration`: 1.15 for the seed formula).
    """
    view = transcript.view
    model_spec = resolve_spec(
        model or view.model,
        context_length=context_length,
        max_output_tokens=max_output_tokens,
        spec=spec,
    )
    budget = compute_budget(model_spec, max_tokens=max_tokens, body_max_tokens=view.max_tokens)
    if calibration is None:
        calibration = default_calibration(transcript.estimator.name, model_spec.name)
    result = fit(
        view, budget.budget, transcript.estimator, calibration, transcript.adapter.problems
    )
    return Plan(transcript, budget, result)


def prune(
    body: Any,
    *,
    model: str | None = None,
    context_length: int | None = None,
    max_output_tokens: int | None = None,
    max_tokens: int | None = None,
    spec: Any = None,
    calibration: float | None = None,
    fmt: str = AUTO,
    estimator: Estimator | None = None,
) -> tuple[Any, Plan]:
    """Fit ``body`` to its model's window: ``(fitted body, plan)``.

    Raises :class:`ContextTruncated` when even the floor exceeds the budget,
    and :class:`InputError` for a body that cannot be read or safely pruned.
    """
    p = plan(
        load(body, fmt, estimator),
        model=model,
        context_length=context_length,
        max_output_tokens=max_output_tokens,
        max_tokens=max_tokens,
        spec=spec,
        calibration=calibration,
    )
    if p.result.overflow_at_floor:
        raise ContextTruncated(p.result)
    return p.output(), p
