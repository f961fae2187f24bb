"""The console entry point (``ctxwin``): process policy, and the way in.

Only this module decides how the process runs and ends:

- a plain ``estimate``, ``prune`` or ``replay`` command line
  (:mod:`ctxwin.cli.fastargs`) runs without the command-line framework at all;
- otherwise the Typer application is built with only the requested lean
  command (``estimate``, ``prune``, ``models``) when there is one — typer reads
  every registered command's signature, which costs start-up time — and with
  all of them for ``--help``, no command or an unknown name, so help and
  "no such command" messages list every command;
- ``estimate``, ``prune`` and ``replay`` run with the cyclic garbage collector
  off and keep what they parsed alive until the end: a parsed body is millions
  of acyclic objects, which the collector would re-scan for nothing and which
  would otherwise be freed one by one on return (a replay's fits make no
  reference cycles either: what they leave is freed as it goes);
- the process ends with :func:`finish`: streams flushed, then ``os._exit``,
  without the interpreter's teardown.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import Any

LEAN_COMMANDS = frozenset({"estimate", "prune", "models"})
TRANSCRIPT_COMMANDS = frozenset({"estimate", "prune", "replay"})
"""The commands that run with the cyclic garbage collector off."""
ROOT_FLAGS = frozenset({"--debug"})


def command_in(argv: list[str], among: frozenset[str] = LEAN_COMMANDS) -> str | None:
    """The command named in ``argv`` (after root flags), if it is one of ``among``."""
    for arg in argv:
        if arg in ROOT_FLAGS:
            continue
        return arg if arg in among else None
    return None


def finish(code: int) -> None:
    """Flush the standard streams and end the process with ``code``.

    Every file the command wrote is closed (and fsynced) by then; a failed
    flush of a successful run's output turns exit 0 into 1.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            if code == 0:
                code = 1
    os._exit(code)


def run_plain(command: str, debug: bool, kwargs: dict[str, Any]) -> int:
    """Run ``estimate``, ``prune`` or ``replay`` with the keyword arguments the Typer
    command would pass (:func:`ctxwin.cli.fastargs.parse`); the exit code.

    Errors go through the same funnel as the Typer app's
    (:func:`ctxwin.cli.funnel.exit_code_for`): one line and its code; with
    ``debug``, the exception propagates (a traceback).
    """
    from collections.abc import Callable

    from ctxwin.cli.funnel import exit_code_for

    fn: Callable[..., int]
    if command == "replay":
        from ctxwin.cli.replay import replay

        fn = replay
    else:
        from ctxwin.cli import commands

        fn = commands.estimate_command if command == "estimate" else commands.prune_command
    try:
        return fn(**kwargs)
    except KeyboardInterrupt as exc:
        return exit_code_for(exc)
    except Exception as exc:
        if debug:
            raise
        return exit_code_for(exc)


def run() -> None:
    """Console-script entry point (``ctxwin``)."""
    argv = sys.argv[1:]
    requested = command_in(argv)
    transcript = command_in(argv, TRANSCRIPT_COMMANDS) is not None
    if transcript:
        gc.disable()  # before the commands' modules load, which leave nothing to collect
    from ctxwin.cli import commands

    if transcript:
        commands.keep_until_exit()
    from ctxwin.cli.fastargs import parse

    plain = parse(argv)
    if plain is not None:
        finish(run_plain(*plain))
    from ctxwin.cli.app import main_exit_code

    finish(main_exit_code(argv, only=requested))
