"""Fuzzing the session readers with damaged copies of real session files.

The agent-tool samples of the shared corpus (Claude Code, Codex CLI, Gemini CLI,
OpenHands, mini-swe-agent, OpenTelemetry, pi, GitHub Copilot CLI) and the session readers'
fixtures (tests/fixtures/sessions) are read, one to three of their values
(at any depth; the first 60 lines of a JSONL file) are replaced by a value of another
type, and the result is read, replayed and checked as ``ctxwin replay`` and ``ctxwin
check`` do. Only :class:`~ctxwin.errors.CtxwinError` (bad input: exit 1 with one line)
may come out; anything else would be an internal error. Seeded, so a failure repeats.

``make test`` runs about 500 cases; ``make fuzz`` (``CTXWIN_FUZZ_EXAMPLES``) more. The
tests skip when the corpus is absent.
"""

from __future__ import annotations

import contextlib
import os
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxwin.errors import CtxwinError
from ctxwin.runs import read_runs
from ctxwin.runs.simulate import check_run, replay_run
from ctxwin.settings import Settings
from fidelity.corpus import corpus_path
from tests.test_format_robustness import paths

CORPUS = corpus_path()
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "sessions"
SAMPLES = sorted(
    p
    for folder in (CORPUS / "agent_tools", CORPUS / "agent_tools_next", FIXTURES)
    for p in folder.rglob("*")
    if p.is_file() and p.suffix in (".json", ".jsonl")
)
"""The agent-tool samples (``agent_tools/``, ``agent_tools_next/``) and the readers'
fixtures."""
CASES = int(os.environ.get("CTXWIN_FUZZ_EXAMPLES", "500"))
VALUES: list[Any] = [[], {}, 0, -1, 1.5, None, True, "", "x", [1], {"a": []}, 2**62]
"""What a value is replaced by: every JSON type, empty and not."""
SETTINGS = Settings(context_length=200_000)


def _damaged(docs: list[Any], rng: random.Random) -> list[Any]:
    """A copy of ``docs`` with one to three values replaced."""
    out: list[Any] = orjson.loads(orjson.dumps(docs))
    spots = [(d, p) for d in range(len(out)) for p in paths(out[d]) if p]
    for _ in range(rng.randint(1, 3)):
        d, path = rng.choice(spots)
        target = out[d]
        for key in path[:-1]:  # an earlier change may have replaced a parent: then skip
            try:
                target = target[key]
            except (IndexError, KeyError, TypeError):
                break
        else:
            with contextlib.suppress(IndexError, KeyError, TypeError):
                target[path[-1]] = rng.choice(VALUES)
    return out


@pytest.mark.skipif(not SAMPLES, reason="no samples")
@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_damaged_session_files_are_bad_input_or_read(sample: Path) -> None:
    raw = sample.read_bytes()
    jsonl = sample.suffix == ".jsonl"
    docs = (
        [orjson.loads(line) for line in raw.splitlines() if line.strip()][:60]
        if jsonl
        else [orjson.loads(raw)]
    )
    rng = random.Random(sample.name)
    for case in range(max(5, CASES // len(SAMPLES))):
        damaged = _damaged(docs, rng)
        if jsonl:
            data = b"".join(orjson.dumps(d) + b"\n" for d in damaged)
        else:
            data = orjson.dumps(damaged[0])
        try:
            for run in read_runs(data, "auto")[:3]:
                replay_run(run, SETTINGS)
                check_run(run, SETTINGS)
        except CtxwinError:
            pass
        except Exception as exc:  # an internal error: say which case
            raise AssertionError(
                f"case {case}: {type(exc).__name__}: {exc}\n{data[:400]!r}"
            ) from exc
