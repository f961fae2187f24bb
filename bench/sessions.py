"""Prediction ÷ reported on the agent-tool session samples (issue 12's targets).

    .venv/bin/python bench/sessions.py [CORPUS/agent_tools]

Replays every sample the way ``ctxwin replay`` does (agent-tool sessions learn
the overhead their logs never record) and prints, per run, the calls with
usage after the run's first, how many predictions were under the reported
count, and the median prediction ÷ reported; then the totals with and without
the two Codex rollouts whose text the publisher replaced by placeholders.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from ctxwin.runs import read_runs
from ctxwin.settings import Settings
from ctxwin.simulate import replay_run

REDACTED = "localpush"
"""Name part of the samples whose free text was replaced (their token counts are real)."""


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/corpus/agent_tools")
    every: list[tuple[float, bool]] = []
    plain: list[tuple[float, bool]] = []
    print("| sample | run | calls after the first report | under | median pred ÷ reported |")
    print("|---|---|---:|---:|---:|")
    for path in sorted(root.rglob("*.json*")):
        for run in read_runs(path.read_bytes()):
            rows = [r for r in replay_run(run, Settings())["rows"] if r.get("reported_tokens")]
            pairs = [
                (r["estimated_tokens"] / r["reported_tokens"], r["under_estimate"])
                for r in rows[1:]
            ]
            every += pairs
            if REDACTED not in path.name:
                plain += pairs
            median = f"{statistics.median(p for p, _ in pairs):.3f}" if pairs else "—"
            under = sum(u for _, u in pairs)
            name = f"{path.parent.name}/{path.name[:48]}"
            print(f"| {name} | {run.name[:24]} | {len(pairs)} | {under} | {median} |")
    for label, pairs in (
        ("all samples", every),
        (f"without the redacted ({REDACTED}) rollouts", plain),
    ):
        under = sum(u for _, u in pairs)
        median = statistics.median(p for p, _ in pairs)
        print(f"\n{label}: {len(pairs)} predictions after a run's first report,", end=" ")
        print(f"{under} under, median {median:.4f}")


if __name__ == "__main__":
    main()
