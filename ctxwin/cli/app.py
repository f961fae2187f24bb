"""The ``ctxwin`` command: parse flags, read, call the core, render, exit.

Only this module (and ``__main__``) knows about processes: it maps every
:class:`~ctxwin.errors.CtxwinError` to one line on stderr and its exit code.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from ctxwin import __version__
from ctxwin.cli import commands
from ctxwin.cli.commands import exit_code_for, finish
from ctxwin.cli.commands import say as _say
from ctxwin.cli.streams import DEFAULT_MAX_INPUT_BYTES, STDIO, write_stdout
from ctxwin.errors import ExitCode, SpecError

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


def _guard(fn: F) -> F:
    """Turn ctxwin errors into one stderr line and their exit code
    (:func:`ctxwin.cli.commands.exit_code_for`); with ``--debug``, a traceback."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except Exception as exc:
            if _state["debug"]:
                raise
            raise typer.Exit(exit_code_for(exc)) from None

    return wrapper  # type: ignore[return-value]


def _exit(code: int) -> None:
    if code:
        raise typer.Exit(code)


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
    _exit(
        commands.estimate_command(
            input_=input_,
            model=model,
            model_spec=model_spec,
            context_length=context_length,
            max_output_tokens=max_output_tokens,
            max_tokens=max_tokens,
            calibration=calibration,
            format_=format_,
            estimator=estimator,
            tokenizer=tokenizer,
            json_=json_,
            max_input_bytes=max_input_bytes,
            quiet=quiet,
        )
    )


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
    _exit(
        commands.prune_command(
            input_=input_,
            output=output,
            model=model,
            model_spec=model_spec,
            context_length=context_length,
            max_output_tokens=max_output_tokens,
            max_tokens=max_tokens,
            calibration=calibration,
            format_=format_,
            estimator=estimator,
            tokenizer=tokenizer,
            report_path=report_path,
            max_input_bytes=max_input_bytes,
            quiet=quiet,
        )
    )


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
    from ctxwin.cli import main as _entry

    wanted = _entry.requested
    core: dict[str, Callable[..., Any]] = {"estimate": estimate, "prune": prune, "models": models}
    for name, fn in core.items():
        if wanted is None or wanted == name:
            app.command(name)(fn)
    if wanted is not None:
        return
    from ctxwin.cli import runs as cli_runs
    from ctxwin.cli.lint import lint

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


def run() -> None:
    """Console-script entry point: run the command line, then :func:`.commands.finish`."""
    finish(main_exit_code())
