"""Estimates anchored on the provider's last report (``ctxwin.fitting.anchor``).

The promise: a request that extends a reported one, and the part of it a cut keeps, are
estimated at or above what the provider counts. Checked against a stand-in provider that
counts OpenAI Chat prompts with o200k_base (:func:`tests.provider_standin.prompt_tokens`),
on generated loops (hypothesis: tool results of every kind of text, windows that force
cuts, reports that are missing or zero, requests built on the whole history or on what
was sent) and on loops whose tool results are the texts of the agent-tool sessions the
estimator was not fitted on (``../shared/corpus/agent_tools``).
"""

from __future__ import annotations

import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxwin.fitting.anchor import Anchor, unlogged_tokens
from ctxwin.manager import ContextWindowManager
from ctxwin.runs import read_runs
from ctxwin.runs.simulate import replay_run
from ctxwin.settings import Settings
from fidelity.corpus import corpus_path

pytest.importorskip("quicktok")

from tests.provider_standin import READ_FILE, prompt_tokens

CHAT = "/v1/chat/completions"
MODEL = "gpt-4o-mini"
AGENT_TOOLS = corpus_path() / "agent_tools"


# --- the anchor's arithmetic ---------------------------------------------------------


def test_a_request_extending_the_reported_one_costs_the_report_plus_what_is_new() -> None:
    a = Anchor(additive=True)
    a.record(2, 2, 10, 1000)
    assert a.estimate(2, 50) == 1050  # the reported request's cut, 50 tokens new
    assert a.estimate(6, 50) == 1050  # no count known for items 2..6: drops at least 0
    a.record(2, 2, 6, 700)  # a report that ends at 6 (a replay's earlier call, say)
    a.record(2, 2, 10, 1000)
    # dropping items [2, 6) drops T(6) - T(2): T(2) unknown, so at least nothing
    assert a.estimate(6, 50) == 1050
    a.record(2, 2, 2, 100)  # the head alone
    a.record(2, 2, 10, 1000)
    assert a.known(2) == 100 and a.known(6) == 700
    assert a.estimate(6, 50) == 1050 - (700 - 100)  # exactly what the reports measured
    assert a.estimate(8, 50) == 1050 - (700 - 100)  # items [6, 8) cost at least 0


def test_a_cut_report_measures_the_boundary_it_ends() -> None:
    a = Anchor(additive=True)
    for end, count in ((2, 100), (4, 400), (6, 700), (8, 1000)):
        a.record(2, 2, end, count)
    a.record(2, 4, 10, 1000)  # sent [0, 2) + [4, 10): T(10) = 1000 + T(4) - T(2)
    assert a.known(10) == 1300
    assert a.estimate(4, 0) == 1000
    assert a.estimate(6, 0) == 1000 - 300
    assert a.estimate(2, 0) == 1000 + 300  # what comes back is what the reports counted


def test_formats_that_recount_earlier_turns_measure_no_boundary() -> None:
    a = Anchor(additive=False)  # thinking blocks, reasoning items: stripped later
    a.record(2, 2, 2, 100)
    a.record(2, 2, 10, 1000)
    assert a.keys == []
    assert a.estimate(6, 50) == 1050  # a cut drops at least 0
    assert a.estimate(2, 50) == 1050  # the reported request itself
    a.record(2, 6, 12, 900)
    assert a.estimate(2, 0) is None  # no report bounds what comes back


def test_an_anchor_follows_the_request_that_was_sent() -> None:
    a = Anchor(additive=True)
    for end, count in ((2, 100), (4, 400), (6, 700), (8, 1000)):
        a.record(2, 2, end, count)
    a.record(2, 4, 8, 700)
    moved = a.moved([0, 1, 4, 5, 6, 7])
    assert moved is not None
    assert (moved.head, moved.cut, moved.end, moved.reported) == (2, 2, 6, 700)
    assert moved.known(2) == 100 and moved.known(4) == 400 and moved.known(6) == 700
    assert a.moved([0, 1, 5, 6, 7]) is None  # not the request reported


# --- generated loops -----------------------------------------------------------------

TEXT = st.one_of(
    st.text(alphabet=string.printable, min_size=1, max_size=1500),
    st.text(alphabet=string.ascii_letters + " \n", min_size=1, max_size=1500),
    st.text(alphabet=string.digits + "abcdef-:., ", min_size=1, max_size=1500),
    st.text(min_size=1, max_size=500),
    st.builds(
        lambda n, k: orjson.dumps(
            [{"id": i * k, "v": f"{i:x}", "ok": i % 2 == 0} for i in range(n)]
        ).decode(),
        st.integers(1, 60),
        st.integers(1, 10**9),
    ),
)
"""A tool result: any printable text, prose-like, hex and numbers, any unicode, JSON."""

REPORT = st.sampled_from(["usage", "usage", "usage", "none", "zero"])
"""What the provider reports for a call: its count, nothing (streaming without usage),
or zeros (a gateway that does not count)."""


def run_loop(
    results: list[str], reports: list[str], window: int, build_on: str
) -> Iterator[tuple[int, int, int, int]]:
    """A Chat agent loop through one manager: each call's ``(estimate of the request as
    given, its count, estimate of what is sent, its count)``."""
    manager = ContextWindowManager(MODEL, context_length=window)
    head: list[Any] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Read the files and summarise them."},
    ]
    history = list(head)
    sent: list[Any] = list(head)
    for turn, (text, report) in enumerate(zip(results, reports, strict=True)):
        listed = history if build_on == "history" else sent
        body = {"model": MODEL, "messages": listed, "tools": [READ_FILE]}
        fitted = manager.evaluate(body)
        if fitted.result.overflow_at_floor:
            return
        out = fitted.request
        yield (
            fitted.estimated_tokens,
            prompt_tokens(CHAT, body),
            fitted.estimated_tokens_after,
            prompt_tokens(CHAT, out),
        )
        if report == "usage":
            manager.observe({"prompt_tokens": prompt_tokens(CHAT, out)})
        elif report == "zero":
            manager.observe({"prompt_tokens": 0, "completion_tokens": 0})
        call = {
            "id": f"call_{turn}",
            "type": "function",
            "function": {"name": "read_file", "arguments": orjson.dumps({"p": turn}).decode()},
        }
        new = [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{turn}", "content": text},
        ]
        history = [*history, *new]
        sent = [*out["messages"], *new]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    calls=st.lists(st.tuples(TEXT, REPORT), min_size=2, max_size=40),
    window=st.integers(1500, 9000),
    build_on=st.sampled_from(["history", "sent"]),
)
def test_an_anchored_estimate_is_never_below_the_count(
    calls: list[tuple[str, str]], window: int, build_on: str
) -> None:
    results = [t for t, _ in calls]
    reports = [r for _, r in calls]
    for estimate, count, after, sent in run_loop(results, reports, window, build_on):
        assert after >= sent
        assert estimate >= count


# --- held-out texts: the agent-tool sessions ------------------------------------------


def _texts(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        if len(value) >= 40:
            out.append(value[:6000])
    elif isinstance(value, dict):
        for v in value.values():
            _texts(v, out)
    elif isinstance(value, list):
        for v in value:
            _texts(v, out)


def session_texts(path: Path) -> list[str]:
    """The long strings of a session file (tool output, messages, code), in order."""
    data = path.read_bytes()
    out: list[str] = []
    try:
        _texts(orjson.loads(data), out)
    except orjson.JSONDecodeError:
        for line in data.splitlines():
            try:
                _texts(orjson.loads(line), out)
            except orjson.JSONDecodeError:
                continue
    return out


corpus = pytest.mark.skipif(not AGENT_TOOLS.is_dir(), reason="../shared/corpus is absent")


@corpus
@pytest.mark.corpus
@pytest.mark.parametrize("build_on", ["history", "sent"])
def test_anchored_estimates_bound_loops_over_the_session_texts(build_on: str) -> None:
    """Every session's texts as one loop's tool results, at windows that cut it often:
    no estimate of a request, or of what a cut keeps, falls below its count."""
    checked = cut = 0
    for path in sorted(AGENT_TOOLS.rglob("*.json*")):
        texts = session_texts(path)
        if len(texts) < 4:
            continue
        reports = ["usage" if k % 7 else "none" for k in range(len(texts))]
        for window in (6000, 20_000):
            for estimate, count, after, sent in run_loop(texts, reports, window, build_on):
                assert after >= sent, path.name
                assert estimate >= count, path.name
                checked += 1
                cut += sent < count
    assert checked > 500 and cut > 100


# --- replay says what the log does not show -------------------------------------------


def test_replay_marks_a_report_beyond_the_anchored_prediction() -> None:
    """A call whose count jumps past the prediction made from the report before it by
    more than the safety margin carries ``unlogged_tokens``; the run counts such calls."""
    messages: list[Any] = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
    ]
    for k in range(4):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{k}", "content": "word " * 200},
        ]
    messages.append({"role": "assistant", "content": "done"})
    [run] = read_runs(orjson.dumps({"model": "gpt-4o", "messages": messages}))
    settings_ = Settings(context_length=100_000)
    rows = replay_run(run, settings_)["rows"]
    ends = [2, 4, 6, 8, 10]  # the model messages: one call each
    counts = [r["estimated_tokens"] for r in rows]
    # every call reports its estimate, but the fourth 10,000 more (3,000 is the margin)
    run.usage_at = {
        i: {"prompt_tokens": c + (10_000 if n == 3 else 0)}
        for n, (i, c) in enumerate(zip(ends, counts, strict=False))
    }
    report = replay_run(run, settings_)
    marked = [r["call"] for r in report["rows"] if "unlogged_tokens" in r]
    assert marked == [4]
    row = report["rows"][3]
    jumped = row["reported_tokens"]
    assert jumped is not None
    assert row["unlogged_tokens"] == jumped - row["estimated_tokens"] > 3000
    assert report["unlogged_calls"] == 1
    assert report["zero_reports"] == 0
    # the call after it is anchored on the jump: not marked, and not under
    assert report["rows"][4]["estimated_tokens"] >= jumped


def test_unlogged_is_more_than_the_safety_share_of_the_report_or_the_margin() -> None:
    # 3 % of 100,000 is 3,000; the margin 6,000: the less decides
    assert unlogged_tokens(100_000, 97_000, 6_000) == 0
    assert unlogged_tokens(100_000, 96_999, 6_000) == 3_001
    # a margin under 3 % of the report (a small window): the margin decides
    assert unlogged_tokens(100_000, 98_000, 1_500) == 2_000
    assert unlogged_tokens(100_000, 98_500, 1_500) == 0
    assert unlogged_tokens(100_000, 120_000, 1_500) == 0  # over, not under


def test_new_content_is_priced_at_the_family_seed_at_least() -> None:
    """After usage taught a run a factor below its model family's seed (a slope fitted to
    part of the growth), content no report has counted is still priced at the seed: the
    bound times the seed bounds what that tokenizer counts."""
    from ctxwin.tokens.seeds import BOUND_MODEL_CALIBRATION

    seed = dict(BOUND_MODEL_CALIBRATION)["claude"]
    manager = ContextWindowManager(
        context_length=200_000, model="claude-sonnet-4-5", learn_overhead=True
    )
    for k in range(4):  # each step: 500 raw tokens more, reported 300 more
        manager.observe({"input_tokens": 3000 + 300 * k}, raw_tokens=1000 + 500 * k)
    assert manager.calibration == pytest.approx(0.6)
    assert manager.fresh == seed
    plain = ContextWindowManager(context_length=200_000, model="gpt-4o", learn_overhead=True)
    for k in range(4):
        plain.observe({"prompt_tokens": 3000 + 300 * k}, raw_tokens=1000 + 500 * k)
    assert plain.calibration == pytest.approx(0.6)
    assert plain.fresh == 1.0
