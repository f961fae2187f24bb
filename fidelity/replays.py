"""Prediction ÷ reported on the agent-tool session samples, as ``ctxwin replay`` predicts.

    python bench/sessions.py [CORPUS/agent_tools]

Every run of every sample under ``agent_tools/`` is replayed the way ``ctxwin replay``
does with its default settings (:func:`ctxwin.runs.simulate.replay_run`; agent-tool
sessions learn the overhead their logs never record). For each call with usage after a
run's first report: the prediction made before its usage was seen, the reported prompt
tokens, and whether it was under. :func:`measure` returns them; ``docs/sessions.md``
and the README quote what :mod:`tests.figures` makes of them.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxwin.fitting.budget import SAFETY_PERCENT
from ctxwin.runs import read_runs
from ctxwin.runs.simulate import replay_run
from ctxwin.settings import Settings

REDACTED = "localpush"
"""Name part of the samples whose free text was replaced (their token counts are real)."""

FITTED_ON = ("codemie", "django", "sympy")
"""Name starts of the samples the learner's constants were chosen on (the share and the
least factor of ``ctxwin.fitting.calibration``); the others are held out."""

TOOLS = {
    "claude-code": "Claude Code",
    "codex": "Codex",
    "gemini-cli": "Gemini CLI",
    "mini-swe-agent": "mini-swe-agent",
    "openhands-events": "OpenHands",
    "otel-genai": "OpenTelemetry",
    "pi": "pi",
    "copilot-cli": "GitHub Copilot CLI",
    "cline": "Cline / Roo Code / Kilo Code",
    "opencode": "OpenCode",
    "qwen-code": "Qwen Code",
}
"""The folders of ``agent_tools/``, ``agent_tools_next/`` and the readers' fixtures
(``tests/fixtures/sessions``), and the agent tools they hold."""


@dataclass(frozen=True, slots=True)
class Call:
    """One call with usage after its run's first report."""

    call: int
    predicted: int
    reported: int
    context_length: int
    next_under: bool
    """The run's next call with usage is under its reported count too."""
    unlogged: int = 0
    """The row's ``unlogged_tokens`` (0: not marked)."""

    @property
    def ratio(self) -> float:
        return self.predicted / self.reported

    @property
    def short_by(self) -> int:
        return self.reported - self.predicted

    @property
    def safety(self) -> int:
        return safety_margin(self.context_length)


@dataclass(frozen=True, slots=True)
class Replayed:
    """One run of one sample."""

    tool: str
    sample: str
    run: str
    calls: list[Call] = field(default_factory=list)
    found: int = 0
    """Every model call of the run, with usage or not."""
    invalid: int = 0
    """Calls the replay could not read."""
    reported: int = 0
    """Calls with a reported prompt count (the run's first one included)."""

    @property
    def redacted(self) -> bool:
        return REDACTED in self.sample

    @property
    def held_out(self) -> bool:
        return not self.sample.startswith(FITTED_ON)

    @property
    def under(self) -> list[Call]:
        return [c for c in self.calls if c.predicted < c.reported]


def safety_margin(context_length: int) -> int:
    """The budget's safety margin for a window (``ceil(SAFETY_PERCENT % × window)``)."""
    return -((-SAFETY_PERCENT * context_length) // 100)


def measure(root: Path) -> list[Replayed]:
    """Every run of every sample under ``root`` (``agent_tools/``), in file order; a
    sample's agent tool is the folder under ``root`` that holds it (a task folder of
    Cline's is read with the files beside it)."""
    out = []
    for path in sorted(root.rglob("*.json*")):
        for run in read_runs(path.read_bytes(), path=str(path)):
            report = replay_run(run, Settings())
            rows = [r for r in report["rows"] if r.get("reported_tokens")]
            out.append(
                Replayed(
                    path.relative_to(root).parts[0],
                    path.name,
                    run.name,
                    list(_calls(rows)),
                    report["calls"],
                    report["invalid_calls"],
                    len(rows),
                )
            )
    return out


def _calls(rows: Sequence[Any]) -> Iterator[Call]:
    for i, row in enumerate(rows[1:], 1):
        yield Call(
            row["call"],
            row["estimated_tokens"],
            row["reported_tokens"],
            row["context_length"],
            i + 1 < len(rows) and rows[i + 1]["estimated_tokens"] < rows[i + 1]["reported_tokens"],
            row.get("unlogged_tokens", 0),
        )


def median(calls: Sequence[Call]) -> float | None:
    return statistics.median(c.ratio for c in calls) if calls else None
