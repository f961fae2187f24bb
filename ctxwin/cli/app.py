"""The Typer application: ``estimate``, ``prune`` and ``models``, and the root options.

:func:`make_app` builds the application with every command, or with just the
one the entry point saw requested (registering a command makes Typer read its
signature, which costs start-up time). ``ctxwin.cli.app.app`` is the full
application, built on first use, for embedding and for tests
(``typer.testing.CliRunner().invoke(app, ...)``).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from ctxwin import __version__
from ctxwin.cli import commands
from ctxwin.cli.funnel import INTERRUPTED, say
from ctxwin.cli.options import EXIT_CODES_HELP, InputArg, guard, state, with_flags
from ctxwin.cli.streams import STDIO, write_stdout
from ctxwin.errors import SpecError

HELP = (
    "Keep LLM agent transcripts inside the model's context window.\n\n"
    "Estimate a request's tokens, derive the budget (context length − reserve − safety) "
    "and drop the oldest whole tool-call turns until it fits, never splitting a call from "
    "its results.\n\n" + EXIT_CODES_HELP
)


def _exit(code: int) -> None:
    if code:
        raise typer.Exit(code)


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"ctxwin {__version__}\n")
        raise typer.Exit()


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
    state["debug"] = debug


@guard
@with_flags("estimate")
def estimate(input_: InputArg = STDIO, **flags: Any) -> None:
    """Estimate a transcript's tokens and budget, and say what pruning would do (dry run).

    IN may also be an agent tool's session file (Claude Code, Codex CLI, Gemini
    CLI, OpenHands, mini-swe-agent, OpenTelemetry spans): its next request is
    everything it recorded, estimated with the overhead its usage proves.

    Exit 0 whether or not pruning is needed; 3 when even the floor (head plus
    newest turn) exceeds the budget.
    """
    _exit(commands.estimate_command(input_=input_, **flags))


@guard
@with_flags("prune")
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
    **flags: Any,
) -> None:
    """Drop the oldest whole turns until the transcript fits, and write it to OUT.

    The output has the input's shape; kept messages are byte-for-byte the
    same JSON values, and a transcript that fits is written back unchanged.
    Exit 3 (and nothing written to OUT) when even the floor does not fit.
    """
    _exit(commands.prune_command(input_=input_, output=output, **flags))


@guard
def models(
    json_: Annotated[bool, typer.Option("--json", help="Print the table as JSON.")] = False,
    name: Annotated[
        str | None,
        typer.Argument(help="Show how this model name resolves (prefix and provider rules)."),
    ] = None,
) -> None:
    """List the built-in model table: window, output cap, tokenizer, source and date."""
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
                "tokenizer": r.tokenizer,
                "tokenizer_generation": r.tokenizer_generation,
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
        ("tokenizer", "left"),
        ("as of", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        cap = f"{r.max_output_tokens:,}" if r.max_output_tokens is not None else "—"
        tok = r.tokenizer or "—"
        if r.tokenizer_generation is not None:
            tok = f"{tok} (gen {r.tokenizer_generation})"
        table.add_row(r.name, r.provider, f"{r.context_length:,}", cap, tok, r.date)
    Console().print(table)


LEAN_COMMANDS: dict[str, Callable[..., Any]] = {
    "estimate": estimate,
    "prune": prune,
    "models": models,
}
"""The commands that need no module beyond this one."""


def make_app(only: str | None = None) -> typer.Typer:
    """The ``ctxwin`` application with every command, or only the lean command ``only``."""
    application = typer.Typer(
        name="ctxwin",
        help=HELP,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    application.callback()(_root)
    for name, fn in LEAN_COMMANDS.items():
        if only is None or only == name:
            application.command(name)(fn)
    if only is None:
        from ctxwin.cli import runs
        from ctxwin.cli.lint import lint
        from ctxwin.cli.proxy import proxy
        from ctxwin.cli.repair import repair

        application.command("lint")(guard(lint))
        application.command("repair")(guard(repair))
        application.command("replay")(guard(runs.replay))
        application.command("check")(guard(runs.check))
        application.command("calibrate")(guard(runs.calibrate))
        application.command("proxy")(guard(proxy))
    return application


@functools.cache
def _full_app() -> typer.Typer:
    return make_app()


def __getattr__(name: str) -> Any:
    if name == "app":  # built on first use: importing this module registers nothing
        return _full_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main_exit_code(argv: list[str] | None = None, only: str | None = None) -> int:
    """Run the command line and return its exit code (usage errors are one line).

    ``only`` names the lean command the entry point saw requested, if any.
    """
    try:
        code = make_app(only)(args=argv, prog_name="ctxwin", standalone_mode=False)
    except typer.Abort:  # Ctrl-C (Click has already ended the line)
        say("aborted")
        return INTERRUPTED
    except Exception as exc:
        message = getattr(exc, "format_message", None)
        exit_code = getattr(exc, "exit_code", None)
        if message is None or not isinstance(exit_code, int):
            raise
        text = message()
        if text:  # an empty message follows help shown for a bare command
            ctx = getattr(exc, "ctx", None)
            hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
            say(f"usage error: {text}{hint}")
        return exit_code
    return code if isinstance(code, int) else 0
