"""Every session reader's fixtures (tests/fixtures/sessions/<reader>) replay with every model
call found and none invalid, through the library and the command line (check, replay,
calibrate, lint), as the corpus samples do."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ctxwin.recorded import Run
from ctxwin.runs import read_runs
from ctxwin.runs.simulate import check_run, replay_run
from ctxwin.sessions import READERS
from ctxwin.settings import Settings
from tests.conftest import Cli

FIXTURES = Path(__file__).parent / "fixtures" / "sessions"
READERS_WITH_FIXTURES = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
OLDER = frozenset(
    ("claude-code", "codex", "gemini-cli", "openhands-events", "mini-swe-agent", "otel")
)
"""Readers whose synthetic sessions live in their test modules (tests/test_sessions*.py)."""


def test_every_reader_has_fixtures() -> None:
    assert sorted(set(READERS) - OLDER) == READERS_WITH_FIXTURES
    assert {"pi", "copilot-cli", "cline", "opencode", "qwen-code"} <= set(READERS_WITH_FIXTURES)


def fixture_runs(reader: str) -> list[tuple[Path, Run]]:
    out: list[tuple[Path, Run]] = []
    for path in sorted((FIXTURES / reader).rglob("*.json*")):
        out.extend((path, run) for run in read_runs(path.read_bytes(), path=str(path)))
    return out


@pytest.mark.parametrize("reader", READERS_WITH_FIXTURES)
def test_fixtures_replay_with_every_call_and_none_invalid(reader: str) -> None:
    found = fixture_runs(reader)
    assert found
    settings = Settings(context_length=200_000)
    for path, run in found:
        assert run.error is None, (path, run.error)
        assert run.shape == reader, path
        report = replay_run(run, settings)
        expected = len(run.recorded) if run.recorded is not None else len(run.calls_at or ())
        assert report["calls"] == expected > 0, (path, run.name)
        assert report["invalid_calls"] == 0, (path, run.name, report["rows"])
        assert check_run(run, settings)["status"] != "invalid", (path, run.name)
    assert sum(run.current for _, run in found) >= 1


@pytest.mark.parametrize("reader", READERS_WITH_FIXTURES)
def test_the_command_line_reads_the_fixtures(reader: str, cli: Cli) -> None:
    folder = str(FIXTURES / reader)
    check = cli.process("check", folder, "--json", "-j", "1", "-c", "200000", "--fail-on", "never")
    assert check.returncode == 0, check.stderr
    rows = orjson.loads(check.stdout)["rows"]
    assert rows and not [r for r in rows if r["status"] == "invalid"]
    replay = cli.process("replay", folder, "--json", "-j", "1", "-c", "200000")
    assert replay.returncode in (0, 3), replay.stderr
    assert b"invalid" not in replay.stderr
    lint = cli.process("lint", folder, "--json")
    assert lint.returncode == 0, lint.stdout
    calibrate = cli.process("calibrate", folder, "--json")
    assert calibrate.returncode == (1 if reader == "copilot-cli" else 0), calibrate.stderr


def test_run_format_help_names_every_reader() -> None:
    from ctxwin.cli.flags import FLAGS

    text = FLAGS["run_format"].help
    assert [name for name in READERS if name not in text] == []
