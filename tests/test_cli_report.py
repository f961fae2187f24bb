"""The summary for people: printed to a pipe without rich, exactly as rich prints it."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from ctxwin import core
from ctxwin.cli.report import pipe_width, plain_summary, render_summary, summary_rows
from ctxwin.fitting.budget import CONTEXT_SOURCES
from tests.conftest import Cli
from tests.test_cli_fastargs import IMPORTTIME, imported

if TYPE_CHECKING:
    from ctxwin.fitting.rows import Report

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "agent-run.json"


def example_report(**changes: Any) -> Report:
    body = orjson.loads(EXAMPLE.read_bytes())
    plan = core.plan(core.load(body), **{"context_length": 16_000, **changes})
    return plan.report()


def with_rich(report: Report, width: int) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=False, color_system=None)
    render_summary(report, console)
    return out.getvalue()


text = st.text(
    st.one_of(
        st.characters(min_codepoint=0x20, max_codepoint=0x7E),
        st.sampled_from("×−→[]\\é漢\t\n\x1b🙂"),
    ),
    max_size=60,
)
counts = st.integers(0, 10**12)


@settings(max_examples=500, deadline=None)
@given(
    model=st.one_of(st.none(), text),
    source=st.sampled_from(list(CONTEXT_SOURCES)),
    numbers=st.tuples(counts, counts, counts, counts, counts, counts, counts),
    calibration=st.floats(1.0, 5.0),
    state=st.sampled_from(["fits", "pruned", "truncated", "off"]),
    width=st.integers(20, 250),
)
def test_plain_summary_is_what_rich_prints(
    model: str | None,
    source: Any,
    numbers: tuple[int, ...],
    calibration: float,
    state: str,
    width: int,
) -> None:
    report = example_report()
    estimated, raw, budget, context, reserve, safety, messages = numbers
    report.update(
        {
            "model": model,
            "context_length_source": source,
            "estimated_tokens": estimated,
            "raw_tokens": raw,
            "budget": budget,
            "context_length": context,
            "reserve": reserve,
            "safety": safety,
            "messages_in": messages,
            "calibration": calibration,
            "fits": state == "fits",
            "overflow_at_floor": state == "truncated",
            "enforced": state != "off",
        }
    )
    plain = plain_summary(report, width)
    if plain is not None:
        assert plain == with_rich(report, width)


@pytest.mark.parametrize("changes", [{}, {"max_tokens": 0}, {"context_length": 200_000}])
def test_the_example_goes_the_plain_way(changes: dict[str, Any]) -> None:
    report = example_report(**changes)
    assert plain_summary(report, 80) == with_rich(report, 80)
    wrapped = plain_summary(report, 50)  # the budget line goes on in a second line
    assert wrapped == with_rich(report, 50) and "\n          " in wrapped
    assert plain_summary(report, 20) is None  # "openai-chat" is longer than 10: rich folds it


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"COLUMNS": "120"},
        {"COLUMNS": "wide"},
        {"FORCE_COLOR": ""},
        {"FORCE_COLOR": "1"},
        {"TTY_COMPATIBLE": "0", "FORCE_COLOR": "1"},
        {"TTY_COMPATIBLE": "1"},
    ],
)
def test_pipe_width_is_the_width_rich_would_use(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    console = Console()
    assert pipe_width() == (None if console.is_terminal else console.width)


def test_a_summary_to_a_pipe_imports_no_rich(cli: Cli) -> None:
    proc = cli.process("estimate", str(EXAMPLE), "-c", "16000", env=IMPORTTIME)
    assert proc.returncode == 0
    assert b"verdict   needs pruning" in proc.stdout
    assert "rich" not in {m.split(".")[0] for m in imported(proc)}
    narrow = {**IMPORTTIME, "COLUMNS": "40"}
    wrapped = cli.process("estimate", str(EXAMPLE), "-c", "16000", env=narrow)
    assert wrapped.returncode == 0
    assert "rich" not in {m.split(".")[0] for m in imported(wrapped)}
    assert max(map(len, wrapped.stdout.decode().splitlines())) == 40


@pytest.mark.parametrize(
    ("changes", "status"),
    [
        ({"context_length": 200_000}, core.FITS),
        ({}, core.NEEDS_PRUNING),
        ({"context_length": 400, "max_tokens": 100}, core.TRUNCATED),
        ({"context_length": 1_000, "max_tokens": 2_000}, core.NO_BUDGET),
    ],
)
def test_the_verdict_words_the_status_the_plan_computed(
    changes: dict[str, Any], status: str
) -> None:
    """The report carries the plan's status, and the summary's verdict, its colour and a
    table's label all come from the one table of statuses."""
    from ctxwin.cli.verdicts import HEADLINE, LABEL, STYLE, verdict

    report = example_report(**changes)
    assert report["status"] == status
    assert list(report)[-1] == "status"
    assert verdict(report).startswith(HEADLINE[status] + ": ")
    assert set(LABEL) == set(STYLE) == set(HEADLINE) == set(core.STATUSES)
    assert dict(summary_rows(report))["verdict"] == verdict(report)
