"""``ctxwin lint``: every structural problem of one or more transcripts.

The rules are those of :mod:`ctxwin.fitting.rules` (generic pairing rules plus the
format's own), the very checks ``prune`` runs before it drops anything. A
file that cannot be read or is not a transcript is reported as one
``bad-input`` problem, and linting goes on with the next file.

Lint reads what ``estimate`` and ``prune`` read, detected the same way
(:func:`ctxwin.cli.commands.read_body`): a request body, or an agent tool's
session file, of which it lints the request the session would send next — the
body ``prune`` fits and writes — so the places it names are in that request.
Folders and globs are expanded as ``check`` expands them
(:func:`ctxwin.runs.checking.find_files`); one that holds nothing to read is an error.
"""

from __future__ import annotations

import sys
from typing import Annotated, NotRequired, TypedDict

import typer

from ctxwin.cli.options import AnyFormatOpt, MaxInputOpt, RunFormatOpt
from ctxwin.cli.streams import DEFAULT_MAX_INPUT_BYTES, STDIO, read_input, write_stdout
from ctxwin.errors import ExitCode, InputError, UsageError

BAD_INPUT_RULE = "bad-input"
"""Rule name of a file that cannot be read, parsed or recognized."""
BIG_INTEGER_RULE = "big-integer"
"""Rule name of an integer beyond 64 bits (``prune`` cannot write it back unchanged)."""


def expand(paths: list[str]) -> list[str]:
    """The files to lint, in order: ``-`` and files as given (a missing one too: it is
    reported), folders and globs as ``check`` expands them (their ``.json``, ``.jsonl``,
    ``.ndjson`` and ``.traj`` files, recursively, sorted). A folder or glob that names
    no such file raises :class:`InputError`."""
    from ctxwin.runs.checking import SUFFIXES, find_files

    files: list[str] = []
    for path in paths:
        if path == STDIO:
            files.append(path)
            continue
        found = find_files([path])
        if found.unreadable:
            raise InputError(f"{path}: {found.unreadable[0][1]}")
        if found.files:
            files.extend(found.files)
        elif found.skipped or path not in found.missing:
            kinds = ", ".join(SUFFIXES)
            raise InputError(f"{path}: nothing to lint: no {kinds} file in it")
        elif any(c in path for c in "*?["):
            raise InputError(f"{path}: nothing to lint: no file matches")
        else:
            files.append(path)  # missing: read_input names it
    return files


class ProblemRecord(TypedDict):
    """One problem ``lint --json`` reports: where, which rule, and what is wrong."""

    index: int | None
    where: str | None
    rule: str
    message: str


class SessionRecord(TypedDict):
    """The conversation of a session file whose next request was linted."""

    run: str
    shape: str


class LintRecord(TypedDict):
    """One file's line of ``lint --json``: its format, message count and problems."""

    path: str
    format: str | None
    messages: int | None
    problems: list[ProblemRecord]
    session: NotRequired[SessionRecord]
    """Only for a session file: which conversation's next request was linted."""


def lint_file(path: str, fmt: str, max_input_bytes: int, run_format: str = "auto") -> LintRecord:
    """The lint record of one file: path, format, message count and problems (of the
    request a session file would send next, for a session file)."""
    from ctxwin import codec, core
    from ctxwin.cli.commands import PartOfSession, read_body

    record: LintRecord = {"path": path, "format": None, "messages": None, "problems": []}
    try:
        data = read_input(path, max_input_bytes)
        body, session = read_body(data, run_format, path)
        if session is not None:
            record["session"] = {"run": session.name, "shape": session.shape}
            data = b""  # the next request is linted, not the file's bytes
            transcript = core.load(session.next_request(), session.format_for(fmt))
        else:
            transcript = core.load(body, fmt)
    except UsageError:
        raise
    except PartOfSession:
        return record  # linted with the session file it goes with
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
    big = codec.find_big_integer(data) if data else None
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
            help="Transcript or session files, folders (their .json, .jsonl, .ndjson and "
            ".traj files, recursively), globs, or '-' for stdin (the default).",
            show_default=False,
        ),
    ] = None,
    fmt: AnyFormatOpt = "auto",
    run_format: RunFormatOpt = "auto",
    json_: Annotated[
        bool, typer.Option("--json", help="Print the problems as JSON instead of a table.")
    ] = False,
    max_input_bytes: MaxInputOpt = DEFAULT_MAX_INPUT_BYTES,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary on stderr.")] = False,
) -> None:
    """List every structural problem of transcripts, by message and rule.

    Rules: orphan-result, duplicate-call-id, reused-call-id, duplicate-result, unanswered-call
    (a call with no result before the next turn), the format's own rules
    (e.g. Anthropic's call-answered-next), bad-input and big-integer. A session file
    (Claude Code, Codex CLI, Gemini CLI, OpenHands, mini-swe-agent, OTel) is linted as
    the request it would send next, the body prune writes. Exit 0 when clean, 1 when
    any problem is found or a folder or glob holds nothing to lint.
    """
    import orjson

    from ctxwin.cli.commands import check_format, check_run_format

    check_format(fmt)
    check_run_format(run_format)
    files = expand(paths or [STDIO])
    records = [lint_file(path, fmt, max_input_bytes, run_format) for path in files]
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
            if all(r["format"] is None for r in records):
                summary += "; none could be read as a transcript or session file"
        else:
            summary = f"no problems in {len(records)} {noun}"
        sys.stderr.write(f"ctxwin: lint: {summary}\n")
    if total:
        raise typer.Exit(int(ExitCode.BAD_INPUT))
