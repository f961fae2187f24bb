"""``--tokenizer auto``: exact counts for models whose tokenizer ships with the ``bpe``
extra, the estimator otherwise; the model table's tokenizer column and the Claude seeds."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

import ctxwin
from ctxwin.core import load
from ctxwin.fitting.budget import compute_budget, resolve_spec
from ctxwin.proxy.fitting import Fitter, ProxyConfig
from ctxwin.proxy.routes import CHAT, MESSAGES
from ctxwin.settings import Settings
from ctxwin.tokens.bound import BoundEstimator
from ctxwin.tokens.bpe import TOKENIZERS, TokenizerEstimator, auto_estimator, exact_encoding
from ctxwin.tokens.content import ContentEstimator
from ctxwin.tokens.models import lookup_model, model_table
from ctxwin.tokens.registry import default_calibration
from ctxwin.tokens.seeds import (
    BOUND_MODEL_CALIBRATION,
    CLAUDE_GROWTH_MEASURED,
    CLAUDE_NEXT_SEED,
    CLAUDE_TOKENIZER_GROWTH,
    MODEL_CALIBRATION,
)
from tests.conftest import Cli

HAS_BPE = importlib.util.find_spec("quicktok") is not None
needs_bpe = pytest.mark.skipif(not HAS_BPE, reason="needs the bpe extra (quicktok)")

FAMILIES = {*TOKENIZERS, "claude", "gemini", "llama4", "mistral", "deepseek-v3", "qwen"}


def body(model: str | None = "gpt-4o") -> dict[str, Any]:
    out: dict[str, Any] = {
        "max_tokens": 100,
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": 'Count the tokens of ünïcödé, 12345 and {"a": [1, 2]}.'},
            {"role": "assistant", "content": "Done: it is short."},
        ],
    }
    if model is not None:
        out["model"] = model
    return out


@pytest.fixture
def no_bpe(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``bpe`` extra, simulated absent: ``import quicktok`` raises ImportError."""
    monkeypatch.setitem(sys.modules, "quicktok", None)


# --- which models count exactly -------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("openai/gpt-4.1-nano", "o200k_base"),
        ("gpt-5.2", "o200k_base"),
        ("gpt-5-codex", "o200k_base"),
        ("o1", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini-2025-04-16", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo-2024-04-09", "cl100k_base"),
        ("gpt-3.5-turbo-0125", "cl100k_base"),
        ("llama-3.3-70b", "llama3"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama3"),
        ("meta-llama/Meta-Llama-3-8B-Instruct", "llama3"),
        ("Qwen/Qwen2.5-7B-Instruct", "qwen3"),
        ("Qwen/Qwen3-8B", "qwen3"),
        ("qwen3-coder", "qwen3"),
        # not public, or public but not shipped with the extra: the estimator
        ("claude-sonnet-4-5", None),
        ("claude-opus-4-7", None),
        ("gemini-3-pro", None),
        ("llama-4-maverick", None),
        ("deepseek-chat", None),
        ("mistral-small-latest", None),
        ("qwen3-max", None),  # API only: its tokenizer is not published
        ("qwen3.5-27b", None),  # a newer Qwen: not assumed to share the vocabulary
        ("gpt-oss-120b", None),
        ("gpt-4oo", None),
        ("my-local-model", None),
        ("", None),
        (None, None),
    ],
)
def test_exact_encoding(model: str | None, encoding: str | None) -> None:
    assert exact_encoding(model) == encoding


def test_every_row_names_its_tokenizer_family() -> None:
    for row in model_table():
        assert row.tokenizer in FAMILIES, row
        assert (row.tokenizer_generation is not None) == (row.tokenizer == "claude"), row
        if row.tokenizer in TOKENIZERS:
            assert exact_encoding(row.name) == row.tokenizer


@pytest.mark.parametrize(
    ("model", "generation"),
    [
        ("claude-3-5-haiku", 1),
        ("claude-sonnet-4-5", 1),
        ("claude-haiku-4-5", 1),
        ("claude-opus-4-6", 1),
        ("claude-sonnet-4-6", 1),
        ("claude-opus-4-7", 2),
        ("claude-opus-4-8", 2),
        ("claude-sonnet-5", 2),
    ],
)
def test_claude_rows_record_the_tokenizer_generation(model: str, generation: int) -> None:
    row = lookup_model(model)
    assert row is not None and row.tokenizer == "claude"
    assert row.tokenizer_generation == generation


def test_claude_seed_covers_the_newer_tokenizer() -> None:
    gen1 = dict(MODEL_CALIBRATION)["claude"]
    assert default_calibration("content", "claude-sonnet-4-5-20250929") == gen1
    assert default_calibration("content", "anthropic/claude-opus-4-6") == gen1
    bound_gen1 = dict(BOUND_MODEL_CALIBRATION)["claude"]
    assert default_calibration("bound", "anthropic/claude-opus-4-6") == bound_gen1 > gen1
    for model in ("claude-opus-4-7", "claude-opus-4-8-20260601", "claude-opus-5"):
        assert default_calibration("content", model) == CLAUDE_NEXT_SEED, model
        assert default_calibration("bound", model) == CLAUDE_NEXT_SEED, model
    # generation 1's worst ratio on the fit part of the provider calls (content and bound,
    # fidelity/provider.md) times the documented growth, and the largest measured since
    worst = max(float(r["fit worst"]) for r in _seed_rows() if r["family"] == "claude")
    assert worst > 1.0  # the family counts more than the four: the reason it has a seed
    assert worst * CLAUDE_TOKENIZER_GROWTH <= CLAUDE_NEXT_SEED
    assert worst * CLAUDE_GROWTH_MEASURED <= CLAUDE_NEXT_SEED


def _seed_rows() -> list[dict[str, str]]:
    """The seed rows ``python -m fidelity.provider`` wrote (fidelity/provider.md)."""
    from fidelity import provider

    written = Path(provider.__file__).resolve().parent / "provider.md"
    labels = {label for label, _ in provider.SEED_TABLES.values()}
    return [r for r in provider.read_figures(written) if r["figure"] in labels]


def test_bound_seeds_cover_the_models_that_count_more() -> None:
    """The bound borrows no seed from content: each is at least the worst reported ÷
    largest-of-four ratio of its family on either part of the provider calls
    (fidelity/provider.md), and a family whose calls stay under 1.0 has none."""
    rows = [r for r in _seed_rows() if r["estimator"] == "bound"]
    assert {r["family"] for r in rows} >= {"claude", "deepseek", "llama-4", "gpt-4o"}
    table = dict(BOUND_MODEL_CALIBRATION)
    for row in rows:
        worst = max(float(row[k]) for k in ("fit worst", "held-out worst") if row[k] != "—")
        assert table.get(row["family"], 1.0) >= worst, row
        assert (row["family"] in table) == (worst > 1.0), row
    assert default_calibration("bound", "gpt-4o") == 1.0
    # a family added to content's seeds needs its bound seed too, or the bound has none
    assert [n for n, _ in BOUND_MODEL_CALIBRATION] == [n for n, _ in MODEL_CALIBRATION]
    assert default_calibration("tokenizer:o200k_base", "claude-opus-4-7") == 1.0


def test_cli_applies_the_newer_claude_seed(cli: Cli) -> None:
    out = cli(
        "estimate",
        "-",
        "--model",
        "claude-opus-4-7",
        "--json",
        "-q",
        input=orjson.dumps(body(None)),
    )
    assert out.exit_code == 0, out.stderr
    report = orjson.loads(out.stdout)
    assert report["calibration"] == CLAUDE_NEXT_SEED
    assert report["estimated_tokens"] > report["raw_tokens"] * 1.9


# --- the model table's budgets ------------------------------------------------------


def test_every_row_leaves_a_positive_budget() -> None:
    """An output cap as large as the window would leave nothing for the prompt (a budget
    below 0 fits no request: every command refuses it)."""
    for row in model_table():
        budget = compute_budget(resolve_spec(row.name))
        assert budget.budget > 0, (row.name, budget)


def test_mistral_small_latest_is_budgeted() -> None:
    b = compute_budget(resolve_spec("mistral-small-latest"))
    assert b.spec.table_row == "mistral-small"
    assert b.enforced and b.budget > b.context_length // 2


@pytest.mark.parametrize(
    ("model", "row", "window"),
    [
        ("gemini-3-pro", "gemini-3-pro", 1_048_576),
        ("gemini-3-pro-preview", "gemini-3-pro-preview", 1_048_576),
        ("gemini-3-pro-image-preview", "gemini-3-pro-image-preview", 65_536),
        ("google/gemini-3-pro-image", "gemini-3-pro-image", 65_536),
    ],
)
def test_gemini_3_pro_rows(model: str, row: str, window: int) -> None:
    found = lookup_model(model)
    assert found is not None and (found.name, found.context_length) == (row, window)


def test_models_json_lists_the_tokenizer(cli: Cli) -> None:
    out = cli("models", "claude-opus-4-7", "--json")
    assert out.exit_code == 0
    (row,) = orjson.loads(out.stdout)
    assert (row["tokenizer"], row["tokenizer_generation"]) == ("claude", 2)


# --- auto, with the extra installed --------------------------------------------------


@needs_bpe
@pytest.mark.parametrize(
    ("model", "encoding"), [("gpt-4o", "o200k_base"), ("gpt-4", "cl100k_base")]
)
def test_auto_counts_exactly_with_the_extra(model: str, encoding: str) -> None:
    est = auto_estimator(model, ContentEstimator())
    assert est.name == f"tokenizer:{encoding}"
    b = body(model)
    auto = ctxwin.plan(load(b, estimator=est))
    exact = ctxwin.plan(load(b, estimator=TokenizerEstimator(encoding)))
    assert auto.result.raw_tokens == exact.result.raw_tokens
    assert auto.result.calibration == 1.0


@needs_bpe
def test_library_prune_with_tokenizer_auto() -> None:
    _, plan = ctxwin.prune(body("gpt-4o"), tokenizer="auto")
    assert plan.transcript.estimator.name == "tokenizer:o200k_base"
    _, plan = ctxwin.prune(body("claude-sonnet-4-5"), tokenizer="auto")
    assert plan.transcript.estimator.name == "bound"
    _, plan = ctxwin.prune(body("claude-sonnet-4-5"), tokenizer="auto", estimator="content")
    assert plan.transcript.estimator.name == "content"
    _, plan = ctxwin.prune(body(None), Settings(model="gpt-4", tokenizer="auto"))
    assert plan.transcript.estimator.name == "tokenizer:cl100k_base"


def _report(cli: Cli, *args: str, model: str | None = "gpt-4o") -> dict[str, Any]:
    out = cli("estimate", "-", "--json", "-q", *args, input=orjson.dumps(body(model)))
    assert out.exit_code == 0, out.stderr
    report: dict[str, Any] = orjson.loads(out.stdout)
    return report


@needs_bpe
def test_cli_auto_names_the_estimator_it_used(cli: Cli) -> None:
    exact = _report(cli, "--tokenizer", "o200k_base")
    auto = _report(cli, "--tokenizer", "auto")
    assert auto["estimator"] == "tokenizer:o200k_base"
    assert auto["estimated_tokens"] == exact["estimated_tokens"]
    # --model wins over the body's model
    assert (
        _report(cli, "--tokenizer", "auto", "--model", "qwen3-32b")["estimator"]
        == "tokenizer:qwen3"
    )
    # a tokenizer that is not shipped: the estimator, and the model's seed
    claude = _report(cli, "--tokenizer", "auto", model="claude-sonnet-4-5")
    seed = default_calibration("bound", "claude-sonnet-4-5")
    assert (claude["estimator"], claude["calibration"]) == ("bound", seed)
    claude_model = "claude-sonnet-4-5"
    content = _report(cli, "--tokenizer", "auto", "--estimator", "content", model=claude_model)
    assert (content["estimator"], content["calibration"]) == (
        "content",
        default_calibration("content", "claude-sonnet-4-5"),
    )
    bound = _report(cli, "--tokenizer", "auto", "--estimator", "bound", model="gemini-3-pro")
    assert bound["estimator"] == "bound"
    assert _report(cli, "--tokenizer", "auto", model=None)["estimator"] == "bound"


@needs_bpe
def test_proxy_auto_picks_each_requests_model() -> None:
    fitter = Fitter(ProxyConfig(upstream="http://127.0.0.1:9", settings=Settings(tokenizer="auto")))
    anthropic = {
        "model": "claude-haiku-4-5",
        "max_tokens": 100,
        "system": "You are terse.",
        "messages": [{"role": "user", "content": "Hello there."}],
    }
    names = []
    for route, request in ((CHAT, body("gpt-4o")), (MESSAGES, anthropic), (CHAT, body("gpt-4"))):
        plan = fitter.fit(route, orjson.dumps(request)).plan
        assert plan is not None
        names.append(plan.transcript.estimator.name)
    assert names == ["tokenizer:o200k_base", "bound", "tokenizer:cl100k_base"]
    again = [fitter.fit(CHAT, orjson.dumps(body("gpt-4o"))).plan for _ in range(2)]
    assert again[0] is not None and again[1] is not None
    assert again[0].transcript.estimator is again[1].transcript.estimator


# --- auto, with the extra absent -----------------------------------------------------


def test_auto_without_the_extra_uses_the_estimator(no_bpe: None, cli: Cli) -> None:
    fallback = BoundEstimator()
    assert auto_estimator("gpt-4o", fallback) is fallback
    _, plan = ctxwin.prune(body("gpt-4o"), tokenizer="auto")
    assert plan.transcript.estimator.name == "bound"
    report = _report(cli, "--tokenizer", "auto")
    assert report["estimator"] == "bound"
    assert _report(cli, "--tokenizer", "auto", "--estimator", "fast")["estimator"] == "content"
    # naming an encoding still needs the extra (exit 2)
    out = cli("estimate", "-", "--tokenizer", "o200k_base", input=orjson.dumps(body()))
    assert out.exit_code == 2 and "ctxwin[bpe]" in out.stderr


def test_auto_settings_stay_portable() -> None:
    s = Settings(estimator=BoundEstimator(), tokenizer="auto").portable()
    assert (s.estimator, s.tokenizer) == ("bound", "auto")
    assert s.make_estimator("claude-opus-4-7").name == "bound"
