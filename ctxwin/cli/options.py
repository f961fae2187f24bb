"""The options the commands share, declared once for Typer, and the error guard.

Every command that reads a transcript or a recorded run takes the same model,
budget and estimation options. They are declared once, without Typer, in
:mod:`ctxwin.cli.flags`; here they become the ``Annotated`` parameters Typer reads
(:func:`with_flags` for ``estimate`` and ``prune``, :func:`with_settings` for the
commands that take a :class:`~ctxwin.settings.Settings`), and
:mod:`ctxwin.cli.fastargs` builds its tables from the same declarations.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from ctxwin.cli.flags import COMMAND_FLAGS, FLAGS
from ctxwin.cli.funnel import exit_code_for
from ctxwin.errors import NO_PROMPT_FITS

EXIT_CODES_HELP = (
    "Exit codes: 0 ok; 1 bad input (unreadable, invalid JSON, wrong shape, unsafe pairing, "
    "write failure); 2 usage error; 3 context truncated (even the head plus the newest turn "
    f"exceed the budget, or there is no budget: {NO_PROMPT_FITS}; nothing is written); "
    "4 needs pruning (check only)."
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
    if flag.metavar is not None:
        extra["metavar"] = flag.metavar
    return typer.Option(*flag.names, help=flag.help, rich_help_panel=flag.panel, **extra)


InputArg = Annotated[
    str,
    typer.Argument(
        metavar="IN",
        help="Transcript JSON file: a request body or a bare messages array. '-' reads stdin.",
        show_default=True,
    ),
]
RunFormatOpt = Annotated[str, _option("run_format")]
MaxInputOpt = Annotated[int, _option("max_input_bytes")]
QuietOpt = Annotated[bool, _option("quiet")]
JobsOpt = Annotated[int, _option("jobs")]
EngineOpt = Annotated[str, _option("engine")]
SchedulerOpt = Annotated[str | None, _option("scheduler")]
AnyFormatOpt = Annotated[
    str, typer.Option("--format", "-f", help="Wire format of the input; 'auto' detects it.")
]
"""``--format`` of the commands that read a transcript without budgeting it (lint, repair)."""

_KINDS: dict[str, type] = {"str": str, "int": int, "float": float, "path": Path, "flag": bool}


def flag_type(key: str) -> Any:
    """The ``Annotated`` type Typer reads for the flag ``key`` of
    :data:`ctxwin.cli.flags.FLAGS`: its kind, optional when its default is ``None``."""
    flag = FLAGS[key]
    kind: Any = _KINDS[flag.kind]
    return Annotated[kind | None if flag.default is None else kind, _option(key)]


def _declaring(fn: Callable[..., Any], name: str, keys: tuple[str, ...]) -> Any:
    """``fn``'s signature with the parameter ``name`` replaced by the flags ``keys``."""
    import inspect

    signature = inspect.signature(fn, eval_str=True)
    params: list[inspect.Parameter] = []
    for param in signature.parameters.values():
        if param.name != name:
            params.append(param)
            continue
        kind = param.kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            kind = inspect.Parameter.KEYWORD_ONLY
        params.extend(
            inspect.Parameter(
                FLAGS[key].key, kind, default=FLAGS[key].default, annotation=flag_type(key)
            )
            for key in keys
        )
    return signature.replace(parameters=params)


def with_flags(command: str) -> Callable[[F], F]:
    """Give the Typer command ``estimate``, ``prune`` or ``replay`` its flags, as the fast
    path reads them (:data:`ctxwin.cli.flags.COMMAND_FLAGS`): Typer sees them where the
    command declares ``**flags``, and the command receives them as keyword arguments."""
    import functools

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        signature = _declaring(fn, "flags", COMMAND_FLAGS[command])
        wrapper.__signature__ = signature  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate


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

    def decorate(fn: F) -> F:
        from ctxwin.cli.commands import build_settings

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            flags = {key: kwargs.pop(key) for key in keys}
            return fn(*args, settings=build_settings(**flags), **kwargs)

        wrapper.__signature__ = _declaring(fn, "settings", keys)  # type: ignore[attr-defined]
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
