"""Prediction ÷ reported on the agent-tool session samples.

    .venv/bin/python bench/sessions.py [CORPUS/agent_tools]

Replays every sample the way ``ctxwin replay`` does (agent-tool sessions learn
the overhead their logs never record) and prints, per run, the calls with
usage after the run's first, how many predictions were under the reported
count, and the median prediction ÷ reported; then every prediction under its
reported count (by how much, against the safety margin of that call's budget,
and whether the next call is under too); then the totals with and without the
two Codex rollouts whose text the publisher replaced by placeholders.
"""

from __future__ import annotations

import statistics
import sys
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


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/corpus/agent_tools")
    tools: dict[tuple[str, bool], list[float]] = {}
    every: list[tuple[float, bool]] = []
    plain: list[tuple[float, bool]] = []
    misses: list[tuple[str, str, dict[str, Any], bool]] = []
    print("| sample | run | calls after the first report | under | median pred ÷ reported |")
    print("|---|---|---:|---:|---:|")
    for path in sorted(root.rglob("*.json*")):
        name = f"{path.parent.name}/{path.name[:48]}"
        for run in read_runs(path.read_bytes()):
            rows = [r for r in replay_run(run, Settings())["rows"] if r.get("reported_tokens")]
            pairs = [
                (r["estimated_tokens"] / r["reported_tokens"], r["under_estimate"])
                for r in rows[1:]
            ]
            every += pairs
            held = not path.name.startswith(FITTED_ON)
            tools.setdefault((path.parent.name, held), []).extend(p for p, _ in pairs)
            if REDACTED not in path.name:
                plain += pairs
            for i, row in enumerate(rows[1:], 1):
                if row["under_estimate"]:
                    again = i + 1 < len(rows) and bool(rows[i + 1]["under_estimate"])
                    misses.append((name, run.name, row, again))
            median = f"{statistics.median(p for p, _ in pairs):.3f}" if pairs else "—"
            under = sum(u for _, u in pairs)
            print(f"| {name} | {run.name[:24]} | {len(pairs)} | {under} | {median} |")
    print("\n| sample | run | call | predicted | reported | short by | safety margin", end="")
    print(" | next under |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for name, run_name, row, again in misses:
        short = row["reported_tokens"] - row["estimated_tokens"]
        safety = safety_margin(row["context_length"])
        print(
            f"| {name} | {run_name[:24]} | {row['call']} | {row['estimated_tokens']:,} "
            f"| {row['reported_tokens']:,} | {short:,} | {safety:,} | {'yes' if again else 'no'} |"
        )
    print(
        "\n| agent tool | fitted on: predictions | median | held out: predictions | median", end=""
    )
    print(" | all: predictions | median |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for tool in sorted({t for t, _ in tools}):
        cells = []
        both = tools.get((tool, False), []) + tools.get((tool, True), [])
        for xs in (tools.get((tool, False), []), tools.get((tool, True), []), both):
            cells += [str(len(xs)), f"{statistics.median(xs):.3f}" if xs else "—"]
        print(f"| {tool} | {' | '.join(cells)} |")
    for label, pairs in (
        ("all samples", every),
        (f"without the redacted ({REDACTED}) rollouts", plain),
    ):
        under = sum(u for _, u in pairs)
        median = statistics.median(p for p, _ in pairs)
        print(f"\n{label}: {len(pairs)} predictions after a run's first report,", end=" ")
        print(f"{under} under, median {median:.4f}")


def safety_margin(context_length: int) -> int:
    """The budget's safety margin for a window (``ceil(SAFETY_PERCENT % × window)``)."""
    return -((-SAFETY_PERCENT * context_length) // 100)


if __name__ == "__main__":
    main()
