"""``ctxwin lint``: every structural problem of one or more transcripts.

The rules are those of :mod:`ctxwin.rules` (generic pairing rules plus the
format's own), the very checks ``prune`` runs before it drops anything. A
file that cannot be read or is not a transcript is reported as one
``bad-input`` problem, and linting goes on with the next file.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, TypedDict

import typer

from ctxwin.cli.options import AnyFormatOpt, MaxInputOpt
from ctxwin.cli.streams import DEFAULT_MAX_INPUT_BYTES, STDIO, read_input, write_stdout
from ctxwin.errors import ExitCode, InputError, UsageError

BAD_INPUT_RULE = "bad-input"
"""Rule name of a file that cannot be read, parsed or recognized."""
BIG_INTEGER_RULE = "big-integer"
"""Rule name of an integer beyond 64 bits (``prune`` cannot write it back unchanged)."""


def expand(paths: list[str]) -> list[str]:
    """The files to lint: files and ``-`` as given, folders as their ``*.json`` files (sorted)."""
    files: list[str] = []
    for path in paths:
        if path != STDIO and Path(path).is_dir():
            files.extend(str(p) for p in sorted(Path(path).rglob("*.json")) if p.is_file())
        else:
            files.append(path)
    return files


class ProblemRecord(TypedDict):
    """One problem ``lint --json`` reports: where, which rule, and what is wrong."""

    index: int | None
    where: str | None
    rule: str
    message: str


class LintRecord(TypedDict):
    """One file's line of ``lint --json``: its format, message count and problems."""

    path: str
    format: str | None
    messages: int | None
    problems: list[ProblemRecord]


def lint_file(path: str, fmt: str, max_input_bytes: int) -> LintRecord:
    """The lint record of one file: path, format, message count and problems."""
    from ctxwin import codec, core

    record: LintRecord = {"path": path, "format": None, "messages": None, "problems": []}
    try:
        data = read_input(path, max_input_bytes)
        transcript = core.load(codec.parse(data), fmt)
    except UsageError:
        raise
    except InputError as exc:
        record["problems"].append(
            {"index": None, "where": exc.where, "rule": BAD_INPUT_RULE, "message": exc.message}
        )
        return record
    record["format"] = transcript.format
    record["messages"] = len(transcript.view.items)
    record["problems"] = [
        {"index": p.index, "where": p.where, "rule": p.rule, "message": p.message}
        for p in transcript.problems()
    ]
    big = codec.find_big_integer(data)
    if big is not None:
        record["problems"].append(
            {
                "index": None,
                "where": None,
                "rule": BIG_INTEGER_RULE,
                "message": f"{big} is beyond 64 bits (prune cannot write it back unchanged)",
            }
        )
    return record


def _render_table(records: list[LintRecord]) -> bytes:
    import io

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    many = len(records) > 1
    table = Table(box=None, pad_edge=False, header_style="bold")
    if many:
        table.add_column("file", overflow="fold")
    table.add_column("where", overflow="fold")
    table.add_column("rule", no_wrap=True)
    table.add_column("problem", overflow="fold")
    for record in records:
        for p in record["problems"]:
            cells = [Text(p["where"] or "(file)"), Text(p["rule"]), Text(p["message"])]
            if many:
                cells.insert(0, Text(record["path"]))
            table.add_row(*cells)
    # Render to text first, then write it like any data (all of it, or a clear error).
    buffer = io.StringIO()
    Console(file=buffer, width=Console().width).print(table)
    return buffer.getvalue().encode("utf-8")


def lint(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="PATH",
            help="Transcript files, folders (their *.json files, recursively) or '-' for "
            "stdin (the default).",
            show_default=False,
        ),
    ] = None,
    format_: AnyFormatOpt = "auto",
    json_: Annotated[
        bool, typer.Option("--json", help="Print the problems as JSON instead of a table.")
    ] = False,
    max_input_bytes: MaxInputOpt = DEFAULT_MAX_INPUT_BYTES,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary on stderr.")] = False,
) -> None:
    """List every structural problem of transcripts, by message and rule.

    Rules: orphan-result, duplicate-call-id, reused-call-id, duplicate-result, unanswered-call
    (a call with no result before the next turn), the format's own rules
    (e.g. Anthropic's call-answered-next), bad-input and big-integer. Exit 0
    when clean, 1 when any problem is found.
    """
    import orjson

    from ctxwin import formats

    if format_ != formats.AUTO and format_ not in formats.names():
        raise UsageError(
            f"--format: unknown format {format_!r}; choose from: auto, {', '.join(formats.names())}"
        )
    files = expand(paths or [STDIO])
    records = [lint_file(path, format_, max_input_bytes) for path in files]
    total = sum(len(r["problems"]) for r in records)
    if json_:
        payload = {"clean": total == 0, "problems": total, "files": records}
        write_stdout(orjson.dumps(payload, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
    elif total:
        write_stdout(_render_table(records))
    if not quiet:
        bad = sum(1 for r in records if r["problems"])
        noun = "file" if len(records) == 1 else "files"
        if total:
            summary = (
                f"{total} problem{'s' if total != 1 else ''} in {bad} of {len(records)} {noun}"
            )
        else:
            summary = f"no problems in {len(records)} {noun}"
        sys.stderr.write(f"ctxwin: lint: {summary}\n")
    if total:
        raise typer.Exit(int(ExitCode.BAD_INPUT))
