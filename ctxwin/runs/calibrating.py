"""What recorded runs say about calibration: each call's estimate against the prompt
tokens it reported, the factor that makes every estimate safe, and the overhead line
fitted per session run.

Pure functions over :mod:`ctxwin.runs`, as :mod:`ctxwin.runs.simulate`: plain data for
``ctxwin calibrate`` to print.
"""

from __future__ import annotations

import math

from ctxwin.errors import CtxwinError
from ctxwin.fitting.calibration import ZERO_REPORT, fit_overhead
from ctxwin.fitting.rows import CalibrationRow, CalibrationSummary, RunOverhead, SessionLines
from ctxwin.runs import Run
from ctxwin.runs.simulate import SESSION_SHAPES, call_model, reported_tokens, run_manager, run_model
from ctxwin.settings import Settings
from ctxwin.tokens.base import calibrated


def calibration_rows(run: Run, settings: Settings) -> list[CalibrationRow]:
    """One row per call of ``run`` that recorded usage: estimate against reported."""
    estimator = settings.make_estimator(run_model(run))
    rows: list[CalibrationRow] = []
    if run.error is not None:
        return [{"run": run.name, "error": run.error}]
    try:
        calls = run.calls(estimator, settings.fmt)
    except CtxwinError as exc:
        return [{"run": run.name, "error": str(exc)}]
    for k, call in enumerate(calls, 1):
        reported = reported_tokens(call.usage)
        if reported is None:
            continue
        row: CalibrationRow = {"run": run.name, "call": k, "where": call.where}
        if run.shape in SESSION_SHAPES:
            row["shape"] = run.shape
        if reported <= 0:  # no report: a gateway that counts nothing
            row.update({"reported_tokens": reported, "error": ZERO_REPORT})
            rows.append(row)
            continue
        manager = run_manager(settings, run, call_model(call), estimator)
        try:
            fitted = manager.evaluate(call.request)
        except CtxwinError as exc:
            row.update({"reported_tokens": reported, "error": str(exc)})
            rows.append(row)
            continue
        raw = fitted.result.raw_tokens
        estimate = fitted.result.estimated_tokens
        row.update(
            {
                "format": fitted.transcript.format,
                "model": fitted.budget.spec.name,
                "raw_tokens": raw,
                "calibration": fitted.result.calibration,
                "estimated_tokens": estimate,
                "reported_tokens": reported,
                "ratio": round(estimate / reported, 4) if reported else None,
                "needed": round(reported / raw, 4) if raw else None,
            }
        )
        rows.append(row)
    return rows


def overhead_fits(rows: list[CalibrationRow]) -> list[RunOverhead]:
    """``reported ≈ overhead + factor × raw`` fitted per run and model
    (:func:`~ctxwin.fitting.calibration.fit_overhead`) over calibration rows."""
    groups: dict[tuple[str, str, str], list[CalibrationRow]] = {}
    for r in rows:
        if "raw_tokens" in r and r.get("reported_tokens"):
            key = (str(r.get("path", "")), str(r.get("run", "")), str(r.get("model") or ""))
            groups.setdefault(key, []).append(r)
    out: list[RunOverhead] = []
    for (path, run, model), rs in groups.items():
        fit = fit_overhead([(r["raw_tokens"], r["reported_tokens"]) for r in rs])
        out.append({"path": path, "run": run, "model": model or None, **fit})
    return out


def _ceil4(x: float) -> float:
    """Round up to 4 decimals, so a factor rounded for display stays safe."""
    return math.ceil(x * 10_000 - 1e-9) / 10_000


def session_lines(fits: list[RunOverhead]) -> SessionLines:
    """The per-run lines of session runs (:func:`overhead_fits`), pooled."""
    ratios = sorted(x for f in fits for x in f.get("ratios", []))
    calls = sum(f["calls"] for f in fits)
    reported = sum(f.get("reported_tokens", 0) for f in fits)
    waste = sum(f.get("waste_tokens", 0) for f in fits)
    import statistics

    return {
        "calls": calls,
        "runs": sum(1 for f in fits if f["calls"]),
        "median_ratio": round(statistics.median(ratios), 4) if ratios else None,
        "waste_percent": round(100 * waste / reported, 2) if reported else None,
    }


def calibration_summary(rows: list[CalibrationRow]) -> CalibrationSummary:
    """The factor that makes every estimate safe, and the waste at that factor, over the
    calls of runs that are no agent tool's session (a session's log omits its system
    prompt and tools: :func:`overhead_fits` fits its line, and ``sessions`` pools them)."""
    sessions = [r for r in rows if "shape" in r]
    rows = [r for r in rows if "shape" not in r]
    usable = [r for r in rows if "raw_tokens" in r and r["raw_tokens"] > 0]
    seeds = sorted({r["calibration"] for r in usable})
    out: CalibrationSummary = {
        "calls": len(usable),
        "skipped": len(rows) - len(usable),
        "seed_calibration": seeds[0] if len(seeds) == 1 else seeds or None,
    }
    if sessions:
        out["sessions"] = session_lines(overhead_fits(sessions))
    if not usable:
        out["safe_calibration"] = None
        return out
    need = max(r["reported_tokens"] / r["raw_tokens"] for r in usable)
    factor = max(1.0, _ceil4(need))
    reported = sum(r["reported_tokens"] for r in usable)
    estimates = [calibrated(r["raw_tokens"], factor) for r in usable]
    waste = [
        (e - r["reported_tokens"]) / r["reported_tokens"]
        for e, r in zip(estimates, usable, strict=True)
        if r["reported_tokens"]
    ]
    ratios = [ratio for r in usable if (ratio := r.get("ratio")) is not None]
    out.update(
        {
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
    )
    return out
