"""Rendering: the JSON report for machines, a rich summary for people.

The report's keys are public contract: new keys may be added, existing ones
are never renamed or removed. rich is imported only when a person is shown
something.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import orjson

if TYPE_CHECKING:
    from rich.console import Console

    from ctxwin.budget import ContextSource, ReserveSource
    from ctxwin.core import Plan

    # Types for the checker only: declaring TypedDicts costs start-up time.
    class SessionInfo(TypedDict):
        """The run of a session file that ``estimate`` and ``prune`` planned."""

        run: str
        shape: str

    class Report(TypedDict):
        """The JSON report of ``estimate --json`` and ``prune --report``.

        The keys up to ``dropped_messages`` are :data:`REPORT_KEYS`, a public contract
        (never renamed or removed); the rest are extras, and new keys are only added.
        """

        format: str
        model: str | None
        context_length: int
        context_length_source: ContextSource
        reserve: int
        safety: int
        budget: int
        calibration: float
        estimated_tokens: int
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
        raw_tokens: int
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
        session: NotRequired[SessionInfo]
        """Only for a session file: which run of it was estimated (its next request)."""
        overhead: NotRequired[int]
        """Only for a session file: the tokens its usage proves every request costs beyond
        its estimate (a system prompt and tools the log never recorded)."""
        explain: NotRequired[dict[str, Any]]
        """Where the tokens go (``estimate --explain``; :func:`ctxwin.explain`)."""


REPORT_KEYS = (
    "format",
    "model",
    "context_length",
    "context_length_source",
    "reserve",
    "safety",
    "budget",
    "calibration",
    "estimated_tokens",
    "fits",
    "pruned",
    "dropped_turns",
    "kept_turns",
    "estimated_tokens_after",
    "overflow_at_floor",
    "messages_in",
    "messages_out",
    "dropped_messages",
)
"""The stable keys, in order. Extra keys follow them."""


def build_report(plan: Plan) -> Report:
    """The JSON report of ``plan``: the stable keys, then extras."""
    b = plan.budget
    r = plan.result
    spec = b.spec
    return {
        "format": plan.transcript.format,
        "model": spec.name,
        "context_length": spec.context_length,
        "context_length_source": spec.context_length_source,
        "reserve": b.reserve,
        "safety": b.safety,
        "budget": b.budget,
        "calibration": r.calibration,
        "estimated_tokens": r.estimated_tokens,
        "fits": r.fits,
        "pruned": r.pruned,
        "dropped_turns": r.dropped_turns,
        "kept_turns": r.kept_turns,
        "estimated_tokens_after": r.estimated_tokens_after,
        "overflow_at_floor": r.overflow_at_floor,
        "messages_in": len(plan.transcript.view.items),
        "messages_out": len(r.keep),
        "dropped_messages": r.dropped,
        # extras
        "estimator": plan.transcript.estimator.name,
        "raw_tokens": r.raw_tokens,
        "reserve_source": b.reserve_source,
        "max_output_tokens": spec.max_output_tokens,
        "model_table_row": spec.table_row,
        "enforced": r.enforced,
        "warnings": list(r.warnings),
        "strategy": plan.applied.strategy.name,
        "cleared_results": plan.applied.cleared_results,
        "cleared_tokens": plan.applied.cleared_tokens,
        "truncated_results": plan.applied.truncated_results,
        "truncated_tokens": plan.applied.truncated_tokens,
        "cleared_thinking": plan.applied.cleared_thinking,
    }


def render_json(report: Report) -> bytes:
    """The report as indented JSON with a trailing newline."""
    return orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def verdict(report: Report) -> str:
    """One sentence saying what pruning does (or would do)."""
    if not report["enforced"]:
        return "not enforced: the budget is not positive, the transcript passes unchanged"
    if report["overflow_at_floor"]:
        return (
            f"context truncated: even head + newest turn need "
            f"{report['estimated_tokens_after']:,} tokens, over the budget of {report['budget']:,}"
        )
    if report["fits"]:
        return "fits: nothing to drop"
    dropped = report["messages_in"] - report["messages_out"]
    edits = []
    if report["cleared_results"]:
        edits.append(
            f"clear {_count(report['cleared_results'], 'tool result')} "
            f"({report['cleared_tokens']:,} tokens)"
        )
    if report["cleared_thinking"]:
        edits.append(f"clear {_count(report['cleared_thinking'], 'thinking block')}")
    if dropped or not edits:
        edits.append(
            f"drop {report['dropped_turns']:,} of "
            f"{report['dropped_turns'] + report['kept_turns']:,} turns ({dropped:,} messages)"
        )
    if report["truncated_results"]:
        edits.append(f"cut {_count(report['truncated_results'], 'tool result')}")
    return f"needs pruning: {', '.join(edits)} → {report['estimated_tokens_after']:,} tokens"


def render_summary(report: Report, console: Console) -> None:
    """A short table for people."""
    from rich.table import Table
    from rich.text import Text

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    model = report["model"] or "(no model named)"
    table.add_row("format", Text(report["format"]))
    table.add_row(
        "model",
        Text(f"{model}  window {report['context_length']:,} ({report['context_length_source']})"),
    )
    table.add_row(
        "estimate",
        Text(
            f"{report['estimated_tokens']:,} tokens  "
            f"({report['estimator']}: raw {report['raw_tokens']:,} × {report['calibration']:g})"
        ),
    )
    table.add_row(
        "budget",
        Text(
            f"{report['budget']:,} tokens  = {report['context_length']:,} window "
            f"− {report['reserve']:,} reserve ({report['reserve_source']}) "
            f"− {report['safety']:,} safety"
        ),
    )
    table.add_row("messages", Text(f"{report['messages_in']:,}"))
    style = "red" if report["overflow_at_floor"] else "green" if report["fits"] else "yellow"
    table.add_row("verdict", Text(verdict(report), style=style))
    console.print(table)


def render_explain(details: dict[str, Any], console: Console) -> None:
    """``estimate --explain`` for people: where the tokens go, what each step could save."""
    from rich.table import Table

    table = Table(title="where the tokens go", title_justify="left", box=None, pad_edge=False)
    table.add_column("part")
    table.add_column("messages", justify="right")
    table.add_column("tokens", justify="right")
    table.add_row(
        "outside the messages (system, tools, framing)", "", f"{details['outside_messages']:,}"
    )
    head = details["head"]
    table.add_row("head", f"{head['messages']:,}", f"{head['tokens']:,}")
    for turn in details["turns"]:
        table.add_row(
            f"turn {turn['turn']} (from {turn['first']})",
            f"{turn['messages']:,}",
            f"{turn['tokens']:,}",
        )
    console.print(table)
    largest = Table(title="largest messages", title_justify="left", box=None, pad_edge=False)
    for col in ("message", "role", "tokens"):
        largest.add_column(col, justify="right" if col == "tokens" else "left")
    for row in details["largest"]:
        largest.add_row(row["message"], row["role"], f"{row['tokens']:,}")
    console.print(largest)
    steps = Table(title="what each step could save", title_justify="left", box=None, pad_edge=False)
    for col in ("step", "in --strategy", "items", "tokens"):
        steps.add_column(col, justify="left" if col == "step" else "right")
    for row in details["steps"]:
        steps.add_row(
            row["step"],
            "yes" if row["in_strategy"] else "no",
            f"{row['items']:,}",
            f"{row['tokens']:,}",
        )
    console.print(steps)
