"""The options the commands share, declared once for Typer, and the error guard.

Every command that reads a transcript or a recorded run takes the same model,
budget and estimation options. They are declared once, without Typer, in
:mod:`ctxwin.cli.flags`; here they become ``Annotated`` types (``ModelOpt``,
``ContextOpt``, ...) for :mod:`ctxwin.cli.app` and :mod:`ctxwin.cli.runs`, and
:mod:`ctxwin.cli.fastargs` builds its tables from the same declarations.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from ctxwin.cli.flags import FLAGS
from ctxwin.cli.funnel import exit_code_for

EXIT_CODES_HELP = (
    "Exit codes: 0 ok; 1 bad input (unreadable, invalid JSON, wrong shape, unsafe pairing, "
    "write failure); 2 usage error; 3 context truncated (even the head plus the newest turn "
    "exceed the budget); 4 needs pruning (check only)."
)

state = {"debug": False}
"""Set by the root callback from ``--debug``: let exceptions through, with a traceback."""

F = TypeVar("F", bound=Callable[..., Any])


def _option(key: str) -> Any:
    """The Typer option declared as ``key`` in :data:`ctxwin.cli.flags.FLAGS`."""
    flag = FLAGS[key]
    extra: dict[str, Any] = {}
    if flag.minimum is not None:
        extra["min"] = flag.minimum
    if flag.kind == "path":
        extra["dir_okay"] = False
    if not flag.show_default:
        extra["show_default"] = False
    return typer.Option(*flag.names, help=flag.help, rich_help_panel=flag.panel, **extra)


InputArg = Annotated[
    str,
    typer.Argument(
        metavar="IN",
        help="Transcript JSON file: a request body or a bare messages array. '-' reads stdin.",
        show_default=True,
    ),
]
ModelOpt = Annotated[str | None, _option("model")]
SpecOpt = Annotated[Path | None, _option("model_spec")]
ContextOpt = Annotated[int | None, _option("context_length")]
MaxOutputOpt = Annotated[int | None, _option("max_output_tokens")]
MaxTokensOpt = Annotated[int | None, _option("max_tokens")]
CalibrationOpt = Annotated[float | None, _option("calibration")]
FormatOpt = Annotated[str, _option("format_")]
RunFormatOpt = Annotated[str, _option("run_format")]
EstimatorOpt = Annotated[str, _option("estimator")]
TokenizerOpt = Annotated[str | None, _option("tokenizer")]
MaxInputOpt = Annotated[int, _option("max_input_bytes")]
QuietOpt = Annotated[bool, _option("quiet")]
StrategyOpt = Annotated[str, _option("strategy")]
KeepResultsOpt = Annotated[int, _option("keep_results")]
ExcludeToolsOpt = Annotated[str, _option("exclude_tools")]
ClearAtLeastOpt = Annotated[int, _option("clear_at_least")]
ReportJsonOpt = Annotated[bool, _option("json_")]
ExplainOpt = Annotated[bool, _option("explain")]
ReportPathOpt = Annotated[Path | None, _option("report_path")]


SHARED_TYPES: dict[str, Any] = {
    "model": ModelOpt,
    "model_spec": SpecOpt,
    "context_length": ContextOpt,
    "max_output_tokens": MaxOutputOpt,
    "max_tokens": MaxTokensOpt,
    "calibration": CalibrationOpt,
    "format_": FormatOpt,
    "estimator": EstimatorOpt,
    "tokenizer": TokenizerOpt,
    "strategy": StrategyOpt,
    "keep_results": KeepResultsOpt,
    "exclude_tools": ExcludeToolsOpt,
    "clear_at_least": ClearAtLeastOpt,
}
"""The Typer option of each of :data:`ctxwin.cli.flags.SHARED`."""


def with_settings(*keys: str) -> Callable[[F], F]:
    """Give a Typer command the flags ``keys`` (of :data:`ctxwin.cli.flags.SHARED`) as
    one argument.

    The command declares ``settings: Settings`` where the flags belong; Typer
    sees the flags in its place, and the command receives the
    :class:`~ctxwin.settings.Settings` they name
    (:func:`ctxwin.cli.commands.build_settings`: exit 2 for a bad flag)::

        @with_settings(*ESTIMATION, *STRATEGY)
        def replay(run_files: ..., settings: Settings = DEFAULT, ...) -> None: ...
    """
    import functools
    import inspect

    def decorate(fn: F) -> F:
        from ctxwin.cli.commands import build_settings

        signature = inspect.signature(fn, eval_str=True)
        params: list[inspect.Parameter] = []
        for param in signature.parameters.values():
            if param.name != "settings":
                params.append(param)
                continue
            params.extend(
                inspect.Parameter(
                    key, param.kind, default=FLAGS[key].default, annotation=SHARED_TYPES[key]
                )
                for key in keys
            )

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            flags = {key: kwargs.pop(key) for key in keys}
            return fn(*args, settings=build_settings(**flags), **kwargs)

        wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate


def guard(fn: F) -> F:
    """Turn ctxwin errors into one stderr line and their exit code
    (:func:`ctxwin.cli.funnel.exit_code_for`); with ``--debug``, a traceback."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except KeyboardInterrupt as exc:  # before Typer turns it into a silent exit 130
            raise typer.Exit(exit_code_for(exc)) from None
        except Exception as exc:
            if state["debug"]:
                raise
            raise typer.Exit(exit_code_for(exc)) from None

    return wrapper  # type: ignore[return-value]
