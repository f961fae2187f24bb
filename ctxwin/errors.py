"""Exit codes and the one exception family of ctxwin.

Exit codes are public contract: they may be extended, never renumbered.
Only the CLI entry point turns an exception into a process exit; the core
raises, it never exits.
"""

from __future__ import annotations

from enum import IntEnum, unique
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxwin.fitting.budget import Budget
    from ctxwin.fitting.pruning import FitResult


def floor_words(needed: int, budget: int) -> str:
    """How ctxwin says the floor (head + newest turn) does not fit: the one wording that
    the exception, the command line, the proxy and the integrations all use."""
    return (
        f"even the head plus the newest turn need {needed:,} tokens, over the budget of {budget:,}"
    )


NO_PROMPT_FITS = "the window is at most reserve + safety, so no prompt fits"
"""Why a budget that is not positive fits nothing, where its figures are not at hand
(a count of transcripts, a help text); :func:`budget_words` names them."""


def budget_words(
    window: int,
    window_from: str,
    reserve: int,
    reserve_from: str,
    safety: int,
    budget: int,
    input_cap: int | None = None,
) -> str:
    """How ctxwin says there is no budget, figure by figure: the one wording that the
    exception (:class:`NoBudget`), the command line and the proxy all use. ``window_from``
    and ``reserve_from`` say where each figure came from (a source such as ``flag`` or
    ``body``; the command line names its flag); ``input_cap`` is named where it binds."""
    capped = (
        f", capped at {input_cap:,} input tokens,"
        if input_cap is not None and input_cap < window - reserve
        else ""
    )
    return (
        f"the {window:,}-token window ({window_from}) less the {reserve:,}-token reserve "
        f"({reserve_from}){capped} and {safety:,} tokens of safety leaves {budget:,} for "
        "the prompt"
    )


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
    """Even the floor (head + newest turn) exceeds the budget, or there is no budget
    (the window is at most reserve + safety: :class:`NoBudget`)."""
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


def spec_int(value: object, what: str) -> int | None:
    """``value`` when it is a positive integer, ``None`` when it is ``None``; else a
    :class:`SpecError` naming ``what`` (a field of a model spec)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SpecError(f"model spec: {what} must be a positive integer, got {value!r}")
    return value


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
            f"context truncated: {floor_words(result.estimated_tokens_after, result.budget)}"
        )


class NoBudget(ContextTruncated):
    """The window leaves no room for any prompt: ``context_length − reserve − safety``
    (or the input cap less the safety) is not positive, so nothing may be sent.

    A :class:`ContextTruncated` (an agent loop that stops on one stops on this too);
    its fields say where each figure came from, for a caller to word the fix.
    """

    def __init__(self, result: FitResult, budget: Budget) -> None:
        spec = budget.spec
        self.result = result
        self.model = spec.name
        self.context_length = spec.context_length
        self.context_length_source = spec.context_length_source
        self.reserve = budget.reserve
        self.reserve_source = budget.reserve_source
        self.safety = budget.safety
        self.max_input_tokens = spec.max_input_tokens
        self.budget = budget.budget
        words = budget_words(
            self.context_length,
            self.context_length_source,
            self.reserve,
            self.reserve_source,
            self.safety,
            self.budget,
            self.max_input_tokens,
        )
        model = f" (model {self.model})" if self.model else ""
        CtxwinError.__init__(self, f"no budget: {words}{model}")


def truncated(result: FitResult, budget: Budget) -> ContextTruncated:
    """The error that stops a send whose fit is ``result`` (``result.overflow_at_floor``):
    :class:`NoBudget` when the budget is not positive, else :class:`ContextTruncated`."""
    return ContextTruncated(result) if result.enforced else NoBudget(result, budget)
