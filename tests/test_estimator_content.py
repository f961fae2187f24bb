"""The content-aware default estimator: additive, monotonic, content-sensitive."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwin.core import load
from ctxwin.errors import UsageError
from ctxwin.fitting.pruning import total_cost
from ctxwin.tokens.base import Kind
from ctxwin.tokens.bpe import TokenizerEstimator
from ctxwin.tokens.content import SCALE, ContentEstimator
from ctxwin.tokens.framing import (
    ANTHROPIC_TOOL_PROMPT,
    OPENAI_REASONING_PREAMBLE,
    provider_framing,
    reasoning_model,
)
from ctxwin.tokens.registry import default_calibration, default_estimator, get_estimator
from tests.conftest import Cli

HAS_BPE = importlib.util.find_spec("quicktok") is not None
needs_bpe = pytest.mark.skipif(not HAS_BPE, reason="needs the bpe extra (quicktok)")


def cost(text: str) -> list[int]:
    est = ContentEstimator()
    c = [0] * est.width
    est.add_text(c, text, Kind.PROSE)
    return c


def test_default_is_the_bound_and_content_is_named() -> None:
    assert default_estimator().name == "bound"
    assert get_estimator("content").name == "content"
    assert get_estimator("fast").name == "content"  # the alias
    assert isinstance(get_estimator("fast"), ContentEstimator)
    assert get_estimator("seed").name == "seed"


@settings(max_examples=300)
@given(st.text(), st.text())
def test_additive(a: str, b: str) -> None:
    together = cost(a + b)
    apart = [x + y for x, y in zip(cost(a), cost(b), strict=True)]
    assert together == apart


@settings(max_examples=300)
@given(st.text(), st.text(min_size=1))
def test_monotonic(a: str, b: str) -> None:
    est = ContentEstimator()
    assert est.raw(cost(a + b)) >= est.raw(cost(a))
    assert cost(b)[1] > 0


def reference_cost(data: bytes) -> int:
    """The documented price, one byte at a time."""
    from ctxwin.tokens.content import _BYTE, _STEP, _WEIGHTS

    return sum(_BYTE + _STEP * _WEIGHTS[b] for b in data)


def test_each_byte_costs_its_class_extra_steps() -> None:
    """The byte classes as documented, byte by byte: A-Z, 0-9, ASCII punctuation and
    control characters, UTF-8 continuation and lead bytes; any other byte (lower-case
    letters, space) costs no extra and is one of the bytes deleted while translating."""
    from ctxwin.tokens.content import _PLAIN, _WEIGHTS, EXTRA_STEPS

    def byte_class(b: int) -> str | None:
        c = chr(b)
        if "A" <= c <= "Z":
            return "upper"
        if "0" <= c <= "9":
            return "digit"
        if b < 0x20 or b == 0x7F or (b < 0x80 and c in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"):
            return "punct"
        if b >= 0x80:
            return ("cont", "lead2", "lead3", "lead4")[(b >= 0xC0) + (b >= 0xE0) + (b >= 0xF0)]
        return None

    for b in range(256):
        cls = byte_class(b)
        assert _WEIGHTS[b] == (0 if cls is None else EXTRA_STEPS[cls]), b
    assert bytes(b for b in range(256) if byte_class(b) is None) == _PLAIN
    assert _PLAIN == b" abcdefghijklmnopqrstuvwxyz"


@settings(max_examples=200)
@given(st.binary(max_size=20_000), st.sampled_from([b"", b"0", b"\xf0", b"A7"]))
def test_fast_sum_equals_the_byte_by_byte_price(data: bytes, pad: bytes) -> None:
    from ctxwin.tokens.content import _SUM_SPAN, _cost

    # Long runs of the dearest bytes exceed one Adler-32 span several times over.
    for sample in (data, pad * (3 * _SUM_SPAN), data + pad * _SUM_SPAN):
        assert _cost(sample) == reference_cost(sample)


@settings(max_examples=100)
@given(st.binary())
def test_bytes_and_text_agree(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    est = ContentEstimator()
    c = [0, 0]
    est.add_bytes(c, text.encode(), Kind.DENSE)
    assert c == cost(text)


def test_kind_does_not_change_cost() -> None:
    est = ContentEstimator()
    a, b = [0, 0], [0, 0]
    est.add_text(a, "abc 123 {}", Kind.PROSE)
    est.add_text(b, "abc 123 {}", Kind.DENSE)
    assert a == b


@pytest.mark.parametrize(
    ("cheap", "dear"),
    [
        ("abcdefghij", "0123456789"),
        ("abcdefghij", "aBcDeFgHiJ"),
        ("abcdefghij", "abcde{}[]:"),
        ("abcdefghij" * 3, "中文字符测试一二三四"),
        ("abcdefghij" * 3, "🙂🙂🙂🙂🙂🙂🙂🙂"),
    ],
)
def test_dense_content_costs_more_per_byte(cheap: str, dear: str) -> None:
    per_byte = [cost(t)[1] / len(t.encode()) for t in (cheap, dear)]
    assert per_byte[1] > per_byte[0]


def test_raw_rounds_up() -> None:
    est = ContentEstimator()
    assert est.raw([5, 1]) == 6
    assert est.raw([5, SCALE]) == 6
    assert est.raw([5, SCALE + 1]) == 7
    assert est.raw([0, 0]) == 0


def test_framing() -> None:
    assert provider_framing("anthropic", has_tools=True) >= ANTHROPIC_TOOL_PROMPT
    assert provider_framing("anthropic", has_tools=False) < ANTHROPIC_TOOL_PROMPT
    assert provider_framing("openai-chat", has_tools=True) > provider_framing(
        "openai-chat", has_tools=False
    )


@pytest.mark.parametrize(
    ("model", "reasoning"),
    [
        ("gpt-5.4-mini", True),
        ("gpt-5", True),
        ("openai/o3-pro", True),
        ("o4-mini-2025-04-16", True),
        ("o1", True),
        ("gpt-4o", False),
        ("gpt-4.1-mini", False),
        ("o200k", False),
        ("gpt-50", False),
        (None, False),
    ],
)
def test_reasoning_models_get_their_header(model: str | None, reasoning: bool) -> None:
    assert reasoning_model(model) is reasoning
    extra = OPENAI_REASONING_PREAMBLE if reasoning else 0
    for fmt in ("openai-chat", "openai-responses"):
        base = provider_framing(fmt, has_tools=False)
        assert provider_framing(fmt, has_tools=False, model=model) == base + extra
    assert provider_framing("anthropic", has_tools=False, model=model) == provider_framing(
        "anthropic", has_tools=False
    )


def test_the_body_model_reaches_the_framing() -> None:
    """Both OpenAI adapters hand the body's model to the estimator's framing."""
    est = ContentEstimator()
    chat = {"messages": [{"role": "user", "content": "hi"}]}
    responses = {"input": "hi"}
    for body in (chat, responses):
        plain = est.raw(total_cost(load(body, "auto", est).view))
        gpt5 = est.raw(total_cost(load({**body, "model": "gpt-5.4-mini"}, "auto", est).view))
        assert gpt5 == plain + OPENAI_REASONING_PREAMBLE


def test_default_calibration() -> None:
    assert default_calibration("seed") == 1.15
    assert default_calibration("seed", "claude-sonnet-4-5") == 1.15
    assert default_calibration("content") == 1.0
    assert default_calibration("content", "gpt-4o") == 1.0
    assert default_calibration("content", "claude-sonnet-4-5") > 1.0


BODY = {
    "model": "gpt-4o",
    "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Sum 1234 and 5678, please."},
    ],
}


def _report(cli: Cli, *args: str) -> dict[str, object]:
    result = cli("estimate", "-", "--json", "-q", *args, input=orjson.dumps(BODY))
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.stdout)
    assert isinstance(report, dict)
    return report


def test_cli_default_estimator_and_calibration(cli: Cli) -> None:
    report = _report(
        cli,
    )
    assert report["estimator"] == "bound"
    assert report["calibration"] == 1.0
    assert report["estimated_tokens"] == report["raw_tokens"]
    for name in ("content", "fast"):
        content = _report(cli, "--estimator", name)
        assert content["estimator"] == "content"
        assert content["calibration"] == 1.0
        assert content["estimated_tokens"] == content["raw_tokens"]


def test_cli_seed_keeps_the_adr_formula(cli: Cli) -> None:
    report = _report(cli, "--estimator", "seed")
    assert report["estimator"] == "seed"
    assert report["calibration"] == 1.15
    # 2 messages × 8 + ceil(14/3.5) + ceil(26/3.5) = 16 + 4 + 8 = 28; × 1.15 = 32.2 → 33
    assert report["raw_tokens"] == 28
    assert report["estimated_tokens"] == 33


def test_cli_explicit_calibration_wins(cli: Cli) -> None:
    report = _report(cli, "--calibration", "1.5")
    assert report["calibration"] == 1.5


def test_tokenizer_missing_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, cli: Cli) -> None:
    monkeypatch.setitem(sys.modules, "quicktok", None)
    with pytest.raises(UsageError, match=r"pip install 'ctxwin\[bpe\]'"):
        TokenizerEstimator("o200k_base")
    result = cli("estimate", "-", "--tokenizer", "o200k_base", input=orjson.dumps(BODY))
    assert result.exit_code == 2
    assert "ctxwin[bpe]" in result.stderr
    assert result.stdout == ""


def test_tokenizer_unknown_encoding(cli: Cli) -> None:
    result = cli("estimate", "-", "--tokenizer", "gpt2", input=orjson.dumps(BODY))
    assert result.exit_code == 2
    assert "unknown encoding" in result.stderr


@needs_bpe
def test_cli_tokenizer_counts_exactly(cli: Cli) -> None:
    import quicktok  # type: ignore[import-not-found, unused-ignore]

    report = _report(cli, "--tokenizer", "o200k_base")
    enc = quicktok.get_encoding("o200k_base")
    body_tokens = sum(enc.count(m["content"]) for m in BODY["messages"])  # type: ignore[index]
    assert report["estimator"] == "tokenizer:o200k_base"
    assert report["raw_tokens"] == body_tokens + 2 * 3 + 3
    assert report["calibration"] == 1.0


@needs_bpe
@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base", "llama3", "qwen3"])
def test_bounds_every_stress_class(encoding: str) -> None:
    from fidelity import stress

    tok = TokenizerEstimator(encoding, per_message=0, per_tool_call=0)
    est = ContentEstimator()
    for label, texts in stress.samples(seed=7, size=4000, count=3).items():
        for text in texts:
            exact = [0]
            tok.add_text(exact, text, Kind.PROSE)
            assert est.raw(cost(text)) >= exact[0], label


@needs_bpe
def test_bounds_random_mixtures() -> None:
    from fidelity import stress

    rng = random.Random(3)
    fns = list(stress.CLASSES.values())
    toks = [TokenizerEstimator(e) for e in ("o200k_base", "cl100k_base", "llama3", "qwen3")]
    est = ContentEstimator()
    for _ in range(40):
        text = "".join(rng.choice(fns)(rng, rng.randint(20, 600)) for _ in range(4))
        for tok in toks:
            exact = [0]
            tok.add_text(exact, text, Kind.PROSE)
            assert est.raw(cost(text)) >= exact[0]


def test_tokenizer_counts_need_no_calibration() -> None:
    assert default_calibration("tokenizer:o200k_base") == 1.0


@needs_bpe
def test_cli_prune_with_tokenizer(tmp_path: Path, cli: Cli) -> None:
    out = tmp_path / "out.json"
    report_path = tmp_path / "report.json"
    result = cli(
        "prune",
        "-",
        str(out),
        "--tokenizer",
        "qwen3",
        "--report",
        str(report_path),
        "-q",
        input=orjson.dumps(BODY),
    )
    assert result.exit_code == 0, result.output
    assert orjson.loads(out.read_bytes()) == BODY
    assert orjson.loads(report_path.read_bytes())["estimator"] == "tokenizer:qwen3"


@settings(max_examples=500)
@given(st.floats(allow_nan=False, allow_infinity=False), st.integers(0, 10**12))
def test_exact_decimal_and_calibrated_match_fractions(value: float, raw: int) -> None:
    from fractions import Fraction

    from ctxwin.tokens.base import calibrated, exact_decimal

    numerator, denominator = exact_decimal(value)
    assert Fraction(numerator, denominator) == Fraction(repr(value))
    factor = max(Fraction(repr(abs(value))), Fraction(1))
    scaled = raw * factor
    assert calibrated(raw, abs(value)) == -((-scaled.numerator) // scaled.denominator)


@pytest.mark.parametrize("value", ["inf", "nan"])
@pytest.mark.parametrize("command", ["estimate", "replay"])
def test_calibration_must_be_finite(value: str, command: str, cli: Cli) -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "agent-run.json"
    result = cli(command, str(example), "--calibration", value)
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"ctxwin: usage error: --calibration: expected a finite number, got {value}"
    )
