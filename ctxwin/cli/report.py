"""Rendering: the JSON report for machines, a rich summary for people.

The report's keys are public contract: new keys may be added, existing ones
are never renamed or removed. rich is imported only when a person is shown
something.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from rich.console import Console

    from ctxwin.fitting.rows import Report


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


def render_json(report: Report) -> bytes:
    """The report as indented JSON with a trailing newline."""
    return orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def _estimate_text(report: Report) -> str:
    """The estimate and its arithmetic: ``raw × calibration``, plus the overhead a
    session's usage taught (``overhead + ceil(raw × calibration)`` is the estimate)."""
    text = (
        f"{report['estimated_tokens']:,} tokens  "
        f"({report['estimator']}: raw {report['raw_tokens']:,} × {report['calibration']:g}"
    )
    overhead = report.get("overhead", 0)
    return text + (f" + overhead {overhead:,})" if overhead else ")")


def summary_rows(report: Report) -> list[tuple[str, str]]:
    """The summary for people: ``(label, text)`` lines."""
    from ctxwin.cli.verdicts import verdict  # here: --json says no verdict

    model = report["model"] or "(no model named)"
    return [
        ("format", report["format"]),
        (
            "model",
            f"{model}  window {report['context_length']:,} ({report['context_length_source']})",
        ),
        ("estimate", _estimate_text(report)),
        (
            "budget",
            f"{report['budget']:,} tokens  = {report['context_length']:,} window "
            f"− {report['reserve']:,} reserve ({report['reserve_source']}) "
            f"− {report['safety']:,} safety",
        ),
        ("messages", f"{report['messages_in']:,}"),
        *_compact_row(report),
        ("verdict", verdict(report)),
    ]


_COMPACT_RULE = {
    "claude-code": "Claude Code's rule",
    "codex": "Codex's rule",
    "flag": "--auto-compact-at",
}


def _compact_row(report: Report) -> list[tuple[str, str]]:
    """When the session's agent tool compacts it by itself, and how far off that is."""
    at = report.get("auto_compact_at")
    if at is None:
        return []
    source = report.get("auto_compact_source", "")
    text = f"{at:,} tokens ({_COMPACT_RULE.get(source, source)})"
    estimate = report["estimated_tokens"]
    if estimate is not None:
        left = at - estimate
        text += f"; {left:,} to go" if left >= 0 else f"; past it by {-left:,}"
    return [("compacts at", text)]


def render_summary(report: Report, console: Console) -> None:
    """A short table for people."""
    from rich.table import Table
    from rich.text import Text

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    from ctxwin.cli.verdicts import STYLE

    style = STYLE[report["status"]]
    for label, text in summary_rows(report):
        table.add_row(label, Text(text, style=style if label == "verdict" else ""))
    console.print(table)


_NARROW = frozenset("".join(map(chr, range(0x20, 0x7F))) + "×−→")
"""Characters one cell wide with no markup meaning to a rich ``Text``: a summary of only
these lays out the same without rich."""


def plain_summary(report: Report, width: int) -> str | None:
    """:func:`render_summary` as rich prints it to a pipe ``width`` columns wide (no
    styles; a text too long for the width wrapped at spaces, as rich wraps it; each
    line padded to the table's width), without importing rich. ``None`` when only
    rich can say: a character that is not plain ASCII (or ×, −, →), a width under 18
    columns (rich then narrows the labels too), or a word longer than the room left."""
    rows = summary_rows(report)
    if any(not _NARROW.issuperset(text) for _, text in rows):
        return None
    label_width = max(len(label) for label, _ in rows)
    room = max(len(text) for _, text in rows)
    if label_width + 2 + room > width:
        if width < 2 * label_width + 2:
            return None
        room = width - label_width - 2  # rich narrows the widest column, the texts
    out = []
    for label, text in rows:
        lines = _wrapped(text, room)
        if lines is None:
            return None
        for k, line in enumerate(lines):
            out.append(f"{label if k == 0 else '':<{label_width}}  {line:<{room}}\n")
    return "".join(out)


def _wrapped(text: str, width: int) -> list[str] | None:
    """``text`` in lines of at most ``width`` characters, broken before a word that does
    not fit (``rich._wrap.divide_line``: a word keeps the spaces after it); ``None``
    when a word is longer than ``width`` (rich then folds it)."""
    import re
    from itertools import pairwise

    breaks = [0]
    used = 0
    for word in re.finditer(r"\s*\S+\s*", text):
        start = word.start()
        length = len(word.group().rstrip())
        if width - used >= length:
            used += len(word.group())
        elif length > width:
            return None
        elif used and start:
            breaks.append(start)
            used = len(word.group())
    breaks.append(len(text))
    return [text[a:b].rstrip() for a, b in pairwise(breaks)]


def pipe_width() -> int | None:
    """The width rich's ``Console()`` would lay out in when it would print no styles
    (stdout is no terminal and no colour is forced); ``None`` otherwise."""
    import os
    import sys

    environ = os.environ
    tty_compatible = environ.get("TTY_COMPATIBLE", "")
    if tty_compatible == "1":
        return None
    if tty_compatible != "0":
        force_color = environ.get("FORCE_COLOR")
        if force_color is not None:
            if force_color != "":
                return None
        else:
            isatty = getattr(sys.stdout, "isatty", None)
            try:
                if isatty is None or isatty():
                    return None
            except ValueError:
                pass
    columns = environ.get("COLUMNS")
    if columns is not None and columns.isdigit():
        return int(columns) or None
    for fd in (0, 1, 2):
        try:
            return os.get_terminal_size(fd).columns or 80
        except (AttributeError, ValueError, OSError):
            pass
    return 80


def render_explain(details: dict[str, Any], console: Console) -> None:
    """``estimate --explain`` for people: where the tokens go, what each step could save."""
    from rich.table import Table

    table = Table(title="where the tokens go", title_justify="left", box=None, pad_edge=False)
    table.add_column("part")
    table.add_column("messages", justify="right")
    table.add_column("tokens", justify="right")
    overhead = details.get("overhead", 0)
    table.add_row(
        "outside the messages (system, tools, framing)",
        "",
        f"{details['outside_messages'] - overhead:,}",
    )
    if overhead:
        table.add_row("overhead learned from usage (not in the file)", "", f"{overhead:,}")
    head = details["head"]
    table.add_row("head", f"{head['messages']:,}", f"{head['tokens']:,}")
    for turn in details["turns"]:
        table.add_row(
            f"turn {turn['turn']} (from {turn['first']})",
            f"{turn['messages']:,}",
            f"{turn['tokens']:,}",
        )
    if "calibration" in details:
        table.add_row(
            f"estimate (raw {details['raw_tokens']:,} × {details['calibration']:g}"
            + (f" + {overhead:,} overhead)" if overhead else ")"),
            "",
            f"{details['estimated_tokens']:,}",
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


_KIND_LABEL = {
    "system": "system prompt",
    "tools": "tool definitions",
    "user": "user text",
    "assistant": "assistant text",
    "thinking": "thinking",
    "tool_calls": "tool calls",
    "tool_results": "tool results",
    "media": "images, documents, audio",
    "overhead": "overhead (framing; learned from usage; anchoring)",
}


def render_by(report: Report, by: str, console: Console) -> None:
    """``estimate --by kind`` or ``--by tool`` for people: what fills the estimate, each
    part with its share of it; by tool, the largest results after."""
    from rich.table import Table

    total = report["estimated_tokens"] or 0

    def share(tokens: int) -> str:
        return f"{100 * tokens / total:.1f}%" if total else "—"

    if by == "kind":
        table = Table(title="what fills the context", title_justify="left", box=None)
        for col in ("kind", "tokens", "share"):
            table.add_column(col, justify="left" if col == "kind" else "right")
        for kind, tokens in report.get("by_kind", {}).items():
            table.add_row(_KIND_LABEL.get(kind, kind), f"{tokens:,}", share(tokens))
        table.add_row("estimate", f"{total:,}", "")
        console.print(table)
        return
    table = Table(title="what fills the context, by tool", title_justify="left", box=None)
    for col in ("tool", "calls", "results", "tokens", "share"):
        table.add_column(col, justify="left" if col == "tool" else "right")
    for name, use in report.get("by_tool", {}).items():
        table.add_row(
            name,
            f"{use['calls']:,}",
            f"{use['results']:,}",
            f"{use['tokens']:,}",
            share(use["tokens"]),
        )
    kinds = report.get("by_kind", {})
    rest = total - kinds.get("tool_calls", 0) - kinds.get("tool_results", 0)
    table.add_row("(everything else)", "", "", f"{rest:,}", share(rest))
    console.print(table)
    largest = report.get("largest_results", [])
    if largest:
        biggest = Table(title="largest tool results", title_justify="left", box=None)
        for col in ("message", "tool", "tokens"):
            biggest.add_column(col, justify="right" if col == "tokens" else "left")
        for row in largest:
            biggest.add_row(row["message"], row["tool"], f"{row['tokens']:,}")
        console.print(biggest)
