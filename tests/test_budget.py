"""Model spec resolution, the model table, and the budget formula."""

from __future__ import annotations

import math

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


def test_gpt5_budget_is_capped_by_its_input_limit() -> None:
    """GPT-5 takes at most 272,000 input tokens of its 400,000 window: with
    max_completion_tokens=16000 the budget is 272,000 - 12,000 safety, not 372,000."""
    row = lookup_model("gpt-5")
    assert row is not None and row.max_input_tokens == 272_000
    b = compute_budget(resolve_spec("gpt-5"), max_tokens=16_000)
    assert b.budget == 272_000 - 12_000
    assert b.budget < 300_000  # a 300k prompt does not fit
    assert b.spec.max_input_tokens_source == "table"


@pytest.mark.parametrize(
    "name", ["gpt-5", "gpt-5-mini", "gpt-5-nano", "gpt-5-pro", "gpt-5-codex", "gpt-5.1", "gpt-5.2"]
)
def test_every_400k_gpt5_row_has_the_272k_input_cap(name: str) -> None:
    row = lookup_model(name)
    assert row is not None and row.name == name
    assert (row.context_length, row.max_input_tokens) == (400_000, 272_000)


def test_the_window_alone_binds_when_the_reserve_leaves_less_than_the_cap() -> None:
    b = compute_budget(resolve_spec("gpt-5"))  # the 128,000 output cap: 272,000 either way
    assert b.budget == min(400_000 - 128_000, 272_000) - 12_000
    b = compute_budget(resolve_spec("gpt-5"), max_tokens=200_000)
    assert b.budget == 400_000 - 200_000 - 12_000


@pytest.mark.parametrize("name", ["gpt-5.4-mini", "gpt-5.4-nano"])
def test_gpt54_mini_and_nano_have_rows_of_their_own(name: str) -> None:
    row = lookup_model(f"{name}-2026-03-17")
    assert row is not None and row.name == name
    assert (row.context_length, row.max_output_tokens) == (400_000, 128_000)


@pytest.mark.parametrize(
    ("name", "row"),
    [
        ("gpt-5.5-mini", "gpt-5-mini"),  # never gpt-5.5's 1,050,000
        ("gpt-5.6-nano", "gpt-5-nano"),
        ("gpt-5.1-codex-max", "gpt-5-codex"),
        ("gpt-4o-2024-08-06", "gpt-4o"),  # a date: the same model
        ("gemini-2.5-flash-preview-05-20", "gemini-2.5-flash"),
        ("chatgpt-4o-latest", "chatgpt-4o-latest"),
    ],
)
def test_a_sibling_never_inherits_a_larger_window(name: str, row: str) -> None:
    found = lookup_model(name)
    assert found is not None and found.name == row


def test_spec_file_may_give_an_input_cap_next_to_the_window() -> None:
    spec = resolve_spec(
        "x", spec={"context_length": 100_000, "max_input_tokens": 50_000, "max_output_tokens": 10}
    )
    assert (spec.max_input_tokens, spec.max_input_tokens_source) == (50_000, "spec")
    assert compute_budget(spec).budget == 50_000 - 3_000
    # LiteLLM's max_input_tokens alone is the window, as before
    spec = resolve_spec("x", spec={"max_input_tokens": 50_000})
    assert (spec.context_length, spec.max_input_tokens) == (50_000, None)


def test_a_table_output_cap_is_scaled_to_a_smaller_window() -> None:
    """claude-sonnet-4-5: 64,000 of 200,000. At -c 50000 the cap used to leave
    50,000 - 64,000 - 1,500 = -15,500; scaled, 16,000 are reserved."""
    row = lookup_model("claude-sonnet-4-5")
    assert row is not None and row.max_output_tokens is not None
    spec = resolve_spec("claude-sonnet-4-5", context_length=50_000)
    b = compute_budget(spec)
    scaled = math.ceil(row.max_output_tokens * 50_000 / row.context_length)
    assert (b.reserve, b.reserve_source) == (scaled, "scaled")
    assert b.budget == 50_000 - scaled - 1_500 > 0
    # never below the proportional floor, never above the cap
    small = compute_budget(resolve_spec("gpt-4o", context_length=5_000))
    assert (small.reserve, small.reserve_source) == (1_000, "scaled")
    llama = compute_budget(resolve_spec("llama-3.1-8b", context_length=120_000))
    assert llama.reserve == 2048  # the cap, under the 2,400 floor
    # the table's own window, or a cap someone chose, is never scaled
    assert compute_budget(resolve_spec("claude-sonnet-4-5")).reserve_source == "model"
    chosen = resolve_spec("claude-sonnet-4-5", context_length=50_000, max_output_tokens=64_000)
    assert compute_budget(chosen).reserve == 64_000


def test_output_caps_are_the_providers() -> None:
    caps = {r.name: r.max_output_tokens for r in model_table()}
    assert 4028 not in caps.values() and 65535 not in caps.values()
    assert caps["llama-3.3-70b"] == caps["llama-4-maverick"] == 4096
    assert caps["chatgpt-4o-latest"] == 16_384 and caps["gpt-4"] == 8192
    assert caps["gemini-2.5-pro"] == 65_536


def test_a_window_given_replaces_the_table_input_cap() -> None:
    """The table's 272,000 belongs to its 400,000 window: with -c 10,000,000 and no
    reserve it used to leave 272,000 - 300,000 safety, a budget below zero."""
    b = compute_budget(resolve_spec("gpt-5", context_length=10_000_000), max_tokens=0)
    assert b.spec.max_input_tokens is None
    assert b.budget == 10_000_000 - 300_000


def test_a_table_cap_reserves_at_most_half_the_window() -> None:
    """gpt-4 may write all 8,192 tokens of its window: reserving them left -246."""
    row = lookup_model("gpt-4")
    assert row is not None and row.max_output_tokens == row.context_length == 8192
    b = compute_budget(resolve_spec("gpt-4"))
    assert (b.reserve, b.reserve_source) == (4096, "scaled")
    assert b.budget == 8192 - 4096 - 246
