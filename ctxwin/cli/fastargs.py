"""Read a plain ``ctxwin estimate``, ``prune`` or ``replay`` command line without Typer.

Importing Typer and Click costs more than estimating or pruning a small
transcript (or replaying a run of a few thousand calls), and an agent loop or a
CI job may run ctxwin thousands of times. :func:`parse` reads the common shape
of those commands — root ``--debug``, the command, its positional arguments
(``replay``: one or more) and its options, each at most once, as
``--name value``, ``--name=value`` or ``-x value`` — into the keyword
arguments the Typer command would pass to :mod:`ctxwin.cli.commands`.

Anything else (``--help``, ``--version``, another command, an unknown or
repeated option, a value that does not convert or is out of range, a value
starting with ``-``, a directory or unreadable file given as a path) gives
``None``, and the Typer app reads the command line, with its help and its
error messages. So this module never has to produce an error of its own.

``OPTIONS``, ``ARGUMENTS`` and ``DEFAULTS`` come from the declarations in
:mod:`ctxwin.cli.flags`, as the Typer options do; ``tests/test_cli_fastargs.py``
checks that they match, and that every command line accepted here gives the
Typer command the same arguments.
"""

from __future__ import annotations

import math
import os
from typing import Any

from ctxwin.cli.flags import ARGUMENTS as FLAG_ARGUMENTS
from ctxwin.cli.flags import COMMAND_FLAGS, FLAGS, VARIADIC

Spec = tuple[str, str, float | None]
"""``(keyword, kind, minimum)``; kind is ``str``, ``int``, ``float``, ``path`` or ``flag``."""

OPTIONS: dict[str, dict[str, Spec]] = {
    command: {
        name: (FLAGS[key].key, FLAGS[key].kind, FLAGS[key].minimum)
        for key in keys
        for name in FLAGS[key].names
    }
    for command, keys in COMMAND_FLAGS.items()
}
"""Each command's option names → what they set."""

ARGUMENTS: dict[str, tuple[str, ...]] = {
    command: tuple(arguments) for command, arguments in FLAG_ARGUMENTS.items()
}
"""Each command's positional arguments, in order."""

DEFAULTS: dict[str, dict[str, Any]] = {
    command: {**FLAG_ARGUMENTS[command], **{FLAGS[key].key: FLAGS[key].default for key in keys}}
    for command, keys in COMMAND_FLAGS.items()
}
"""Each command's keyword arguments when the command line does not set them."""


def parse(argv: list[str]) -> tuple[str, bool, dict[str, Any]] | None:
    """``(command, debug, keyword arguments)`` for a plain command line, else ``None``."""
    i = 0
    debug = False
    while i < len(argv) and argv[i] == "--debug":
        debug = True
        i += 1
    if i == len(argv) or argv[i] not in OPTIONS:
        return None
    command = argv[i]
    options = OPTIONS[command]
    kwargs = dict(DEFAULTS[command])
    seen: set[str] = set()
    positional: list[str] = []
    rest = argv[i + 1 :]
    j = 0
    while j < len(rest):
        arg = rest[j]
        j += 1
        if arg == "-" or not arg.startswith("-"):
            positional.append(arg)
            continue
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        spec = options.get(name)
        if spec is None or spec[0] in seen:
            return None
        key, kind, minimum = spec
        seen.add(key)
        if kind == "flag":
            if eq:
                return None
            kwargs[key] = True
            continue
        if not eq:
            if j == len(rest):
                return None
            value = rest[j]
            j += 1
        if value.startswith("-"):
            return None
        converted = _convert(value, kind, minimum)
        if converted is None:
            return None
        kwargs[key] = converted
    names = ARGUMENTS[command]
    variadic = VARIADIC.get(command)
    if variadic is not None:
        if not positional:  # a missing argument: Typer says so
            return None
        kwargs[variadic] = positional
        return command, debug, kwargs
    if len(positional) > len(names):
        return None
    kwargs.update(zip(names, positional, strict=False))
    return command, debug, kwargs


def _convert(value: str, kind: str, minimum: float | None) -> Any:
    """``value`` as ``kind``, or ``None`` when the Typer app should judge it."""
    if kind == "str":
        return value
    if kind == "path":
        if os.path.isdir(value) or (os.path.exists(value) and not os.access(value, os.R_OK)):
            return None
        from pathlib import Path

        return Path(value)
    number: float
    try:
        number = int(value) if kind == "int" else float(value)
    except ValueError:
        return None
    if not math.isfinite(number) or (minimum is not None and number < minimum):
        return None
    return number
