"""The split of the provider calls into a fit part and a held-out part (fidelity.corpus)."""

from __future__ import annotations

import hashlib
import random

from fidelity import corpus


def _call(model: str, run: str, i: int = 0) -> corpus.Usage:
    return corpus.Usage("src", f"{run}#{i}", "openai-chat", model, {"messages": []}, 100, run)


def _calls() -> list[corpus.Usage]:
    out = [_call("litellm_proxy/claude-sonnet-4-20250514", f"log-{k}") for k in range(6)]
    out += [_call("meta-llama/llama-4-maverick", f"run-{k}", i) for k in range(3) for i in range(4)]
    out += [_call("gpt-5.4-mini", "only-run", i) for i in range(8)]
    return out


def test_families_of_two_runs_or_more_are_split_by_run_and_one_run_by_call() -> None:
    fit, held = corpus.split(_calls())
    for family, runs in (("claude-sonnet-4", 6), ("llama-4-maverick", 3)):
        fit_runs = {u.run for u in fit if corpus.family(u.model) == family}
        held_runs = {u.run for u in held if corpus.family(u.model) == family}
        assert len(fit_runs) == (runs + 1) // 2 and len(held_runs) == runs // 2, family
        assert not fit_runs & held_runs
    # one run: its calls, ranked by the digest of their name, every second one held out
    mini = [u for u in _calls() if u.model == "gpt-5.4-mini"]
    ranked = sorted(mini, key=lambda u: hashlib.sha256(u.name.encode()).hexdigest())
    assert [u for u in held if u.model == "gpt-5.4-mini"] == [u for u in mini if u in ranked[1::2]]
    assert [u for u in fit if u.model == "gpt-5.4-mini"] == [u for u in mini if u in ranked[::2]]


def test_a_family_of_one_call_is_fit_only() -> None:
    fit, held = corpus.split([_call("gpt-4o", "alone")])
    assert len(fit) == 1 and held == []


def test_a_run_is_held_out_whole_by_the_rank_of_its_name_digest() -> None:
    calls = _calls()
    held = corpus.held_out_runs(calls)
    names = sorted({u.run for u in calls if u.model.startswith("meta-llama/")})
    ranked = sorted(names, key=lambda n: hashlib.sha256(n.encode()).hexdigest())
    assert {r for f, r in held if f == "llama-4-maverick"} == set(ranked[1::2])
    fit, out = corpus.split(calls)
    for u in calls:
        if u.model != "gpt-5.4-mini":  # a family of two runs or more: whole runs
            assert (u in out) == ((corpus.family(u.model), u.run) in held)
        assert (u in fit) != (u in out)


def test_the_split_does_not_depend_on_the_order_of_the_calls() -> None:
    calls = _calls()
    shuffled = calls[:]
    random.Random(3).shuffle(shuffled)
    assert corpus.held_out(calls) == corpus.held_out(shuffled)


def test_a_run_holding_two_families_is_split_per_family() -> None:
    """One cassette can hold calls to two models: each family ranks it among its own runs."""
    shared = [_call("gemini-2.0-flash-exp", "cassette"), _call("gpt-4o-mini", "cassette")]
    other = [_call("gpt-4o-mini", name) for name in ("a", "b", "c")]
    held = corpus.held_out_runs([*shared, *other])
    assert ("gemini-2.0-flash-exp", "cassette") not in held  # its family's only run, one call
    mini = sorted(["cassette", "a", "b", "c"], key=lambda n: hashlib.sha256(n.encode()).hexdigest())
    assert {r for f, r in held if f == "gpt-4o-mini"} == set(mini[1::2])


def test_family_drops_the_provider_and_the_date() -> None:
    assert corpus.family("litellm_proxy/claude-sonnet-4-20250514") == "claude-sonnet-4"
    assert corpus.family("claude-sonnet-4-5") == "claude-sonnet-4-5"
    assert corpus.family("gpt-5.4-mini-2026-03-17") == "gpt-5.4-mini"
    assert corpus.family("meta-llama/llama-4-maverick") == "llama-4-maverick"
