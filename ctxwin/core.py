"""The library's front door: a parsed body in, a fitted body out.

Data flows one way: bytes → :func:`ctxwin.codec.parse` → :func:`load` (adapter →
view) → :func:`plan` (budget → fit) → :meth:`Transcript.write` →
:func:`ctxwin.codec.dumps` → bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from ctxwin.budget import Budget, compute_budget, resolve_spec
from ctxwin.errors import truncated
from ctxwin.formats import AUTO, get_adapter
from ctxwin.formats.base import Adapter
from ctxwin.pruning import FitResult, fit
from ctxwin.rules import problems as rule_problems
from ctxwin.settings import Settings, body_model, settings_with
from ctxwin.strategy import DEFAULT_STRATEGY, DROP_TURNS, Applied, Strategy, plan_edits
from ctxwin.tokens.base import Estimator
from ctxwin.tokens.registry import default_estimator, seed_of
from ctxwin.view import Problem, View


class Transcript(NamedTuple):
    """A parsed request body, its adapter, and its neutral view.

    A NamedTuple: a dataclass would compile its methods at every start.
    """

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

    def raw_tokens(self, keep: Sequence[int]) -> int:
        """Uncalibrated estimate of the items at ``keep`` with the body's fixed part (what
        a calibration learns against when only those items are sent)."""
        view = self.view
        total = list(view.base)
        width = len(total)
        items = view.items
        for i in keep:
            cost = items[i].cost
            for k in range(width):
                total[k] += cost[k]
        return self.estimator.raw(total)

    def problems(self, keep: Sequence[int] | None = None) -> list[Problem]:
        """Structural problems of the items at ``keep`` (all when ``None``): ``ctxwin.rules``."""
        return rule_problems(self.view, self.adapter, keep)


def load(body: Any, fmt: str = AUTO, estimator: Estimator | None = None) -> Transcript:
    """Detect (or force) the format of ``body`` and read it into a view."""
    est = estimator or default_estimator()
    adapter = get_adapter(body, fmt)
    return Transcript(body, adapter, adapter.read(body, est), est)


class Plan(NamedTuple):
    """A budget and what fitting the transcript to it does.

    A NamedTuple: a dataclass would compile its methods at every start.
    """

    transcript: Transcript
    """The transcript fitted: the input, or the input with the strategy's edits."""
    budget: Budget
    result: FitResult
    applied: Applied = Applied()
    """What the strategy's editing steps did (nothing under the default strategy)."""
    original: Transcript | None = None
    """The input, when the strategy edited it (:attr:`transcript` is then the edited one)."""

    @property
    def source(self) -> Transcript:
        """The transcript as given (before any edit)."""
        return self.transcript if self.original is None else self.original

    def output(self) -> Any:
        """The fitted body."""
        return self.transcript.write(self.result.keep)


def plan(
    transcript: Transcript,
    settings: Settings | None = None,
    *,
    overhead: int = 0,
    learned: bool = False,
    **changes: Any,
) -> Plan:
    """Resolve the budget for ``transcript`` and fit it (never raises for overflow).

    ``settings`` with ``changes`` applied (:func:`~ctxwin.settings.settings_with`)
    give the model, budget, calibration and strategy; the estimator is the
    transcript's. ``calibration=None`` uses the estimator's default seed for the
    model (:meth:`~ctxwin.tokens.base.Estimator.seed`: 1.15 for the seed
    formula). ``strategy`` (default: :data:`~ctxwin.strategy.DEFAULT_STRATEGY`, drop
    turns only) says which steps fit it (:mod:`ctxwin.strategy`). ``overhead`` is
    added to every estimate (tokens the body does not show); with ``learned``,
    ``calibration`` is a factor learned from usage, applied as it is (see
    :class:`~ctxwin.calibration.OverheadLearner`).
    """
    s = settings_with(settings, changes)
    budget = budget_for(transcript.view, s)
    calibration = s.calibration
    if calibration is None:
        calibration = seed_of(transcript.estimator, budget.spec.name)
    return fit_plan(transcript, budget, calibration, s.strategy, overhead=overhead, learned=learned)


def budget_for(view: View, settings: Settings) -> Budget:
    """The budget of a request read into ``view``: ``settings``' model spec, else the
    body's ``model`` and ``max_tokens`` (see :func:`~ctxwin.budget.resolve_spec`)."""
    model_spec = resolve_spec(
        settings.model or view.model,
        context_length=settings.context_length,
        max_output_tokens=settings.max_output_tokens,
        spec=settings.spec,
    )
    return compute_budget(
        model_spec, max_tokens=settings.max_tokens, body_max_tokens=view.max_tokens
    )


def fit_plan(
    transcript: Transcript,
    budget: Budget,
    calibration: float,
    strategy: Strategy = DEFAULT_STRATEGY,
    *,
    overhead: int = 0,
    learned: bool = False,
) -> Plan:
    """Fit ``transcript`` to a resolved ``budget`` with ``strategy`` (see :func:`plan`).

    Under a strategy that edits, the edited body is read again and fitted;
    the result's ``estimated_tokens`` and ``fits`` still describe the input.
    """
    view = transcript.view
    adapter = transcript.adapter
    est = transcript.estimator
    applied = Applied(strategy)
    if strategy.edits:
        applied = plan_edits(
            transcript.body,
            view,
            adapter,
            est,
            budget.budget,
            calibration,
            strategy,
            adapter.problems,
            overhead=overhead,
            learned=learned,
        )
    fitted = transcript
    if applied.edits:
        body = adapter.edit(transcript.body, applied.edits)
        fitted = Transcript(body, adapter, adapter.read(body, est), est)
        fitted.view.notes[:] = view.notes
    result = fit(
        fitted.view,
        budget.budget,
        est,
        calibration,
        adapter.problems,
        drop=DROP_TURNS in strategy.steps,
        overhead=overhead,
        learned=learned,
    )
    if fitted is not transcript:
        # the input's estimate, nothing checked
        original = fit(view, 0, est, calibration, overhead=overhead, learned=learned)
        result = replace(
            result,
            estimated_tokens=original.estimated_tokens,
            raw_tokens=original.raw_tokens,
            fits=False,
        )
    return Plan(fitted, budget, result, applied, None if fitted is transcript else transcript)


def prune(body: Any, settings: Settings | None = None, **changes: Any) -> tuple[Any, Plan]:
    """Fit ``body`` to its model's window: ``(fitted body, plan)``.

    ``settings`` with ``changes`` applied, e.g. ``prune(body, model="gpt-4o")``.
    Raises :class:`ContextTruncated` when even the floor exceeds the budget
    (:class:`~ctxwin.errors.NoBudget` when the budget is not positive), and
    :class:`InputError` for a body that cannot be read or safely pruned.
    """
    s = settings_with(settings, changes)
    p = plan(load(body, s.fmt, s.make_estimator(body_model(body))), s)
    if p.result.overflow_at_floor:
        raise truncated(p.result, p.budget)
    return p.output(), p
