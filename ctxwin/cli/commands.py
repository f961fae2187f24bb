"""What ``ctxwin estimate`` and ``ctxwin prune`` do, without the command-line framework.

The Typer app (:mod:`ctxwin.cli.app`) declares the commands, their flags and help,
and calls these functions. The console entry point (``ctxwin.cli.main``) calls
them directly when :mod:`ctxwin.cli.fastargs` can read the command line — a
plain ``estimate`` or ``prune`` call — so such a call never imports Typer or
Click, which would take longer to import than the work on a small transcript.

Each command returns its exit code; :func:`ctxwin.cli.funnel.exit_code_for`
turns an exception into one line on stderr and its code, for both paths.
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any

from ctxwin.cli.funnel import say
from ctxwin.cli.streams import STDIO, read_input, write_output, write_stdout
from ctxwin.errors import ExitCode, InputError, SpecError, UsageError, floor_words
from ctxwin.fitting.strategy import DEFAULT_BLOCK
from ctxwin.words import plural

if TYPE_CHECKING:
    from pathlib import Path
    from typing import NotRequired, TypedDict, Unpack

    from ctxwin.fitting.rows import Report
    from ctxwin.fitting.strategy import Strategy
    from ctxwin.settings import Settings

    # Declared for the checker only: a TypedDict class costs start-up time.
    class PlanOptions(TypedDict):
        """What ``estimate`` and ``prune`` share: where to read and how to estimate and budget."""

        input_: str
        model: str | None
        spec: Path | None
        context_length: int | None
        max_output_tokens: int | None
        max_tokens: int | None
        calibration: float | None
        fmt: str
        run_format: str
        estimator: str
        tokenizer: str | None
        max_input_bytes: int
        quiet: bool
        strategy: str
        keep_results: int
        exclude_tools: str
        clear_at_least: int
        block: float
        cache_mark: NotRequired[bool]


_kept: list[Any] | None = None


def keep_until_exit() -> None:
    """From now on, :func:`retain` keeps what it is given alive until the process ends
    (the entry point, :mod:`ctxwin.cli.main`, asks for it when it turns the collector
    off and ends the process without freeing)."""
    global _kept
    _kept = []


def retain(value: Any) -> None:
    """Called with each parsed body (and a replay's runs and reports): kept alive until
    the process ends after :func:`keep_until_exit`; otherwise nothing is done."""
    if _kept is not None:
        _kept.append(value)


def check_calibration(calibration: float | None) -> float | None:
    """``calibration``; refuses one that is not a finite number (``inf``, ``nan``)."""
    if calibration is not None and not math.isfinite(calibration):
        raise UsageError(f"expected a finite number, got {calibration!r}", setting="calibration")
    return calibration


def load_spec(path: Path | None) -> Any:
    if path is None:
        return None
    from ctxwin.codec import parse
    from ctxwin.errors import InputError

    try:
        return parse(read_input(str(path), 0))
    except InputError as exc:
        raise SpecError(f"--model-spec {exc}") from None


def make_strategy(
    strategy: str,
    keep_results: int,
    exclude_tools: str,
    clear_at_least: int,
    block: float = DEFAULT_BLOCK,
) -> Strategy:
    """The :class:`~ctxwin.fitting.strategy.Strategy` the flags name; :class:`UsageError` (exit 2)
    for an unknown, repeated or misplaced step."""
    from ctxwin.fitting.strategy import Strategy, parse_steps

    try:
        steps = parse_steps(strategy)
    except UsageError as exc:
        raise UsageError(str(exc), setting="strategy") from None
    tools = frozenset(t.strip() for t in exclude_tools.split(",") if t.strip())
    return Strategy(steps, keep_results, tools, clear_at_least, block)


def check_model(model: str | None, spec: Any, context_length: int | None) -> None:
    """Refuse (exit 2) a ``--model`` the model table does not know when nothing else gives
    a window (``--context-length``, ``--model-spec``): most likely a typo, which the
    fallback window would budget silently. Names the closest names the table has."""
    if model is None or spec is not None or context_length is not None:
        return
    from ctxwin.tokens.models import did_you_mean, lookup_model

    if lookup_model(model) is not None:
        return
    meant = did_you_mean(model)
    raise UsageError(
        f"unknown model {model!r}, not in the model table (`ctxwin models`)"
        + (f"; {meant}" if meant else "")
        + ". Pass --context-length or --model-spec to budget for it anyway.",
        setting="model",
    )


def check_format(fmt: str) -> str:
    """``fmt`` when it is ``auto`` or a wire format; :class:`UsageError` about ``fmt``
    (``--format``, exit 2) naming the choices."""
    from ctxwin import formats

    if fmt != formats.AUTO and fmt not in formats.names():
        raise UsageError(
            f"unknown format {fmt!r}; choose from: auto, {', '.join(formats.names())}",
            setting="fmt",
        )
    return fmt


def name_estimator(estimator: str, tokenizer: str | None) -> tuple[str, str | None]:
    """The ``estimator`` and ``tokenizer`` settings of the ``--estimator`` and
    ``--tokenizer`` flags, checked: ``--tokenizer ENCODING`` is the estimator
    ``tokenizer:ENCODING``; ``--tokenizer auto`` stays the ``tokenizer`` setting (it
    depends on the model), with ``--estimator`` used when the model's tokenizer
    cannot count.

    Raises :class:`UsageError` (exit 2) for an unknown estimator, or a tokenizer that
    cannot count here.
    """
    from ctxwin import tokens

    if tokenizer is not None and tokenizer != tokens.AUTO_TOKENIZER:
        estimator, tokenizer = f"tokenizer:{tokenizer}", None
    try:
        return tokens.check_estimator(estimator), tokenizer
    except ValueError as exc:
        raise UsageError(str(exc), setting="estimator") from None


def build_settings(
    *,
    spec: Path | None = None,
    fmt: str = "auto",
    calibration: float | None = None,
    estimator: str = "bound",
    tokenizer: str | None = None,
    strategy: str = "drop-turns",
    keep_results: int = 3,
    exclude_tools: str = "",
    clear_at_least: int = 0,
    block: float = DEFAULT_BLOCK,
    **fields: Any,
) -> Settings:
    """The :class:`~ctxwin.settings.Settings` the model, budget, estimation and strategy
    flags name (:data:`ctxwin.cli.flags.SHARED`), each given by its key: the field it
    sets. The others (``model``, ``context_length``, ...) are set as they come. The
    estimator is named, never built (:func:`name_estimator`), so the settings go to
    worker processes as they are.

    Raises :class:`UsageError` (exit 2) for a bad format, estimator or calibration, or a
    tokenizer that cannot count, or a bad ``--strategy``, and :class:`SpecError` for an
    unreadable ``--model-spec``.
    """
    from ctxwin.settings import Settings

    fields["strategy"] = make_strategy(strategy, keep_results, exclude_tools, clear_at_least, block)
    fields["spec"] = load_spec(spec)
    check_model(fields.get("model"), fields["spec"], fields.get("context_length"))
    fields["fmt"] = check_format(fmt)
    fields["calibration"] = check_calibration(calibration)
    fields["estimator"], fields["tokenizer"] = name_estimator(estimator, tokenizer)
    return Settings(**fields)


def _plan(
    *,
    input_: str,
    max_input_bytes: int,
    quiet: bool,
    run_format: str = "auto",
    lazy: bool = False,
    price_input: bool = True,
    **flags: Any,
) -> tuple[Any, bytes, Any]:
    """The plan of the input; the bytes read; the session run when the input is a
    session file (its next request is planned) or ``None``. With ``lazy``, a request
    body is priced exactly only where the fit needs it (:func:`ctxwin.core.plan_body`;
    ``price_input`` as there)."""
    from ctxwin import codec, core

    settings = build_settings(**flags)
    check_run_format(run_format)
    data = read_input(input_, max_input_bytes)
    if data.startswith(codec.BOM) and not quiet:
        say("warning: ignoring the UTF-8 byte order mark at the start of the input")
    body, session = read_body(data, run_format, input_)
    if session is not None:
        data = b""  # the session's next request is written, never the file: free it now
    # the paths check takes too: one estimated_tokens for one file
    if session is None:
        retain(body)
        plan = core.plan_body(body, settings, lazy=lazy, price_input=price_input)
    else:
        from ctxwin.runs.simulate import next_fit

        plan, manager = next_fit(session, settings)
        if manager is not None and manager.zero_reports and not quiet:
            from ctxwin.fitting.calibration import zero_report_words

            words = zero_report_words(manager.zero_reports, "of the session's")
            say(f"warning: {words}")
    transcript = plan.source
    if not quiet:
        from ctxwin.fitting.budget import spec_warnings

        for words in spec_warnings(plan.budget.spec):
            say(f"warning: {words}. Pass --context-length, --model or --model-spec.")
    if not plan.result.enforced:  # no prompt fits: exit 3, nothing written
        from ctxwin.errors import truncated

        raise truncated(plan.result, plan.budget)
    if not quiet:
        notes = session.warnings if session is not None else []
        for note in notes + transcript.view.notes + plan.result.warnings:
            say(f"warning: {note}")
        if plan.status == core.FITS:
            # Nothing is dropped, so fit did not check the rules: say what a provider may reject.
            _warn_problems(transcript.problems())
    return plan, data, session


def read_body(data: bytes, run_format: str = "auto", source: str = "") -> tuple[Any, Any]:
    """What ``data`` holds: ``(body, None)`` for a request body, ``(None, run)`` for an
    agent tool's session file (:mod:`ctxwin.sessions`), ``run`` being the conversation
    it continues (:func:`ctxwin.runs.simulate.current_run`). ``run_format`` names the session
    reader, or ``auto`` detects one. Raises :class:`InputError` for what is neither (JSON
    Lines that is no session is never called invalid JSON: :func:`cli_error` names
    ``source``, the file, where no reader recognises it)."""
    from ctxwin import codec

    try:
        if run_format != "auto":
            return None, _session_run(data, run_format, source=source)
        if codec.looks_like_jsonl(data):  # not one request body: a session, or an error below
            session = _session_run(data, "auto", source=source)
            if session is not None:
                return None, session
            raise InputError(
                "JSON Lines of request bodies or recorded calls, one a line, not one request "
                "body: `ctxwin replay` and `ctxwin check` read each line"
            )
    except InputError as exc:
        worded = cli_error(exc.message, source)
        if worded == exc.message:
            raise
        raise InputError(worded) from None
    body = codec.parse(data)
    if _may_be_session(body):
        session = _session_run(data, "auto", body, source)
        if session is not None:
            return None, session
    return body, None


def check_engine(engine: str, scheduler: str | None, jobs: int, *, quiet: bool) -> str:
    """``--engine`` read as one of :data:`ctxwin.runs.checking.ENGINES` (any case): exit 2
    for another, and for ``--scheduler`` without ``--engine dask``; a warning for ``--jobs``
    with it."""
    from ctxwin.runs.checking import ENGINES

    name = engine.lower()
    if name not in ENGINES:
        raise UsageError(f"{engine!r}: choose one of {', '.join(ENGINES)}", setting="engine")
    if scheduler is not None and name != "dask":
        raise UsageError("--scheduler needs --engine dask")
    if jobs and name == "dask" and not quiet:
        say("warning: --jobs is for --engine local; the Dask workers' threads do the work")
    return name


def check_run_format(run_format: str) -> None:
    """Refuse an unknown ``--run-format`` (exit 2)."""
    if run_format == "auto":  # the readers are imported only when a file needs them
        return
    from ctxwin import sessions

    if run_format != sessions.AUTO and run_format not in sessions.names():
        raise UsageError(
            f"--run-format: unknown run format {run_format!r}; choose from: auto, "
            f"{', '.join(sessions.names())}"
        )


_BODY_KEYS = frozenset(("input", "contents", "system", "tools"))
_TASK_KEYS = frozenset(("ts", "metrics", "modelInfo", "isSummary", "condenseParent"))
"""Fields Cline, Roo Code and Kilo Code add to the messages of a task's history."""
_SESSION_KEYS = frozenset(
    (
        "sessionId",
        "trajectory_format",
        "info",
        "spans",
        "resourceSpans",
        "attributes",
        "files_in_context",
    )
)


def _may_be_session(body: Any) -> bool:
    """Whether a parsed body could be a session file (cheap: no reader is imported
    for a plain request body)."""
    if isinstance(body, list):
        head = body[0] if body else None
        if not isinstance(head, dict):
            return False
        if "role" not in head or "parts" in head or not _TASK_KEYS.isdisjoint(head):
            return True
        content = head.get("content")  # a Cline task opens with <task>
        text = content if isinstance(content, str) else str(content)[:4096]
        return "<task>" in text or "<environment_details>" in text
    if isinstance(body, dict):
        return not (body.keys() & _BODY_KEYS) and bool(body.keys() & _SESSION_KEYS)
    return False


def cli_error(error: str, source: str = "") -> str:
    """A reading error as the command line words it: JSON Lines that no reader recognises
    (:data:`ctxwin.runs.UNKNOWN_RECORDS`) names the file (``source``, ``-`` for stdin) and
    ends with the flag that names a reader; any other error is returned as it is."""
    from ctxwin.runs import UNKNOWN_RECORDS

    if not error.startswith(UNKNOWN_RECORDS):
        return error
    name = "stdin" if source == STDIO else source
    return f"{name}: {error}; --run-format NAME" if name else f"{error}; --run-format NAME"


class PartOfSession(InputError):
    """The file only goes with the session file beside it (a Cline task folder's
    ``ui_messages.json``): it has no conversation of its own to read."""


def _session_run(data: bytes, run_format: str, body: Any = None, source: str = "") -> Any:
    """The run a session file continues (``None`` when ``data`` is not a session
    and no ``run_format`` was named); ``source`` is the file, whose folder holds the
    other files of a session kept in several (a Cline task folder)."""
    from ctxwin.runs import read_session
    from ctxwin.runs.simulate import current_run

    runs = read_session(data, run_format, body, source or None)
    if runs is None:
        return None
    if not runs:
        raise PartOfSession(
            "this file goes with the session file beside it (a Cline task folder's "
            "api_conversation_history.json): give that one"
        )
    run = current_run(runs)
    if run is None:
        raise InputError(runs[0].error or "no conversation in this session")
    return run


def _warn_problems(problems: list[Any]) -> None:
    from ctxwin.fitting.rules import summary

    if problems:
        say(f"warning: {summary(problems)}; passed through unchanged (see `ctxwin lint`)")


def truncated_message(report: Report) -> str:
    from ctxwin.cli.verdicts import HEADLINE
    from ctxwin.core import TRUNCATED

    return (
        f"{HEADLINE[TRUNCATED]}: {floor_words(report['estimated_tokens_after'], report['budget'])} "
        f"({report['context_length']:,} window − {report['reserve']:,} reserve − "
        f"{report['safety']:,} safety). Use a model with a larger window, a smaller "
        "--max-tokens, or a shorter system prompt or newest turn."
    )


BY = ("tool", "kind")
"""What ``estimate --by`` attributes the tokens to."""


def estimate_command(
    *,
    json_: bool,
    explain: bool = False,
    by: str | None = None,
    auto_compact_at: int | None = None,
    **options: Unpack[PlanOptions],
) -> int:
    """``ctxwin estimate``: print the report (``explain``: and where the tokens go; ``by``:
    and what fills the context, by tool or by kind); the exit code."""
    from ctxwin.cli.report import (
        pipe_width,
        plain_summary,
        render_by,
        render_explain,
        render_json,
        render_summary,
    )

    if by is not None and by.lower() not in BY:
        raise UsageError(f"{by!r}: choose one of {', '.join(BY)}", setting="by")
    plan, _, session = _plan(**options)
    report = plan.report()
    _add_session_keys(report, session, plan, auto_compact_at)
    if explain:
        from ctxwin.breakdown import explain as explain_plan

        report["explain"] = explain_plan(plan)
    if by is not None:
        from ctxwin.breakdown import attribute

        filled = attribute(plan)
        report["by_kind"] = filled["by_kind"]
        report["by_tool"] = filled["by_tool"]
        report["largest_results"] = filled["largest_results"]
    if json_:
        write_stdout(render_json(report))
    elif (
        not explain
        and by is None
        and (width := pipe_width())
        and (text := plain_summary(report, width))
    ):
        sys.stdout.write(text)  # what rich would print to this pipe, without importing it
    else:
        from rich.console import Console

        console = Console()
        render_summary(report, console)
        if explain:
            render_explain(report["explain"], console)
        if by is not None:
            render_by(report, by.lower(), console)
    if plan.result.overflow_at_floor:
        say(truncated_message(report))
        return int(ExitCode.CONTEXT_TRUNCATED)
    return 0


def prune_command(
    *,
    output: str,
    report_path: Path | None,
    auto_compact_at: int | None = None,
    **options: Unpack[PlanOptions],
) -> int:
    """``ctxwin prune``: write the fitted body to ``output``; the exit code."""
    from ctxwin.cli.report import render_json
    from ctxwin.core import NEEDS_PRUNING

    # the input's estimate is reported only in the report (and on stderr after a cut,
    # which prices it or says what it could not): without one, a body that fits is
    # priced no further than its cheap tier
    plan, data, session = _plan(**options, lazy=True, price_input=report_path is not None)
    result = plan.result
    report = plan.report()
    out = data
    _add_session_keys(report, session, plan, auto_compact_at)
    if session is not None:
        from ctxwin.codec import dumps

        out = dumps(plan.output(), indent=True, newline=True)  # the request, as a body
    elif plan.status == NEEDS_PRUNING or (plan.marked and not plan.result.overflow_at_floor):
        from ctxwin.codec import dumps, find_big_integer, may_hold_big_number
        from ctxwin.errors import InputError

        out = dumps(plan.output(), indent=_looks_indented(data), newline=data.endswith(b"\n"))
        big = find_big_integer(data) if may_hold_big_number(out) else None
        if big is not None:
            raise InputError(
                f"{big} is beyond 64 bits: it would be written back as a float, "
                "so this transcript cannot be pruned without changing it"
            )
    if report_path is not None:
        write_output(str(report_path), render_json(report))
    if result.overflow_at_floor:
        say(truncated_message(report))
        return int(ExitCode.CONTEXT_TRUNCATED)
    write_output(output, out)
    if plan.changed and not options["quiet"]:
        after = result.estimated_tokens_after
        if not result.priced:  # the dropped turns were never priced
            did = f"{_did(plan)}, ≥ {result.dropped_at_least:,} tokens"
            say(f"{did}: {after:,} tokens kept, budget {result.budget:,}")
        else:
            tokens = f"{result.estimated_tokens:,} → {after:,} tokens"
            say(f"{_did(plan)}: {tokens}, budget {result.budget:,}")
    return 0


def _add_session_keys(
    report: Report, session: Any, plan: Any, auto_compact_at: int | None = None
) -> None:
    """The extra report keys of a session file: which run, the overhead learned, and when
    its agent tool compacts it by itself (``auto_compact_at``: as the flag says, for any
    input)."""
    compact = None
    if auto_compact_at is not None:
        compact = (auto_compact_at, "flag")
    elif session is not None:
        from ctxwin.fitting.windows import auto_compact

        found = auto_compact(session.shape, plan.budget.spec)
        if found is not None:
            compact = (found.tokens, session.shape)
    if session is not None:
        report["session"] = {"run": session.name, "shape": session.shape}
        report["overhead"] = plan.result.overhead
    if compact is not None:
        report["auto_compact_at"], report["auto_compact_source"] = compact


def _did(plan: Any) -> str:
    """What fitting did, in words: ``cleared 4 tool results, dropped 2 turns (6 messages)``."""
    a = plan.applied
    r = plan.result
    done = []
    if a.cleared_results:
        done.append(f"cleared {plural(a.cleared_results, 'tool result')}")
    if a.cleared_thinking:
        done.append(f"cleared {plural(a.cleared_thinking, 'thinking block')}")
    if r.pruned:
        done.append(
            f"dropped {plural(r.dropped_turns, 'turn')} ({plural(len(r.dropped), 'message')})"
        )
    if a.truncated_results:
        done.append(f"cut {plural(a.truncated_results, 'tool result')}")
    return ", ".join(done)


def _looks_indented(data: bytes) -> bool:
    head = data[:259].removeprefix(b"\xef\xbb\xbf").lstrip()
    return head[:1] in (b"{", b"[") and head[1:2] == b"\n"
