"""The flags of ``estimate``, ``prune`` and ``replay``, declared once, without the CLI framework.

Both parsers read these declarations: :mod:`ctxwin.cli.options` builds the
Typer options from them, and :mod:`ctxwin.cli.fastargs` its tables. Adding a
flag to a command here adds it to both; ``tests/test_cli_fastargs.py`` checks that
the two agree on every command line.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ctxwin.cli.streams import DEFAULT_MAX_INPUT_BYTES, STDIO
from ctxwin.fitting.strategy import DEFAULT_BLOCK

MODEL_PANEL = "Model and budget"
EST_PANEL = "Estimation"
STRATEGY_PANEL = "Strategy"


class Flag(NamedTuple):
    """One option: the keyword it sets, its names, how its value converts, its help.

    (A named tuple: declaring it costs a tenth of a dataclass at start-up.)
    """

    key: str
    """The keyword the option sets: for a model, budget or estimation option, the
    :class:`~ctxwin.settings.Settings` field it sets (``--format``: ``fmt``;
    ``--model-spec``: ``spec``, the file's content); for a strategy option, the
    :class:`~ctxwin.fitting.strategy.Strategy` argument."""
    names: tuple[str, ...]
    kind: str
    """``str``, ``int``, ``float``, ``path`` (a readable file) or ``flag`` (no value)."""
    default: Any
    help: str
    minimum: float | None = None
    panel: str | None = None
    show_default: bool = True
    metavar: str | None = None
    """What ``--help`` shows for the value (default: its kind)."""


FLAGS: dict[str, Flag] = {
    f.key: f
    for f in (
        Flag(
            "model",
            ("--model", "-m"),
            "str",
            None,
            "Model to budget for, looked up in the built-in table "
            "(default: the body's 'model'). See `ctxwin models`.",
            panel=MODEL_PANEL,
            metavar="NAME",
        ),
        Flag(
            "spec",
            ("--model-spec",),
            "path",
            None,
            "JSON file with context_length and max_output_tokens (or LiteLLM's "
            "max_input_tokens, max_tokens and max_output_tokens, or a whole LiteLLM model "
            "map).",
            panel=MODEL_PANEL,
            metavar="FILE",
        ),
        Flag(
            "context_length",
            ("--context-length", "-c"),
            "int",
            None,
            "Context window in tokens (overrides spec file and table).",
            minimum=1,
            panel=MODEL_PANEL,
            metavar="TOKENS",
        ),
        Flag(
            "auto_compact_at",
            ("--auto-compact-at",),
            "int",
            None,
            "The prompt tokens at which the agent tool compacts the session by itself "
            "(default: Claude Code's and Codex's own rules; see docs/sessions.md).",
            minimum=1,
            panel=MODEL_PANEL,
            metavar="TOKENS",
        ),
        Flag(
            "max_output_tokens",
            ("--max-output-tokens",),
            "int",
            None,
            "The model's output cap in tokens (used as the reserve when the body sets none).",
            minimum=1,
            panel=MODEL_PANEL,
            metavar="TOKENS",
        ),
        Flag(
            "max_tokens",
            ("--max-tokens",),
            "int",
            None,
            "Tokens to reserve for the response (overrides the body's max_tokens).",
            minimum=0,
            panel=MODEL_PANEL,
            metavar="TOKENS",
        ),
        Flag(
            "calibration",
            ("--calibration",),
            "float",
            None,
            "Factor the raw estimate is scaled by (below 1 counts as 1). Default: the "
            "model family's seed for the estimator (1.0 for most; Claude, Llama 4 and "
            "DeepSeek more: docs/tokenizers.md), 1.15 for --estimator seed, 1.0 with "
            "--tokenizer.",
            minimum=0.0,
            panel=EST_PANEL,
            show_default=False,
            metavar="FACTOR",
        ),
        Flag(
            "fmt",
            ("--format", "-f"),
            "str",
            "auto",
            "Wire format of the input: auto (detect by shape), anthropic, openai-responses, "
            "gemini or openai-chat.",
            panel=EST_PANEL,
            metavar="FORMAT",
        ),
        Flag(
            "run_format",
            ("--run-format",),
            "str",
            "auto",
            "Session file format: auto (detect by shape), claude-code, codex, gemini-cli, "
            "openhands-events, mini-swe-agent, otel, pi, copilot-cli, cline, opencode or "
            "qwen-code. See docs/sessions.md.",
            panel=EST_PANEL,
            metavar="FORMAT",
        ),
        Flag(
            "estimator",
            ("--estimator",),
            "str",
            "bound",
            "Estimator: 'bound' (an upper bound of the o200k, cl100k, Llama 3 and Qwen 3 "
            "counts), 'content' (alias 'fast': faster, a fit to recorded transcripts, not a "
            "bound) or 'seed' (prose ÷ 3.5 chars, dense ÷ 2.5). See docs/fidelity.md.",
            panel=EST_PANEL,
            metavar="NAME",
        ),
        Flag(
            "tokenizer",
            ("--tokenizer",),
            "str",
            None,
            "Count exactly with this BPE encoding (o200k_base, cl100k_base, llama3, qwen3) "
            "plus chat framing, instead of --estimator. Needs: pip install 'ctxwin\\[bpe]' "
            "(exit 2 when it is missing). 'auto': exactly when the model's tokenizer is one "
            "of those and the extra is installed (GPT-4o/4.1/5.x, o-series, GPT-4, GPT-3.5, "
            "Llama 3.x, Qwen 2.5/3), else --estimator; the report's estimator says which.",
            panel=EST_PANEL,
            metavar="ENCODING",
        ),
        Flag(
            "strategy",
            ("--strategy",),
            "str",
            "drop-turns",
            "Steps taken in order until the request fits, comma-separated: clear-results "
            "(replace old tool results with a placeholder), clear-thinking (earlier turns' "
            "thinking), drop-turns (the oldest whole turns), truncate-results (last: cut the "
            "middle of the largest results).",
            panel=STRATEGY_PANEL,
            metavar="STEPS",
        ),
        Flag(
            "keep_results",
            ("--keep-results",),
            "int",
            3,
            "clear-results never clears the newest N tool results.",
            minimum=0,
            panel=STRATEGY_PANEL,
            metavar="N",
        ),
        Flag(
            "exclude_tools",
            ("--exclude-tools",),
            "str",
            "",
            "Comma-separated tool names whose results are never cleared or cut.",
            panel=STRATEGY_PANEL,
            metavar="NAMES",
        ),
        Flag(
            "clear_at_least",
            ("--clear-at-least",),
            "int",
            0,
            "Once clear-results clears anything, it clears at least this many tokens "
            "(fewer edits that break a prompt cache).",
            minimum=0,
            panel=STRATEGY_PANEL,
            metavar="TOKENS",
        ),
        Flag(
            "block",
            ("--block",),
            "float",
            DEFAULT_BLOCK,
            "Move the cut in blocks of this share of the budget (0 to 1; 0: drop the "
            "fewest turns that fit), and clear results and thinking in batches of it. "
            "Consecutive requests of a growing run then keep one cut and one cleared set, "
            "and the provider's prompt cache, until what must go crosses the next block.",
            minimum=0.0,
            panel=STRATEGY_PANEL,
            metavar="SHARE",
        ),
        Flag(
            "cache_mark",
            ("--cache-mark",),
            "flag",
            False,
            "Anthropic requests: add one cache_control mark at the end of the stable prefix "
            "(the last block of the last message, which the next request re-sends), unless "
            "the request has 4 marks already (Anthropic's limit) or that block has one.",
            panel=STRATEGY_PANEL,
        ),
        Flag(
            "max_input_bytes",
            ("--max-input-bytes",),
            "int",
            DEFAULT_MAX_INPUT_BYTES,
            "Refuse inputs larger than this many bytes (0: no limit).",
            minimum=0,
            metavar="BYTES",
        ),
        Flag("quiet", ("--quiet", "-q"), "flag", False, "No info lines or warnings on stderr."),
        Flag(
            "jobs",
            ("--jobs", "-j"),
            "int",
            0,
            "Worker processes (0: all cores; --engine local).",
            minimum=0,
            metavar="N",
        ),
        Flag(
            "engine",
            ("--engine",),
            "str",
            "local",
            "Where the files are read and their runs worked through: 'local' (this "
            "machine's processes) or 'dask' (the workers of a Dask cluster, --scheduler; "
            "needs ctxwin\\[dask]).",
            metavar="<local|dask>",
        ),
        Flag(
            "scheduler",
            ("--scheduler",),
            "str",
            None,
            "The Dask scheduler for --engine dask: tcp://HOST:PORT, or the JSON file "
            "of `dask scheduler --scheduler-file` (default: DASK_SCHEDULER_ADDRESS). "
            "Workers must see the same paths.",
            metavar="ADDRESS",
        ),
        Flag(
            "explain",
            ("--explain",),
            "flag",
            False,
            "Also show where the tokens go (outside the messages, head, each turn, the "
            "largest messages) and what each strategy step could save.",
        ),
        Flag(
            "by",
            ("--by",),
            "str",
            None,
            "Also show what fills the context: 'tool' (each tool's calls and results, and "
            "the largest results) or 'kind' (system, tools, user, assistant, thinking, tool "
            "calls, tool results, media, overhead). With --json: by_kind, by_tool and "
            "largest_results.",
            metavar="<tool|kind>",
        ),
        Flag(
            "json_",
            ("--json",),
            "flag",
            False,
            "Print the JSON report instead of a summary.",
        ),
        Flag(
            "report_path",
            ("--report",),
            "path",
            None,
            "Also write the JSON report to this file.",
        ),
    )
} | {
    "select": Flag(
        "select",
        ("--run",),
        "str",
        None,
        "Replay only the runs whose name contains this text (e.g. an id).",
    ),
    "json_tables": Flag(
        "json_", ("--json",), "flag", False, "Print JSON for machines instead of tables."
    ),
    "recommend": Flag(
        "recommend",
        ("--recommend",),
        "flag",
        False,
        "With --compare: try each named policy over a grid of its parameters and name the "
        "cheapest total cost with no call over the window that keeps --min-context of "
        "as-logged's mean context, its saving, and the configuration to paste.",
    ),
    "min_context": Flag(
        "min_context",
        ("--min-context",),
        "float",
        0.75,
        "--recommend's floor: the share of as-logged's mean context a policy must keep.",
        minimum=0,
        metavar="SHARE",
    ),
}
"""Every flag ``estimate``, ``prune`` or ``replay`` takes, by its key (:attr:`Flag.key`),
but for ``json_tables`` (``replay``'s ``--json``, whose help differs). An error about a
setting names its flag through this table (:func:`ctxwin.cli.funnel.flag_for`)."""

ESTIMATION = (
    "model",
    "spec",
    "context_length",
    "max_output_tokens",
    "max_tokens",
    "calibration",
    "fmt",
    "estimator",
    "tokenizer",
)
"""The model, budget and estimation flags."""

STRATEGY = ("strategy", "keep_results", "exclude_tools", "clear_at_least", "block")
"""The flags that say how a request is fitted (:class:`~ctxwin.fitting.strategy.Strategy`)."""

CACHING = ("cache_mark",)
"""The flags that change what is sent for a provider's prompt cache (a request that fits
too), for the commands that send or price a body."""

SHARED = ESTIMATION + STRATEGY + CACHING
"""The flags that make a :class:`~ctxwin.settings.Settings`
(:func:`ctxwin.cli.commands.build_settings`)."""

ENGINE = ("jobs", "engine", "scheduler")
"""Where the per-file work of ``check`` and ``replay`` runs
(:func:`ctxwin.runs.checking.on_engine`)."""

_AT = ESTIMATION.index("estimator")
_READ = (*ESTIMATION[:_AT], "run_format", *ESTIMATION[_AT:])
"""The estimation flags with ``--run-format`` after ``--format``, as ``--help`` lists them."""

COMMAND_FLAGS: dict[str, tuple[str, ...]] = {
    "estimate": (
        *_READ,
        "auto_compact_at",
        "json_",
        "by",
        "explain",
        "max_input_bytes",
        "quiet",
        *STRATEGY,
    ),
    "prune": (
        *_READ,
        "auto_compact_at",
        "report_path",
        "max_input_bytes",
        "quiet",
        *STRATEGY,
        *CACHING,
    ),
    "replay": (
        "select",
        *ESTIMATION,
        *STRATEGY,
        *CACHING,
        "run_format",
        "json_tables",
        "recommend",
        "min_context",
        "max_input_bytes",
        "quiet",
        *ENGINE,
    ),
}
"""Each transcript command's flags, in the order ``--help`` lists them (each within its
panel) and the Typer command declares them (:func:`ctxwin.cli.options.with_flags`)."""

ARGUMENTS: dict[str, dict[str, Any]] = {
    "estimate": {"input_": STDIO},
    "prune": {"input_": STDIO, "output": STDIO},
    "replay": {"run_files": None},
}
"""Each command's positional arguments, in order, with their defaults."""

VARIADIC: dict[str, str] = {"replay": "run_files"}

LEFT_TO_TYPER: dict[str, tuple[str, ...]] = {"replay": ("compare",)}
"""Each command's options that the Typer command declares itself and the fast path leaves
to it (a repeatable option: ``replay --compare``): a command line with one is read by
Typer (:mod:`ctxwin.cli.fastargs` finds the option unknown)."""
"""The commands whose one positional argument takes one or more values (a list)."""
