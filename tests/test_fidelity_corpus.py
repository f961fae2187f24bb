"""The recorded corpus: the default estimator never under-counts (skips without it)."""

from __future__ import annotations

import importlib.util

import pytest

from fidelity import corpus
from fidelity.run import count, estimate

ROOT = corpus.corpus_dir()
pytestmark = [
    pytest.mark.corpus,
    pytest.mark.skipif(ROOT is None, reason="needs ../shared/corpus"),
]
HAS_BPE = importlib.util.find_spec("quicktok") is not None


def test_no_under_count_against_provider_usage() -> None:
    assert ROOT is not None
    seen = 0
    under = []
    from ctxwin.estimate import get_estimator

    est = get_estimator("content")
    for u in corpus.usages(ROOT):
        seen += 1
        got = estimate(u.body, est, u.fmt, u.model)
        if got < u.reported:
            under.append((u.name, got, u.reported))
    assert seen >= 100
    assert under == []


@pytest.mark.skipif(not HAS_BPE, reason="needs the bpe extra (quicktok)")
def test_no_under_count_against_tokenizers_and_median() -> None:
    import statistics

    from ctxwin.estimate import TOKENIZERS, get_estimator
    from fidelity.run import RealCount

    assert ROOT is not None
    est = get_estimator("content")
    reals = [RealCount(e) for e in TOKENIZERS]
    ratios = []
    for t in corpus.transcripts(ROOT):
        e = estimate(t.body, est)
        real = [count(t.body, r) for r in reals]
        assert e >= max(real), t.name
        ratios.append(e / real[0])
    assert len(ratios) >= 200
    assert statistics.median(ratios) <= 1.15
