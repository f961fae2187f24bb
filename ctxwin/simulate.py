"""What recorded runs say: replay a run through the manager, fit-check, calibrate.

Pure functions over :mod:`ctxwin.runs`: no typer, no rich, no stdin/stdout.
Every result is plain data (dicts of JSON values) so the CLI can print it
and worker processes can return it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ctxwin.calibration import prompt_tokens_from_usage
from ctxwin.core import Transcript
from ctxwin.errors import CtxwinError, InputError
from ctxwin.estimate import Estimator, calibrated
from ctxwin.formats import get_adapter
from ctxwin.manager import ContextWindowManager
from ctxwin.runs import Call, Run, prepared_calls
from ctxwin.settings import Settings

FITS = "fits"
NEEDS_PRUNING = "needs_pruning"
TRUNCATED = "truncated"
INVALID = "invalid"
STATUSES = (FITS, NEEDS_PRUNING, TRUNCATED, INVALID)
"""Verdicts, mildest first."""


def run_manager(
    settings: Settings,
    run: Run,
    model_hint: str | None = None,
    estimator: Estimator | None = None,
) -> ContextWindowManager:
    """A fresh manager for one call or run of ``run``: the run's wire format, and
    ``model_hint`` naming the model when no setting does; the run's recorded window
    (``run.context_length``) when no setting names a model, spec or window."""
    changes: dict[str, Any] = {"fmt": run.format_for(settings.fmt)}
    if settings.spec is None and settings.context_length is None and settings.model is None:
        changes["context_length"] = run.context_length
    return ContextWindowManager(
        settings.model or model_hint,
        settings,
        estimator=estimator or settings.make_estimator(),
        **changes,
    )


def _reported(usage: Mapping[str, Any] | None) -> int | None:
    return prompt_tokens_from_usage(usage) if isinstance(usage, Mapping) else None


def _hint(call: Call) -> str | None:
    body = call.request
    if call.model and not (isinstance(body, dict) and isinstance(body.get("model"), str)):
        return call.model
    return None


# --- replay ------------------------------------------------------------------


def replay_run(run: Run, settings: Settings) -> dict[str, Any]:
    """Simulate the agent loop over ``run``: one manager, its calls in order.

    Call ``k``'s request is fitted at the calibration learned so far; then the
    usage call ``k`` reported (if recorded) teaches the manager, against the
    raw estimate of the request it counts (the recorded request, as sent).
    Fitting each recorded request in full equals carrying the pruned
    transcript forward: dropping is oldest-first and calibration only grows.
    """
    estimator = settings.make_estimator()
    if run.error is not None:
        raise InputError(run.error)
    prepared: list[tuple[Call, Transcript | None]]
    if run.recorded is None:
        prepared = list(
            prepared_calls(
                run.body, run.usage_at, estimator, run.format_for(settings.fmt), run.calls_at
            )
        )
    else:
        prepared = [(call, None) for call in run.recorded]
    calls = [call for call, _ in prepared]
    hint = next((h for h in map(_hint, calls) if h), None)
    manager = run_manager(settings, run, hint, estimator)
    rows: list[dict[str, Any]] = []
    first_pruned: int | None = None
    first_truncated: int | None = None
    prev: tuple[Mapping[str, Any] | None, int] | None = None
    for k, (call, transcript) in enumerate(prepared, 1):
        if prev is None:
            manager.reset()
        elif prev[0] is not None:
            manager.observe(prev[0], raw_tokens=prev[1])
        reported = _reported(call.usage)
        row: dict[str, Any] = {"run": run.name, "call": k, "where": call.where}
        try:
            if transcript is None:
                fitted = manager.evaluate(call.request)
            else:
                fitted = manager.evaluate_transcript(transcript)
        except CtxwinError as exc:
            row.update(status=INVALID, reported_tokens=reported, error=str(exc))
            rows.append(row)
            prev = (None, 0)  # nothing to learn from it; keep what was learned
            continue
        r = fitted.result
        b = fitted.budget
        status = TRUNCATED if r.overflow_at_floor else NEEDS_PRUNING if r.pruned else FITS
        if r.pruned and first_pruned is None:
            first_pruned = k
        if r.overflow_at_floor and first_truncated is None:
            first_truncated = k
        row.update(
            status=status,
            messages=len(fitted.transcript.view.items),
            reported_tokens=reported,
            raw_tokens=r.raw_tokens,
            estimated_tokens=r.estimated_tokens,
            calibration=r.calibration,
            budget=b.budget,
            context_length=b.context_length,
            dropped_turns=r.dropped_turns,
            kept_turns=r.kept_turns,
            estimated_tokens_after=r.estimated_tokens_after,
            under_estimate=reported is not None and r.estimated_tokens < reported,
            model=b.spec.name,
        )
        rows.append(row)
        prev = (call.usage, r.raw_tokens)
    first = rows[0] if rows and rows[0]["status"] != INVALID else None
    return {
        "run": run.name,
        "shape": run.shape,
        "calls": len(rows),
        "calls_with_usage": sum(1 for r in rows if r.get("reported_tokens") is not None),
        "model": first["model"] if first else None,
        "context_length": first["context_length"] if first else None,
        "first_pruned": first_pruned,
        "first_truncated": first_truncated,
        "invalid_calls": sum(1 for r in rows if r["status"] == INVALID),
        "under_estimates": sum(1 for r in rows if r.get("under_estimate")),
        "final_calibration": manager.calibration,
        "rows": rows,
    }


# --- check -------------------------------------------------------------------


def _reason(body: Any, fmt: str) -> str:
    """Why a body is invalid: ``unsupported_format`` (no adapter reads it) or ``bad_input``."""
    try:
        get_adapter(body, fmt)
    except CtxwinError:
        return "unsupported_format"
    return "bad_input"


def check_run(run: Run, settings: Settings, estimator: Estimator | None = None) -> dict[str, Any]:
    """The verdict on one run: its worst request against the model spec.

    A transcript run is checked as one request (the whole conversation);
    a run of recorded calls is checked call by call.
    """
    row: dict[str, Any] = {"run": run.name, "shape": run.shape}
    if run.error is not None:
        row.update(status=INVALID, error=run.error)
        return row
    estimator = estimator or settings.make_estimator()
    worst: tuple[int, int] | None = None
    calls = run.recorded if run.recorded is not None else [Call(run.body)]
    fmt = run.format_for(settings.fmt)
    if not calls:
        row.update(status=INVALID, error="no requests in this run")
        return row
    for call in calls:
        manager = run_manager(settings, run, _hint(call), estimator)
        try:
            fitted = manager.evaluate(call.request)
        except CtxwinError as exc:
            where = f"{call.where}: " if run.recorded is not None and call.where else ""
            reason = _reason(call.request, fmt)
            row.update(status=INVALID, reason=reason, error=f"{where}{exc}", requests=len(calls))
            return row
        r = fitted.result
        b = fitted.budget
        status = TRUNCATED if r.overflow_at_floor else NEEDS_PRUNING if r.pruned else FITS
        key = (STATUSES.index(status), r.estimated_tokens - b.budget)
        if worst is None or key > worst:
            worst = key
            row.update(
                status=status,
                format=fitted.transcript.format,
                model=b.spec.name,
                context_length=b.context_length,
                budget=b.budget,
                estimated_tokens=r.estimated_tokens,
                over_by=r.estimated_tokens - b.budget,
                dropped_turns=r.dropped_turns,
                kept_turns=r.kept_turns,
                estimated_tokens_after=r.estimated_tokens_after,
                messages=len(fitted.transcript.view.items),
                where=call.where,
                enforced=r.enforced,
            )
    row["requests"] = len(calls)
    return row


# --- calibrate ---------------------------------------------------------------


def calibration_rows(run: Run, settings: Settings) -> list[dict[str, Any]]:
    """One row per call of ``run`` that recorded usage: estimate against reported."""
    estimator = settings.make_estimator()
    rows: list[dict[str, Any]] = []
    if run.error is not None:
        return [{"run": run.name, "error": run.error}]
    try:
        calls = run.calls(estimator, settings.fmt)
    except CtxwinError as exc:
        return [{"run": run.name, "error": str(exc)}]
    for k, call in enumerate(calls, 1):
        reported = _reported(call.usage)
        if reported is None:
            continue
        row: dict[str, Any] = {"run": run.name, "call": k, "where": call.where}
        manager = run_manager(settings, run, _hint(call), estimator)
        try:
            fitted = manager.evaluate(call.request)
        except CtxwinError as exc:
            row.update(reported_tokens=reported, error=str(exc))
            rows.append(row)
            continue
        raw = fitted.result.raw_tokens
        estimate = fitted.result.estimated_tokens
        row.update(
            format=fitted.transcript.format,
            model=fitted.budget.spec.name,
            raw_tokens=raw,
            calibration=fitted.result.calibration,
            estimated_tokens=estimate,
            reported_tokens=reported,
            ratio=round(estimate / reported, 4) if reported else None,
            needed=round(reported / raw, 4) if raw else None,
        )
        rows.append(row)
    return rows


def _ceil4(x: float) -> float:
    """Round up to 4 decimals, so a factor rounded for display stays safe."""
    return math.ceil(x * 10_000 - 1e-9) / 10_000


def calibration_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The factor that makes every estimate safe, and the waste at that factor."""
    usable = [r for r in rows if "raw_tokens" in r and r["raw_tokens"] > 0]
    seeds = sorted({r["calibration"] for r in usable})
    out: dict[str, Any] = {
        "calls": len(usable),
        "skipped": len(rows) - len(usable),
        "seed_calibration": seeds[0] if len(seeds) == 1 else seeds or None,
    }
    if not usable:
        return out | {"safe_calibration": None}
    need = max(r["reported_tokens"] / r["raw_tokens"] for r in usable)
    factor = max(1.0, _ceil4(need))
    reported = sum(r["reported_tokens"] for r in usable)
    estimates = [calibrated(r["raw_tokens"], factor) for r in usable]
    waste = [
        (e - r["reported_tokens"]) / r["reported_tokens"]
        for e, r in zip(estimates, usable, strict=True)
        if r["reported_tokens"]
    ]
    ratios = [r["ratio"] for r in usable if r.get("ratio") is not None]
    return out | {
        "needed_max": round(need, 4),
        "under_estimates_at_seed": sum(
            1 for r in usable if r["estimated_tokens"] < r["reported_tokens"]
        ),
        "ratio_min": min(ratios) if ratios else None,
        "ratio_max": max(ratios) if ratios else None,
        "safe_calibration": factor,
        "waste_tokens": sum(estimates) - reported,
        "waste_percent": round(100 * (sum(estimates) - reported) / reported, 2)
        if reported
        else None,
        "waste_percent_max": round(100 * max(waste), 2) if waste else None,
    }
