"""Incremental fitting gives exactly what a fit from scratch gives, for every prefix."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwin.core import load
from ctxwin.errors import PairingError
from ctxwin.estimate import SeedEstimator
from ctxwin.formats.anthropic import Anthropic
from ctxwin.formats.openai_chat import OpenAIChat
from ctxwin.formats.openai_responses import OpenAIResponses, ResponsesView
from ctxwin.incremental import Prefixes, Segmenter
from ctxwin.pruning import Rules, fit, segment
from ctxwin.runs import Run, calls_from_transcript, read_runs
from ctxwin.simulate import Options, replay_run
from ctxwin.view import ASSISTANT, SYSTEM, TOOL, USER, Item, View
from tests.strategies import transcripts

EST = SeedEstimator()
IDS = ["a", "b", "c", "d"]


@st.composite
def items(draw: st.DrawFn, max_size: int = 30) -> list[Item]:
    """Any item sequence: roles, joins, call ids made and answered, from a small pool
    (so orphans, duplicates, reuse, late results and head extensions all occur)."""
    out = []
    for _ in range(draw(st.integers(0, max_size))):
        role = draw(st.sampled_from([SYSTEM, USER, ASSISTANT, ASSISTANT, TOOL, TOOL]))
        calls = tuple(draw(st.lists(st.sampled_from(IDS), max_size=2))) if role != TOOL else ()
        answers = tuple(draw(st.lists(st.sampled_from(IDS), max_size=2))) if role != SYSTEM else ()
        cost = [draw(st.integers(0, 50)), draw(st.integers(0, 400)), draw(st.integers(0, 400))]
        joins = role == ASSISTANT and draw(st.integers(0, 4)) == 0
        out.append(Item(role, cost, calls, answers, joins))
    return out


def outcome(view: View, budget: int, calibration: float, rules: Rules | None) -> Any:
    try:
        return fit(view, budget, EST, calibration, rules)
    except PairingError as exc:
        return ("refused", str(exc), exc.where)


def incremental_outcome(p: Prefixes, i: int, budget: int, calibration: float) -> Any:
    try:
        return p.fit(i, budget, calibration)
    except PairingError as exc:
        return ("refused", str(exc), exc.where)


def check_all_prefixes(
    view: View, rules: Rules | None, steps: list[int], budget: int, calibration: float
) -> None:
    p = Prefixes(view, EST, rules)
    for i in sorted(steps):
        sub = replace(view, items=view.items[:i], notes=list(view.notes))
        assert incremental_outcome(p, i, budget, calibration) == outcome(
            sub, budget, calibration, rules
        ), i


PLAN = st.tuples(
    st.lists(st.integers(0, 30), max_size=12),
    st.integers(-5, 3000),
    st.sampled_from([1.0, 1.15, 1.7]),
)


@settings(max_examples=120, deadline=None)
@given(items(), PLAN)
def test_generic_rules_every_prefix(found: list[Item], plan: tuple[list[int], int, float]) -> None:
    steps, budget, calibration = plan
    steps = [min(s, len(found)) for s in steps] + [len(found)]
    view = View("openai-chat", found, [3, 0, 0])
    check_all_prefixes(view, OpenAIChat().problems, steps, budget, calibration)
    check_all_prefixes(view, None, steps, budget, calibration)


@settings(max_examples=120, deadline=None)
@given(items(), PLAN)
def test_adjacency_rules_every_prefix(
    found: list[Item], plan: tuple[list[int], int, float]
) -> None:
    steps, budget, calibration = plan
    steps = [min(s, len(found)) for s in steps] + [len(found)]
    view = View("anthropic", found, [0, 40, 40])
    check_all_prefixes(view, Anthropic().problems, steps, budget, calibration)


@settings(max_examples=80, deadline=None)
@given(items(), PLAN, st.sets(st.integers(0, 30)))
def test_reasoning_rules_every_prefix(
    found: list[Item], plan: tuple[list[int], int, float], reasoning: set[int]
) -> None:
    steps, budget, calibration = plan
    steps = [min(s, len(found)) for s in steps] + [len(found)]
    view = ResponsesView("openai-responses", found, [0, 0, 0], reasoning=reasoning)
    check_all_prefixes(view, OpenAIResponses().problems, steps, budget, calibration)


@settings(max_examples=120, deadline=None)
@given(items(), st.lists(st.integers(0, 30), max_size=10))
def test_segmenter_matches_segment(found: list[Item], steps: list[int]) -> None:
    seg = Segmenter(found)
    for i in sorted(min(s, len(found)) for s in [*steps, len(found)]):
        seg.advance(i)
        assert seg.segments() == segment(found[:i]), i


@settings(max_examples=100, deadline=None)
@given(transcripts(), st.integers(1, 4000), st.sampled_from([1.0, 1.15, 2.0]))
def test_valid_agent_runs(messages: list[Any], budget: int, calibration: float) -> None:
    """A whole agent run, one call per model message, as ``replay`` fits it."""
    t = load(messages, estimator=EST)
    steps = [i for i, item in enumerate(t.view.items) if item.role == ASSISTANT]
    check_all_prefixes(t.view, t.adapter.problems, steps, budget, calibration)


def test_prefixes_only_grow() -> None:
    view = View("openai-chat", [Item(USER, [1, 0, 0]), Item(ASSISTANT, [1, 0, 0])], [0, 0, 0])
    p = Prefixes(view, EST)
    p.fit(2, 100, 1.0)
    try:
        p.fit(1, 100, 1.0)
    except ValueError as exc:
        assert "only grow" in str(exc)
    else:
        raise AssertionError("a shrinking prefix was accepted")


@settings(max_examples=60, deadline=None)
@given(
    transcripts(max_steps=40),
    st.integers(1200, 6000),
    st.lists(st.integers(0, 3000), max_size=20),
)
def test_replay_of_a_transcript_equals_replay_of_its_calls(
    messages: list[Any], context_length: int, reported: list[int]
) -> None:
    """``replay`` fits a transcript's calls incrementally; replaying the same calls as
    recorded request bodies (each read and fitted from scratch) gives the same rows."""
    view = load(messages, estimator=EST).view
    model_at = [i for i, item in enumerate(view.items) if item.role == ASSISTANT]
    usage_at = {i: {"prompt_tokens": n} for i, n in zip(model_at, reported, strict=False)}
    run = Run("r", "chat", body={"messages": messages}, usage_at=usage_at)
    recorded = Run("r", "chat", recorded=calls_from_transcript(run.body, usage_at))
    options = Options(context_length=context_length, estimator=EST.name)
    incremental = replay_run(run, options)
    scratch = replay_run(recorded, options)
    assert incremental == scratch


CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"


@pytest.mark.corpus
@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is absent")
@pytest.mark.parametrize(
    "name", ["openhands/multi_swe_bench_output.jsonl", "sweagent/demo_fc__marshmallow-1867.traj"]
)
@pytest.mark.parametrize("context_length", [6000, 20000])
def test_replay_of_recorded_transcripts_equals_replay_of_their_calls(
    name: str, context_length: int
) -> None:
    for run in read_runs((CORPUS / name).read_bytes()):
        recorded = Run(run.name, run.shape, recorded=run.calls())
        options = Options(context_length=context_length)
        assert replay_run(run, options) == replay_run(recorded, options)
