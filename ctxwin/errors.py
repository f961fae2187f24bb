"""Exit codes and the one exception family of ctxwin.

Exit codes are public contract: they may be extended, never renumbered.
Only the CLI entry point turns an exception into a process exit; the core
raises, it never exits.
"""

from __future__ import annotations

from enum import IntEnum, unique
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxwin.pruning import FitResult


@unique
class ExitCode(IntEnum):
    """Process exit codes of the ``ctxwin`` command."""

    OK = 0
    """Success: the transcript fits, or was pruned to fit."""
    BAD_INPUT = 1
    """Unreadable input, invalid JSON, wrong shape, unsafe pairing, or an I/O failure."""
    USAGE = 2
    """Wrong flags or arguments."""
    CONTEXT_TRUNCATED = 3
    """Even the floor (head + newest turn) exceeds the budget."""
    NEEDS_PRUNING = 4
    """``check`` only: some transcript needs pruning, none would be truncated."""


class CtxwinError(Exception):
    """Base of every error ctxwin raises on purpose.

    ``setting`` names the setting the error is about, when it is about one: a field of
    :class:`~ctxwin.settings.Settings` or a keyword argument of the function called
    (``tokenizer``, ``engine``, ``scheduler``). The message then starts with it
    (``tokenizer: unknown encoding 'x'``); the command line names its flag instead.
    """

    exit_code: ExitCode = ExitCode.BAD_INPUT
    setting: str | None = None
    message: str = ""

    def __init__(self, message: str = "", *, setting: str | None = None) -> None:
        self.message = message
        self.setting = setting
        super().__init__(f"{setting}: {message}" if setting else message)


class InputError(CtxwinError):
    """The input cannot be used: unreadable, not JSON, or not a transcript.

    ``where`` is the JSON path of the offending value (``messages[4].role``)
    when one is known.
    """

    def __init__(self, message: str, where: str | None = None) -> None:
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)
        self.message = message


class PairingError(InputError):
    """A tool result does not answer a call made earlier, or a call id repeats."""


class SpecError(CtxwinError):
    """A model spec (file or flags) is unusable."""


class UsageError(CtxwinError):
    """The command was called wrongly (maps to exit code 2)."""

    exit_code = ExitCode.USAGE


class ContextTruncated(CtxwinError):
    """Even the floor of the transcript (head + newest turn) exceeds the budget.

    ``result`` is the fit of the floor, so callers can report how far over it is.
    """

    exit_code = ExitCode.CONTEXT_TRUNCATED

    def __init__(self, result: FitResult) -> None:
        self.result = result
        super().__init__(
            f"context truncated: even the floor (head + newest turn) needs "
            f"{result.estimated_tokens_after} tokens, over the budget of {result.budget}"
        )
