"""The ``ctxwin`` command: parse flags, read, call the core, render, exit.

Only this module (and ``__main__``) knows about processes: it maps every
:class:`~ctxwin.errors.CtxwinError` to one line on stderr and its exit code.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from ctxwin import __version__
from ctxwin._io import DEFAULT_MAX_INPUT_BYTES, STDIO, read_input, write_output, write_stdout
from ctxwin.errors import CtxwinError, ExitCode, SpecError, UsageError

EXIT_CODES_HELP = (
    "Exit codes: 0 ok; 1 bad input (unreadable, invalid JSON, wrong shape, unsafe pairing, "
    "write failure); 2 usage error; 3 context truncated (even the head plus the newest turn "
    "exceed the budget); 4 needs pruning (check only)."
)

app = typer.Typer(
    name="ctxwin",
    help=(
        "Keep LLM agent transcripts inside the model's context window.\n\n"
        "Estimate a request's tokens, derive the budget (context length − reserve − safety) "
        "and drop the oldest whole tool-call turns until it fits, never splitting a call from "
        "its results.\n\n" + EXIT_CODES_HELP
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_state = {"debug": False}

F = TypeVar("F", bound=Callable[..., Any])

MODEL_PANEL = "Model and budget"
EST_PANEL = "Estimation"

InputArg = Annotated[
    str,
    typer.Argument(
        metavar="IN",
        help="Transcript JSON file: a request body or a bare messages array. '-' reads stdin.",
        show_default=True,
    ),
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="Model to budget for, looked up in the built-in table "
        "(default: the body's 'model'). See `ctxwin models`.",
        rich_help_panel=MODEL_PANEL,
    ),
]
SpecOpt = Annotated[
    Path | None,
    typer.Option(
        "--model-spec",
        help="JSON file with context_length and max_output_tokens "
        "(LiteLLM's max_input_tokens/max_tokens/max_output_tokens also work, "
        "as does a whole LiteLLM model map).",
        rich_help_panel=MODEL_PANEL,
        dir_okay=False,
    ),
]
ContextOpt = Annotated[
    int | None,
    typer.Option(
        "--context-length",
        "-c",
        min=1,
        help="Context window in tokens (overrides spec file and table).",
        rich_help_panel=MODEL_PANEL,
    ),
]
MaxOutputOpt = Annotated[
    int | None,
    typer.Option(
        "--max-output-tokens",
        min=1,
        help="The model's output cap in tokens (used as the reserve when the body sets none).",
        rich_help_panel=MODEL_PANEL,
    ),
]
MaxTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--max-tokens",
        min=0,
        help="Tokens to reserve for the response (overrides the body's max_tokens).",
        rich_help_panel=MODEL_PANEL,
    ),
]
CalibrationOpt = Annotated[
    float | None,
    typer.Option(
        "--calibration",
        min=0.0,
        help="Factor the raw estimate is scaled by (values below 1 count as 1). "
        "Default: 1.15 for --estimator seed; 1.0 for content, or its model family's "
        "measured seed (Claude 1.35, Llama 4 1.3, DeepSeek 1.2); 1.0 with --tokenizer.",
        show_default=False,
        rich_help_panel=EST_PANEL,
    ),
]
FormatOpt = Annotated[
    str,
    typer.Option(
        "--format",
        "-f",
        help="Wire format of the input: auto (detect by shape), anthropic, openai-responses, "
        "gemini or openai-chat.",
        rich_help_panel=EST_PANEL,
    ),
]
EstimatorOpt = Annotated[
    str,
    typer.Option(
        "--estimator",
        help="Estimator: 'content' (default) costs each byte by its class (digits, "
        "upper-case, punctuation, non-ASCII) and bounds o200k, cl100k, Llama 3 and Qwen 3 "
        "from above; 'seed' is the chars/N formula (prose ÷ 3.5, dense ÷ 2.5).",
        rich_help_panel=EST_PANEL,
    ),
]
TokenizerOpt = Annotated[
    str | None,
    typer.Option(
        "--tokenizer",
        help="Count exactly with this BPE encoding (o200k_base, cl100k_base, llama3, qwen3) "
        "plus chat framing, instead of --estimator. Needs: pip install 'ctxwin\\[bpe]' "
        "(exit 2 when it is missing).",
        rich_help_panel=EST_PANEL,
    ),
]
MaxInputOpt = Annotated[
    int,
    typer.Option(
        "--max-input-bytes",
        min=0,
        help="Refuse inputs larger than this many bytes (0: no limit).",
    ),
]
QuietOpt = Annotated[
    bool,
    typer.Option("--quiet", "-q", help="No info lines or warnings on stderr."),
]


def _say(message: str) -> None:
    sys.stderr.write(f"ctxwin: {message}\n")
    sys.stderr.flush()


def _fail(exc: CtxwinError) -> NoReturn:
    _say(f"{'usage error' if isinstance(exc, UsageError) else 'error'}: {exc}")
    raise typer.Exit(int(exc.exit_code))


def _guard(fn: F) -> F:
    """Turn ctxwin errors into one stderr line and their exit code."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except BrokenPipeError:  # stdout closed by the reader (e.g. `| head`)
            if _state["debug"]:
                raise
            _quiet_stdout()
            _say("error: output closed before all data was written (broken pipe)")
            raise typer.Exit(int(ExitCode.BAD_INPUT)) from None
        except CtxwinError as exc:
            if _state["debug"]:
                raise
            _fail(exc)
        except MemoryError:
            if _state["debug"]:
                raise
            _say("error: out of memory (try a smaller input)")
            raise typer.Exit(int(ExitCode.BAD_INPUT)) from None
        except RecursionError:
            if _state["debug"]:
                raise
            _say("error: input nested too deeply")
            raise typer.Exit(int(ExitCode.BAD_INPUT)) from None
        except Exception as exc:  # a bug: still one line, unless --debug
            if _state["debug"]:
                raise
            _say(
                f"internal error: {type(exc).__name__}: {exc} "
                "(run with --debug for a traceback, and please report it)"
            )
            raise typer.Exit(int(ExitCode.BAD_INPUT)) from None

    return wrapper  # type: ignore[return-value]


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    import contextlib
    import os

    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"ctxwin {__version__}\n")
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show a traceback instead of a one-line error.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """Keep LLM agent transcripts inside the model's context window."""
    _state["debug"] = debug


def _load_spec(path: Path | None) -> Any:
    if path is None:
        return None
    from ctxwin.core import parse
    from ctxwin.errors import InputError

    try:
        return parse(read_input(str(path), 0))
    except InputError as exc:
        raise SpecError(f"--model-spec {exc}") from None


def _plan(
    input_: str,
    *,
    model: str | None,
    model_spec: Path | None,
    context_length: int | None,
    max_output_tokens: int | None,
    max_tokens: int | None,
    calibration: float | None,
    format_: str,
    estimator: str,
    max_input_bytes: int,
    quiet: bool,
    tokenizer: str | None = None,
) -> tuple[Any, bytes]:
    from ctxwin import core, estimate, formats

    if format_ != formats.AUTO and format_ not in formats.names():
        raise UsageError(
            f"--format: unknown format {format_!r}; choose from: auto, {', '.join(formats.names())}"
        )
    if tokenizer is not None:
        est: estimate.Estimator = estimate.TokenizerEstimator(tokenizer)
        if calibration is None:
            calibration = 1.0
    else:
        try:
            est = estimate.get_estimator(estimator)
        except ValueError as exc:
            raise UsageError(f"--estimator: {exc}") from None
    spec = _load_spec(model_spec)
    data = read_input(input_, max_input_bytes)
    if data.startswith(core.BOM) and not quiet:
        _say("warning: ignoring the UTF-8 byte order mark at the start of the input")
    # A parsed body is millions of acyclic objects that live until exit: the cyclic
    # collector would re-scan them on every allocation burst, up to half the run time
    # on large inputs, and find nothing. This one-shot process does without it.
    gc.disable()
    body = core.parse(data)
    _KEEP_UNTIL_EXIT.append(body)
    transcript = core.load(body, format_, est)
    plan = core.plan(
        transcript,
        model=model,
        context_length=context_length,
        max_output_tokens=max_output_tokens,
        max_tokens=max_tokens,
        spec=spec,
        calibration=calibration,
    )
    if not quiet:
        s = plan.budget.spec
        if s.context_length_source == "fallback":
            named = f"model {s.name!r}" if s.name else "no model named"
            _say(
                f"warning: unknown context length ({named}); assuming {s.context_length:,} "
                "tokens. Pass --context-length, --model or --model-spec."
            )
        for note in transcript.view.notes + plan.result.warnings:
            _say(f"warning: {note}")
        if not plan.result.pruned and not plan.result.overflow_at_floor:
            # Nothing is dropped, so fit did not check the rules: say what a provider may reject.
            _warn_problems(transcript.problems())
    return plan, data


def _warn_problems(problems: list[Any]) -> None:
    from ctxwin.rules import summary

    if problems:
        _say(f"warning: {summary(problems)}; passed through unchanged (see `ctxwin lint`)")


def _truncated_message(report: dict[str, Any]) -> str:
    return (
        f"context truncated: even the head plus the newest turn need "
        f"{report['estimated_tokens_after']:,} tokens, over the budget of {report['budget']:,} "
        f"({report['context_length']:,} window − {report['reserve']:,} reserve − "
        f"{report['safety']:,} safety). Use a model with a larger window, a smaller "
        "--max-tokens, or a shorter system prompt or newest turn."
    )


@_guard
def estimate(
    input_: InputArg = STDIO,
    model: ModelOpt = None,
    model_spec: SpecOpt = None,
    context_length: ContextOpt = None,
    max_output_tokens: MaxOutputOpt = None,
    max_tokens: MaxTokensOpt = None,
    calibration: CalibrationOpt = None,
    format_: FormatOpt = "auto",
    estimator: EstimatorOpt = "content",
    tokenizer: TokenizerOpt = None,
    json_: Annotated[
        bool, typer.Option("--json", help="Print the JSON report instead of a summary.")
    ] = False,
    max_input_bytes: MaxInputOpt = DEFAULT_MAX_INPUT_BYTES,
    quiet: QuietOpt = False,
) -> None:
    """Estimate a transcript's tokens and budget, and say what pruning would do (dry run).

    Exit 0 whether or not pruning is needed; 3 when even the floor (head plus
    newest turn) exceeds the budget.
    """
    from ctxwin.report import build_report, render_json, render_summary

    plan, _ = _plan(
        input_,
        model=model,
        model_spec=model_spec,
        context_length=context_length,
        max_output_tokens=max_output_tokens,
        max_tokens=max_tokens,
        calibration=calibration,
        format_=format_,
        estimator=estimator,
        max_input_bytes=max_input_bytes,
        quiet=quiet,
        tokenizer=tokenizer,
    )
    report = build_report(plan)
    if json_:
        write_stdout(render_json(report))
    else:
        from rich.console import Console

        render_summary(report, Console())
    if plan.result.overflow_at_floor:
        _say(_truncated_message(report))
        raise typer.Exit(int(ExitCode.CONTEXT_TRUNCATED))


@_guard
def prune(
    input_: InputArg = STDIO,
    output: Annotated[
        str,
        typer.Argument(
            metavar="OUT",
            help="Where to write the pruned body ('-': stdout). Replaced atomically; "
            "nothing is written when the command fails.",
        ),
    ] = STDIO,
    model: ModelOpt = None,
    model_spec: SpecOpt = None,
    context_length: ContextOpt = None,
    max_output_tokens: MaxOutputOpt = None,
    max_tokens: MaxTokensOpt = None,
    calibration: CalibrationOpt = None,
    format_: FormatOpt = "auto",
    estimator: EstimatorOpt = "content",
    tokenizer: TokenizerOpt = None,
    report_path: Annotated[
        Path | None,
        typer.Option("--report", help="Also write the JSON report to this file.", dir_okay=False),
    ] = None,
    max_input_bytes: MaxInputOpt = DEFAULT_MAX_INPUT_BYTES,
    quiet: QuietOpt = False,
) -> None:
    """Drop the oldest whole turns until the transcript fits, and write it to OUT.

    The output has the input's shape; kept messages are byte-for-byte the
    same JSON values, and a transcript that fits is written back unchanged.
    Exit 3 (and nothing written to OUT) when even the floor does not fit.
    """
    from ctxwin.report import build_report, render_json

    plan, data = _plan(
        input_,
        model=model,
        model_spec=model_spec,
        context_length=context_length,
        max_output_tokens=max_output_tokens,
        max_tokens=max_tokens,
        calibration=calibration,
        format_=format_,
        estimator=estimator,
        max_input_bytes=max_input_bytes,
        quiet=quiet,
        tokenizer=tokenizer,
    )
    result = plan.result
    report = build_report(plan)
    out = data
    if result.pruned and not result.overflow_at_floor:
        from ctxwin.core import dumps, find_big_integer, may_hold_big_number
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
        _say(_truncated_message(report))
        raise typer.Exit(int(ExitCode.CONTEXT_TRUNCATED))
    write_output(output, out)
    if result.pruned and not quiet:
        _say(
            f"dropped {_plural(result.dropped_turns, 'turn')} "
            f"({_plural(len(result.dropped), 'message')}): "
            f"{result.estimated_tokens:,} → {result.estimated_tokens_after:,} tokens, "
            f"budget {result.budget:,}"
        )


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _looks_indented(data: bytes) -> bool:
    head = data[:259].removeprefix(b"\xef\xbb\xbf").lstrip()
    return head[:1] in (b"{", b"[") and head[1:2] == b"\n"


@_guard
def models(
    json_: Annotated[bool, typer.Option("--json", help="Print the table as JSON.")] = False,
    name: Annotated[
        str | None,
        typer.Argument(help="Show how this model name resolves (prefix and provider rules)."),
    ] = None,
) -> None:
    """List the built-in model table: context window, output cap, source and date."""
    import orjson

    from ctxwin.budget import lookup_model, model_table

    rows = model_table()
    if name is not None:
        row = lookup_model(name)
        if row is None:
            raise SpecError(
                f"no model in the table matches {name!r}; pass --context-length or --model-spec"
            )
        rows = (row,)
    if json_:
        payload = [
            {
                "name": r.name,
                "provider": r.provider,
                "context_length": r.context_length,
                "max_output_tokens": r.max_output_tokens,
                "source": r.source,
                "date": r.date,
            }
            for r in rows
        ]
        write_stdout(orjson.dumps(payload, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=None if name is None else f"{name} → {rows[0].name}")
    for col, justify in (
        ("model", "left"),
        ("provider", "left"),
        ("context", "right"),
        ("output cap", "right"),
        ("as of", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        cap = f"{r.max_output_tokens:,}" if r.max_output_tokens is not None else "—"
        table.add_row(r.name, r.provider, f"{r.context_length:,}", cap, r.date)
    Console().print(table)


def _register_commands() -> None:
    """Register the commands: all of them, or only the one the entry point saw requested."""
    from ctxwin import _entry

    wanted = _entry.requested
    core: dict[str, Callable[..., Any]] = {"estimate": estimate, "prune": prune, "models": models}
    for name, fn in core.items():
        if wanted is None or wanted == name:
            app.command(name)(fn)
    if wanted is not None:
        return
    from ctxwin import cli_runs
    from ctxwin.cli_lint import lint

    app.command("lint")(_guard(lint))
    app.command("replay")(_guard(cli_runs.replay))
    app.command("check")(_guard(cli_runs.check))
    app.command("calibrate")(_guard(cli_runs.calibrate))


_register_commands()


def main_exit_code(argv: list[str] | None = None) -> int:
    """Run the command line and return its exit code (usage errors are one line)."""
    try:
        code = app(args=argv, prog_name="ctxwin", standalone_mode=False)
    except typer.Abort:
        _say("aborted")
        return int(ExitCode.BAD_INPUT)
    except Exception as exc:
        message = getattr(exc, "format_message", None)
        exit_code = getattr(exc, "exit_code", None)
        if message is None or not isinstance(exit_code, int):
            raise
        text = message()
        if text:  # an empty message follows help shown for a bare command
            ctx = getattr(exc, "ctx", None)
            hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
            _say(f"usage error: {text}{hint}")
        return exit_code
    return code if isinstance(code, int) else 0


_KEEP_UNTIL_EXIT: list[Any] = []
"""Parsed inputs, held so they are not freed object by object when a command returns:
:func:`run` ends the process without that teardown (a second or more on large inputs)."""


def run() -> None:
    """Console-script entry point.

    Every file the command wrote is closed (and fsynced) by then; the standard
    streams are flushed here, and the process ends without the interpreter's
    teardown, which would free a large parsed body one object at a time.
    """
    code = main_exit_code()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            if code == 0:
                code = int(ExitCode.BAD_INPUT)
    os._exit(code)
