"""The one place an exception becomes a line on stderr and an exit code.

Both ways into the command line use it: the Typer commands (through
:func:`ctxwin.cli.options.guard`) and the plain ``estimate``/``prune`` fast
path (:func:`ctxwin.cli.main.run_plain`). So a given failure reads the same and
exits the same, whichever parser read the command line.

- a ctxwin error (:class:`~ctxwin.errors.CtxwinError`): its message and its code
  (1 bad input, 2 usage, 3 context truncated, 4 needs pruning); a budget that is not
  positive (:class:`~ctxwin.errors.NoBudget`, exit 3) is worded with the flags that
  change its figures (:func:`no_budget_message`);
- a closed stdout (``| head``), out of memory, nesting too deep: one line, exit 1;
- Ctrl-C: "aborted", exit 130 (128 + SIGINT), as shells expect;
- anything else is a bug: one line naming it and ``--debug``, exit 1.
"""

from __future__ import annotations

import os
import sys

from ctxwin.errors import CtxwinError, ExitCode, NoBudget, UsageError, budget_words

INTERRUPTED = 130
"""Exit code after Ctrl-C: 128 + SIGINT, the shell convention."""


def say(message: str) -> None:
    """Write ``ctxwin: message`` as one line on stderr."""
    sys.stderr.write(f"ctxwin: {message}\n")
    sys.stderr.flush()


def exit_code_for(exc: BaseException) -> int:
    """Say what went wrong in one stderr line and return the exit code for it.

    Raises ``exc`` again when it is not one ctxwin reports this way
    (``SystemExit`` and the like).
    """
    if isinstance(exc, KeyboardInterrupt):
        sys.stderr.write("\n")
        say("aborted")
        return INTERRUPTED
    if isinstance(exc, BrokenPipeError):  # stdout closed by the reader (e.g. `| head`)
        quiet_stdout()
        say("error: output closed before all data was written (broken pipe)")
        return int(ExitCode.BAD_INPUT)
    if isinstance(exc, NoBudget):
        say(no_budget_message(exc))
        return int(exc.exit_code)
    if isinstance(exc, CtxwinError):
        text = f"{flag_for(exc.setting)}: {exc.message}" if exc.setting else str(exc)
        say(f"{'usage error' if isinstance(exc, UsageError) else 'error'}: {text}")
        return int(exc.exit_code)
    if isinstance(exc, MemoryError):
        say("error: out of memory (try a smaller input)")
        return int(ExitCode.BAD_INPUT)
    if isinstance(exc, RecursionError):
        say("error: input nested too deeply")
        return int(ExitCode.BAD_INPUT)
    if isinstance(exc, Exception):  # a bug: still one line, unless --debug
        say(
            f"internal error: {type(exc).__name__}: {exc} "
            "(run with --debug for a traceback, and please report it)"
        )
        return int(ExitCode.BAD_INPUT)
    raise exc


_WINDOW_FROM = {
    "flag": "--context-length",
    "spec": "--model-spec",
    "name": "the [1m] of the model's name",
    "session": "the session file",
    "tool": "the agent tool's default window",
    "table": "the model table",
    "fallback": "the fallback for an unknown model",
}
_RESERVE_FROM = {
    "flag": "--max-tokens",
    "body": "the body's max_tokens",
    "model": "the model's output cap",
    "scaled": "the model's output cap scaled to the window",
    "default": "the default for the window",
}


def no_budget_message(exc: NoBudget) -> str:
    """The line for a budget that is not positive: each figure, where it came from, and
    the flags that change it."""
    model = f" for {exc.model}" if exc.model else ""
    fixes = ["a larger --context-length"]
    if exc.reserve_source in ("body", "model", "scaled"):
        fixes.append("a smaller --max-tokens (the response's reserve)")
    elif exc.reserve_source == "flag":
        fixes.append("a smaller --max-tokens")
    words = budget_words(
        exc.context_length,
        _WINDOW_FROM.get(exc.context_length_source, exc.context_length_source),
        exc.reserve,
        _RESERVE_FROM.get(exc.reserve_source, exc.reserve_source),
        exc.safety,
        exc.budget,
        exc.max_input_tokens,
    )
    return f"no budget{model}: {words}; nothing was written. Pass {' or '.join(fixes)}."


def flag_for(setting: str) -> str:
    """The flag that sets ``setting``: the one declared for it in
    :data:`ctxwin.cli.flags.FLAGS`, keyed by the setting's name (a
    :class:`~ctxwin.settings.Settings` field: ``fmt`` → ``--format``), else its name as
    a flag (``scheduler`` → ``--scheduler``)."""
    from ctxwin.cli.flags import FLAGS

    flag = FLAGS.get(setting)
    return flag.names[0] if flag is not None else "--" + setting.replace("_", "-")


def quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    import contextlib

    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
