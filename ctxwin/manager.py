"""The stateful collaborator of an agent loop: bound every send, learn from usage.

:class:`ContextWindowManager` is the library form of the design's
``ContextWindowManager``. Call :meth:`~ContextWindowManager.fit` before every
provider send with the request and the usage the *previous* call reported::

    manager = ctxwin.ContextWindowManager("gpt-4o")
    usage = None                                  # None: a new run
    while True:
        try:
            sent = manager.fit(request, last_usage=usage)
        except ctxwin.ContextTruncated as exc:    # stop the loop, no provider call
            reason = "context_truncated"
            break
        response = provider.send(sent.request)
        usage = response["usage"]
        request = sent.request | {"messages": [*sent.request["messages"], ...]}

Promises:

* ``last_usage=None`` resets the calibration to the seed, so one manager
  shared by many runs never carries one run's calibration into the next;
* otherwise the calibration grows toward ``reported ÷ raw`` where ``raw`` is
  the uncalibrated estimate of the request that was sent; it never shrinks;
* with ``learn_overhead=True`` the manager fits ``reported ≈ overhead +
  factor × raw`` to the run's usage instead
  (:class:`~ctxwin.fitting.calibration.OverheadLearner`): the overhead (a system
  prompt and tools the caller's log never shows) and the factor (what the
  content the run adds costs, robust to one call's jump) are fitted together,
  and the line stays on or above every report seen;
* a pruned request is what the caller keeps: the next request is built on
  ``sent.request``, so dropped turns stay dropped;
* when even the floor (head + newest turn) exceeds the budget, nothing is
  returned to send: :class:`~ctxwin.errors.ContextTruncated` carries the fit; a
  budget that is not positive (the window at most reserve + safety) is such an
  overflow for every request, raised as its subclass :class:`~ctxwin.errors.NoBudget`;
* a request that extends the previous one (the same message objects first,
  either the whole history or what the last fit kept, and the other fields
  equal) is read incrementally: only its new messages are estimated, and the
  fit reuses the running sums, segmentation and rule checks of the last one
  (``ctxwin.fitting.incremental``), so an N-call loop costs O(total messages). Under a
  strategy with a step that is not incremental (``Step.incremental``: the
  editing steps), a request within budget is settled the same way, and one over
  it is planned over the whole request already read. The result is exactly what
  reading the whole request gives, the edited messages a fit sent built on too;
  pass ``incremental=False`` to read every request whole. Messages already sent
  must not be edited in place;
* a request that extends the one the provider last reported on (read
  incrementally, as above) is estimated from that report: the prompt tokens
  reported, plus the calibrated bound of the messages added since; after a cut,
  the report less what the reports measured of the dropped messages, when the
  format lets them measure it (:mod:`ctxwin.fitting.anchor`; ``anchor=False``
  estimates every request from the calibrated bound alone, as reading it whole
  does);
* every fit before a send (:meth:`fit`, :meth:`before_send`) is seen: a log record under
  the manager's ``logger`` when it changed the request or nothing may be sent, warnings
  for a fallback window, zero usage and a calibration that jumps, and, with the ``otel``
  extra and an SDK tracer provider, a ``ctxwin.fit`` span (:mod:`ctxwin.telemetry`).
  :meth:`evaluate` (what replays and checks use) is never seen.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxwin.core import Plan, Transcript, budget_for, load, plan
from ctxwin.errors import truncated
from ctxwin.fitting.budget import Budget, ContextSource
from ctxwin.fitting.calibration import FRESH_FACTOR, OverheadLearner, grow, prompt_tokens_from_usage
from ctxwin.fitting.incremental import Prefixes, Reader
from ctxwin.fitting.pruning import FitResult
from ctxwin.fitting.strategy import Applied
from ctxwin.settings import Settings, settings_with
from ctxwin.telemetry import GROWTH_WARNING, MANAGER, fit_span, fitted, observed
from ctxwin.telemetry import end as end_span
from ctxwin.telemetry import failed as span_failed
from ctxwin.tokens.base import Estimator
from ctxwin.tokens.registry import seed_of

ManagedFit = Plan
"""What :meth:`ContextWindowManager.fit` decided for one send: the one outcome record,
:class:`~ctxwin.core.Plan` (``.request``, ``.messages``, ``.pruned``, ``.dropped_turns``,
``.estimated_tokens_after``, ``.raw_tokens_sent``, ...)."""


def default_seed(estimator: Estimator, model: str | None) -> float:
    """The calibration a run starts from when no seed is given (the estimator's ``seed``)."""
    return seed_of(estimator, model)


class ContextWindowManager:
    """Bounds each request of one agent run to the model's window (stateful per run).

    The model spec is resolved per request as everywhere in ctxwin: the
    arguments given here, else the body's ``model`` and ``max_tokens``, else
    the built-in table, else an 8192-token fallback.
    """

    def __init__(
        self,
        model: str | None = None,
        settings: Settings | None = None,
        *,
        calibration_seed: float | None = None,
        learn_overhead: bool = False,
        fresh_factor: float = FRESH_FACTOR,
        incremental: bool = True,
        anchor: bool = True,
        logger: str = MANAGER,
        growth_warning: float | None = GROWTH_WARNING,
        context_length_source: ContextSource = "flag",
        **changes: Any,
    ) -> None:
        """Manage one run with ``settings`` and ``changes`` (:class:`~ctxwin.settings.Settings`).

        ``model`` is the setting ``model``; ``calibration_seed`` is the former name of
        the setting ``calibration`` (deprecated, still accepted; giving both is a
        ``TypeError``). ``estimator`` is a name (``bound``, the default; ``content``,
        ``tokenizer:o200k_base``) or an estimator. ``learn_overhead`` learns
        an overhead the requests do not show from usage (see the module docstring);
        ``fresh_factor`` is its factor until two reports measure one
        (:class:`~ctxwin.fitting.calibration.OverheadLearner`; 1.0 when the requests show
        every message as sent, as a framework's own history does). ``anchor``: estimate
        a request that extends one the provider reported from that report
        (:mod:`ctxwin.fitting.anchor`; ``False``: from the calibrated bound alone).
        ``logger`` names the logger (and the spans' ``ctxwin.source``) the fits before a
        send are recorded under (:mod:`ctxwin.telemetry`); ``growth_warning``: a report
        that grows the calibration by more than this share is a WARNING (``None``: never).
        ``context_length_source`` names where the setting ``context_length`` came from
        (the window an agent tool ran a recorded session at: :mod:`ctxwin.fitting.windows`).
        """
        if model is not None:
            changes["model"] = model
        if calibration_seed is not None:
            if changes.get("calibration") is not None:
                raise TypeError("calibration and calibration_seed (its former name): give one")
            changes["calibration"] = calibration_seed
        self.settings = settings_with(settings, changes)
        self.model = self.settings.model
        self.calibration_seed = self.settings.calibration
        """The factor each run starts from; ``None``: :func:`default_seed` for the run's model."""
        self.estimator = self.settings.make_estimator()
        self.fmt = self.settings.fmt
        self.learn_overhead = learn_overhead
        self.fresh_factor = fresh_factor
        self._seed: float | None = self.calibration_seed
        self._learned: float | None = None
        self._learner: OverheadLearner | None = None
        self._sent_raw: int | None = None
        self._budget: tuple[tuple[str | None, int | None], Budget] | None = None
        self.incremental = incremental
        """Read only the messages new since the last request (see :class:`Reader`)."""
        self._reader = Reader(self.estimator, self.fmt)
        self.anchor = anchor
        """Anchor estimates on the provider's last report (:mod:`ctxwin.fitting.anchor`)."""
        self._fit_at: tuple[Prefixes, FitResult, int] | None = None
        """The last request fitted on a growing transcript: its prefixes, its fit and the
        raw estimate of what was sent (the request a report anchors on)."""
        self.zero_reports = 0
        """Reports of zero prompt tokens seen in this run: treated as no report."""
        self.logger = logger
        """The logger the fits before a send are recorded under (:mod:`ctxwin.telemetry`)."""
        self.growth_warning = growth_warning
        """A report that grows the calibration by more than this share is a WARNING."""
        self.sending = False
        """Whether this manager has fitted a request for a send (:meth:`before_send`): only
        then does what usage teaches it log warnings (a replay's manager never does)."""
        self._told: set[str | None] | None = None
        """The models a fallback window was reported for (made when the first is)."""
        self.context_length_source: ContextSource = context_length_source

    @property
    def calibration(self) -> float:
        """The current calibration factor (the seed, or what reported usage taught)."""
        if self._learner is not None:
            return self._learner.factor
        if self._learned is not None:
            return self._learned
        if self._seed is not None:
            return self._seed
        return default_seed(self.estimator, self.model)

    @property
    def fresh(self) -> float:
        """The factor on the bound of content no report has counted, when an estimate is
        anchored on a report (:mod:`ctxwin.fitting.anchor`): the calibration, and never
        below the run's seed nor 1 (the bound is an upper bound of the four open
        tokenizers' counts, and the seed of a family whose tokenizer counts more bounds
        the rest; a factor below them learned from usage measures opaque content priced
        at its bytes, or a slope fitted to a share of the growth, no promise for what
        comes next); the seed's until two reports measure a slope (the learner's fresh
        factor guesses at content the log does not show, which a report already
        counts)."""
        learner = self._learner
        if learner is not None and not learner.measured:
            return max(1.0, learner.seed)
        seed = self._seed if self._seed is not None else default_seed(self.estimator, self.model)
        return max(1.0, seed, self.calibration)

    @property
    def learned(self) -> bool:
        """Whether usage has taught this run anything (since it started or :meth:`reset`)."""
        return self._learned is not None or self._learner is not None

    @property
    def overhead(self) -> int:
        """The intercept of the line learned from usage: tokens every request costs
        beyond its content (0 unless ``learn_overhead``)."""
        return self._learner.overhead if self._learner is not None else 0

    @property
    def messages_read(self) -> int:
        """How many messages this manager has estimated: each new one once, when the
        next request extends the last one (see ``ctxwin.fitting.incremental.Reader``)."""
        return self._reader.messages_read

    def reads_equal_prefixes(self) -> None:
        """Take a request whose first messages equal the last request's (not only are the
        same objects) as extending it (:attr:`ctxwin.fitting.incremental.Reader.equal`):
        for requests parsed one by one, as a run's recorded calls are."""
        self._reader.equal = True

    def reset(self) -> None:
        """Start a new run: calibration back to the seed, no overhead, no previous send."""
        self._seed = self.calibration_seed
        self._learned = None
        self._learner = None
        self._sent_raw = None
        self._fit_at = None
        self.zero_reports = 0

    def observe(self, usage: Mapping[str, Any] | None, *, raw_tokens: int | None = None) -> float:
        """Learn from the usage a provider reported; returns the calibration.

        ``raw_tokens`` is the uncalibrated estimate of the request that
        ``usage`` counts; by default the last request :meth:`fit` returned.
        Usage without a recognizable prompt count teaches nothing.
        """
        raw = self._sent_raw if raw_tokens is None else raw_tokens
        reported = prompt_tokens_from_usage(usage) if isinstance(usage, Mapping) else None
        before = self.calibration
        zero = False
        if reported is not None and reported <= 0:
            # a provider (or a gateway in front of one) that reports zeros: no report
            self.zero_reports += 1
            zero = self.zero_reports == 1
            reported = None
        if reported is not None:
            self._anchor(raw_tokens, reported)
        if raw is not None and reported is not None:
            if self.learn_overhead:
                if self._learner is None:
                    self._learner = OverheadLearner(self.calibration, self.fresh_factor)
                self._learner.observe(raw, reported)
            else:
                self._learned = grow(self.calibration, raw, reported)
        after = self.calibration
        share = self.growth_warning
        if self.sending and (zero or (share is not None and after > before * (1 + share))):
            observed(
                self.logger,
                before=before,
                after=after,
                reported=reported,
                raw=raw,
                zero=zero,
                share=share,
            )
        return after

    def _anchor(self, raw_tokens: int | None, reported: int) -> None:
        """Anchor the next requests on ``reported``, the count of the request last fitted
        on a growing transcript: as sent (``raw_tokens`` ``None`` or its raw estimate), or
        as given (``raw_tokens`` the raw estimate of the whole request: a recorded run's
        report counts what the agent sent, not what a replay keeps)."""
        at = self._fit_at
        if at is None or not self.anchor:
            return
        prefixes, result, sent_raw = at
        if result.gap is not None:
            return
        head = prefixes.seg.head_end
        if raw_tokens is None or raw_tokens == sent_raw:
            if result.pruned:
                prefixes.report(result.head, result.cut, result.items, reported)
            else:
                prefixes.report(head, head, result.items, reported)
        elif raw_tokens == result.raw_tokens:
            prefixes.report(head, head, result.items, reported)

    def evaluate(self, request: Any) -> ManagedFit:
        """Fit ``request`` at the current calibration (no change but the run's seed).

        The first request of a run fixes the run's seed when none was given
        (it may depend on the request's model). Never raises for an overflow:
        ``result.overflow_at_floor`` says so. Raises
        :class:`~ctxwin.errors.InputError` for a body it cannot read.
        """
        if not self.incremental:
            return self.evaluate_transcript(load(request, self.fmt, self.estimator))
        transcript, prefixes = self._reader.read(request)
        if transcript.view.pinned:
            # a compaction block: the incremental segmenter does not know its head
            return self.evaluate_transcript(transcript)
        n = len(transcript.view.items)
        strategy = self.settings.strategy
        if not strategy.incremental:
            # Every strategy keeps a request within its budget whole: that is settled at
            # O(new items). One over it is planned over the whole request, as a step that
            # is not incremental (ctxwin.fitting.strategy.Step.incremental) declares.
            budget = self._prefix_budget(prefixes)
            scale = prefixes.scale(
                self.calibration, self.overhead, self._learner is not None, self.fresh
            )
            whole = prefixes.whole(n, budget.budget, scale)
            if whole is not None:
                self._fit_at = (prefixes, whole, whole.raw_tokens)
                return Plan(
                    transcript,
                    budget,
                    whole,
                    Applied(strategy),
                    sent=request,
                    sent_raw=whole.raw_tokens,
                    cache_mark=self.settings.cache_mark,
                )
            managed = self.evaluate_transcript(transcript)
            if managed.changed:
                self._reader.sent(managed.messages, managed.result.keep, managed.transcript.view)
            return managed
        fitted = self.evaluate_prefix(prefixes, n, transcript)
        result = fitted.result
        if not fitted.changed:
            return fitted._replace(sent=request, sent_raw=result.raw_tokens)
        sent = transcript.write(result.keep)
        items = sent if isinstance(sent, list) else sent.get(transcript.adapter.items_key)
        if isinstance(items, list):
            self._reader.sent(items, result.keep)
        sent_raw = prefixes.raw_kept(result)
        self._fit_at = (prefixes, result, sent_raw)
        return fitted._replace(sent=sent, sent_raw=sent_raw)

    def evaluate_transcript(self, transcript: Transcript) -> ManagedFit:
        """:meth:`evaluate` for a request that is already read."""
        self._fit_at = None
        p = self.plan(transcript)
        return p._replace(sent=p.fitted(), sent_raw=p.raw_tokens_sent)

    def plan(self, transcript: Transcript) -> Plan:
        """The :class:`~ctxwin.core.Plan` of ``transcript`` at what this run has learned."""
        if self._learned is None and self._seed is None:
            self._seed = default_seed(self.estimator, self.model or transcript.view.model)
        learner = self._learner
        return plan(
            transcript,
            self.settings,
            calibration=self.calibration,
            overhead=self.overhead,
            learned=learner is not None,
            context_length_source=self.context_length_source,
        )

    def evaluate_prefix(self, prefixes: Prefixes, i: int, transcript: Transcript) -> Plan:
        """:meth:`evaluate` for the request holding the first ``i`` items of a growing
        transcript (``ctxwin.fitting.incremental``): O(new items) instead of O(i).

        ``transcript`` holds the items ``prefixes`` reads. The result equals
        ``evaluate`` of that request's body; the fitted body is built only when
        asked for (:attr:`~ctxwin.core.Plan.request`).
        """
        budget = self._prefix_budget(prefixes)
        learner = self._learner
        result = prefixes.fit(
            i,
            budget.budget,
            self.calibration,
            overhead=self.overhead,
            learned=learner is not None,
            block=self.settings.strategy.block,
            fresh=self.fresh,
        )
        self._fit_at = (
            prefixes,
            result,
            prefixes.raw_kept(result) if result.pruned else result.raw_tokens,
        )
        return Plan(transcript, budget, result, cache_mark=self.settings.cache_mark)

    def _prefix_budget(self, prefixes: Prefixes) -> Budget:
        """The budget of the requests ``prefixes`` holds (fixing the run's seed first)."""
        view = prefixes.view
        if self._learned is None and self._seed is None:
            self._seed = default_seed(self.estimator, self.model or view.model)
        key = (view.model, view.max_tokens)
        if self._budget is None or self._budget[0] != key:
            self._budget = (key, budget_for(view, self.settings, self.context_length_source))
        return self._budget[1]

    def fit(self, request: Any, last_usage: Mapping[str, Any] | None = None) -> ManagedFit:
        """Bound ``request`` before a send.

        ``last_usage`` is the usage the previous call of this run reported
        (``None`` starts a new run and resets the calibration). Returns the
        body to send; raises :class:`~ctxwin.errors.ContextTruncated` (carrying
        the fit of the floor) when even head + newest turn exceed the budget, and
        :class:`~ctxwin.errors.NoBudget` when the budget is not positive.
        """
        if last_usage is None:
            self.reset()
        else:
            self.observe(last_usage)
        managed = self.before_send(request)
        if managed.result.overflow_at_floor:
            raise truncated(managed.result, managed.budget)
        return managed

    def before_send(self, request: Any, span: Any = None) -> ManagedFit:
        """:meth:`evaluate` ``request``, about to be sent, at what the run has learned (the
        usage of earlier calls given to :meth:`observe`), and make the fit seen
        (:mod:`ctxwin.telemetry`): a record under :attr:`logger`, and a ``ctxwin.fit`` span,
        or attributes on ``span`` when one is given (its owner ends it). Never raises for
        an overflow: the caller refuses to send when ``result.overflow_at_floor`` (a record
        at ERROR says so already). Raises :class:`~ctxwin.errors.InputError` for a body it
        cannot read. Every SDK wrapper, framework hook and the proxy fit through here."""
        own = span is None
        if own:
            span = fit_span(self.logger)
        try:
            managed = self.evaluate(request)
        except BaseException as exc:
            if own and span is not None:
                span_failed(span, exc)
                end_span(span)
            raise
        self.sending = True
        if self._told is None and managed.budget.spec.context_length_source == "fallback":
            self._told = set()
        fitted(managed, self.logger, span, self._told)
        if own:
            end_span(span)
        self._sent_raw = None if managed.result.overflow_at_floor else managed.raw_tokens_sent
        return managed
