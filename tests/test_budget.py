"""Model spec resolution, the model table, and the budget formula."""

from __future__ import annotations

import pytest

from ctxwin.budget import compute_budget, lookup_model, model_table, resolve_spec, spec_fields
from ctxwin.errors import SpecError


def test_table_has_enough_current_models_with_sources() -> None:
    rows = model_table()
    assert len(rows) >= 30
    providers = {r.provider for r in rows}
    for needed in ("openai", "anthropic", "google", "meta", "mistral", "deepseek", "qwen"):
        assert needed in providers, needed
    names = [r.name for r in rows]
    assert len(names) == len(set(names))
    for r in rows:
        assert r.context_length > 0
        assert r.max_output_tokens is None or r.max_output_tokens > 0
        assert r.source.startswith("http"), r
        assert len(r.date) == 10 and r.date[4] == "-", r


@pytest.mark.parametrize(
    ("name", "row"),
    [
        ("gpt-4o", "gpt-4o"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("openai/gpt-4o", "gpt-4o"),
        ("litellm_proxy/anthropic/claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-3-5-haiku-20241022", "claude-3-5-haiku"),
        ("GPT-4O", "gpt-4o"),
    ],
)
def test_lookup_by_exact_name_prefix_and_provider(name: str, row: str) -> None:
    found = lookup_model(name)
    assert found is not None and found.name == row


@pytest.mark.parametrize("name", ["gpt-4oz", "totally-unknown", "", "claude"])
def test_lookup_misses(name: str) -> None:
    assert lookup_model(name) is None


def test_prefix_must_end_at_a_boundary() -> None:
    # "gpt-4" is a known model, but "gpt-4o-foo" must not resolve to it by prefix.
    row = lookup_model("gpt-4o-foo")
    assert row is not None and row.name == "gpt-4o"


def test_flags_win_over_spec_and_table() -> None:
    spec = resolve_spec(
        "gpt-4o",
        context_length=5000,
        max_output_tokens=100,
        spec={"context_length": 7000, "max_output_tokens": 200},
    )
    assert (spec.context_length, spec.context_length_source) == (5000, "flag")
    assert (spec.max_output_tokens, spec.max_output_tokens_source) == (100, "flag")


def test_spec_file_wins_over_table_per_field() -> None:
    spec = resolve_spec("gpt-4o", spec={"context_length": 7000})
    assert (spec.context_length, spec.context_length_source) == (7000, "spec")
    row = lookup_model("gpt-4o")
    assert row is not None
    assert (spec.max_output_tokens, spec.max_output_tokens_source) == (
        row.max_output_tokens,
        "table",
    )


def test_unknown_model_falls_back_to_8192() -> None:
    spec = resolve_spec("no-such-model")
    assert (spec.context_length, spec.context_length_source) == (8192, "fallback")
    assert spec.max_output_tokens is None


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"context_length": 1000, "max_output_tokens": 10}, (1000, 10)),
        ({"max_input_tokens": 1000, "max_tokens": 10}, (1000, 10)),
        ({"max_input_tokens": 1000, "max_tokens": 99, "max_output_tokens": 10}, (1000, 10)),
        ({"max_output_tokens": 10}, (None, 10)),
    ],
)
def test_spec_fields_accept_litellm_keys(data: dict[str, int], expected: tuple[int, int]) -> None:
    assert spec_fields(data) == expected


def test_spec_fields_search_a_litellm_model_map() -> None:
    data = {"my-model": {"max_input_tokens": 32000, "max_output_tokens": 4000}}
    assert spec_fields(data, "openai/my-model") == (32000, 4000)


@pytest.mark.parametrize(
    "data",
    [[], {"context_length": -1}, {"context_length": "big"}, {"unrelated": 1}, {"m": {"x": 1}}],
)
def test_bad_spec_is_a_spec_error(data: object) -> None:
    with pytest.raises(SpecError):
        spec_fields(data, "m")


@pytest.mark.parametrize(
    ("max_tokens", "body", "model_cap", "reserve", "source"),
    [
        (5000, 300, 200, 5000, "flag"),
        (None, 300, 200, 300, "body"),
        (None, None, 200, 200, "model"),
        (None, None, None, 1000, "default"),
    ],
)
def test_reserve_precedence(
    max_tokens: int | None, body: int | None, model_cap: int | None, reserve: int, source: str
) -> None:
    spec = resolve_spec(None, context_length=20000, max_output_tokens=model_cap)
    b = compute_budget(spec, max_tokens=max_tokens, body_max_tokens=body)
    assert (b.reserve, b.reserve_source) == (reserve, source)
    assert b.safety == 600
    assert b.budget == 20000 - reserve - 600


def test_default_reserve_is_two_percent_above_50k() -> None:
    spec = resolve_spec(None, context_length=200_000)
    b = compute_budget(spec)
    assert (b.reserve, b.safety, b.budget) == (4000, 6000, 190_000)


def test_rounding_is_up_and_exact() -> None:
    spec = resolve_spec(None, context_length=8193)
    b = compute_budget(spec)
    assert b.safety == 246  # ceil(245.79)


def test_non_positive_budget_is_not_enforced() -> None:
    spec = resolve_spec(None, context_length=1000)
    b = compute_budget(spec)
    assert b.budget == 1000 - 1000 - 30
    assert not b.enforced
