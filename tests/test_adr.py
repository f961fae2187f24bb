"""The ADR's worked numbers, through the library and the command line."""

from __future__ import annotations

import orjson

import ctxwin
from tests.builders import adr_transcript
from tests.conftest import Cli


def report(cli: Cli, *args: str, body: object) -> dict[str, object]:
    result = cli("estimate", "-", "--json", "--estimator", "seed", *args, input=orjson.dumps(body))
    assert result.exit_code == 0, result.stderr
    data = orjson.loads(result.stdout)
    assert isinstance(data, dict)
    return data


def test_unknown_window_budget_is_6946(cli: Cli) -> None:
    data = report(cli, body=adr_transcript())
    assert data["context_length"] == 8192
    assert data["context_length_source"] == "fallback"
    assert (data["reserve"], data["safety"], data["budget"]) == (1000, 246, 6946)


def test_window_20000_with_max_tokens_5000_budget_is_14400(cli: Cli) -> None:
    data = report(cli, "--context-length", "20000", "--max-tokens", "5000", body=adr_transcript())
    assert (data["reserve"], data["safety"], data["budget"]) == (5000, 600, 14400)


def test_window_4000_drops_exactly_one_turn(cli: Cli) -> None:
    data = report(cli, "--context-length", "4000", body=adr_transcript())
    assert data["budget"] == 2880
    assert data["dropped_turns"] == 1
    assert data["kept_turns"] == 2
    assert data["estimated_tokens_after"] == 2879
    assert data["dropped_messages"] == [2, 3]
    assert data["pruned"] is True and data["fits"] is False
    assert data["overflow_at_floor"] is False


def test_window_4000_prune_output_is_head_plus_two_newest_turns(cli: Cli) -> None:
    body = adr_transcript()
    result = cli("prune", "-", "-", "-c", "4000", "--estimator", "seed", input=orjson.dumps(body))
    assert result.exit_code == 0, result.stderr
    assert orjson.loads(result.stdout) == body[:2] + body[4:]
    assert "dropped 1 turn (2 messages)" in result.stderr


def test_library_gives_the_same_numbers() -> None:
    out, plan = ctxwin.prune(
        adr_transcript(), context_length=4000, estimator=ctxwin.SeedEstimator()
    )
    assert plan.budget.budget == 2880
    assert plan.result.estimated_tokens_after == 2879
    assert out == adr_transcript()[:2] + adr_transcript()[4:]
