"""The shapes of what ``replay``, ``check`` and ``calibrate`` report, as typed dicts.

:mod:`ctxwin.runs.simulate`, :mod:`ctxwin.runs.checking` and :mod:`ctxwin.fitting.calibration` build
these; the command line prints them as JSON (``replay --json``, ``check --json`` and
``--jsonl``, ``calibrate --json``) and renders them as tables. Keys that only some
rows have (an invalid row has an ``error`` and no estimate) are not required.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Required, TypedDict

from ctxwin.fitting.budget import ContextSource, ReserveSource

Status = Literal["fits", "needs_pruning", "truncated", "no_budget", "invalid"]
"""A verdict on a call, a transcript or a session's next request."""

Reason = Literal["unsupported_format", "bad_input"]
"""Why a transcript is invalid: no adapter reads it, or one does and finds it broken."""


class Fitted(TypedDict, total=False):
    """What a replayed call, a checked run and a session's next request report of a fit
    (:meth:`ctxwin.core.Plan.row`, or an ``error``)."""

    status: Status
    model: str | None
    context_length: int
    budget: int
    messages: int
    raw_tokens: int
    estimated_tokens: int
    calibration: float
    overhead: int
    dropped_turns: int
    kept_turns: int
    estimated_tokens_after: int
    cleared_results: int
    cleared_tokens: int
    cleared_thinking: int
    truncated_results: int
    error: str


class ReplayRow(Fitted, total=False):
    """One provider call of a replayed run (``replay --json``: ``runs[].rows[]``)."""

    run: Required[str]
    call: Required[int]
    """1-based, in the order the run made its calls."""
    where: Required[str]
    """Where the call is in the file (the model message's JSON path)."""
    reported_tokens: int | None
    """The prompt tokens the call's recorded usage reports, if any."""
    under_estimate: bool
    unlogged_tokens: int
    """Present when the reported count exceeds the prediction, made from the run's
    earlier reports, by more than 3 % of the report or the budget's safety margin,
    whichever is less (:func:`ctxwin.fitting.anchor.unlogged_tokens`): by how much
    (content the file does not record; ``docs/sessions.md``)."""
    cached_tokens: int | None
    """Prompt tokens the provider's cache would read for the request as fitted and sent
    (``ctxwin.runs.billing``); ``None`` when the model's caching rules are unknown. A call
    that is not sent (truncated) has none of the keys below."""
    cache_write_tokens: int | None
    """Prompt tokens it would write to the cache (Anthropic's billed writes)."""
    cache_write_1h_tokens: int | None
    """Of those, the ones written for an hour (marks with ``ttl: "1h"``: billed at
    ``cache_write_1h``, 2 × input at Anthropic, not 1.25 ×)."""
    reported_cached_tokens: int
    """The cache reads the call's usage logs, where it logs them."""
    reported_cache_write_tokens: int
    """The cache writes the call's usage logs (Anthropic), where it logs them."""
    reported_cache_write_1h_tokens: int
    """Of those, the ones written for an hour, where the log breaks writes down
    (Anthropic's ``cache_creation.ephemeral_1h_input_tokens``)."""
    reported_cache_break_tokens: int
    """Where the log shows the call read less than the call before left cached (its read
    plus write, within its lifetime): how much less (``ctxwin.runs.billing.CacheLog``). Sent
    or not."""
    input_cost: float | None
    """USD for the prompt as fitted and sent, at the model's prices with the predicted
    cache use; ``None`` when a price it needs is unknown."""
    reported_input_cost: float | None
    """USD for the logged prompt with the logged cache use, where both are logged."""


NextRequest = Fitted
"""A session's next request (its whole transcript) at what the replay learned."""


class ReplayReport(TypedDict):
    """One replayed run (``replay --json``: ``runs[]``)."""

    run: str
    shape: str
    calls: int
    calls_with_usage: int
    model: str | None
    context_length: int | None
    first_pruned: int | None
    first_truncated: int | None
    invalid_calls: int
    under_estimates: int
    under_estimates_after_first: int
    unlogged_calls: int
    """Rows with ``unlogged_tokens``."""
    zero_reports: int
    """Calls whose usage reports 0 prompt tokens: taken as no report (a gateway that
    does not count)."""
    final_calibration: float
    learn_overhead: bool
    final_overhead: int
    peak_context_use: float | None
    peak_call: int | None
    next_request: NextRequest | None
    rows: list[ReplayRow]
    tokens_sent: int
    """Prompt tokens of the calls sent, as fitted (their estimates)."""
    cached_tokens: int | None
    cache_write_tokens: int | None
    cache_write_1h_tokens: int | None
    reported_cached_tokens: int | None
    reported_cache_write_tokens: int | None
    reported_cache_write_1h_tokens: int | None
    input_cost: float | None
    """USD over the calls sent (``None``: a price or the caching rules unknown)."""
    reported_input_cost: float | None
    reported_cache_breaks: int | None
    """Calls whose log shows they read less than the call before left cached
    (``ctxwin.runs.billing.CacheLog``): a provider whose calls reach caches that do not share
    entries. ``None`` when the log does not say what calls read and wrote."""
    reported_cache_break_tokens: int | None
    """What those calls read less, in all."""
    reported_uncached_calls: int | None
    """Calls whose log shows they neither read from nor wrote to the cache, though marked
    (the body's marks, or the agent tool's) and at least the model's shortest cacheable
    prefix: they reached the provider without their marks. ``None`` when the log does
    not say what calls read and wrote."""
    warnings: list[str]
    """What to warn about the run's budget: a model the table does not know, budgeted at
    the fallback window (:func:`ctxwin.fitting.budget.spec_warnings`)."""
    served_by: str | None
    """The service that answered, where the log shows it (Claude Code's response ids:
    ``msg_bdrk_…`` Amazon Bedrock, ``msg_vrtx_…`` Google Vertex AI, ``msg_…``
    Anthropic)."""
    price: dict[str, Any] | None
    """The model's prices, USD per million tokens (``models.json``'s shape)."""
    price_source: str | None
    """``table`` (the model table) or ``spec`` (``--model-spec``); ``None``: unknown."""
    cache_rules: dict[str, Any] | None
    cache_marks: str | None
    """Where the cache marks came from: the body's ``cache_control``, or what an agent
    tool whose log records none is assumed to send (``ctxwin.runs.billing.SESSION_MARKS``)."""


class RunCheck(Fitted, total=False):
    """The verdict on one run (:func:`ctxwin.runs.simulate.check_run`): its worst request."""

    run: Required[str]
    shape: str
    reason: Reason
    format: str
    over_by: int
    where: str
    enforced: bool
    requests: int
    first_pruned: int | None
    first_truncated: int | None
    peak_context_use: float | None
    peak_call: int | None
    calls: int
    overhead: int
    under_estimates_after_first: int
    warnings: list[str]


class CheckRow(RunCheck, total=False):
    """One transcript of ``check`` (``--jsonl`` lines, ``--json``: ``rows[]``)."""

    path: Required[str]


class Offender(TypedDict):
    """One of the worst offenders a check summary lists."""

    path: str
    run: str
    status: Status
    estimated_tokens: int | None
    budget: int | None
    over_by: int | None


class InvalidEntry(TypedDict):
    """One invalid transcript a check summary lists."""

    path: str
    run: str
    error: str | None


class CheckSummary(TypedDict):
    """``check --json``: ``summary``."""

    files: int
    skipped_files: int
    missing: list[str]
    transcripts: int
    counts: dict[str, int]
    """How many transcripts have each :data:`Status` (every status, zero when none)."""
    not_enforced: int
    worst: list[Offender]
    invalid: list[InvalidEntry]


class CalibrationRow(TypedDict, total=False):
    """One recorded call with usage (``calibrate --json``: ``rows[]``); a call or file
    that could not be read has an ``error`` instead of the estimate."""

    path: str
    run: str
    call: int
    where: str
    format: str
    model: str | None
    raw_tokens: int
    calibration: float
    estimated_tokens: int
    reported_tokens: int
    ratio: float | None
    needed: float | None
    error: str
    shape: str
    """The run's shape (an agent tool's session shape: its log omits the system prompt
    and tools, so its calls are fitted with ``overhead + factor × raw`` instead)."""


class SessionLines(TypedDict):
    """The per-run lines ``overhead + factor × raw`` over the calls of session runs
    (``calibrate --json``: ``summary.sessions``), pooled."""

    calls: int
    runs: int
    median_ratio: float | None
    """The median of prediction ÷ reported over every call, each at its run's line."""
    waste_percent: float | None


class CalibrationSummary(TypedDict, total=False):
    """The safe calibration over calibration rows (``calibrate --json``: ``summary``
    and ``by_model``)."""

    calls: Required[int]
    skipped: Required[int]
    seed_calibration: Required[float | list[float] | None]
    needed_max: float
    under_estimates_at_seed: int
    ratio_min: float | None
    ratio_max: float | None
    safe_calibration: float | None
    waste_tokens: int
    waste_percent: float | None
    waste_percent_max: float | None
    sessions: SessionLines
    """Only when session runs were read: their calls are left out of the factor above
    and summed up here."""


class OverheadFit(TypedDict, total=False):
    """The safe line ``overhead + factor × raw``.

    :func:`ctxwin.fitting.calibration.fit_overhead` fits it.
    """

    calls: Required[int]
    factor: Required[float | None]
    overhead: Required[int | None]
    waste_tokens: int
    reported_tokens: int
    waste_percent: float
    median_ratio: float
    ratios: list[float]
    """Prediction ÷ reported per call, in call order (``calibrate`` pools them; not
    printed in ``by_run``)."""


class RunOverhead(OverheadFit, total=False):
    """The safe line of one run and model (``calibrate --json``: ``by_run[]``)."""

    path: Required[str]
    run: Required[str]
    model: Required[str | None]


class ToolUse(TypedDict):
    """One tool's share of a request (``by_tool``)."""

    calls: int
    results: int
    tokens: int


class LargeResult(TypedDict):
    """One of the largest tool results of a request (``largest_results``)."""

    message: str
    """Where it sits: the JSON path of the message holding it."""
    tool: str
    tokens: int
    """Its tokens priced on its own."""


class Filling(TypedDict):
    """What fills a request (:func:`ctxwin.breakdown.attribute`)."""

    by_kind: dict[str, int]
    by_tool: dict[str, ToolUse]
    largest_results: list[LargeResult]


class SessionInfo(TypedDict):
    """The run of a session file that ``estimate`` and ``prune`` planned."""

    run: str
    shape: str


class Report(TypedDict):
    """The JSON report of ``estimate --json`` and ``prune --report``
    (:meth:`ctxwin.core.Plan.report`).

    The keys up to ``dropped_messages`` are ``ctxwin.cli.report.REPORT_KEYS``, a public
    contract (never renamed or removed); the rest are extras, and new keys are only added.
    """

    format: str
    model: str | None
    context_length: int
    context_length_source: ContextSource
    reserve: int
    safety: int
    budget: int
    calibration: float
    estimated_tokens: int | None
    """The input's estimate, the same number in every command; ``null`` only when
    ``prune`` dropped turns it never priced (``dropped_tokens_at_least`` then bounds
    what it dropped)."""
    fits: bool
    pruned: bool
    dropped_turns: int
    kept_turns: int
    estimated_tokens_after: int
    overflow_at_floor: bool
    messages_in: int
    messages_out: int
    dropped_messages: list[int]
    estimator: str
    raw_tokens: int | None
    reserve_source: ReserveSource
    max_output_tokens: int | None
    model_table_row: str | None
    enforced: bool
    warnings: list[str]
    strategy: str
    """The strategy's steps, comma-separated (``--strategy``)."""
    cleared_results: int
    cleared_tokens: int
    """The size of the cleared results (what their placeholders state)."""
    truncated_results: int
    truncated_tokens: int
    cleared_thinking: int
    dropped_tokens_at_least: int
    """``estimated_tokens − estimated_tokens_after``, or, when ``estimated_tokens`` is
    ``null``, a lower bound of what it would be
    (:attr:`~ctxwin.fitting.pruning.FitResult.dropped_at_least`)."""
    status: Status
    """The verdict (:attr:`ctxwin.core.Plan.status`)."""
    session: NotRequired[SessionInfo]
    """Only for a session file: which run of it was estimated (its next request)."""
    overhead: NotRequired[int]
    """Only for a session file: the tokens its usage proves every request costs beyond
    its estimate (a system prompt and tools the log never recorded)."""
    auto_compact_at: NotRequired[int]
    """The prompt tokens at which the session's agent tool compacts it by itself
    (:func:`ctxwin.fitting.windows.auto_compact`, or ``--auto-compact-at``)."""
    auto_compact_source: NotRequired[str]
    """``claude-code`` or ``codex`` (the tool's rule), or ``flag``."""
    explain: NotRequired[dict[str, Any]]
    """Where the tokens go (``estimate --explain``; :func:`ctxwin.explain`)."""
    by_kind: NotRequired[dict[str, int]]
    """What fills the estimate, by kind of content (``estimate --by``;
    :func:`ctxwin.breakdown.attribute`): sums to ``estimated_tokens``."""
    by_tool: NotRequired[dict[str, ToolUse]]
    """Each tool's calls and results and the tokens they add (``estimate --by``)."""
    largest_results: NotRequired[list[LargeResult]]
    """The largest tool results (``estimate --by``)."""
