"""One settings type for plan, prune, the manager and the run workers."""

from __future__ import annotations

import pickle
from pathlib import Path

import orjson
import pytest

import ctxwin
from ctxwin.settings import DEFAULT, Settings, settings_with
from ctxwin.tokens.seed import SeedEstimator

EXAMPLE = orjson.loads(
    (Path(__file__).resolve().parent.parent / "examples/agent-run.json").read_bytes()
)


def test_keywords_and_settings_mean_the_same_fit() -> None:
    by_keywords, p1 = ctxwin.prune(EXAMPLE, context_length=12_000, max_tokens=0)
    by_settings, p2 = ctxwin.prune(EXAMPLE, Settings(context_length=12_000, max_tokens=0))
    assert p1.result.dropped_turns > 0
    assert by_keywords == by_settings
    assert p1.result.keep == p2.result.keep and p1.budget == p2.budget


def test_keywords_apply_on_top_of_settings() -> None:
    base = Settings(context_length=12_000, max_tokens=0, estimator="seed")
    _, plan = ctxwin.prune(EXAMPLE, base, context_length=100_000)
    assert plan.budget.spec.context_length == 100_000
    assert plan.transcript.estimator.name == "seed"


def test_an_unknown_setting_is_named() -> None:
    with pytest.raises(TypeError, match="contextlength"):
        ctxwin.prune(EXAMPLE, contextlength=1000)
    with pytest.raises(TypeError, match="unknown setting"):
        settings_with(None, {"budget": 5})
    assert settings_with(None, {}) is DEFAULT


def test_portable_settings_pickle_and_name_their_estimator() -> None:
    held = Settings(context_length=5000, estimator=SeedEstimator())
    portable = held.portable()
    assert portable.estimator == "seed"
    assert pickle.loads(pickle.dumps(portable)) == portable
    assert portable.make_estimator().name == "seed"
    assert Settings().make_estimator().name == "content"


def test_the_manager_takes_settings_or_keywords() -> None:
    a = ctxwin.ContextWindowManager("gpt-4o", Settings(max_tokens=0), calibration_seed=1.2)
    assert a.settings.model == "gpt-4o" and a.settings.calibration == 1.2
    b = ctxwin.ContextWindowManager(context_length=12_000, max_tokens=0)
    c = ctxwin.ContextWindowManager(settings=Settings(context_length=12_000, max_tokens=0))
    assert b.fit(EXAMPLE).result.keep == c.fit(EXAMPLE).result.keep
