"""ContextWindowManager and calibration: reset, only growing, the true factor, cache tokens."""

from __future__ import annotations

import math
import re
import runpy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxwin
from ctxwin.fitting.calibration import grow, prompt_tokens_from_usage
from ctxwin.fitting.pruning import pairing_problems
from ctxwin.manager import default_seed
from ctxwin.tokens.seed import SeedEstimator
from tests.builders import assistant, system, tool, user

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def body(turns: int, result_bytes: int = 400) -> dict[str, Any]:
    messages = [system(), user()]
    for i in range(turns):
        messages += [assistant(f"c{i}"), tool(f"c{i}", "r" * result_bytes)]
    return {"model": "gpt-4o", "messages": messages}


def manager(**kw: Any) -> ctxwin.ContextWindowManager:
    kw.setdefault("context_length", 100_000)
    kw.setdefault("max_tokens", 1000)
    return ctxwin.ContextWindowManager(estimator=SeedEstimator(), **kw)


# calibration helpers ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("factor", "raw", "reported", "expected"),
    [
        (1.15, 1000, 2000, 2.0),  # grows to reported ÷ raw
        (1.15, 1000, 900, 1.15),  # never shrinks
        (2.5, 1000, 2000, 2.5),
        (1.15, 0, 500, 1.15),  # nothing to learn from an empty estimate
    ],
)
def test_grow(factor: float, raw: int, reported: int, expected: float) -> None:
    assert grow(factor, raw, reported) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"prompt_tokens": 120, "completion_tokens": 9}, 120),
        (
            {
                "input_tokens": 3,
                "cache_creation_input_tokens": 200,
                "cache_read_input_tokens": 1111,
                "output_tokens": 40,
            },
            1314,
        ),
        ({"input_tokens": 445}, 445),
        ({"promptTokenCount": 23, "totalTokenCount": 28}, 23),
        ({"usageMetadata": {"promptTokenCount": 35}}, 35),
        ({"completion_tokens": 9}, None),
        ({"prompt_tokens": "many"}, None),
    ],
)
def test_prompt_tokens_from_usage(usage: Any, expected: int | None) -> None:
    assert prompt_tokens_from_usage(usage) == expected


def test_observe_without_usage_teaches_nothing() -> None:
    m = manager()
    m.fit(body(1))
    assert m.observe(None) == ctxwin.SEED_CALIBRATION


# the manager --------------------------------------------------------------------------


def test_fits_returns_the_request_itself() -> None:
    request = body(3)
    sent = manager().fit(request)
    assert sent.request is request
    assert not sent.pruned and sent.dropped_turns == 0 and sent.kept_turns == 3
    assert sent.messages == request["messages"]
    assert sent.calibration == ctxwin.SEED_CALIBRATION


def test_a_new_run_resets_the_calibration() -> None:
    m = manager()
    first = m.fit(body(1))
    m.fit(body(2), last_usage={"prompt_tokens": first.raw_tokens_sent * 3})
    assert m.calibration == pytest.approx(3.0)
    m.fit(body(1), last_usage=None)  # the next run's first send
    assert m.calibration == ctxwin.SEED_CALIBRATION


def test_calibration_only_grows() -> None:
    m = manager()
    sent = m.fit(body(1))
    m.fit(body(2), last_usage={"prompt_tokens": sent.raw_tokens_sent * 2})
    assert m.calibration == pytest.approx(2.0)
    sent = m.fit(body(3), last_usage={"prompt_tokens": 1})
    assert m.calibration == pytest.approx(2.0)
    assert sent.calibration == pytest.approx(2.0)


def test_converges_to_the_true_factor_not_to_true_over_seed() -> None:
    """A provider that counts exactly 2× the raw estimate: the factor becomes 2, not 1.74."""
    m = manager()
    usage = None
    for turns in range(1, 8):
        sent = m.fit(body(turns), last_usage=usage)
        reported = 2 * sent.raw_tokens_sent
        if usage is not None:
            assert sent.estimated_tokens_after >= reported  # safe from the second call on
        usage = {"prompt_tokens": reported}
    assert m.calibration == pytest.approx(2.0)
    assert m.calibration > 2 / ctxwin.SEED_CALIBRATION + 0.2


def test_anthropic_cache_tokens_are_part_of_the_prompt() -> None:
    m = manager()
    sent = m.fit(body(2))
    raw = sent.raw_tokens_sent
    usage = {
        "input_tokens": raw // 4,
        "cache_creation_input_tokens": raw // 2,
        "cache_read_input_tokens": raw,
    }
    m.fit(body(3), last_usage=usage)
    expected = (raw // 4 + raw // 2 + raw) / raw
    assert m.calibration == pytest.approx(expected)
    assert m.calibration > 1.7  # input_tokens alone would have taught nothing


def test_learns_against_what_was_sent_after_pruning() -> None:
    m = manager(context_length=3000, max_tokens=200)
    sent = m.fit(body(12, result_bytes=600))
    assert sent.pruned
    assert sent.raw_tokens_sent < sent.result.raw_tokens
    m.observe({"prompt_tokens": sent.raw_tokens_sent * 2})
    assert m.calibration == pytest.approx(2.0)


def test_pruned_transcripts_persist_and_keep_pairing() -> None:
    m = manager(context_length=4000, max_tokens=200)
    request = body(1)
    usage = None
    dropped_ever = 0
    for i in range(1, 40):
        sent = m.fit(request, last_usage=usage)
        view = ctxwin.load(sent.request).view
        assert pairing_problems(view) == []
        assert sent.messages[:2] == [system(), user()]  # the head is kept
        dropped_ever += sent.dropped_turns
        usage = {"prompt_tokens": sent.raw_tokens_sent}
        request = {
            **sent.request,
            "messages": [*sent.messages, assistant(f"n{i}"), tool(f"n{i}", "z" * 500)],
        }
    assert dropped_ever > 0
    assert sent.estimated_tokens_after <= sent.budget.budget


def test_context_truncated_carries_the_fit() -> None:
    m = manager(context_length=2000, max_tokens=200)
    request = body(1, result_bytes=20_000)
    with pytest.raises(ctxwin.ContextTruncated) as info:
        m.fit(request)
    result = info.value.result
    assert result.overflow_at_floor
    assert result.estimated_tokens_after > result.budget
    assert result.calibration == ctxwin.SEED_CALIBRATION


def test_observe_ignores_usage_without_a_prompt_count() -> None:
    m = manager()
    m.fit(body(1))
    assert m.observe({"completion_tokens": 50}) == ctxwin.SEED_CALIBRATION


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=0.2, max_value=5.0), min_size=1, max_size=12))
def test_calibration_is_monotone_within_a_run(ratios: list[float]) -> None:
    m = manager()
    sent = m.fit(body(1))
    seen = [m.calibration]
    for turns, ratio in enumerate(ratios, 2):
        usage = {"prompt_tokens": math.ceil(sent.raw_tokens_sent * ratio)}
        sent = m.fit(body(turns), last_usage=usage)
        seen.append(m.calibration)
    assert seen == sorted(seen)
    assert seen[-1] >= max([ctxwin.SEED_CALIBRATION, *ratios]) - 1e-9


def test_agent_loop_example_ends_in_context_truncated(capsys: pytest.CaptureFixture[str]) -> None:
    namespace = runpy.run_path(str(EXAMPLES / "agent_loop.py"))
    reason, detail = namespace["run_agent"]()
    assert reason == "context_truncated"
    assert "over the budget" in detail
    out = capsys.readouterr().out
    assert re.search(r"dropped turns [1-9]", out)  # it pruned before it had to stop
    assert re.search(r"calibration (1\.[2-9]|[2-9]\.)", out)  # and learned from usage


def test_run_modules_do_not_import_typer_or_rich() -> None:
    import subprocess
    import sys

    code = (
        "import sys, ctxwin.manager, ctxwin.runs, ctxwin.runs.simulate, ctxwin.runs.checking,"
        " ctxwin.fitting.calibration;"
        "bad = [m for m in ('typer', 'rich', 'click') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_an_explicit_seed_is_where_every_run_starts() -> None:
    m = manager(calibration_seed=1.4)
    sent = m.fit(body(1))
    assert sent.calibration == pytest.approx(1.4)
    m.fit(body(2), last_usage={"prompt_tokens": sent.raw_tokens_sent * 3})
    assert m.calibration == pytest.approx(3.0)
    m.fit(body(1))
    assert m.calibration == pytest.approx(1.4)
    assert manager().calibration == default_seed(SeedEstimator(), None)


def test_the_fresh_content_factor_of_overhead_learning_is_a_setting() -> None:
    """``fresh_factor`` is where the factor for content no report counted yet starts
    (frameworks show every message as sent: 1.0); by default the session logs' 3.0."""
    seen = ctxwin.ContextWindowManager("gpt-4o", learn_overhead=True, fresh_factor=1.0)
    default = ctxwin.ContextWindowManager("gpt-4o", learn_overhead=True)
    for manager in (seen, default):
        manager.observe({"prompt_tokens": 500}, raw_tokens=100)
        # one report: the line through it at the factor no report has measured yet
        assert manager.overhead == 500 - manager.calibration * 100
    assert seen.overhead == 400
    assert seen.calibration == 1.0
    assert default.calibration == ctxwin.fitting.calibration.FRESH_FACTOR == 3.0


@pytest.mark.parametrize("entry", ["manager", "prune"])
def test_no_budget_raises_with_its_figures(entry: str) -> None:
    """A 20,000-token window with the body's 32,000-token max_tokens leaves no budget:
    the manager and ``ctxwin.prune`` raise (they used to return the body unchanged)."""
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 32_000,
        "messages": [user("Summarise the repository.")],
    }
    with pytest.raises(ctxwin.NoBudget) as caught:
        if entry == "manager":
            ctxwin.ContextWindowManager(context_length=20_000).fit(body)
        else:
            ctxwin.prune(body, context_length=20_000)
    exc = caught.value
    assert isinstance(exc, ctxwin.ContextTruncated)
    assert exc.exit_code == ctxwin.ExitCode.CONTEXT_TRUNCATED
    assert (exc.context_length, exc.context_length_source) == (20_000, "flag")
    assert (exc.reserve, exc.reserve_source, exc.safety) == (32_000, "body", 600)
    assert exc.budget == -12_600 and exc.model == "claude-sonnet-4-5"
    assert not exc.result.enforced and exc.result.overflow_at_floor
    assert "--" not in str(exc)  # the library words no flags
