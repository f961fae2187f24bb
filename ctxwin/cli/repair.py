"""``ctxwin repair IN OUT``: the minimal provider-valid fix of what ``lint`` flags.

The library does the work (:func:`ctxwin.fitting.repairing.repair`); this module reads,
writes atomically (nothing is written when it fails) and reports every change:
one line each on stderr, or as JSON (``--json`` on stdout, ``--report PATH``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypedDict

import typer

from ctxwin.cli.funnel import say
from ctxwin.cli.options import AnyFormatOpt, MaxInputOpt
from ctxwin.cli.streams import DEFAULT_MAX_INPUT_BYTES, STDIO, read_input, write_output
from ctxwin.errors import UsageError

if TYPE_CHECKING:
    from ctxwin.fitting.repairing import Action


class ChangeRecord(TypedDict):
    """One change of ``repair --json``."""

    action: Action
    index: int
    where: str
    call_id: str | None
    message: str


class RepairReport(TypedDict):
    """The JSON report of ``ctxwin repair``."""

    format: str
    changed: bool
    messages_before: int
    messages_after: int
    changes: list[ChangeRecord]


def repair(
    input_: Annotated[
        str,
        typer.Argument(metavar="IN", help="Transcript JSON file ('-': stdin).", show_default=True),
    ] = STDIO,
    output: Annotated[
        str,
        typer.Argument(
            metavar="OUT",
            help="Where to write the repaired body ('-': stdout). Replaced atomically; "
            "nothing is written when the command fails.",
        ),
    ] = STDIO,
    fmt: AnyFormatOpt = "auto",
    json_: Annotated[
        bool,
        typer.Option(
            "--json", help="Print the JSON report of the changes on stdout (OUT must be a file)."
        ),
    ] = False,
    report_path: Annotated[
        Path | None, typer.Option("--report", help="Also write the JSON report to this file.")
    ] = None,
    max_input_bytes: MaxInputOpt = DEFAULT_MAX_INPUT_BYTES,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No lines on stderr.")] = False,
) -> None:
    """Fix what lint flags, minimally: remove orphan and duplicate results, move results
    next to their call, give a call without a result a stub result saying so.

    Each change is one line on stderr (or JSON with --json / --report). A transcript
    with nothing to fix is written back byte for byte; repairing the output again
    changes nothing. Exit 1, with one line saying why and nothing written, when the
    fix would need a guess (e.g. a call id made twice while the first awaits its result).
    """
    import orjson

    from ctxwin import codec
    from ctxwin.cli.commands import _looks_indented, check_format
    from ctxwin.errors import InputError
    from ctxwin.fitting.repairing import repair as repair_body

    check_format(fmt)
    if json_ and output == STDIO:
        raise UsageError("--json prints the report on stdout: give OUT as a file, or use --report")
    data = read_input(input_, max_input_bytes)
    body, done = repair_body(codec.parse(data), fmt)
    out = data
    if done.changed:
        out = codec.dumps(body, indent=_looks_indented(data), newline=data.endswith(b"\n"))
        big = codec.find_big_integer(data) if codec.may_hold_big_number(out) else None
        if big is not None:
            raise InputError(
                f"{big} is beyond 64 bits: it would be written back as a float, "
                "so this transcript cannot be repaired without changing it"
            )
    report: RepairReport = {
        "format": done.format,
        "changed": done.changed,
        "messages_before": done.messages_before,
        "messages_after": done.messages_after,
        "changes": [
            {
                "action": c.action,
                "index": c.index,
                "where": c.where,
                "call_id": c.call_id,
                "message": c.message,
            }
            for c in done.changes
        ],
    }
    rendered = orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    if report_path is not None:
        write_output(str(report_path), rendered)
    write_output(output, out)
    if json_:
        write_output(STDIO, rendered)
    if not quiet:
        for c in done.changes:
            say(f"repair: {c.where}: {c.message}")
        if done.changed:
            n = len(done.changes)
            say(
                f"repair: {n} change{'s' if n != 1 else ''}, "
                f"{done.messages_before:,} → {done.messages_after:,} messages"
            )
        else:
            say("repair: nothing to repair")
