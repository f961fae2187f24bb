"""Prediction ÷ reported on the agent-tool session samples.

    .venv/bin/python bench/sessions.py [CORPUS/agent_tools]

Replays every sample the way ``ctxwin replay`` does (:mod:`fidelity.replays`: agent-tool
sessions learn the overhead their logs never record) and prints, per run, the calls with
usage after the run's first, how many predictions were under the reported count, and the
median prediction ÷ reported; then every prediction under its reported count (by how
much, against the safety margin of that call's budget, and whether the next call is under
too); then the totals with and without the two Codex rollouts whose text the publisher
replaced by placeholders. ``python -m tests.docs_support`` writes the same figures into
``docs/sessions.md``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fidelity.replays import REDACTED, measure, median
from tests.figures import sessions_per_sample


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/corpus/agent_tools")
    replayed = measure(root)
    print(sessions_per_sample(replayed))
    print("\n| sample | run | call | predicted | reported | short by | safety margin", end="")
    print(" | next under |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for r in replayed:
        for c in r.under:
            print(
                f"| {r.tool}/{r.sample[:48]} | {r.run[:24]} | {c.call} | {c.predicted:,} "
                f"| {c.reported:,} | {c.short_by:,} | {c.safety:,} "
                f"| {'yes' if c.next_under else 'no'} |"
            )
    for label, runs in (
        ("all samples", replayed),
        (f"without the redacted ({REDACTED}) rollouts", [r for r in replayed if not r.redacted]),
    ):
        calls = [c for r in runs for c in r.calls]
        under = sum(len(r.under) for r in runs)
        print(f"\n{label}: {len(calls)} predictions after a run's first report,", end=" ")
        print(f"{under} under, median {median(calls):.4f}")


if __name__ == "__main__":
    main()
