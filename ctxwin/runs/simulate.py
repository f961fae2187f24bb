"""What recorded runs say: replay a run through the manager, fit-check
(:mod:`ctxwin.runs.calibrating` calibrates).

Pure functions over :mod:`ctxwin.runs`: no typer, no rich, no stdin/stdout.
Every result is plain data (dicts of JSON values) so the CLI can print it
and worker processes can return it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxwin.core import INVALID, STATUSES, Plan, Transcript, load, plan_body
from ctxwin.errors import CtxwinError, InputError
from ctxwin.fitting.anchor import unlogged_tokens
from ctxwin.fitting.budget import spec_warnings
from ctxwin.fitting.calibration import prompt_tokens_from_usage, zero_report_words
from ctxwin.fitting.incremental import Prefixes
from ctxwin.fitting.pruning import FitResult, total_cost
from ctxwin.fitting.rows import (
    Fitted,
    NextRequest,
    Reason,
    ReplayReport,
    ReplayRow,
    RunCheck,
)
from ctxwin.fitting.windows import Window, session_window
from ctxwin.formats import get_adapter
from ctxwin.manager import ContextWindowManager
from ctxwin.recorded import model_messages
from ctxwin.runs import Call, Run, prepared_calls
from ctxwin.runs.billing import Ledger, body_marks, body_ttl, laid_plan, laid_prefix
from ctxwin.runs.traced import traced_report
from ctxwin.sessions import names as session_names
from ctxwin.settings import Settings, body_model
from ctxwin.tokens.base import Estimator

SESSION_SHAPES = frozenset(session_names())
"""Run shapes of agent-tool session files (:mod:`ctxwin.sessions`)."""


def learns_overhead(run: Run, learn_overhead: bool | None = None) -> bool:
    """Whether replaying ``run`` learns an overhead from usage
    (:class:`~ctxwin.fitting.calibration.OverheadLearner`): ``learn_overhead`` when given,
    else for agent-tool sessions only, whose logs never record the system prompt
    and tools that were sent."""
    if learn_overhead is not None:
        return learn_overhead
    return run.shape in SESSION_SHAPES


def run_manager(
    settings: Settings,
    run: Run,
    model_hint: str | None = None,
    estimator: Estimator | None = None,
    learn_overhead: bool = False,
) -> ContextWindowManager:
    """A fresh manager for one call or run of ``run``: the run's wire format, and
    ``model_hint`` naming the model when no setting does; the window the run's agent tool
    ran it at (:func:`run_window`) when no setting names a spec or a window."""
    changes: dict[str, Any] = {"fmt": run.format_for(settings.fmt)}
    window = run_window(run, settings, model_hint)
    if window is not None:
        changes["context_length"] = window.context_length
        changes["context_length_source"] = window.source
    manager = ContextWindowManager(
        settings.model or model_hint,
        settings,
        estimator=estimator or settings.make_estimator(settings.model or model_hint),
        learn_overhead=learn_overhead,
        **changes,
    )
    # recorded calls are parsed one by one: a request whose first messages equal the last
    # one's extends it (and is anchored on its report)
    manager.reads_equal_prefixes()
    return manager


def run_window(run: Run, settings: Settings, model_hint: str | None = None) -> Window | None:
    """The window ``run``'s agent tool ran it at, when it is not the model table's
    (:func:`ctxwin.fitting.windows.session_window`: the window a Codex rollout names,
    Claude Code's own), unless a setting names a spec file or a window."""
    if settings.spec is not None or settings.context_length is not None:
        return None
    model = settings.model or model_hint or run_model(run)
    reports = [n for n in map(reported_tokens, run.usage_at.values()) if n]
    return session_window(
        run.shape, model, run.context_length, reports, model_given=settings.model is not None
    )


def reported_tokens(usage: Mapping[str, Any] | None) -> int | None:
    """The prompt tokens ``usage`` reports, if it is a usage object that does."""
    return prompt_tokens_from_usage(usage) if isinstance(usage, Mapping) else None


def run_model(run: Run) -> str | None:
    """The model ``run`` names (its body's, else its first recorded call's), for
    ``tokenizer="auto"``."""
    if run.recorded:
        call = run.recorded[0]
        return body_model(call.request) or call.model
    return body_model(run.body)


def call_model(call: Call) -> str | None:
    """The model ``call`` names outside its body, when its body names none."""
    body = call.request
    if call.model and not (isinstance(body, dict) and isinstance(body.get("model"), str)):
        return call.model
    return None


# --- replay ------------------------------------------------------------------


def replay_run(run: Run, settings: Settings, learn_overhead: bool | None = None) -> ReplayReport:
    """Simulate the agent loop over ``run``: one manager, its calls in order.

    Call ``k``'s request is fitted at the calibration learned so far; then the
    usage call ``k`` reported (if recorded) teaches the manager, against the
    raw estimate of the request it counts (the recorded request, as sent).
    Fitting each recorded request in full equals carrying the pruned
    transcript forward: dropping is oldest-first and calibration only grows.
    Agent-tool sessions (or any run, with ``learn_overhead=True``) learn an
    overhead too (:func:`learns_overhead`). The report names the peak context
    use and, for a transcript, the session's next request (the whole
    transcript) at what was learned.
    """
    if run.fits is not None:  # ctxwin's own spans: what it did, reported as it is
        return traced_report(run)
    estimator = settings.make_estimator(run_model(run))
    if run.error is not None:
        raise InputError(run.error)
    # (request, usage, where, transcript read already, when sent) of each call
    prepared: list[tuple[Any, Mapping[str, Any] | None, str, Transcript | None, float | None]]
    hint: str | None = None
    prefixes: Prefixes | None = None
    ends: list[int] = []
    strategy = settings.strategy
    whole: Transcript | None = None
    # a strategy with a step that cannot be fitted incrementally (Step.incremental) reads
    # each call's request whole
    if run.recorded is None and strategy.incremental:
        whole = load(run.body, run.format_for(settings.fmt), estimator)
        if whole.view.pinned:  # a compaction block: earlier calls did not have it
            whole = None
    if whole is not None:
        # One reading of the transcript; call k fits the prefix before its model
        # message, incrementally (ctxwin.fitting.incremental), so n calls cost O(n), not O(n²).
        t = whole
        prefixes = Prefixes(t.view, estimator, t.adapter.problems, complete=True)
        ends = model_messages(t.view, run.calls_at)
        usage_at, sent_at = run.usage_at, run.sent_at
        where = t.view.where
        prepared = [(None, usage_at.get(i), where(i), None, sent_at.get(i)) for i in ends]
    else:
        read: list[tuple[Call, Transcript | None]]
        if run.recorded is None:
            read = list(
                prepared_calls(
                    run.body,
                    run.usage_at,
                    estimator,
                    run.format_for(settings.fmt),
                    run.calls_at,
                    run.sent_at,
                )
            )
        else:
            read = [(call, None) for call in run.recorded]
        prepared = [(c.request, c.usage, c.where, t, c.at) for c, t in read]
        hint = next((h for h in (call_model(c) for c, _ in read) if h), None)
    learn = learns_overhead(run, learn_overhead)
    manager = run_manager(settings, run, hint, estimator, learn)
    ledger = Ledger(run.shape, grows=run.recorded is None)
    marked = body_marks(whole.body) if whole is not None else None
    marked_ttl = body_ttl(whole.body) if whole is not None else None
    rows: list[ReplayRow] = []
    first_pruned: int | None = None
    first_truncated: int | None = None
    prev: tuple[Mapping[str, Any] | None, int] | None = None
    counted = False
    """Whether a call before this one reported a (non-zero) prompt count."""
    warnings: list[str] | None = None
    for k, (request, usage, where_k, transcript, at) in enumerate(prepared, 1):
        if prev is None:
            manager.reset()
        elif prev[0] is not None:
            manager.observe(prev[0], raw_tokens=prev[1])
        reported = reported_tokens(usage)
        ttl = marked_ttl if whole is not None else body_ttl(request)
        try:
            if prefixes is not None and whole is not None:
                fitted = manager.evaluate_prefix(prefixes, ends[k - 1], whole)
            elif transcript is None:
                fitted = manager.evaluate(request)
            else:
                fitted = manager.evaluate_transcript(transcript)
        except CtxwinError as exc:
            logged = ledger.log(usage, at, ttl, ledger.rules)
            rows.append(
                {
                    "run": run.name,
                    "call": k,
                    "where": where_k,
                    "status": INVALID,
                    "reported_tokens": reported,
                    "error": str(exc),
                    **logged,  # type: ignore[typeddict-item]
                }
            )
            prev = (None, 0)  # nothing to learn from it; keep what was learned
            continue
        r = fitted.result
        if warnings is None:  # the first call read: one budget for the run's model
            warnings = spec_warnings(fitted.budget.spec)
        logged = ledger.log(usage, at, ttl, fitted.budget.spec.cache)
        if fitted.changed and first_pruned is None:
            first_pruned = k
        if r.overflow_at_floor and first_truncated is None:
            first_truncated = k
        rows.append(
            {
                "run": run.name,
                "call": k,
                "where": where_k,
                **fitted.row(),
                "reported_tokens": reported,
                "under_estimate": reported is not None and r.estimated_tokens < reported,
                **logged,  # type: ignore[typeddict-item]
            }
        )
        if counted and reported:
            unlogged = unlogged_tokens(reported, r.estimated_tokens, fitted.budget.safety)
            if unlogged:
                rows[-1]["unlogged_tokens"] = unlogged
        if not r.overflow_at_floor:  # a call that is sent
            ledger.rescale(r, manager.learn_overhead and manager.learned)
            if prefixes is not None and r.gap is None:
                laid = laid_prefix(prefixes, r, ledger.now)
                marks = _kept_marks(marked, r)
                if fitted.marked:  # the setting cache_mark adds one: read it from the body
                    sent = fitted.output()
                    marks, ttl = body_marks(sent), body_ttl(sent)
            else:
                laid = laid_plan(fitted, ledger.now)
                sent = fitted.output()
                marks, ttl = body_marks(sent), body_ttl(sent)
            costs = ledger.add(fitted, laid, marks, reported, usage, at, ttl)
            rows[-1].update(costs)  # type: ignore[typeddict-item]
        prev = (usage, r.raw_tokens)
        counted = counted or bool(reported)
    first = rows[0] if rows and rows[0]["status"] != INVALID else None
    if prev is not None and prev[0] is not None:
        manager.observe(prev[0], raw_tokens=prev[1])
    nxt = _next_request(run, manager, prefixes, whole)
    seen_usage = False
    after_first = 0
    for row in rows:
        if not row.get("reported_tokens"):  # none, or 0: no report
            continue
        if seen_usage and row.get("under_estimate"):
            after_first += 1
        seen_usage = True
    peak_context_use, peak_call = _peak(rows, nxt)
    return {
        "run": run.name,
        "shape": run.shape,
        "calls": len(rows),
        "calls_with_usage": sum(1 for r in rows if r.get("reported_tokens")),
        "model": first["model"] if first else None,
        "context_length": first["context_length"] if first else None,
        "first_pruned": first_pruned,
        "first_truncated": first_truncated,
        "invalid_calls": sum(1 for r in rows if r["status"] == INVALID),
        "under_estimates": sum(1 for r in rows if r.get("under_estimate")),
        "under_estimates_after_first": after_first,
        "unlogged_calls": sum(1 for r in rows if "unlogged_tokens" in r),
        "zero_reports": sum(1 for r in rows if r.get("reported_tokens") == 0),
        "final_calibration": manager.calibration,
        "learn_overhead": learn,
        "final_overhead": manager.overhead,
        "peak_context_use": peak_context_use,
        "peak_call": peak_call,
        "next_request": nxt,
        "rows": rows,
        "served_by": run.served_by,
        "warnings": warnings or [],
        **ledger.totals(),  # type: ignore[typeddict-item]
    }


def _kept_marks(marked: list[int] | None, result: FitResult) -> list[int] | None:
    """The blocks of a growing transcript's request (``result``: its fit) that carry the
    transcript's cache marks (``marked``: :func:`~ctxwin.runs.billing.body_marks` of the whole
    transcript), where its kept messages are."""
    if not marked:
        return None
    head, cut, items = result.head, result.cut, result.items
    out = []
    for m in marked:
        j = m - 1
        if j < 0:
            out.append(0)
        elif j < head:
            out.append(m)
        elif cut <= j < items:
            out.append(1 + head + j - cut)
    return out or None


def _peak(rows: list[ReplayRow], nxt: NextRequest | None = None) -> tuple[float | None, int | None]:
    """The share of the window the fullest prompt of the run fills, and its call: each
    call's (reported, or estimated when larger) and the next request's (``nxt``, the
    call after the last: what ``check`` reads a transcript as, so both say the same)."""
    best: tuple[float, int] | None = None
    last = rows[-1]["call"] if rows else 0
    prompts: list[tuple[Fitted, int, int | None]] = [
        (r, r["call"], r.get("reported_tokens")) for r in rows
    ]
    if nxt is not None:
        prompts.append((nxt, last + 1, None))
    for r, call, reported in prompts:
        window = r.get("context_length")
        if not window or "estimated_tokens" not in r:
            continue
        use = max(r["estimated_tokens"], reported or 0) / window
        if best is None or use > best[0]:
            best = (use, call)
    if best is None:
        return None, None
    return round(best[0], 4), best[1]


def _next_request(
    run: Run,
    manager: ContextWindowManager,
    prefixes: Prefixes | None = None,
    whole: Transcript | None = None,
) -> NextRequest | None:
    """The request a session would send next (its whole transcript), at what was learned
    (from ``prefixes``, the prefixes of ``whole``'s calls, when it was replayed with them)."""
    if run.recorded is not None or run.calls_at is not None:
        return None
    try:
        if prefixes is not None and whole is not None:
            fitted = manager.evaluate_prefix(prefixes, len(prefixes.view.items), whole)
        else:
            fitted = manager.evaluate(run.body)
    except CtxwinError as exc:
        return {"status": INVALID, "error": str(exc)}
    return fitted.row()


# --- a session's next request ------------------------------------------------


def current_run(runs: list[Run]) -> Run | None:
    """The run a session file continues (:attr:`~ctxwin.recorded.Run.current`), else
    its first readable run."""
    readable = [r for r in runs if r.error is None]
    return next((r for r in readable if r.current), readable[0] if readable else None)


def learns_nothing(run: Run) -> bool:
    """Whether ``run`` is a request body alone: a transcript with no usage that is not an
    agent tool's session, so its next request is the body, fitted at the seed."""
    return run.recorded is None and not run.usage_at and not learns_overhead(run)


def next_plan(run: Run, settings: Settings, *, lazy: bool = False) -> Plan:
    """The plan of the request ``run`` sends next (:meth:`~ctxwin.recorded.Run.next_request`)
    at what its usage taught (:func:`learned_manager`): the one path by which ``estimate``,
    ``prune`` and ``check`` estimate a file, so each reports the same ``estimated_tokens``
    for it (``replay``'s ``next_request`` is the same fit, at what its replay learned).

    A request body alone (:func:`learns_nothing`) is fitted as it is
    (:func:`ctxwin.core.plan_body`, ``lazy`` as there). Raises
    :class:`~ctxwin.errors.CtxwinError` for a run that cannot be read."""
    return next_fit(run, settings, lazy=lazy)[0]


def next_fit(
    run: Run, settings: Settings, *, lazy: bool = False
) -> tuple[Plan, ContextWindowManager | None]:
    """:func:`next_plan`, with the manager that learned the run's usage (None for a
    request body alone), whose ``zero_reports`` says how many calls reported 0 prompt
    tokens. The next request is anchored on the run's last report where it extends the
    request reported (:meth:`~ctxwin.manager.ContextWindowManager.evaluate`)."""
    if learns_nothing(run):
        body_plan = plan_body(run.body, settings, lazy=lazy, fmt=run.format_for(settings.fmt))
        return body_plan, None
    manager, nxt = learned_manager(run, settings)
    return manager.evaluate(nxt), manager


def learned_manager(
    run: Run, settings: Settings, learn_overhead: bool | None = None
) -> tuple[ContextWindowManager, Any]:
    """A manager that has seen every usage ``run`` recorded, and the run's next request.

    The next request is the whole transcript (or the last recorded request).
    Each call's raw estimate is read from the request as recorded, as
    :func:`replay_run` does; :meth:`~ctxwin.manager.ContextWindowManager.evaluate` of the
    next request is anchored on the last report (it extends the request reported).
    """
    nxt = run.next_request()
    estimator = settings.make_estimator(run_model(run))
    fmt = run.format_for(settings.fmt)
    if run.recorded is None:
        prepared = prepared_calls(run.body, run.usage_at, estimator, fmt, run.calls_at)
        calls = [c for c, _ in prepared]
        transcripts: list[Transcript | None] = [t for _, t in prepared]
    else:
        calls = list(run.recorded)
        transcripts = [None] * len(calls)
    hint = next((h for h in map(call_model, calls) if h), None)
    manager = run_manager(settings, run, hint, estimator, learns_overhead(run, learn_overhead))
    manager.reset()
    started = False
    for call, transcript in zip(calls, transcripts, strict=True):
        if reported_tokens(call.usage) is None:
            continue
        # read through the manager's reader, so the next request, which extends the last
        # reported one, is anchored on its report (ctxwin.fitting.anchor)
        try:
            raw = manager.evaluate(call.request).result.raw_tokens
        except CtxwinError:
            t = transcript if transcript is not None else load(call.request, fmt, estimator)
            if not started:  # the run's seed depends on its model, as in replay_run
                manager.plan(t)
            raw = estimator.raw(total_cost(t.view))
        started = True
        manager.observe(call.usage, raw_tokens=raw)
    return manager, nxt


# --- check -------------------------------------------------------------------


def _reason(body: Any, fmt: str) -> Reason:
    """Why a body is invalid: ``unsupported_format`` (no adapter reads it) or ``bad_input``."""
    try:
        get_adapter(body, fmt)
    except CtxwinError:
        return "unsupported_format"
    return "bad_input"


def check_run(run: Run, settings: Settings) -> RunCheck:
    """The verdict on one run.

    The row is the fit of the run's next request (:func:`next_plan`): the request body
    itself, a session's whole transcript or a call log's last request, at what the run's
    usage taught, so its ``estimated_tokens`` is what ``estimate`` and ``prune`` report
    for the file. A run that learns (a call log, a transcript with usage, an agent-tool
    session) is also replayed (:func:`replay_run`): the row carries the replay's first
    pruned and first truncated call and its peak context use, and its verdict is the
    worst of the next request's and every call's as the replay fits them. A call log with
    a call that cannot be read is invalid, naming it.
    """
    row: RunCheck = {"run": run.name, "shape": run.shape}
    if run.error is not None:
        row.update({"status": INVALID, "error": run.error})
        return row
    requests = len(run.recorded) if run.recorded is not None else 1
    if run.recorded is not None and not run.recorded:
        row.update({"status": INVALID, "error": "no requests in this run"})
        return row
    fmt = run.format_for(settings.fmt)
    try:
        fitted = next_plan(run, settings)
    except CtxwinError as exc:
        request, where, error = _unreadable(run, fmt, settings, exc)
        row.update(
            {
                "status": INVALID,
                "reason": _reason(request, fmt),
                "error": f"{where}: {error}" if where else str(error),
                "requests": requests,
            }
        )
        return row
    r = fitted.result
    b = fitted.budget
    estimate = r.estimated_tokens
    if run.recorded is not None:
        where = run.recorded[-1].where
    else:
        where = "" if learns_nothing(run) else "next request"
    found = spec_warnings(b.spec)
    if found:
        row["warnings"] = found
    row = {
        **row,
        **fitted.row(),
        "format": fitted.transcript.format,
        "over_by": estimate - b.budget,
        "where": where,
        "enforced": r.enforced,
        "requests": requests,
    }
    if learns_nothing(run):
        use = estimate / b.context_length if b.context_length > 0 else None
        row.update(
            {
                "first_pruned": 1 if fitted.changed else None,
                "first_truncated": 1 if r.overflow_at_floor else None,
                "peak_context_use": round(use, 4) if use is not None else None,
                "peak_call": None,
            }
        )
        return row
    _check_calls(run, settings, row)
    return row


def _unreadable(
    run: Run, fmt: str, settings: Settings, exc: CtxwinError
) -> tuple[Any, str, CtxwinError]:
    """The request a run's next-request plan could not read, where it is and why: for a
    call log, its first call that cannot be read (the plan reads every call with usage);
    else the run's next request, with ``exc``."""
    for call in run.recorded or []:
        try:
            load(call.request, fmt, settings.make_estimator(settings.model or call.model))
        except CtxwinError as first:
            return call.request, call.where, first
    return run.next_request(), run.recorded[-1].where if run.recorded else "", exc


def _check_calls(run: Run, settings: Settings, row: RunCheck) -> None:
    """Fold a run's replay into its check row (see :func:`check_run`)."""
    try:
        rep = replay_run(run, settings)
    except CtxwinError:
        return  # the next request above already judged the run
    row.update(
        {
            "first_pruned": rep["first_pruned"],
            "first_truncated": rep["first_truncated"],
            "peak_context_use": rep["peak_context_use"],
            "peak_call": rep["peak_call"],
        }
    )
    if rep["zero_reports"]:
        row.setdefault("warnings", []).append(zero_report_words(rep["zero_reports"]))
    if run.recorded is None:
        row.update(
            {
                "calls": rep["calls"],
                "overhead": rep["final_overhead"],
                "under_estimates_after_first": rep["under_estimates_after_first"],
            }
        )
    worst = STATUSES.index(row["status"])
    for call in rep["rows"]:
        status = call["status"]
        if status == INVALID:
            if run.recorded is None:
                continue  # a session's call the log cut short: its next request is read
            request = run.recorded[call["call"] - 1].request
            where = f"{call['where']}: " if call["where"] else ""
            row.update(
                {
                    "status": INVALID,
                    "reason": _reason(request, run.format_for(settings.fmt)),
                    "error": f"{where}{call.get('error', '')}",
                }
            )
            return
        worst = max(worst, STATUSES.index(status))
    row["status"] = STATUSES[worst]
