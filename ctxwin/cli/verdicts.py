"""How the command line says a verdict: one table of the statuses a fit or a row can
have (:data:`ctxwin.core.STATUSES`), each with its label, its colour and, where a line
opens with it, its headline; and the one sentence a report's summary says.

The status itself is computed once, by the outcome record (:attr:`ctxwin.core.Plan.status`),
and carried by the report (``status``) and every row; this module only words it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxwin.core import FITS, INVALID, NEEDS_PRUNING, NO_BUDGET, TRUNCATED
from ctxwin.errors import NO_PROMPT_FITS, floor_words
from ctxwin.words import plural

if TYPE_CHECKING:
    from ctxwin.fitting.rows import Report

_TABLE = (
    # status, label, colour, headline (how a line about it opens)
    (FITS, "fits", "green", "fits"),
    (NEEDS_PRUNING, "needs pruning", "yellow", "needs pruning"),
    (TRUNCATED, "truncated", "red", "context truncated"),
    (NO_BUDGET, "no budget", "bold red", "no budget"),
    (INVALID, "invalid", "magenta", "invalid"),
)
LABEL = {status: label for status, label, _, _ in _TABLE}
"""A status as a table's verdict column says it."""
STYLE = {status: style for status, _, style, _ in _TABLE}
"""The colour of each verdict."""
HEADLINE = {status: headline for status, _, _, headline in _TABLE}
"""How a line about a status opens (``context truncated: …``)."""


def verdict(report: Report) -> str:
    """One sentence saying what pruning does (or would do), by the report's ``status``."""
    status = report["status"]
    opening = HEADLINE[status]
    if status == NO_BUDGET:
        return f"{opening}: {NO_PROMPT_FITS}"
    if status == TRUNCATED:
        return f"{opening}: {floor_words(report['estimated_tokens_after'], report['budget'])}"
    if status == FITS:
        return f"{opening}: nothing to drop"
    dropped = report["messages_in"] - report["messages_out"]
    edits = []
    if report["cleared_results"]:
        edits.append(
            f"clear {plural(report['cleared_results'], 'tool result')} "
            f"({report['cleared_tokens']:,} tokens)"
        )
    if report["cleared_thinking"]:
        edits.append(f"clear {plural(report['cleared_thinking'], 'thinking block')}")
    if dropped or not edits:
        edits.append(
            f"drop {report['dropped_turns']:,} of "
            f"{plural(report['dropped_turns'] + report['kept_turns'], 'turn')} "
            f"({plural(dropped, 'message')})"
        )
    if report["truncated_results"]:
        edits.append(f"cut {plural(report['truncated_results'], 'tool result')}")
    return f"{opening}: {', '.join(edits)} → {report['estimated_tokens_after']:,} tokens"
