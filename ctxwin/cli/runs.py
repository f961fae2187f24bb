"""The recorded-run commands: ``replay``, ``check`` and ``calibrate``.

Registered on the ``ctxwin`` app by :func:`ctxwin.cli.app.make_app`. ``check`` and
``calibrate`` take the shared model, budget and estimation flags as one ``Settings``
(:func:`ctxwin.cli.options.with_settings`); ``replay`` passes them on as given to
:func:`ctxwin.cli.replay.replay`, which a plain command line reaches without Typer
(:mod:`ctxwin.cli.fastargs`). The work happens in :mod:`ctxwin.runs.simulate` and
:mod:`ctxwin.runs.checking`; this module parses flags, renders and picks the exit code.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer

from ctxwin.cli.commands import check_engine, check_run_format, cli_error
from ctxwin.cli.flags import ESTIMATION, STRATEGY
from ctxwin.cli.funnel import say as _say
from ctxwin.cli.options import (
    EngineOpt,
    JobsOpt,
    MaxInputOpt,
    QuietOpt,
    RunFormatOpt,
    SchedulerOpt,
    with_flags,
    with_settings,
)
from ctxwin.cli.replay import num, render_chart, render_replay
from ctxwin.cli.streams import DEFAULT_MAX_INPUT_BYTES, STDIO, read_input, write_stdout
from ctxwin.cli.verdicts import LABEL, STYLE
from ctxwin.core import STATUSES
from ctxwin.errors import NO_PROMPT_FITS, InputError, UsageError
from ctxwin.fitting.calibration import ZERO_REPORT, zero_report_words
from ctxwin.runs.checking import check_exit_code
from ctxwin.settings import DEFAULT, Settings
from ctxwin.words import plural

if TYPE_CHECKING:
    from rich.console import Console

    from ctxwin.fitting.rows import (
        CalibrationRow,
        CalibrationSummary,
        CheckRow,
        CheckSummary,
        RunOverhead,
    )


JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for machines instead of tables.")]


_num = num


# --- replay ------------------------------------------------------------------


@with_flags("replay")
def replay(
    run_files: Annotated[
        list[str],
        typer.Argument(
            metavar="RUN...",
            help="A recorded run (JSON or JSONL, any shape `check` reads; '-' reads stdin). "
            "Recorded calls (request/response pairs, per-call logs, cassettes) in the files "
            "and folders given are replayed as one run, in order.",
        ),
    ],
    compare: Annotated[
        list[str] | None,
        typer.Option(
            "--compare",
            metavar="POLICY",
            help="Replay the runs once per context policy, side by side (calls over the "
            "window, tokens sent, cache reads and writes, input and total cost): "
            "as-logged, just-fit, block=SHARE, anthropic-clear, anthropic-clear-thinking, "
            "auto-compact, anthropic-compact, openai-compact; NAME:KEY=VALUE,... sets "
            "parameters (docs/strategies.md). Repeat it or separate with commas.",
        ),
    ] = None,
    **flags: Any,
) -> None:
    """Simulate the agent loop over a recorded run, call by call.

    Each model message marks one provider call; the request at call k is
    everything before it. One manager sees the calls in order, learning
    calibration from the usage each recorded call reported. Shows per call
    the reported prompt tokens, the estimate, the budget, the calibration and
    the turns dropped, and names the first call that would be pruned or
    truncated, then what the run's prompts cost: the tokens a provider's
    prompt cache would read and write (the requests as fitted and sent, at
    the model's caching rules and the log's times), those the log reports
    (and where it shows calls reading less than one cache would), and the
    input cost at the model's prices. Exit 0 when every run survives (fits or is
    pruned), 3 when some call would be truncated, 1 when the run cannot be
    read.
    """
    from ctxwin.cli.replay import replay

    if compare:  # a plain command line (ctxwin.cli.fastargs) passes none
        flags["compare"] = compare
    code = replay(run_files=run_files, **flags)
    if code:
        raise typer.Exit(code)


_render_replay = render_replay
_render_chart = render_chart


# --- check -------------------------------------------------------------------


class FailOn(StrEnum):
    pruned = "pruned"
    truncated = "truncated"
    never = "never"


@with_settings(*ESTIMATION, *STRATEGY)
def check(
    paths: Annotated[
        list[str],
        typer.Argument(
            metavar="PATH...",
            help="Files, folders (recursive: *.json, *.jsonl, *.ndjson, *.traj) and globs; "
            "'-' reads stdin.",
        ),
    ],
    jobs: JobsOpt = 0,
    engine: EngineOpt = "local",
    scheduler: SchedulerOpt = None,
    fail_on: Annotated[
        FailOn,
        typer.Option(
            "--fail-on",
            help="Which verdict fails: 'pruned' (exit 4, or 3 when any would truncate), "
            "'truncated' (exit 3 only), 'never' (exit 0 unless some input is invalid).",
            case_sensitive=False,
        ),
    ] = FailOn.pruned,
    settings: Settings = DEFAULT,
    run_format: RunFormatOpt = "auto",
    json_: Annotated[
        bool, typer.Option("--json", help="Print {summary, rows} as one JSON document.")
    ] = False,
    jsonl: Annotated[bool, typer.Option("--jsonl", help="Print one JSON row per line.")] = False,
    worst: Annotated[
        int, typer.Option("--worst", min=0, help="How many worst offenders the summary lists.")
    ] = 10,
    max_input_bytes: MaxInputOpt = DEFAULT_MAX_INPUT_BYTES,
    quiet: QuietOpt = False,
) -> None:
    """Check recorded transcripts against the model spec, in parallel.

    Reads JSON or JSONL (one request body or run per line) in every shape
    `replay` reads. Each transcript fits, needs pruning, would be truncated,
    has no budget (the window is at most reserve + safety), or is invalid (one
    row with its error; never a traceback). Exit 0 when all fit; 4 when some
    need pruning and none would truncate; 3 when any would truncate or has no
    budget; 1 when any is invalid. --fail-on chooses which verdict fails, except
    that no budget exits 3 under every --fail-on.
    """
    from ctxwin.runs.checking import check_files, default_jobs, find_files, summarize

    if json_ and jsonl:
        raise UsageError("--json and --jsonl: choose one")
    engine = check_engine(engine, scheduler, jobs, quiet=quiet)
    check_run_format(run_format)
    stdin_rows: list[CheckRow] = []
    if STDIO in paths:
        from ctxwin.runs.checking import check_bytes

        stdin_rows = check_bytes(read_input(STDIO, max_input_bytes), STDIO, settings, run_format)
        paths = [p for p in paths if p != STDIO]
    found = find_files(paths)
    if not (found.files or found.missing or found.unreadable or stdin_rows):
        raise InputError("no files to check: the folders hold no .json, .jsonl or .traj files")
    workers = jobs or default_jobs()
    label = f"checking ({workers} workers)" if engine == "local" else "checking on Dask"

    def run(advance: Callable[[int], None] | None = None) -> list[CheckRow]:
        checked = check_files(
            found,
            settings,
            engine=engine,
            scheduler=scheduler,
            jobs=workers,
            max_bytes=max_input_bytes,
            on_file_done=advance,
            run_format=run_format,
        )
        return checked.rows  # file order, then run order within a file

    show_progress = not quiet and sys.stderr.isatty() and len(found.files) > 1
    if show_progress:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        # Refreshed by hand: no refresh thread may run when worker processes are forked.
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
            auto_refresh=False,
        ) as progress:
            task = progress.add_task(label, total=len(found.files))

            def advance(n: int) -> None:
                progress.advance(task, n)
                progress.refresh()

            rows = run(advance)
    else:
        rows = run()
    rows = stdin_rows + rows
    for r in rows:  # a file no reader recognises: the flag that names a reader
        if r.get("error"):
            r["error"] = cli_error(r["error"] or "")
    summary = summarize(rows, found, worst)
    if not quiet:
        for r in rows:
            for warning in r.get("warnings") or ():
                _say(f"warning: {r['path']}: {warning}")
    if summary["not_enforced"]:  # an error line: printed under --quiet too
        n = summary["not_enforced"]
        _say(
            f"no budget: {plural(n, 'transcript')} {'has' if n == 1 else 'have'} a budget "
            f"that is not positive ({NO_PROMPT_FITS}); pass a larger --context-length or a "
            "smaller --max-tokens"
        )
    if jsonl:
        write_stdout(b"".join(orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE) for r in rows))
    elif json_:
        payload = {"summary": summary, "rows": rows}
        write_stdout(orjson.dumps(payload, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
    else:
        from rich.console import Console

        _render_check(summary, Console())
    raise typer.Exit(int(check_exit_code(summary["counts"], fail_on.value)))


def _render_check(summary: CheckSummary, console: Console) -> None:
    from rich.table import Table
    from rich.text import Text

    counts = summary["counts"]
    total = summary["transcripts"] or 1
    listed = [r["path"] for r in summary["worst"] + summary["invalid"]]
    base = os.path.commonpath(listed) if len(listed) > 1 else ""
    if base and not os.path.isdir(base):
        base = os.path.dirname(base)

    def short(path: str) -> Text:
        return Text(os.path.relpath(path, base) if base else path)

    table = Table(
        title=Text(
            f"{plural(summary['transcripts'], 'transcript')} in {plural(summary['files'], 'file')}"
        )
    )
    table.add_column("verdict")
    table.add_column("count", justify="right")
    table.add_column("share", justify="right")
    for status in STATUSES:
        n = counts[status]
        table.add_row(Text(LABEL[status], style=STYLE[status]), f"{n:,}", f"{100 * n / total:.1f}%")
    console.print(table)
    if base:
        console.print(Text(f"files below {base}", style="dim"))
    if summary["worst"]:
        w = Table(title=Text("worst offenders (estimate over budget)"), title_justify="left")
        for col in ("file", "run", "estimate", "budget", "over by", "verdict"):
            w.add_column(col, justify="left" if col in ("file", "run", "verdict") else "right")
        for r in summary["worst"]:
            w.add_row(
                short(r["path"]),
                Text(r["run"] or ""),
                _num(r["estimated_tokens"]),
                _num(r["budget"]),
                _num(r["over_by"]),
                Text(LABEL[r["status"]], style=STYLE[r["status"]]),
            )
        console.print(w)
    if summary["invalid"]:
        bad = Table(title=Text("invalid"), title_justify="left")
        bad.add_column("file")
        bad.add_column("run")
        bad.add_column("error")
        first: dict[str, str] = {}  # an error several files share is written once
        for entry in summary["invalid"]:
            error = entry["error"] or ""
            said = Text(error)
            if error and error in first:
                said = Text(f"the error of {first[error]}", style="dim")
            first.setdefault(error, str(short(entry["path"])))
            bad.add_row(short(entry["path"]), Text(entry["run"] or ""), said)
        console.print(bad)
    if summary["skipped_files"]:
        console.print(
            Text(
                f"{plural(summary['skipped_files'], 'file')} in folders skipped "
                "(not .json, .jsonl, .ndjson or .traj)",
                style="dim",
            )
        )


# --- calibrate ---------------------------------------------------------------


@with_settings(*ESTIMATION)
def calibrate(
    logs: Annotated[
        list[str],
        typer.Argument(
            metavar="LOG...",
            help="Recorded request/usage pairs: files, folders and globs "
            '(JSONL of {"request", "response"}, cassettes, per-call logs, eval output, '
            "session files); '-' reads stdin.",
        ),
    ],
    settings: Settings = DEFAULT,
    run_format: RunFormatOpt = "auto",
    json_: JsonOpt = False,
    max_input_bytes: MaxInputOpt = DEFAULT_MAX_INPUT_BYTES,
    quiet: QuietOpt = False,
) -> None:
    """Compare estimates with the prompt tokens providers reported.

    For every recorded call with usage: estimate ÷ reported. Then the
    calibration factor that would have made every estimate safe (≥ reported),
    and the waste at that factor. Exit 1 when no call has usable usage.
    """
    from ctxwin.runs import read_runs
    from ctxwin.runs.calibrating import calibration_rows, calibration_summary, overhead_fits
    from ctxwin.runs.checking import find_files

    check_run_format(run_format)
    found = find_files([arg for arg in logs if arg != STDIO])
    if not quiet:
        for arg in found.missing:
            _say(f"warning: {arg}: no such file, folder or match")
        for arg, error in found.unreadable:
            _say(f"warning: {arg}: {error}")
    rows: list[CalibrationRow] = []
    for path in [STDIO] * (STDIO in logs) + found.files:
        try:
            data = read_input(path, max_input_bytes)
        except InputError as exc:
            rows.append({"path": path, "error": str(exc)})
            continue
        for run in read_runs(data, run_format, path):
            rows.extend({"path": path, **row} for row in calibration_rows(run, settings))
    usable = [r for r in rows if "raw_tokens" in r]
    zero = [r for r in rows if r.get("error") == ZERO_REPORT]
    if not quiet:
        if zero:
            first = zero[0]
            _say(
                f"warning: {zero_report_words(len(zero))} (first: {first['path']} "
                f"{first.get('where', '')})"
            )
        from ctxwin.tokens.models import did_you_mean, lookup_model

        for model in sorted({m for r in usable if (m := r.get("model"))}):
            if lookup_model(model) is None:
                meant = did_you_mean(model)
                _say(
                    f"warning: model {model!r} is not in the model table: its calls are "
                    "estimated at the default seed" + (f"; {meant}" if meant else "")
                )
        skipped = [r for r in rows if "error" in r and r.get("error") != ZERO_REPORT]
        if skipped:
            _say(
                f"warning: {len(skipped)} calls or files skipped (first: "
                f"{skipped[0]['path']} {skipped[0].get('where', '')}: "
                f"{cli_error(skipped[0]['error'])})"
            )
    if not usable:
        why = f" ({len(zero):,} reported 0 prompt tokens)" if zero else ""
        raise InputError(f"no recorded calls with usable usage (prompt token counts) found{why}")
    summary = calibration_summary(rows)
    models: dict[str, list[CalibrationRow]] = {}
    for r in usable:
        if "shape" not in r:  # a session's calls: its line, in by_run
            models.setdefault(r["model"] or "(unknown)", []).append(r)
    by_model = {m: calibration_summary(rs) for m, rs in sorted(models.items())}
    by_run = overhead_fits(rows)
    for fit in by_run:
        fit.pop("ratios", None)
    if json_:
        payload = {"summary": summary, "by_model": by_model, "by_run": by_run, "rows": rows}
        write_stdout(orjson.dumps(payload, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
        return
    from rich.console import Console

    console = Console()
    plain = [r for r in usable if "shape" not in r]
    if plain:
        _render_calibrate(plain, summary, by_model, console)
    lines = summary.get("sessions")
    if lines and lines["median_ratio"] is not None:
        console.print(
            f"sessions: {lines['calls']:,} calls in {lines['runs']:,} runs, each fitted with "
            f"overhead + factor × raw: median prediction ÷ reported "
            f"{lines['median_ratio']:.3f}, waste {lines['waste_percent']:.1f}%",
            soft_wrap=True,
        )
    _render_overheads(by_run, console)


def _render_calibrate(
    rows: list[CalibrationRow],
    summary: CalibrationSummary,
    by_model: dict[str, CalibrationSummary],
    console: Console,
) -> None:
    from rich.table import Table
    from rich.text import Text

    calls = Table(title=Text("estimate ÷ reported per call"), title_justify="left")
    for col in ("file", "call", "model", "reported", "estimate", "ratio", "needs"):
        calls.add_column(col, justify="left" if col in ("file", "model") else "right")
    for r in rows:
        ratio = r["ratio"]
        calls.add_row(
            Text(Path(r["path"]).name + (f" {r['run']}" if r.get("run") else "")),
            str(r["call"]),
            Text(r["model"] or ""),
            _num(r["reported_tokens"]),
            _num(r["estimated_tokens"]),
            Text(_num(ratio), style="red" if ratio is not None and ratio < 1 else "green"),
            _num(r["needed"]),
        )
    console.print(calls)
    title = "safe calibration (every estimate ≥ reported; needed: the largest reported ÷ raw)"
    table = Table(title=Text(title), title_justify="left")
    for col in ("model", "calls", "under at seed", "ratio range", "needed", "safe factor", "waste"):
        table.add_column(col, justify="left" if col == "model" else "right")

    def add(name: str, s: CalibrationSummary) -> None:
        table.add_row(
            Text(name),
            f"{s['calls']:,}",
            f"{s['under_estimates_at_seed']:,}",
            f"{s['ratio_min']:.2f}–{s['ratio_max']:.2f}",
            f"{s['needed_max']:.4f}",
            f"{s['safe_calibration']:.4f}",
            f"{s['waste_percent']:.1f}% (max {s['waste_percent_max']:.1f}%)",
        )

    for name, s in by_model.items():
        add(name, s)
    add("all", summary)
    console.print(table)


def _render_overheads(fits: list[RunOverhead], console: Console) -> None:
    """The ``reported ≈ overhead + factor × raw`` line fitted per run and model."""
    from rich.table import Table
    from rich.text import Text

    title = "overhead + factor × raw per run and model (the safe line with the least waste)"
    table = Table(title=Text(title), title_justify="left")
    for col in ("file", "run", "model", "calls", "overhead", "factor", "median", "waste"):
        table.add_column(col, justify="left" if col in ("file", "run", "model") else "right")
    for f in fits:
        if not f["calls"]:
            continue
        table.add_row(
            Text(Path(f["path"]).name),
            Text(f["run"]),
            Text(f["model"] or ""),
            f"{f['calls']:,}",
            f"{f['overhead']:,}",
            f"{f['factor']:.3f}",
            f"{f['median_ratio']:.3f}",
            f"{f['waste_percent']:.1f}%",
        )
    console.print(table)
