"""The console entry point: start only what the requested command needs.

A plain ``estimate`` or ``prune`` command line (:mod:`ctxwin.cli.fastargs`) runs
without the command-line framework at all. Otherwise: building the command
line costs start-up time per registered command (typer reads every command's
signature), and the recorded-run and lint commands pull in modules of their
own. When the command named on the command line is one
of the transcript commands, only that one is registered; anything else
(``--help``, no command, an unknown name) registers them all, so help and
"no such command" messages list every command.
"""

from __future__ import annotations

import sys

LEAN_COMMANDS = frozenset({"estimate", "prune", "models"})
ROOT_FLAGS = frozenset({"--debug"})

requested: str | None = None
"""The command this process runs, when the entry point could tell; else None."""


def command_in(argv: list[str]) -> str | None:
    """The command named in ``argv`` (after root flags), if it is a lean one."""
    for arg in argv:
        if arg in ROOT_FLAGS:
            continue
        return arg if arg in LEAN_COMMANDS else None
    return None


def run() -> None:
    """Console-script entry point (``ctxwin``)."""
    global requested
    argv = sys.argv[1:]
    from ctxwin.cli.fastargs import parse

    plain = parse(argv)
    if plain is not None:
        from ctxwin.cli import commands

        commands.finish(commands.run(*plain))
    requested = command_in(argv)
    from ctxwin.cli.app import run as cli_run

    cli_run()
