"""Readers for the session files agent tools write, detected by shape.

Each reader module has ``NAME``, ``detect(entries, jsonl)`` and
``read(entries, labels) -> list[Run]``, where ``entries`` are the parsed JSON
values of a file (one for a JSON file, one per line for JSONL) and ``labels``
name them (``""`` or ``line N``). Readers take fields by name, tolerate
unknown ones, and name a required field that is missing. A reader whose tool keeps a
session in several files of one folder sets ``READS_BESIDE = True`` and takes a third
argument, ``beside`` (:data:`Beside`: the other files of the folder by name, ``None``
when the caller has no folder); a file that only goes with another raises
:class:`~ctxwin.sessions._common.Besides`.

=================== ==========================================================
name                what
=================== ==========================================================
``claude-code``     Claude Code session JSONL (main chain, subagent sidechains,
                    compaction segments, side-model calls)
``codex``           OpenAI Codex CLI rollout JSONL (a resumed or forked rollout's
                    replayed history is context, not calls)
``gemini-cli``      Gemini CLI ``Content[]`` history or ChatRecording session
                    (JSON, or JSONL with ``$set``/``$rewindTo`` records)
``openhands-events`` OpenHands V0 event-stream trajectory (a JSON list)
``mini-swe-agent``  mini-swe-agent ``.traj.json``
``otel``            OpenTelemetry spans (GenAI ``gen_ai.*`` or OpenInference ``llm.*``)
``pi``              pi coding agent session JSONL (branches, compaction segments,
                    each model's calls, aborted calls)
``copilot-cli``     GitHub Copilot CLI ``events.jsonl`` (system prompt logged; no
                    input usage per call; subagents, compaction segments)
``cline``           Cline, Roo Code and Kilo Code task folders
                    (``api_conversation_history.json`` with ``ui_messages.json``)
``opencode``        ``opencode export`` JSON (one call per step, compaction segments)
``qwen-code``       Qwen Code chat JSONL (``ChatRecord``: Gemini ``Content`` messages,
                    compression segments, subagent sidechains)
=================== ==========================================================

Pure: no typer, no rich, no stdin/stdout.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

from ctxwin.errors import InputError
from ctxwin.recorded import Run
from ctxwin.sessions import (
    claude_code,
    cline,
    codex,
    copilot_cli,
    gemini_cli,
    mini_swe_agent,
    opencode,
    openhands,
    otel,
    pi,
    qwen_code,
)
from ctxwin.sessions._common import Beside

AUTO = "auto"

READERS: dict[str, ModuleType] = {
    m.NAME: m
    for m in (
        qwen_code,  # before claude-code: its records also have uuid, type and message
        claude_code,
        codex,
        gemini_cli,
        openhands,
        mini_swe_agent,
        otel,
        pi,
        copilot_cli,
        cline,
        opencode,
    )
}
"""Every session reader by name, in detection order."""


def names() -> list[str]:
    """The names ``--run-format`` accepts (besides ``auto``)."""
    return list(READERS)


def check_name(name: str) -> str:
    """``name`` when it names a reader or is ``auto``; else :class:`InputError`."""
    if name != AUTO and name not in READERS:
        raise InputError(f"unknown run format {name!r} (choose from: {AUTO}, {', '.join(READERS)})")
    return name


def slim(value: Any) -> Any:
    """``value`` (one JSONL line) without what no reader uses, to keep big sessions
    small in memory: a Claude Code line's ``toolUseResult`` (a copy of the tool
    output) and the body of a ``file-history-snapshot`` or ``progress`` line."""
    if isinstance(value, dict):
        return claude_code.slim(value)
    return value


def detect(entries: Sequence[Any], jsonl: bool) -> str | None:
    """The name of the first reader that recognizes these entries, or ``None``."""
    for name, reader in READERS.items():
        if reader.detect(entries, jsonl):
            return name
    return None


def read(
    name: str, entries: Sequence[Any], labels: Sequence[str], beside: Beside | None = None
) -> list[Run]:
    """The runs the reader ``name`` finds in ``entries`` (``beside``: the files next to
    the file read, for the readers that read several, ``READS_BESIDE``).

    A bad entry raises :class:`InputError` naming the field; the caller turns
    it into an invalid run. A file that only goes with another raises
    :class:`~ctxwin.sessions._common.Besides`.
    """
    reader = READERS[check_name(name)]
    if getattr(reader, "READS_BESIDE", False):
        runs: list[Run] = reader.read(entries, labels, beside)
    else:
        runs = reader.read(entries, labels)
    return runs
