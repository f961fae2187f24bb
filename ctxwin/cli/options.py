"""The options the commands share, declared once for Typer, and the error guard.

Every command that reads a transcript or a recorded run takes the same model,
budget and estimation options; they are declared here as ``Annotated`` types
(``ModelOpt``, ``ContextOpt``, ...) and used by :mod:`ctxwin.cli.app` and
:mod:`ctxwin.cli.runs`. :mod:`ctxwin.cli.fastargs` mirrors the ones ``estimate``
and ``prune`` take, and ``tests/test_fastargs.py`` checks that they match.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from ctxwin.cli.funnel import exit_code_for

EXIT_CODES_HELP = (
    "Exit codes: 0 ok; 1 bad input (unreadable, invalid JSON, wrong shape, unsafe pairing, "
    "write failure); 2 usage error; 3 context truncated (even the head plus the newest turn "
    "exceed the budget); 4 needs pruning (check only)."
)

state = {"debug": False}
"""Set by the root callback from ``--debug``: let exceptions through, with a traceback."""

F = TypeVar("F", bound=Callable[..., Any])

MODEL_PANEL = "Model and budget"
EST_PANEL = "Estimation"

InputArg = Annotated[
    str,
    typer.Argument(
        metavar="IN",
        help="Transcript JSON file: a request body or a bare messages array. '-' reads stdin.",
        show_default=True,
    ),
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="Model to budget for, looked up in the built-in table "
        "(default: the body's 'model'). See `ctxwin models`.",
        rich_help_panel=MODEL_PANEL,
    ),
]
SpecOpt = Annotated[
    Path | None,
    typer.Option(
        "--model-spec",
        help="JSON file with context_length and max_output_tokens "
        "(LiteLLM's max_input_tokens/max_tokens/max_output_tokens also work, "
        "as does a whole LiteLLM model map).",
        rich_help_panel=MODEL_PANEL,
        dir_okay=False,
    ),
]
ContextOpt = Annotated[
    int | None,
    typer.Option(
        "--context-length",
        "-c",
        min=1,
        help="Context window in tokens (overrides spec file and table).",
        rich_help_panel=MODEL_PANEL,
    ),
]
MaxOutputOpt = Annotated[
    int | None,
    typer.Option(
        "--max-output-tokens",
        min=1,
        help="The model's output cap in tokens (used as the reserve when the body sets none).",
        rich_help_panel=MODEL_PANEL,
    ),
]
MaxTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--max-tokens",
        min=0,
        help="Tokens to reserve for the response (overrides the body's max_tokens).",
        rich_help_panel=MODEL_PANEL,
    ),
]
CalibrationOpt = Annotated[
    float | None,
    typer.Option(
        "--calibration",
        min=0.0,
        help="Factor the raw estimate is scaled by (values below 1 count as 1). "
        "Default: 1.15 for --estimator seed; 1.0 for content, or its model family's "
        "measured seed (Claude 1.35, Llama 4 1.3, DeepSeek 1.2); 1.0 with --tokenizer.",
        show_default=False,
        rich_help_panel=EST_PANEL,
    ),
]
FormatOpt = Annotated[
    str,
    typer.Option(
        "--format",
        "-f",
        help="Wire format of the input: auto (detect by shape), anthropic, openai-responses, "
        "gemini or openai-chat.",
        rich_help_panel=EST_PANEL,
    ),
]
EstimatorOpt = Annotated[
    str,
    typer.Option(
        "--estimator",
        help="Estimator: 'content' (default) costs each byte by its class (digits, "
        "upper-case, punctuation, non-ASCII) and bounds o200k, cl100k, Llama 3 and Qwen 3 "
        "from above; 'seed' is the chars/N formula (prose ÷ 3.5, dense ÷ 2.5).",
        rich_help_panel=EST_PANEL,
    ),
]
TokenizerOpt = Annotated[
    str | None,
    typer.Option(
        "--tokenizer",
        help="Count exactly with this BPE encoding (o200k_base, cl100k_base, llama3, qwen3) "
        "plus chat framing, instead of --estimator. Needs: pip install 'ctxwin\\[bpe]' "
        "(exit 2 when it is missing).",
        rich_help_panel=EST_PANEL,
    ),
]
MaxInputOpt = Annotated[
    int,
    typer.Option(
        "--max-input-bytes",
        min=0,
        help="Refuse inputs larger than this many bytes (0: no limit).",
    ),
]
QuietOpt = Annotated[
    bool,
    typer.Option("--quiet", "-q", help="No info lines or warnings on stderr."),
]


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
