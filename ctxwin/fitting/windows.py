"""The window an agent tool ran a session at, and when the tool compacts it by itself.

A session file of an agent tool says more about the window than the model table does:

* **Codex** names it: each turn's ``task_started`` event carries ``model_context_window``,
  the share of the model's window Codex lets the conversation fill
  (``TurnContext::model_context_window`` in ``codex-rs/core``: the model's
  ``context_window`` × ``effective_context_window_percent`` ÷ 100, 95 by default; 258,400
  for the 272,000 of GPT-5.x: openai/codex#19319, #19306). That window is the session's
  (source ``session``) unless a flag, a spec file or ``--model`` names another.
* **Claude Code** runs every model at 200,000 tokens unless the 1M-token variant was
  chosen (a ``[1m]`` model id: ``sonnet[1m]``, ``claude-opus-4-6[1m]``; code.claude.com's
  model configuration, "extended context"), whatever window the API gives the model
  (the model table says 1,000,000 for Opus 4.6 and Sonnet 4.6). Its session logs record
  the model id without the suffix, so a session is budgeted at 200,000 (source ``tool``)
  unless a report above 200,000 shows the larger window (source ``session``) or the model
  id named with ``--model`` ends in ``[1m]`` (source ``name``).

When each compacts by itself (:func:`auto_compact`):

* **Claude Code** at ``window − min(max output, 20,000) − 13,000``: the effective window
  (the window less the output it keeps for the summary, at most 20,000) less a
  13,000-token buffer; 167,000 of 200,000, 967,000 of 1,000,000 (the threshold read from
  Claude Code's bundle in anthropics/claude-code#31806; the same formula in
  sirmalloc/ccstatusline#319 and bman654/clodex#180). ``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE``
  only lowers it: ``--auto-compact-at`` says so.
* **Codex** at ``auto_compact_token_limit``: 90 % of the model's window unless
  ``model_auto_compact_token_limit`` sets less (``ModelInfo::auto_compact_token_limit`` in
  ``codex-rs/protocol/src/openai_models.rs``); the model's window is the session's
  ÷ 0.95, so 244,800 for a session that names 258,400. A rollout that names no window
  (Codex 0.36–0.42 wrote it only in their ``token_count`` events, before the 95 % share
  existed, and compacted by other rules) gets none.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from ctxwin.fitting.budget import ContextSource, ModelSpec
from ctxwin.tokens.models import LONG_CONTEXT_WINDOW, long_context, lookup_model

CLAUDE_CODE = "claude-code"
CODEX = "codex"

CLAUDE_CODE_WINDOW = 200_000
"""The window Claude Code runs a model at unless its 1M-token variant is chosen."""
CLAUDE_CODE_SUMMARY_OUTPUT = 20_000
"""At most what Claude Code keeps of the window for the output (the summary)."""
CLAUDE_CODE_BUFFER = 13_000
"""The buffer below Claude Code's effective window at which it compacts."""

CODEX_WINDOW_PERCENT = 95
"""The share of the model's window a Codex session names (``effective_context_window_percent``)."""
CODEX_COMPACT_PERCENT = 90
"""The share of the model's window at which Codex compacts by default."""


class Window(NamedTuple):
    """A window and where it came from."""

    context_length: int
    source: ContextSource


def session_window(
    tool: str,
    model: str | None,
    named: int | None,
    reports: Iterable[int],
    *,
    model_given: bool = False,
) -> Window | None:
    """The window the agent tool ``tool`` (a session shape) ran a session at, when it is
    not simply the model table's: the window the session names (``named``: Codex), unless
    the model was given (``model_given``: ``--model`` names another model); else for
    Claude Code its default window, or the larger one its prompt counts (``reports``)
    show. ``None``: nothing to add (a ``[1m]`` model id asks for its window itself)."""
    if named is not None and not model_given:
        return Window(named, "session")
    if tool != CLAUDE_CODE or long_context(model):
        return None
    if max(reports, default=0) > CLAUDE_CODE_WINDOW:
        row = lookup_model(model) if model else None
        table = row.context_length if row is not None else 0
        return Window(max(LONG_CONTEXT_WINDOW, table), "session")
    row = lookup_model(model) if model else None
    if row is not None and row.context_length <= CLAUDE_CODE_WINDOW:
        return None  # the table's window is Claude Code's
    return Window(CLAUDE_CODE_WINDOW, "tool")


class AutoCompact(NamedTuple):
    """The prompt size at which an agent tool compacts by itself, and by which rule."""

    tokens: int
    rule: str
    """How it was found: ``flag`` (``--auto-compact-at``) or the tool's rule in words."""


def auto_compact(tool: str, spec: ModelSpec) -> AutoCompact | None:
    """When the agent tool ``tool`` compacts a session whose model spec is ``spec`` (the
    window in use): Claude Code's and Codex's rules (module docstring); ``None`` for
    another tool, or a Codex session whose window is not its own."""
    window = spec.context_length
    if tool == CLAUDE_CODE:
        output = min(
            spec.max_output_tokens or CLAUDE_CODE_SUMMARY_OUTPUT, CLAUDE_CODE_SUMMARY_OUTPUT
        )
        return AutoCompact(
            window - output - CLAUDE_CODE_BUFFER,
            f"Claude Code: window − {output:,} output − {CLAUDE_CODE_BUFFER:,} buffer",
        )
    if tool == CODEX and spec.context_length_source == "session":
        model_window = window * 100 // CODEX_WINDOW_PERCENT
        return AutoCompact(
            model_window * CODEX_COMPACT_PERCENT // 100,
            f"Codex: {CODEX_COMPACT_PERCENT} % of the model's {model_window:,}-token window",
        )
    return None
