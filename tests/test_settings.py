"""One settings type for plan, prune, the manager and the run workers."""

from __future__ import annotations

import pickle
import re
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
    assert Settings().make_estimator().name == "bound"
    assert Settings(estimator="fast").make_estimator().name == "content"


def test_the_manager_takes_settings_or_keywords() -> None:
    a = ctxwin.ContextWindowManager("gpt-4o", Settings(max_tokens=0), calibration_seed=1.2)
    assert a.settings.model == "gpt-4o" and a.settings.calibration == 1.2
    b = ctxwin.ContextWindowManager(context_length=12_000, max_tokens=0)
    c = ctxwin.ContextWindowManager(settings=Settings(context_length=12_000, max_tokens=0))
    assert b.fit(EXAMPLE).result.keep == c.fit(EXAMPLE).result.keep


def test_the_manager_takes_calibration_seed_as_the_former_name_of_calibration() -> None:
    old = ctxwin.ContextWindowManager("gpt-4o", calibration_seed=1.3)
    new = ctxwin.ContextWindowManager("gpt-4o", calibration=1.3)
    assert old.settings == new.settings and old.calibration == new.calibration == 1.3
    with pytest.raises(TypeError, match="calibration_seed"):
        ctxwin.ContextWindowManager(calibration=1.2, calibration_seed=1.3)


def test_the_wrappers_pass_settings_by_their_names() -> None:
    from ctxwin.integrations._common import settings_for

    spec = {"context_length": 9000, "max_output_tokens": 100}
    given = settings_for(spec=spec, calibration=1.3, estimator="seed")
    assert set(given) <= set(Settings._fields)
    assert Settings(**given) == Settings(spec=spec, calibration=1.3, estimator="seed")
    assert settings_for(model_spec=spec) == settings_for(spec=spec)  # the former name
    with pytest.raises(TypeError, match="model_spec"):
        settings_for(spec=spec, model_spec=spec)


# The command line: one name per setting --------------------------------------------


def test_each_setting_is_set_by_the_flag_keyed_by_its_name() -> None:
    from ctxwin.cli.flags import FLAGS, SHARED
    from ctxwin.cli.funnel import flag_for

    assert set(Settings._fields) <= set(SHARED)
    for field in Settings._fields:
        assert FLAGS[field].key == field
        assert flag_for(field) == FLAGS[field].names[0]
    assert flag_for("fmt") == "--format" and flag_for("spec") == "--model-spec"


def test_every_setting_an_error_names_is_a_flag_of_the_command_line() -> None:
    import typer.main

    from ctxwin.cli.app import app
    from ctxwin.cli.funnel import flag_for

    root = Path(ctxwin.__file__).parent
    named = {
        name
        for path in root.rglob("*.py")
        for name in re.findall(r"\bsetting=\"(\w+)\"", path.read_text(encoding="utf-8"))
    }
    assert {"tokenizer", "fmt", "estimator", "engine", "scheduler"} <= named
    group = typer.main.get_command(app)
    declared = {
        opt
        for command in group.commands.values()  # type: ignore[attr-defined]
        for param in command.params
        for opt in param.opts
    }
    assert {name: flag_for(name) for name in named if flag_for(name) not in declared} == {}


def test_the_command_line_names_its_estimator() -> None:
    from ctxwin.cli.commands import build_settings

    seed = build_settings(estimator="seed", context_length=5000)
    assert seed.estimator == "seed" and seed.context_length == 5000
    assert pickle.loads(pickle.dumps(seed)) == seed
    auto = build_settings(tokenizer="auto")
    assert (auto.estimator, auto.tokenizer) == ("bound", "auto")
    pytest.importorskip("quicktok")
    exact = build_settings(estimator="seed", tokenizer="o200k_base")
    assert (exact.estimator, exact.tokenizer) == ("tokenizer:o200k_base", None)
    assert exact.make_estimator().name == "tokenizer:o200k_base"


@pytest.mark.parametrize("name", ["nope", "tokenizer:nope", "tokenizer:"])
def test_an_estimator_name_is_checked_as_it_would_be_built(name: str) -> None:
    from ctxwin.tokens import check_estimator, get_estimator

    with pytest.raises(Exception) as built:
        get_estimator(name)
    with pytest.raises(type(built.value), match=re.escape(str(built.value))):
        check_estimator(name)
    assert check_estimator("bound") == "bound"
