"""The adversarial generator: coverage, determinism, and the estimator's bound on it."""

from __future__ import annotations

import importlib.util

import pytest

from fidelity import adversarial

HAS_BPE = importlib.util.find_spec("quicktok") is not None
SEED, PER_CLASS, SIZE = 11, 14, 300


def test_covers_every_listed_kind() -> None:
    names = set(adversarial.CLASSES)
    wanted = [
        "run:lower",
        "run:upper",
        "run:digit",
        "run:punct",
        "run:space",
        "run:printable",
        "run:combining",
        "script:latin_diacritics",
        "script:greek",
        "script:cyrillic",
        "script:arabic",
        "script:hebrew",
        "script:devanagari",
        "script:tamil",
        "script:thai",
        "script:cjk",
        "script:hangul",
        "script:kana_ascii",
        "symbols:math",
        "symbols:arrows",
        "symbols:box",
        "symbols:emoji_seq",
        "code:minified_js",
        "code:minified_css",
        "code:regex",
        "text:latex",
        "text:markdown_table",
        "data:json_pretty",
        "data:json_min",
        "data:csv",
        "log:ansi",
        "enc:hexdump",
        "enc:base16",
        "enc:base32",
        "enc:base64",
        "enc:base85",
        "enc:url",
        "data:paths",
    ]
    assert [w for w in wanted if w not in names] == []
    assert sum(n.startswith("code:") for n in names) >= 12
    assert sum(n.startswith("mix:") for n in names) >= 50
    fit, held = adversarial.split()
    assert not set(fit) & set(held) and set(fit) | set(held) == names


def test_a_mixture_draws_only_on_its_own_half() -> None:
    """The held-out half stays held out: no mixture of the fit half (which the bound's
    prices are solved on) interleaves a held-out generator, and the reverse."""
    fit, held = adversarial.split()
    assert {"mix:everything", "mix:everything:held"} <= set(adversarial.SOURCES)
    for mixture, sources in adversarial.SOURCES.items():
        half = set(fit) if mixture in fit else set(held)
        assert mixture in half and sources and set(sources) <= half


def test_same_seed_same_texts() -> None:
    a = list(adversarial.cases(3, 2, 200))
    assert a == list(adversarial.cases(3, 2, 200))
    assert a != list(adversarial.cases(4, 2, 200))


@pytest.mark.skipif(not HAS_BPE, reason="needs the bpe extra (quicktok)")
@pytest.mark.xfail(
    strict=True,
    reason="content is a fit, not a bound: its per-byte weights under-count random "
    "letter runs, dense punctuation, whitespace and combining-mark mixtures "
    "(fidelity/adversarial.md)",
)
def test_content_estimate_bounds_every_generated_case() -> None:
    encs = adversarial.encoders()
    under = []
    seen = 0
    for name, text in adversarial.cases(SEED, PER_CLASS, SIZE):
        seen += 1
        real = adversarial.worst_real(text, encs)
        if adversarial.content_tokens(text) < real:
            under.append(name)
    assert seen >= 2000
    assert under == []
