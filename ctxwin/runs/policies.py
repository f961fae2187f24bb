"""The cutting policies ``replay --compare`` sets side by side, and what each one sent
and cost over the runs replayed under it.

A policy is a :attr:`~ctxwin.fitting.strategy.Strategy.block`: ``just-fit`` (0, the
fewest turns dropped) or ``block=SHARE``. A row adds up the replay reports
(:func:`ctxwin.runs.simulate.replay_run`) of the runs under one policy; a figure is
``None`` when some run's is unknown, never a guess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxwin.core import FITS, NEEDS_PRUNING, NO_BUDGET, TRUNCATED
from ctxwin.runs.billing import usd

JUST_FIT = "just-fit"


def policy_block(policy: str) -> float:
    """The :attr:`~ctxwin.fitting.strategy.Strategy.block` a cutting policy names: ``just-fit``
    (0: the fewest turns dropped) or ``block=SHARE`` (0 < SHARE ≤ 1). Raises
    :class:`~ctxwin.errors.UsageError` for anything else."""
    from ctxwin.errors import UsageError

    text = policy.strip()
    if text == JUST_FIT:
        return 0.0
    name, sep, value = text.partition("=")
    if sep and name.strip() == "block":
        try:
            share = float(value)
        except ValueError:
            share = -1.0
        if 0 < share <= 1:
            return share
    raise UsageError(
        f"unknown cutting policy {policy!r} (choose just-fit or block=SHARE, 0 < SHARE <= 1)"
    )


def policies(texts: Sequence[str]) -> list[tuple[str, float]]:
    """``(name, block)`` of each policy in ``texts`` (each one or comma-separated), in
    order, each once."""
    out: dict[str, float] = {}
    for text in texts:
        for part in text.split(","):
            if part.strip():
                share = policy_block(part)
                out.setdefault(JUST_FIT if share == 0 else f"block={share:g}", share)
    return list(out.items())


def compare_row(policy: str, reports: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What replaying ``reports``' runs under ``policy`` sent and cost, over their calls
    that were sent (``None``: unknown for some run)."""
    sent = [
        r["estimated_tokens_after"]
        for rep in reports
        for r in rep["rows"]
        if "estimated_tokens_after" in r and r["status"] in (FITS, NEEDS_PRUNING)
    ]

    def total(key: str) -> Any:
        values = [rep.get(key) for rep in reports]
        known = [v for v in values if v is not None]
        if len(known) < len(values):
            return None
        return usd(sum(known)) if key == "input_cost" else sum(known)

    return {
        "policy": policy,
        "calls": sum(rep["calls"] for rep in reports),
        "pruned_calls": sum(
            1 for rep in reports for r in rep["rows"] if r["status"] == NEEDS_PRUNING
        ),
        "truncated_calls": sum(
            1 for rep in reports for r in rep["rows"] if r["status"] in (TRUNCATED, NO_BUDGET)
        ),
        "mean_tokens_sent": round(sum(sent) / len(sent)) if sent else None,
        "min_tokens_sent": min(sent) if sent else None,
        "cached_tokens": total("cached_tokens"),
        "cache_write_tokens": total("cache_write_tokens"),
        "input_cost": total("input_cost"),
    }
