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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ctxwin import __version__
from ctxwin.cli import commands
from ctxwin.cli.funnel import INTERRUPTED, say
from ctxwin.cli.options import EXIT_CODES_HELP, InputArg, guard, state, with_flags
from ctxwin.cli.streams import STDIO, write_stdout
from ctxwin.errors import SpecError

if TYPE_CHECKING:
    from ctxwin.tokens.models import ModelRow

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
    """List the built-in model table: window, input cap, output cap, tokenizer, date.

    Each row names its source and the date its figures were checked (--json); the date,
    provider and price columns show where the terminal is wide enough. --json also gives
    each model's prices (USD per million tokens) and prompt-caching rules where known.
    """
    import orjson

    from ctxwin.tokens.models import lookup_model, model_table

    rows = model_table() if name is None else ()
    if name is not None:
        row = lookup_model(name)
        if row is None:
            from ctxwin.tokens.models import did_you_mean

            meant = did_you_mean(name)
            raise SpecError(
                f"no model in the table matches {name!r}"
                + (f"; {meant}" if meant else "")
                + "; pass --context-length or --model-spec"
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
                "max_input_tokens": r.max_input_tokens,
                "price": None if r.price is None else r.price.as_dict(),
                "price_source": r.price_source,
                "price_date": r.price_date,
                "cache": None if r.cache is None else r.cache.as_dict(),
                "cache_source": r.cache_source,
                "litellm_key": r.litellm_key,
                "note": r.note,
            }
            for r in rows
        ]
        write_stdout(orjson.dumps(payload, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
        return
    from rich.console import Console

    console = Console()
    console.print(model_table_view(rows, console.width, name))


def model_table_view(rows: Sequence[ModelRow], width: int, name: str | None = None) -> Any:
    """``ctxwin models`` as a rich table ``width`` columns wide: every model name whole;
    the provider, the date and the price columns only where the width has room for them
    (``--json`` has every field)."""
    from rich.table import Table

    def num(n: int | None) -> str:
        return f"{n:,}" if n is not None else "—"

    def tok(r: ModelRow) -> str:
        t = r.tokenizer or "—"
        return t if r.tokenizer_generation is None else f"{t} (gen {r.tokenizer_generation})"

    columns: list[tuple[str, str, list[str]]] = [
        ("model", "left", [r.name for r in rows]),
        ("window", "right", [num(r.context_length) for r in rows]),
        ("input cap", "right", [num(r.max_input_tokens) for r in rows]),
        ("output cap", "right", [num(r.max_output_tokens) for r in rows]),
        ("tokenizer", "left", [tok(r) for r in rows]),
    ]

    def usd(r: ModelRow) -> str:
        p = r.price
        if p is None or p.input is None or p.output is None:
            return "—"
        return f"{p.input:g} / {p.output:g}"

    extras = [
        ("as of", "left", [r.date for r in rows]),
        ("provider", "left", [r.provider for r in rows]),
        ("$/M in / out", "right", [usd(r) for r in rows]),
    ]

    def span(cols: list[tuple[str, str, list[str]]]) -> int:
        return sum(max(len(h), *map(len, cells)) for h, _, cells in cols) + 2 * (len(cols) - 1)

    for extra in extras:
        if span([*columns, extra]) <= width:
            columns.append(extra)
    title = None if name is None else f"{name} → {rows[0].name}"
    table = Table(title=title, box=None, pad_edge=False, header_style="bold")
    for header, justify, _ in columns:
        table.add_column(header, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for i in range(len(rows)):
        table.add_row(*(cells[i] for _, _, cells in columns))
    return table


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
