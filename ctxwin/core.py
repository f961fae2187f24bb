"""The library's front door: a parsed body in, a fitted body out.

Data flows one way: bytes → :func:`ctxwin.codec.parse` → :func:`load` (adapter →
view) → :func:`plan` (budget → fit) → :meth:`Transcript.write` →
:func:`ctxwin.codec.dumps` → bytes.
"""

from __future__ import annotations

from dataclasses import replace
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Final

from ctxwin.errors import truncated
from ctxwin.fitting.budget import (
    Budget,
    ContextSource,
    compute_budget,
    resolve_spec,
    spec_warnings,
)
from ctxwin.fitting.pruning import FitResult, fit
from ctxwin.fitting.strategy import DEFAULT_STRATEGY, DROP_TURNS, Applied, Strategy, plan_edits
from ctxwin.fitting.transcript import Transcript as Transcript
from ctxwin.fitting.transcript import load as load
from ctxwin.settings import Settings, body_model, settings_with
from ctxwin.tokens.registry import seed_of
from ctxwin.view import View

if TYPE_CHECKING:
    from ctxwin.fitting.rows import Fitted, Report, Status


FITS: Final = "fits"
"""Within the budget as given: nothing to change."""
NEEDS_PRUNING: Final = "needs_pruning"
"""Over the budget: turns dropped or content edited (cleared, cut) to fit."""
TRUNCATED: Final = "truncated"
"""Even the floor (head + newest turn) exceeds the budget: nothing may be sent."""
NO_BUDGET: Final = "no_budget"
"""The budget is not positive (the window is at most reserve + safety): no request fits."""
INVALID: Final = "invalid"
"""No fit: the request could not be read (a row's verdict, never a :class:`Plan`'s)."""
STATUSES: tuple[Status, ...] = (FITS, NEEDS_PRUNING, TRUNCATED, NO_BUDGET, INVALID)
"""Verdicts, mildest first."""

NO_EDITS = Applied()
"""What a fit under the default strategy applied: nothing."""


def _of_result(name: str) -> Any:
    """A read-only attribute of a :class:`Plan`: its result's ``name``."""
    return property(attrgetter(f"result.{name}"))


_UNMARKED: Any = object()
"""A :class:`Plan`'s marked body before it is built."""


class Plan:
    """The outcome of fitting one request: the budget, the pruner's result, the edits,
    and what is sent.

    The one record every caller reads (:func:`plan`, :meth:`ContextWindowManager.fit
    <ctxwin.manager.ContextWindowManager.fit>`, replay, check, the proxy):
    :attr:`status` and :attr:`changed` say what fitting does, :meth:`row` and
    :meth:`report` are its JSON shapes. Frozen, with slots and a written ``__init__``:
    a dataclass would compile its methods at every start, a NamedTuple its annotations.
    """

    __slots__ = (
        "_marked_body",
        "applied",
        "budget",
        "cache_mark",
        "original",
        "result",
        "sent",
        "sent_raw",
        "transcript",
    )

    transcript: Transcript
    """The transcript fitted: the input, or the input with the strategy's edits. When
    a growing transcript's prefix was fitted (``ContextWindowManager.evaluate_prefix``),
    the request is its first ``result.items`` items."""
    budget: Budget
    result: FitResult
    """What the pruner decided (:class:`~ctxwin.fitting.pruning.FitResult`)."""
    applied: Applied
    """What the strategy's editing steps did (nothing under the default strategy)."""
    original: Transcript | None
    """The input, when the strategy edited it (:attr:`transcript` is then the edited one)."""
    sent: Any
    """The fitted body, when the fitter built it already (else :meth:`fitted` builds it),
    without the mark :attr:`cache_mark` adds."""
    sent_raw: int | None
    """Uncalibrated estimate of :attr:`request`, when the fitter knows it already."""
    cache_mark: bool
    """The setting :attr:`~ctxwin.settings.Settings.cache_mark`: :meth:`output` adds an
    Anthropic ``cache_control`` mark at the end of the stable prefix (:attr:`marked`)."""
    _marked_body: Any
    """What :meth:`_with_mark` built, once asked (:data:`_UNMARKED` before)."""

    def __init__(
        self,
        transcript: Transcript,
        budget: Budget,
        result: FitResult,
        applied: Applied = NO_EDITS,
        original: Transcript | None = None,
        sent: Any = None,
        sent_raw: int | None = None,
        cache_mark: bool = False,
    ) -> None:
        init = object.__setattr__
        init(self, "transcript", transcript)
        init(self, "budget", budget)
        init(self, "result", result)
        init(self, "applied", applied)
        init(self, "original", original)
        init(self, "sent", sent)
        init(self, "sent_raw", sent_raw)
        init(self, "cache_mark", cache_mark)
        init(self, "_marked_body", _UNMARKED)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a Plan is frozen: {name} cannot be set")

    def __repr__(self) -> str:
        return f"Plan(status={self.status!r}, budget={self.budget!r}, result={self.result!r})"

    def _replace(self, *, sent: Any, sent_raw: int | None) -> Plan:
        """This plan with what is sent known."""
        return Plan(
            self.transcript,
            self.budget,
            self.result,
            self.applied,
            self.original,
            sent,
            sent_raw,
            self.cache_mark,
        )

    @property
    def source(self) -> Transcript:
        """The transcript as given (before any edit)."""
        return self.transcript if self.original is None else self.original

    def fitted(self) -> Any:
        """The fitted body, without the mark :attr:`cache_mark` adds."""
        if self.sent is not None:
            return self.sent
        return self.transcript.write(self.result.keep)

    def _with_mark(self) -> Any | None:
        """The fitted body with the mark :attr:`cache_mark` adds, ``None`` when none is;
        built once (:attr:`marked` and :meth:`output` both ask)."""
        if not self.cache_mark or self.transcript.format != "anthropic":
            return None
        if self._marked_body is _UNMARKED:
            from ctxwin.formats.anthropic import with_stable_mark  # here: rarely asked for

            object.__setattr__(self, "_marked_body", with_stable_mark(self.fitted()))
        return self._marked_body

    def output(self) -> Any:
        """The body to send: the fitted body, with one Anthropic ``cache_control`` mark at
        the end of its last message when :attr:`cache_mark` asks for it and the request
        has fewer than four (:func:`~ctxwin.formats.anthropic.with_stable_mark`)."""
        marked = self._with_mark()
        return self.fitted() if marked is None else marked

    @property
    def marked(self) -> bool:
        """Whether :meth:`output` adds a cache mark to the last kept message (the input's
        entry ``result.keep[-1]``, sent as an edited copy)."""
        return self._with_mark() is not None

    @property
    def request(self) -> Any:
        """The body to send: the input itself when it fits, else the fitted body."""
        return self.output()

    @property
    def changed(self) -> bool:
        """Fitting changes the request: turns dropped or content edited."""
        return self.result.pruned or bool(self.applied.edits)

    @property
    def status(self) -> Status:
        """:data:`NO_BUDGET`, :data:`TRUNCATED`, :data:`NEEDS_PRUNING` (:attr:`changed`)
        or :data:`FITS`."""
        r = self.result
        if not r.enforced:
            return NO_BUDGET
        if r.overflow_at_floor:
            return TRUNCATED
        return NEEDS_PRUNING if self.changed else FITS

    @property
    def raw_tokens_sent(self) -> int:
        """Uncalibrated estimate of :attr:`request` (what calibration learns against)."""
        if self.sent_raw is not None:
            return self.sent_raw
        if self.changed:
            return self.transcript.raw_tokens(self.result.keep)
        return self.result.raw_tokens

    @property
    def messages(self) -> list[Any]:
        """The kept entries of the message list, as sent."""
        body = self.output()
        items = body if isinstance(body, list) else body.get(self.transcript.view.items_path, [])
        return list(items) if isinstance(items, list) else []

    # What the pruner decided, read through: one table, not a property each.
    pruned: bool = _of_result("pruned")
    dropped_turns: int = _of_result("dropped_turns")
    kept_turns: int = _of_result("kept_turns")
    estimated_tokens: int = _of_result("estimated_tokens")
    """Estimate of the request as given (before pruning); :class:`ValueError` for a lazy
    fit that left items unpriced (:attr:`FitResult.known_tokens
    <ctxwin.fitting.pruning.FitResult.known_tokens>`)."""
    estimated_tokens_after: int = _of_result("estimated_tokens_after")
    """Estimate of :attr:`request`."""
    overflow_at_floor: bool = _of_result("overflow_at_floor")
    calibration: float = _of_result("calibration")

    def row(self) -> Fitted:
        """The JSON row of this fit: what ``replay`` and ``check`` rows carry and the
        proxy's ``x-ctxwin-*`` headers say (``ctxwin.fitting.rows.Fitted``). A row carries
        the input's estimate: its fit priced every item (a view not read lazily)."""
        r, b, a = self.result, self.budget, self.applied
        return {
            "status": self.status,
            "model": b.spec.name,
            "context_length": b.context_length,
            "budget": b.budget,
            "messages": r.items,
            "raw_tokens": r.raw_tokens,
            "estimated_tokens": r.estimated_tokens,
            "calibration": r.calibration,
            "overhead": r.overhead,
            "dropped_turns": r.dropped_turns,
            "kept_turns": r.kept_turns,
            "estimated_tokens_after": r.estimated_tokens_after,
            "cleared_results": a.cleared_results,
            "cleared_tokens": a.cleared_tokens,
            "cleared_thinking": a.cleared_thinking,
            "truncated_results": a.truncated_results,
        }

    def report(self) -> Report:
        """The JSON report of ``estimate --json`` and ``prune --report``
        (docs/json-report.md): the stable keys, then extras."""
        b = self.budget
        r = self.result
        a = self.applied
        spec = b.spec
        return {
            "format": self.transcript.format,
            "model": spec.name,
            "context_length": spec.context_length,
            "context_length_source": spec.context_length_source,
            "reserve": b.reserve,
            "safety": b.safety,
            "budget": b.budget,
            "calibration": r.calibration,
            "estimated_tokens": r.known_tokens,
            "fits": r.fits,
            "pruned": r.pruned,
            "dropped_turns": r.dropped_turns,
            "kept_turns": r.kept_turns,
            "estimated_tokens_after": r.estimated_tokens_after,
            "overflow_at_floor": r.overflow_at_floor,
            "messages_in": r.items,
            "messages_out": len(r.keep),
            "dropped_messages": r.dropped,
            # extras
            "estimator": self.transcript.estimator.name,
            "raw_tokens": r.known_raw,
            "reserve_source": b.reserve_source,
            "max_output_tokens": spec.max_output_tokens,
            "model_table_row": spec.table_row,
            "enforced": r.enforced,
            "warnings": [*spec_warnings(spec), *r.warnings],
            "strategy": a.strategy.name,
            "cleared_results": a.cleared_results,
            "cleared_tokens": a.cleared_tokens,
            "truncated_results": a.truncated_results,
            "truncated_tokens": a.truncated_tokens,
            "cleared_thinking": a.cleared_thinking,
            "dropped_tokens_at_least": r.dropped_at_least,
            "status": self.status,
        }


def plan(
    transcript: Transcript,
    settings: Settings | None = None,
    *,
    overhead: int = 0,
    learned: bool = False,
    price_input: bool = True,
    context_length_source: ContextSource = "flag",
    **changes: Any,
) -> Plan:
    """Resolve the budget for ``transcript`` and fit it (never raises for overflow).

    ``settings`` with ``changes`` applied (:func:`~ctxwin.settings.settings_with`)
    give the model, budget, calibration and strategy; the estimator is the
    transcript's. ``calibration=None`` uses the estimator's default seed for the
    model (:meth:`~ctxwin.tokens.base.Estimator.seed`: 1.15 for the seed
    formula). ``strategy`` (default: :data:`~ctxwin.fitting.strategy.DEFAULT_STRATEGY`, drop
    turns, the cut moving in blocks) says which steps fit it (:mod:`ctxwin.fitting.strategy`).
    ``overhead`` is
    added to every estimate (tokens the body does not show); with ``learned``,
    ``calibration`` is a factor learned from usage, applied as it is (see
    :class:`~ctxwin.fitting.calibration.OverheadLearner`). ``context_length_source`` names
    where the setting ``context_length`` came from (:func:`budget_for`).
    """
    s = settings_with(settings, changes)
    budget = budget_for(transcript.view, s, context_length_source)
    calibration = s.calibration
    if calibration is None:
        calibration = seed_of(transcript.estimator, budget.spec.name)
    return fit_plan(
        transcript,
        budget,
        calibration,
        s.strategy,
        overhead=overhead,
        learned=learned,
        cache_mark=s.cache_mark,
        price_input=price_input,
    )


def budget_for(view: View, settings: Settings, source: ContextSource = "flag") -> Budget:
    """The budget of a request read into ``view``: ``settings``' model spec, else the
    body's ``model`` and ``max_tokens`` (see :func:`~ctxwin.fitting.budget.resolve_spec`);
    ``source`` names where ``settings.context_length`` came from (an agent tool's session:
    :mod:`ctxwin.fitting.windows`)."""
    model_spec = resolve_spec(
        settings.model or view.model,
        context_length=settings.context_length,
        max_output_tokens=settings.max_output_tokens,
        spec=settings.spec,
        context_length_source=source,
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
    cache_mark: bool = False,
    price_input: bool = True,
) -> Plan:
    """Fit ``transcript`` to a resolved ``budget`` with ``strategy`` (see :func:`plan`;
    ``cache_mark``: :attr:`Plan.cache_mark`; ``price_input``: as
    :func:`~ctxwin.fitting.pruning.fit` takes it).

    Under a strategy that edits, the edited body is read again and fitted;
    the result's ``estimated_tokens`` and ``fits`` still describe the input.
    """
    view = transcript.view
    adapter = transcript.adapter
    est = transcript.estimator
    applied = Applied(strategy)
    if strategy.edits:
        if view.tighten is not None:  # the planner weighs every item's cost: price them all
            view.tighten(range(len(view.items)))
            view.tighten = None
        applied = plan_edits(
            transcript,
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
        # the plan placed an edited body's cut on a block already: a block search over
        # the edited costs would put the boundaries elsewhere and could drop more than
        # dropping alone does, so the edited body is just fitted
        block=0.0 if applied.edits else strategy.block,
        price_input=price_input,
    )
    if fitted is not transcript:
        # the input's estimate, nothing checked
        original = fit(view, 0, est, calibration, overhead=overhead, learned=learned)
        result = replace(
            result,
            known_tokens=original.estimated_tokens,
            known_raw=original.raw_tokens,
            fits=False,
        )
    given = None if fitted is transcript else transcript
    return Plan(fitted, budget, result, applied, given, cache_mark=cache_mark)


def plan_body(
    body: Any,
    settings: Settings | None = None,
    *,
    lazy: bool = False,
    price_input: bool = True,
    **changes: Any,
) -> Plan:
    """The plan of a request body alone (no usage to learn from): ``settings`` with
    ``changes`` applied, the estimator they name for the body's model. The one path by
    which every command and :func:`prune` estimate a body
    (:func:`ctxwin.runs.simulate.next_plan` takes it for a body read as a run), so a
    body has one ``estimated_tokens`` everywhere. With ``lazy`` the items are priced
    exactly only where the fit needs them (:func:`load`): a fit that drops items it
    never priced leaves ``estimated_tokens`` unknown (``None``), as does one that keeps
    every item when ``price_input`` is false (a caller that never reports the number:
    ``prune`` without ``--report``; see :func:`~ctxwin.fitting.pruning.fit`)."""
    s = settings_with(settings, changes)
    est = s.make_estimator(body_model(body))
    return plan(load(body, s.fmt, est, lazy=lazy), s, price_input=price_input)


def prune(body: Any, settings: Settings | None = None, **changes: Any) -> tuple[Any, Plan]:
    """Fit ``body`` to its model's window: ``(fitted body, plan)``.

    ``settings`` with ``changes`` applied, e.g. ``prune(body, model="gpt-4o")``.
    Raises :class:`ContextTruncated` when even the floor exceeds the budget
    (:class:`~ctxwin.errors.NoBudget` when the budget is not positive), and
    :class:`InputError` for a body that cannot be read or safely pruned.
    """
    p = plan_body(body, settings, **changes)
    if p.result.overflow_at_floor:
        raise truncated(p.result, p.budget)
    return p.output(), p
