"""Model spec resolution, the model table, and the budget formula."""

from __future__ import annotations

import math
from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwin.cost.pricing import CacheRules, Pricing, spec_pricing
from ctxwin.errors import SpecError
from ctxwin.fitting.budget import ModelSpec, compute_budget, resolve_spec, spec_fields
from ctxwin.tokens.models import lookup_model, model_table


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


def test_output_caps_are_the_sources_read() -> None:
    """The caps read on 2026-12-04 (LiteLLM 00035b69, Google's Vertex AI page): Gemini's
    65,535, not the 65,536 of a page that was never read; gpt-4 writes 4,096."""
    caps = {r.name: r.max_output_tokens for r in model_table()}
    assert 4028 not in caps.values()
    assert caps["gemini-2.5-pro"] == caps["gemini-3-pro-preview"] == 65_535
    assert caps["gemini-3.1-pro-preview"] == 65_536
    assert caps["gpt-4"] == 8192 and caps["chatgpt-4o-latest"] == 16_384
    assert caps["llama-3.3-70b"] == 4096 and caps["llama-4-maverick"] == 16_384


def test_a_window_given_replaces_the_table_input_cap() -> None:
    """The table's 272,000 belongs to its 400,000 window: with -c 10,000,000 and no
    reserve it used to leave 272,000 - 300,000 safety, a budget below zero."""
    b = compute_budget(resolve_spec("gpt-5", context_length=10_000_000), max_tokens=0)
    assert b.spec.max_input_tokens is None
    assert b.budget == 10_000_000 - 300_000


def test_a_table_cap_reserves_at_most_half_the_window() -> None:
    """A table cap as large as the window (8,192 of 8,192) reserved it all and left -246."""
    spec = ModelSpec(
        name="m",
        context_length=8192,
        context_length_source="table",
        max_output_tokens=8192,
        max_output_tokens_source="table",
        table_row="m",
        table_context_length=8192,
    )
    b = compute_budget(spec)
    assert (b.reserve, b.reserve_source) == (4096, "scaled")
    assert b.budget == 8192 - 4096 - 246


# --- sources, prices and cache rules ----------------------------------------------------

LITELLM_BLOB = "https://github.com/BerriAI/litellm/blob/"


def test_every_row_cites_a_dated_source_and_its_prices_theirs() -> None:
    for r in model_table():
        assert r.source.startswith("https://"), r.name
        date.fromisoformat(r.date)
        if r.source.startswith(LITELLM_BLOB):
            commit = r.source[len(LITELLM_BLOB) :].split("/", 1)[0]
            assert len(commit) == 40 and int(commit, 16) >= 0, r.name
            assert r.source.endswith("/model_prices_and_context_window.json"), r.name
        if r.date == "2026-12-04" and r.source.startswith(LITELLM_BLOB):
            assert r.litellm_key, r.name  # the entry read, so it can be read again
        if r.price is not None:
            assert r.price_source is not None and r.price_source.startswith("https://"), r.name
            assert r.price_date is not None
            date.fromisoformat(r.price_date)
        else:
            assert r.price_source is None and r.price_date is None, r.name
        if r.cache is not None:
            assert r.cache_source is not None and r.cache_source.startswith("https://"), r.name


def test_prices_keep_the_providers_rules() -> None:
    """Cached reads cost less than input; Anthropic writes cost 1.25x (5 minutes) and 2x
    (1 hour) the input price; a long-context tier applies above a prompt size and costs
    more. LiteLLM's 1-hour write of claude-3-haiku ($6/M, 24x input) broke the rule."""
    priced = [r for r in model_table() if r.price is not None]
    assert len(priced) >= 50
    for r in priced:
        p = r.price
        assert p is not None and p.input is not None and p.output is not None, r.name
        assert p.tokens is None, r.name
        for tier in (p, p.above):
            if tier is None:
                continue
            assert all(v is None or v >= 0 for v in tier[:5]), r.name
            if tier.cache_read is not None and tier.input is not None:
                assert tier.cache_read < tier.input, r.name
        if r.provider == "anthropic":
            # Claude Haiku 3 ($0.25 input) rounds to the cent: $0.30 writes, $0.03 reads
            assert p.cache_write == pytest.approx(p.input * 1.25, abs=0.0126), r.name
            assert p.cache_write_1h == pytest.approx(p.input * 2), r.name
            assert p.cache_read == pytest.approx(p.input / 10, abs=0.0051), r.name
        if p.above is not None:
            assert p.above.tokens is not None and p.above.tokens > 0, r.name
            assert p.above.input is not None and p.above.input > p.input, r.name


def test_cache_rules_by_provider() -> None:
    for r in model_table():
        c = r.cache
        if c is None:
            continue
        assert c.kind in ("breakpoints", "automatic", "implicit", "none"), r.name
        if r.provider == "anthropic":
            assert (c.kind, c.ttl_seconds, c.max_breakpoints) == ("breakpoints", 300, 4)
            assert c.min_prefix in (None, 512, 1024, 2048, 4096), r.name
        if r.provider == "openai":
            assert (c.kind, c.min_prefix) == ("automatic", 1024), r.name
    assert lookup_model("claude-opus-4-7").cache.min_prefix == 2048  # type: ignore[union-attr]


def test_the_table_prices_reach_the_spec() -> None:
    spec = resolve_spec("claude-sonnet-4-5-20250929")
    row = lookup_model("claude-sonnet-4-5")
    assert row is not None and row.price is not None
    assert (spec.price, spec.price_source, spec.cache) == (row.price, "table", row.cache)
    assert resolve_spec("totally-unknown").price is None
    none = resolve_spec("totally-unknown")
    assert (none.price, none.price_source, none.cache) == (None, None, None)


LITELLM_ENTRY = {
    "max_input_tokens": 200_000,
    "max_output_tokens": 64_000,
    "input_cost_per_token": 3e-06,
    "output_cost_per_token": 1.5e-05,
    "cache_read_input_token_cost": 3e-07,
    "cache_creation_input_token_cost": 3.75e-06,
    "cache_creation_input_token_cost_above_1hr": 6e-06,
    "input_cost_per_token_above_200k_tokens": 6e-06,
    "output_cost_per_token_above_200k_tokens": 2.25e-05,
    "cache_read_input_token_cost_above_200k_tokens": 6e-07,
    "cache_creation_input_token_cost_above_200k_tokens": 7.5e-06,
    "cache_creation_input_token_cost_above_1hr_above_200k_tokens": 1.2e-05,
    "input_cost_per_token_above_200k_tokens_priority": 1.2e-05,  # another tier of service
    "prompt_cache_min_tokens": 1024,
}


def test_a_litellm_spec_gives_prices_per_million_tokens() -> None:
    spec = resolve_spec("anthropic/my-claude", spec={"my-claude": LITELLM_ENTRY})
    assert spec.price_source == "spec"
    assert spec.price == Pricing(
        input=3.0,
        output=15.0,
        cache_read=0.3,
        cache_write=3.75,
        cache_write_1h=6.0,
        above=Pricing(
            input=6.0,
            output=22.5,
            cache_read=0.6,
            cache_write=7.5,
            cache_write_1h=12.0,
            tokens=200_000,
        ),
    )
    assert spec.cache == CacheRules(min_prefix=1024)
    # a spec's prices win over the table's
    assert resolve_spec("gpt-4o", spec=LITELLM_ENTRY).price == spec.price


def test_the_lowest_litellm_tier_is_the_long_context_price() -> None:
    entry = {
        "max_input_tokens": 1_050_000,
        "input_cost_per_token": 2.5e-06,
        "input_cost_per_token_above_512k_tokens": 9e-06,
        "input_cost_per_token_above_272k_tokens": 5e-06,
    }
    price, cache = spec_pricing(entry)
    assert price == Pricing(input=2.5, above=Pricing(input=5.0, tokens=272_000))
    assert cache is None
    assert spec_pricing({"max_input_tokens": 8192}) == (None, None)


def test_a_spec_file_may_give_prices_in_the_tables_shape() -> None:
    data = {
        "context_length": 100_000,
        "price": {"input": 1, "output": 4.5, "above": {"tokens": 50_000, "input": 2}},
        "cache": {"kind": "automatic", "min_prefix": 1024, "step": 128, "ttl_seconds": 300},
    }
    spec = resolve_spec("gpt-4o", spec=data)
    assert spec.price == Pricing(input=1.0, output=4.5, above=Pricing(input=2.0, tokens=50_000))
    assert spec.cache == CacheRules(kind="automatic", min_prefix=1024, step=128, ttl_seconds=300)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"input_cost_per_token": -1e-06}, "input_cost_per_token must be a number not below zero"),
        ({"input_cost_per_token": True}, "input_cost_per_token must be a number"),
        ({"output_cost_per_token": "3e-06"}, "output_cost_per_token must be a number"),
        ({"price": {"input": float("nan")}}, "price.input must be a number"),
        ({"price": {"input": 1, "cached": 0.1}}, "price has unknown key 'cached'"),
        ({"price": {"above": {"input": 2}}}, "price.above needs tokens"),
        ({"price": [1, 2]}, "price must be an object"),
        ({"cache": {"kind": "sometimes"}}, "cache.kind must be one of"),
        ({"cache": {"min_prefix": 0}}, "cache.min_prefix must be a positive integer"),
        ({"cache": {"ttl": 300}}, "cache has unknown key 'ttl'"),
    ],
)
def test_bad_spec_prices_are_spec_errors(extra: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        resolve_spec("gpt-4o", spec={"context_length": 8192, **extra})


def test_a_budget_never_loads_the_pricing_module() -> None:
    """Prices are built on use: a command that prices nothing pays nothing at start-up."""
    import subprocess
    import sys

    code = (
        "import sys, ctxwin.fitting.budget as b;"
        "b.compute_budget(b.resolve_spec('claude-opus-4-7'));"
        "print('ctxwin.cost.pricing' in sys.modules); b.lookup_model('claude-opus-4-7').price;"
        "print('ctxwin.cost.pricing' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_every_table_of_model_names_matches_by_one_rule() -> None:
    """Provider prefixes and vendor words (Bedrock's ids) come off the same way for the
    model table, the seeds, the open tokenizers and the reasoning models."""
    from ctxwin.tokens.bpe import exact_encoding
    from ctxwin.tokens.framing import reasoning_model
    from ctxwin.tokens.models import candidates, match
    from ctxwin.tokens.registry import default_calibration

    bedrock = "bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    assert list(candidates(bedrock))[-1] == "claude-sonnet-4-5-20250929-v1:0"
    row = lookup_model(bedrock)
    assert row is not None and row.name == "claude-sonnet-4-5"
    assert (
        default_calibration("content", bedrock)
        == default_calibration("content", "claude-sonnet-4-5")
        > 1.0
    )
    assert default_calibration("content", "meta.llama4-maverick-17b-instruct-v1:0") > 1.0
    # a name that only contains a family's name somewhere is not of that family
    assert default_calibration("content", "my-claude-proxy") == 1.0
    # "." ends a family only where a table says so
    assert match("gpt-4.5-preview", {"gpt-4"}) is None
    assert exact_encoding("openrouter/openai/gpt-4.5-preview") == "o200k_base"
    assert reasoning_model("azure/gpt-5.4-mini") and not reasoning_model("gpt-4o")
    # a version separated by "." is not a release of a vendor word
    assert list(candidates("gpt-4.1")) == ["gpt-4.1"]


def test_a_lookup_gives_the_rows_the_whole_table_holds() -> None:
    """A lookup parses only the row it finds, by its line of ``models.json`` (one row a
    line, its name first and in lower case): each row so found is the table's row."""
    from ctxwin.tokens.models import table_row

    for r in model_table():
        assert table_row(r.name) == r, r.name
        assert table_row(r.name.upper()) == r, r.name
        assert lookup_model(f"openai/{r.name.upper()}") == r, r.name
        if r.litellm_key and r.litellm_key.lower() not in {t.name for t in model_table()}:
            # a name elsewhere in a row's line is not a row's name
            assert table_row(r.litellm_key) is None, r.litellm_key
    for name in ("", "gpt-4o\udcff", "\udcff-x", 'gpt-4o"', "gpt-4o\n"):
        assert table_row(name) is None
    assert lookup_model("gpt-4o-\udcff") == table_row("gpt-4o")


@given(
    st.text(alphabet="ab-.:/_", max_size=12),
    st.sets(st.text(alphabet="ab-._", max_size=6), max_size=8),
    st.sampled_from(["-:@_", "-:@_."]),
)
def test_match_takes_the_longest_key_a_boundary_follows(
    name: str, keys: set[str], ends: str
) -> None:
    """:func:`match` against its definition: for the first candidate that has one, the
    key it is, else the longest key it starts with followed by one of ``ends``."""
    from ctxwin.tokens.models import candidates, match

    expected = None
    for candidate in candidates(name):
        if candidate in keys:
            expected = (candidate, "")
            break
        before = [k for k in keys if 0 < len(k) < len(candidate) and candidate.startswith(k)]
        before = [k for k in before if candidate[len(k)] in ends]
        if before:
            best = max(before, key=len)
            expected = (best, candidate[len(best) + 1 :])
            break
    assert match(name, keys, ends) == expected
