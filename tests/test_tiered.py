"""The bound in two tiers (ctxwin/tokens/tiered.py): the cheap tier is never below the
bound's price, and a fit of a body read lazily (priced at the bound only where the fit
needs it) finds exactly the cut that pricing every item at the bound finds."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxwin.core import load
from ctxwin.fitting.pruning import FitResult, fit
from ctxwin.tokens.base import Kind
from ctxwin.tokens.bound import _bound_cents
from ctxwin.tokens.content import SCALE, _cost
from ctxwin.tokens.registry import default_estimator, get_estimator
from ctxwin.tokens.tiered import (
    LazyBound,
    TieredBound,
    _cheap_and_content,
    cheap_cents,
    tightener,
)
from ctxwin.tokens.vocabulary import bound_vocabulary
from fidelity.corpus import corpus_path
from tests.builders import Message
from tests.strategies import transcripts
from tests.test_compaction import _body as compaction_anthropic
from tests.test_responses_compaction import _body as compaction_body

ROOT = Path(__file__).resolve().parent.parent
CORPUS = corpus_path()
FIXTURES = sorted((ROOT / "tests" / "fixtures").glob("*.json"))


def _cheap_covers(text: str) -> None:
    data = text.encode("utf-8", "surrogatepass")
    assert _bound_cents(data) <= cheap_cents(data, text), text[:80]
    # the reader's inline path prices as cheap_cents and content's own _cost do
    assert _cheap_and_content(text) == (SCALE // 100 * cheap_cents(data, text), _cost(data))


@settings(max_examples=3000, deadline=None)
@given(st.text())
def test_the_cheap_tier_is_never_below_the_bound(text: str) -> None:
    _cheap_covers(text)


PIECES = st.sampled_from(
    ["\n", "\r\n", "  ", "\t", " the", "Value", "_id", "0", "99", "é", "e\u0301", "\u0f76",
     "\U0001d160", "→", "├──", "Привет", "中文", "ｶ", "!!", "\x00", "\x7f", "/usr/lib", "'s"]
)  # fmt: skip


@settings(max_examples=2000, deadline=None)
@given(st.lists(PIECES, max_size=60))
def test_the_cheap_tier_covers_mixtures_of_hard_pieces(parts: list[str]) -> None:
    _cheap_covers("".join(parts))


def test_no_vocabulary_count_is_over_its_cheap_price() -> None:
    """A piece the vocabulary prices exactly costs its count: never more than the cheap
    tier's price of its bytes (K apart), which is at least a token a byte."""
    for piece, count in bound_vocabulary().records():
        assert 100 * count <= cheap_cents(piece) - 200, piece


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the corpus is not here")
def test_the_cheap_tier_covers_every_corpus_string() -> None:
    seen = 0
    for path in sorted(CORPUS.rglob("*")):
        if path.suffix not in (".json", ".jsonl") or path.stat().st_size > 20_000_000:
            continue
        raw = path.read_text("utf-8", "replace")
        for line in raw.splitlines() if path.suffix == ".jsonl" else [raw]:
            try:
                value = json.loads(line)
            except ValueError:
                continue
            for text in _strings(value):
                _cheap_covers(text)
                seen += 1
    assert seen > 1000


def _strings(value: Any) -> list[str]:
    out: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return out


def test_nfc_growth_is_covered() -> None:
    for ch in ("\u0f76", "\U0001d160", "\u0344", "e\u0301\u0301"):
        assert not unicodedata.is_normalized("NFC", ch) or ch == "e\u0301\u0301"
        _cheap_covers(ch * 50)


TEXTS = [
    *("", "hi", "The quick brown fox.\n\n", "x" * 5000, "Привет ├── 中文 " * 40),
    *("20260212165422", "e\u0301" * 30, "\u0f76" * 9, '{"id": 12, "ok": true}'),
]


@pytest.mark.parametrize("text", TEXTS)
def test_the_bound_is_bound_estimators_price_with_contents_beside_it(text: str) -> None:
    """``bound`` (:class:`TieredBound`) estimates as :class:`BoundEstimator` (slots 0 and
    1) and measures the cut's blocks as ``content`` does (slot 2, ContentEstimator's own
    price), for text and for bytes (``add_bytes`` is its own code, not the parent's)."""
    from ctxwin.tokens.bound import BoundEstimator
    from ctxwin.tokens.content import ContentEstimator

    est = default_estimator()
    assert isinstance(est, TieredBound) and est.name == "bound"
    assert isinstance(get_estimator("bound"), TieredBound)
    plain, content = BoundEstimator(), ContentEstimator()
    data = text.encode("utf-8", "surrogatepass")
    for method, value in (("add_text", text), ("add_bytes", data)):
        ours, bound, fit_ = [0] * est.width, [0] * plain.width, [0] * content.width
        for e, cost in ((est, ours), (plain, bound), (content, fit_)):
            getattr(e, method)(cost, value, Kind.PROSE)
        assert ours[:2] == bound, method
        assert ours[2] == fit_[1], method


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_a_body_read_lazily_and_priced_at_the_bound_is_the_eager_read(path: Path) -> None:
    """Every format read through ``bound`` prices as BoundEstimator does, and a lazy read
    (slot 1 at the cheap tier, never below) whose items are all priced by its tightener
    ends at the same costs, item by item."""
    from ctxwin.tokens.bound import BoundEstimator

    data = json.loads(path.read_text())
    est = TieredBound()
    eager = load(data, estimator=est).view
    plain = load(data, estimator=BoundEstimator()).view
    assert eager.base[:2] == plain.base
    assert [i.cost[:2] for i in eager.items] == [i.cost for i in plain.items]
    lazy = load(data, estimator=est, lazy=True).view
    assert lazy.base == eager.base  # the base is priced at the bound when read
    assert all(
        lz.cost[1] >= e.cost[1] and lz.cost[2] == e.cost[2]
        for lz, e in zip(lazy.items, eager.items, strict=True)
    )
    assert [i.cost for i in lazy.items] != [i.cost for i in eager.items]
    assert lazy.tighten is not None
    lazy.tighten(range(len(lazy.items)))
    assert [i.cost for i in lazy.items] == [i.cost for i in eager.items]


# --- a lazy fit is the eager fit -----------------------------------------------------------


def _same_cut(eager: FitResult, lazy: FitResult) -> None:
    keys = ["head", "cut", "gap", "items", "budget", "calibration", "pruned", "overflow_at_floor"]
    keys += ["dropped_turns", "kept_turns", "enforced", "overhead", "fits"]
    keys += ["estimated_tokens_after"]
    assert {k: getattr(lazy, k) for k in keys} == {k: getattr(eager, k) for k in keys}
    # the input's estimate is the eager one, or unknown when dropped items went unpriced:
    # then its lower bound is at most the eager estimate, and at least what is kept
    assert eager.priced and eager.at_least is None
    if not lazy.priced:
        assert lazy.known_raw is None and lazy.pruned and lazy.at_least is not None
        assert lazy.estimated_tokens_after <= lazy.at_least <= eager.estimated_tokens
        assert 0 <= lazy.dropped_at_least <= eager.dropped_at_least
        if lazy.enforced and not lazy.overflow_at_floor:  # what it walked is over the budget
            assert lazy.at_least > lazy.budget
        with pytest.raises(ValueError):
            lazy.estimated_tokens  # noqa: B018
    else:
        assert lazy.estimated_tokens == eager.estimated_tokens
        assert lazy.raw_tokens == eager.raw_tokens
        assert lazy.dropped_at_least == eager.dropped_at_least


def _both(body: Any, budget: int, calibration: float, block: float, overhead: int = 0) -> None:
    est = TieredBound()
    eager = load(body, estimator=est)
    lazy = load(body, estimator=est, lazy=True)
    assert lazy.view.tighten is not None
    rules = eager.adapter.problems
    kw: dict[str, Any] = {"block": block, "overhead": overhead}
    e = fit(eager.view, budget, est, calibration, rules, **kw)
    lz = fit(lazy.view, budget, est, calibration, rules, **kw)
    _same_cut(e, lz)
    if lz.pruned or lz.overflow_at_floor:  # what the fit keeps is priced at the bound
        assert lazy.raw_tokens(lz.keep) == eager.raw_tokens(e.keep)


TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=300)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    transcripts(),
    st.integers(1, 4000),
    st.sampled_from([1.0, 1.15, 1.7]),
    st.sampled_from([0.0, 0.2, 0.45, 1.0]),
    st.integers(0, 50),
    st.lists(TEXT, min_size=1, max_size=40),
)
def test_a_lazy_fit_is_the_eager_fit(
    messages: list[Message],
    budget: int,
    calibration: float,
    block: float,
    overhead: int,
    texts: list[str],
) -> None:
    body = [dict(m) for m in messages]
    for i, m in enumerate(body):  # text the bound prices well apart from its bytes
        if isinstance(m.get("content"), str):
            m["content"] = m["content"] + texts[i % len(texts)]
    _both(body, budget, calibration, block, overhead)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
@pytest.mark.parametrize("fraction", [0.05, 0.3, 0.6, 0.9, 1.0, 3.0])
@pytest.mark.parametrize("block", [0.0, 0.45])
def test_a_lazy_fit_of_each_format_is_the_eager_fit(
    path: Path, fraction: float, block: float
) -> None:
    body = json.loads(path.read_text())
    est = TieredBound()
    whole = fit(load(body, estimator=est).view, 10**12, est).estimated_tokens
    _both(body, max(1, int(whole * fraction)), 1.0, block)


@pytest.mark.parametrize("fraction", [0.01, 0.2, 0.5, 0.8])
def test_a_lazy_fit_drops_a_superseded_block_as_the_eager_one(fraction: float) -> None:
    body = compaction_body(6)
    est = TieredBound()
    whole = fit(load(body, estimator=est).view, 10**12, est).estimated_tokens
    _both(body, max(1, int(whole * fraction)), 1.0, 0.45)


def test_a_body_that_fits_is_priced_in_full() -> None:
    """A lazy fit that keeps everything reports the input's estimate, the eager one (one
    number for one input): every item is priced at the bound."""
    body = json.loads(FIXTURES[0].read_text())
    t = load(body, lazy=True)
    tighten = t.view.tighten
    assert tighten is not None
    result = fit(t.view, 10**9, t.estimator)
    assert result.fits and not result.pruned
    assert tighten.done()  # type: ignore[attr-defined]
    assert result.estimated_tokens == fit(load(body).view, 10**9, t.estimator).estimated_tokens


def test_a_cost_vector_no_item_holds_reads_the_body_at_the_bound() -> None:
    """A string priced into a vector that is neither an item's nor the base's (a part's,
    summed later) cannot be found again: no tightener, and load reads at the bound."""
    est = TieredBound()
    body = json.loads(FIXTURES[0].read_text())
    t = load(body, estimator=est)
    reader = est.lazy()
    assert isinstance(reader, LazyBound)
    stray = [0] * est.width
    reader.add_text(stray, "a part", Kind.DENSE)
    assert tightener(t.view, reader) is None
    # an Anthropic compaction block moves a message's cost to a new vector mid-read: the
    # strings priced before it went into a vector no item holds
    compacted = compaction_anthropic(turns=2, before=2_000)
    lazy = load(compacted, estimator=est, lazy=True)
    eager = load(compacted, estimator=est)
    assert lazy.view.tighten is None
    assert lazy.view.base == eager.view.base
    assert [i.cost for i in lazy.view.items] == [i.cost for i in eager.view.items]
    # ... which is the bound's price, not the cheap tier's a read by the lazy reader gives
    by_cheap = eager.adapter.read(compacted, est.lazy())
    assert [i.cost for i in by_cheap.items] != [i.cost for i in eager.view.items]


def test_a_fit_told_not_to_price_the_input_prices_no_further() -> None:
    """``price_input=False`` (``prune`` without a report): a body that fits at the cheap
    tier is priced no further, and says its estimate is unknown; one over the budget is
    fitted as with the flag set."""
    body = json.loads(FIXTURES[0].read_text())
    eager = load(body)
    exact = fit(eager.view, 10**9, eager.estimator)
    t = load(body, lazy=True)
    tighten = t.view.tighten
    assert tighten is not None
    result = fit(t.view, 10**9, t.estimator, price_input=False)
    assert result.fits and not result.pruned and not tighten.done()  # type: ignore[attr-defined]
    assert not result.priced and result.known_raw is None
    assert result.estimated_tokens_after >= exact.estimated_tokens
    budget = max(1, exact.estimated_tokens // 2)
    told = fit(load(body, lazy=True).view, budget, t.estimator, price_input=False)
    assert told == fit(load(body, lazy=True).view, budget, t.estimator)
