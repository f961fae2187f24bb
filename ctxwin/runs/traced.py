"""Runs ctxwin traced itself: its ``ctxwin.fit`` spans (and the proxy's server spans),
read back by :mod:`ctxwin.sessions.otel` as one replay row per call.

Such spans hold what ctxwin did at each call (the fields of
:data:`ctxwin.telemetry.FIELDS`: the keys of :meth:`Plan.row() <ctxwin.core.Plan.row>`)
but no message, so nothing is fitted again: :func:`traced_report` reports the rows as
recorded, with the run's summary (first pruned and truncated call, peak use of the
window, the calibration at the end) over them. What a call reported counts what ctxwin
sent: a call estimated under its report is one whose ``estimated_tokens_after`` is below
the ``gen_ai.usage.input_tokens`` its span carries.
"""

from __future__ import annotations

from typing import Any

from ctxwin.core import INVALID, NEEDS_PRUNING, NO_BUDGET, TRUNCATED
from ctxwin.fitting.rows import ReplayReport, ReplayRow
from ctxwin.recorded import Run
from ctxwin.runs.billing import Ledger


def traced_report(run: Run) -> ReplayReport:
    """The replay report of a run read from ctxwin's spans (:attr:`Run.fits
    <ctxwin.recorded.Run.fits>`): its rows as recorded."""
    rows: list[ReplayRow] = [dict(r) for r in run.fits or []]  # type: ignore[misc]
    first_pruned = first_truncated = None
    ledger = Ledger(run.shape)
    peak: tuple[float, int] | None = None
    for row in rows:
        k = row["call"]
        status = row.get("status")
        if status == NEEDS_PRUNING and first_pruned is None:
            first_pruned = k
        if status in (TRUNCATED, NO_BUDGET) and first_truncated is None:
            first_truncated = k
        reported = row.get("reported_tokens")
        after = row.get("estimated_tokens_after")
        if reported is not None and after is not None:
            row["under_estimate"] = after < reported
        if status not in (TRUNCATED, NO_BUDGET, INVALID) and after is not None:
            ledger.sent += after
            window = row.get("context_length")
            if window:
                use = max(after, reported or 0) / window
                if peak is None or use > peak[0]:
                    peak = (use, k)
    last = rows[-1] if rows else None
    first = rows[0] if rows else None
    overhead = _int(last.get("overhead")) if last is not None else 0
    seen_usage = False
    after_first = 0
    for row in rows:
        if row.get("reported_tokens") is None:
            continue
        if seen_usage and row.get("under_estimate"):
            after_first += 1
        seen_usage = True
    return {
        "run": run.name,
        "shape": run.shape,
        "calls": len(rows),
        "calls_with_usage": sum(1 for r in rows if r.get("reported_tokens") is not None),
        "model": first.get("model") if first is not None else None,
        "context_length": first.get("context_length") if first is not None else None,
        "first_pruned": first_pruned,
        "first_truncated": first_truncated,
        "invalid_calls": sum(1 for r in rows if r.get("status") == INVALID),
        "under_estimates": sum(1 for r in rows if r.get("under_estimate")),
        "under_estimates_after_first": after_first,
        "unlogged_calls": 0,
        "zero_reports": sum(1 for r in rows if r.get("reported_tokens") == 0),
        "final_calibration": float(last.get("calibration") or 0.0) if last is not None else 0.0,
        "learn_overhead": overhead > 0,
        "final_overhead": overhead,
        "peak_context_use": round(peak[0], 4) if peak is not None else None,
        "peak_call": peak[1] if peak is not None else None,
        "next_request": None,
        "rows": rows,
        "served_by": run.served_by,
        **ledger.totals(),  # type: ignore[typeddict-item]
    }


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0
