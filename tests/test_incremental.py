"""Incremental fitting gives exactly what a fit from scratch gives, for every prefix."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwin.core import load
from ctxwin.errors import CtxwinError, PairingError
from ctxwin.fitting.incremental import Prefixes, Segmenter, _Cover
from ctxwin.fitting.pruning import Rules, fit, segment
from ctxwin.fitting.strategy import DEFAULT_STRATEGY, Strategy
from ctxwin.formats.anthropic import Anthropic
from ctxwin.formats.openai_chat import OpenAIChat
from ctxwin.formats.openai_responses import OpenAIResponses, ResponsesView
from ctxwin.manager import ContextWindowManager
from ctxwin.runs import Run, calls_from_transcript, read_runs
from ctxwin.runs.simulate import replay_run
from ctxwin.settings import Settings
from ctxwin.tokens.seed import SeedEstimator
from ctxwin.view import ASSISTANT, SYSTEM, TOOL, USER, Item, View
from fidelity.corpus import corpus_path
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
    growing = Prefixes(view, EST, rules)
    complete = Prefixes(view, EST, rules, complete=True)
    for i in sorted(steps):
        sub = view._replace(items=view.items[:i], notes=list(view.notes))
        want = outcome(sub, budget, calibration, rules)
        assert incremental_outcome(growing, i, budget, calibration) == want, i
        assert incremental_outcome(complete, i, budget, calibration) == want, i


def same_replay(transcript: Mapping[str, object], calls: Mapping[str, object]) -> bool:
    """Two replay reports agree, but for what only a transcript run reports (the
    request the session would send next, which its peak counts as the call after the
    last) and the run's shape."""
    skip = {"next_request", "shape", "peak_context_use", "peak_call"}
    if {k: v for k, v in transcript.items() if k not in skip} != {
        k: v for k, v in calls.items() if k not in skip
    }:
        return False
    peak, call = transcript["peak_context_use"], transcript["peak_call"]
    if call is not None and call == int(transcript["calls"]) + 1:  # type: ignore[call-overload]
        return calls["peak_context_use"] is None or peak >= calls["peak_context_use"]  # type: ignore[operator]
    return (peak, call) == (calls["peak_context_use"], calls["peak_call"])


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


def reference_units(items: list[Item], head: int) -> tuple[list[int], list[int]]:
    """Turns and drop units by their definition: a turn starts at an assistant message
    that does not join the one before; turn ``t`` begins a unit unless some earlier
    turn made a call answered in turn ``t`` or later."""
    turns: list[int] = []
    made_in: dict[str, int] = {}
    last_answer: dict[int, int] = {}  # turn -> the last turn answering one of its calls
    for i in range(head, len(items)):
        if not turns or (items[i].role == ASSISTANT and not items[i].joins):
            turns.append(i)
        t = len(turns) - 1
        made_in.update(dict.fromkeys(items[i].calls, t))
        for call_id in items[i].answers:
            if call_id in made_in:
                s = made_in[call_id]
                last_answer[s] = max(last_answer.get(s, s), t)
    units = [t for t in range(len(turns)) if all(last_answer.get(s, s) < t for s in range(t))]
    return turns, units


@settings(max_examples=200, deadline=None)
@given(items())
def test_segment_matches_its_definition(found: list[Item]) -> None:
    seg = segment(found)
    assert (seg.turn_starts, seg.unit_starts) == reference_units(found, seg.head_end)


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
    st.booleans(),
)
def test_replay_of_a_transcript_equals_replay_of_its_calls(
    messages: list[Any], context_length: int, reported: list[int], learn: bool
) -> None:
    """``replay`` fits a transcript's calls incrementally; replaying the same calls as
    recorded request bodies (each read and fitted from scratch) gives the same rows."""
    view = load(messages, estimator=EST).view
    model_at = [i for i, item in enumerate(view.items) if item.role == ASSISTANT]
    usage_at: dict[int, Mapping[str, Any]] = {
        i: {"prompt_tokens": n} for i, n in zip(model_at, reported, strict=False)
    }
    run = Run("r", "chat", body={"messages": messages}, usage_at=usage_at)
    recorded = Run("r", "chat", recorded=calls_from_transcript(run.body, usage_at))
    options = Settings(context_length=context_length, estimator=EST.name)
    assert same_replay(replay_run(run, options, learn), replay_run(recorded, options, learn))


CORPUS = corpus_path()


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
        options = Settings(context_length=context_length)
        assert same_replay(replay_run(run, options), replay_run(recorded, options))


# the manager: a live loop reads only the new messages -----------------------------------


def to_anthropic(messages: list[Any]) -> tuple[str, list[Any]]:
    """Chat messages as Anthropic ones (one for one; the system text goes apart)."""
    system = ""
    out: list[Any] = []
    for m in messages:
        if m["role"] in ("system", "developer"):
            system += str(m["content"])
        elif m["role"] == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": m["tool_call_id"],
                "content": m["content"],
            }
            out.append({"role": "user", "content": [block]})
        elif m["role"] == "assistant":
            blocks: list[Any] = [{"type": "text", "text": m["content"] or "."}]
            for call in m.get("tool_calls", ()):
                blocks.append({"type": "tool_use", "id": call["id"], "name": "f", "input": {}})
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": "user", "content": m["content"] or "."})
    return system, out


def attempt(manager: ContextWindowManager, request: Any, usage: Any) -> Any:
    try:
        fitted = manager.fit(request, last_usage=usage)
    except CtxwinError as exc:
        return type(exc).__name__, str(exc), None, None, None, None, None
    view = fitted.transcript.view
    return (
        fitted.result,
        fitted.budget,
        fitted.raw_tokens_sent,
        fitted.request,
        view,
        fitted.applied,
        fitted,
    )


STRATEGIES = [
    DEFAULT_STRATEGY,
    Strategy(("clear-results", "drop-turns"), keep_results=0),
    Strategy(("clear-results", "drop-turns"), keep_results=1, clear_at_least=300),
    Strategy(("clear-thinking", "clear-results", "drop-turns", "truncate-results")),
    Strategy(("clear-results",), keep_results=0),
    Strategy(("drop-turns", "truncate-results")),
]
"""Every step, before and after drop-turns, and without it."""


def tool_turn(k: int) -> list[dict[str, Any]]:
    """The ``k``-th turn of a Chat loop: a call of ``f`` and its 200-byte result."""
    call = {"id": f"c{k}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{k}", "content": "x" * 200},
    ]


def drive(
    incremental: ContextWindowManager,
    scratch: ContextWindowManager,
    messages: list[Any],
    loop: list[tuple[int, str, int]],
    system: str | None = None,
    tools: bool = False,
    *,
    body: dict[str, Any] | None = None,
    key: str = "messages",
    counted: str = "prompt_tokens",
) -> None:
    """Send both managers the same loop and check that they decide alike. Each step
    appends ``take`` messages and sends the growing history (``history``), what the last
    fit kept plus the new ones (``sent``) or fresh copies (``copy``), under ``key`` of
    ``body``; the next request reports ``reported`` prompt tokens (none for 0; -1: the
    estimate sent)."""
    history: list[Any] = []
    sent: list[Any] | None = None
    pos = 0
    usage: Any = None
    for take, mode, reported in loop:
        new = messages[pos : pos + take]
        pos += take
        if mode == "sent" and sent is not None:
            listed = [*sent, *new]
        elif mode == "copy":
            listed = [dict(m) for m in [*history, *new]]
        else:
            listed = [*history, *new]
        history = [*history, *new]
        request: dict[str, Any] = {"model": "m", **(body or {}), key: listed}
        if system is not None:
            request["system"] = system
        if tools:
            request["tools"] = [{"name": "f", "description": "d" * take, "input_schema": {}}]
        got = attempt(incremental, request, usage)
        want = attempt(scratch, request, usage)
        assert got[:6] == want[:6]
        if got[6] is not None:
            sent = got[6].request[key]
            if reported < 0:
                usage = {counted: got[6].estimated_tokens_after}
        if reported >= 0:
            usage = {counted: reported} if reported else None


LOOP = st.lists(
    st.tuples(
        st.integers(0, 4), st.sampled_from(["history", "sent", "copy"]), st.integers(0, 5000)
    ),
    max_size=14,
)


@settings(max_examples=80, deadline=None)
@given(
    transcripts(max_steps=40),
    st.integers(900, 6000),
    LOOP,
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.sampled_from(STRATEGIES),
)
def test_manager_loop_equals_reading_every_request_whole(
    messages: list[Any],
    context_length: int,
    loop: list[tuple[int, str, int]],
    anthropic: bool,
    tools: bool,
    learn: bool,
    strategy: Strategy,
) -> None:
    """Whatever the loop sends (the growing history, the last fit's kept messages plus
    new ones, or fresh copies), an incremental manager decides exactly what one that
    reads every request whole decides, under every strategy (the edited messages a
    clearing step sent are built on too)."""
    system = ""
    if anthropic:
        system, messages = to_anthropic(messages)
    incremental = ContextWindowManager(
        context_length=context_length,
        estimator=EST,
        learn_overhead=learn,
        strategy=strategy,
        anchor=False,
    )
    scratch = ContextWindowManager(
        context_length=context_length,
        estimator=EST,
        learn_overhead=learn,
        incremental=False,
        strategy=strategy,
    )
    drive(incremental, scratch, messages, loop, system if anthropic else None, tools)


EDITING = [s for s in STRATEGIES if s.edits]


@settings(max_examples=60, deadline=None)
@given(
    transcripts(max_steps=60),
    st.integers(700, 2500),
    st.lists(
        st.tuples(st.integers(1, 4), st.sampled_from(["history", "sent", "sent", "copy"])),
        min_size=4,
        max_size=20,
    ),
    st.booleans(),
    st.sampled_from(EDITING),
)
def test_an_editing_loop_equals_reading_every_request_whole(
    messages: list[Any],
    context_length: int,
    loop: list[tuple[int, str]],
    anthropic: bool,
    strategy: Strategy,
) -> None:
    """A loop under a strategy that edits, tight enough that results are cleared or cut
    and the next request is built on the edited messages sent: the incremental manager
    decides what one that reads every request whole decides."""
    system = ""
    if anthropic:
        system, messages = to_anthropic(messages)
    incremental = ContextWindowManager(
        context_length=context_length, estimator=EST, strategy=strategy, anchor=False
    )
    scratch = ContextWindowManager(
        context_length=context_length, estimator=EST, incremental=False, strategy=strategy
    )
    drive(incremental, scratch, messages, [(take, mode, -1) for take, mode in loop], system or None)


@pytest.mark.parametrize("build_on", ["history", "sent"])
def test_a_clearing_loop_reads_each_message_once(build_on: str) -> None:
    """Under clear-results,drop-turns a 200-call loop reads each message once (requests
    within budget are settled from running state; the ones over it are planned on the
    messages already read) and decides what reading every request whole decides, the
    edited messages it sent built on too."""
    strategy = Strategy(("clear-results", "drop-turns"), keep_results=1)
    manager = ContextWindowManager(
        context_length=3000, estimator=EST, strategy=strategy, anchor=False
    )
    scratch = ContextWindowManager(
        context_length=3000, estimator=EST, strategy=strategy, incremental=False
    )
    history: list[Any] = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    usage = None
    cleared = 0
    total = len(history)
    for k in range(200):
        history = [*history, *tool_turn(k)]
        total += 2
        body = {"model": "m", "messages": history}
        got = attempt(manager, body, usage)
        assert got[:6] == attempt(scratch, body, usage)[:6]
        fitted = got[6]
        cleared += fitted.applied.cleared_results
        usage = {"prompt_tokens": fitted.estimated_tokens_after}
        if build_on == "sent":
            history = fitted.messages
    assert cleared > 100
    assert manager.messages_read == total


def to_responses(messages: list[Any]) -> list[Any]:
    """Chat messages as Responses input items: an assistant message becomes a reasoning
    item, its text and one ``function_call`` per call (model items that join), a tool
    message a ``function_call_output``."""
    out: list[Any] = []
    for m in messages:
        if m["role"] == "tool":
            out.append(
                {
                    "type": "function_call_output",
                    "call_id": m["tool_call_id"],
                    "output": m["content"],
                }
            )
        elif m["role"] == "assistant":
            out.append({"type": "reasoning", "summary": [{"type": "summary_text", "text": "r"}]})
            if m["content"]:
                out.append({"role": "assistant", "content": m["content"]})
            for call in m.get("tool_calls", ()):
                out.append(
                    {"type": "function_call", "call_id": call["id"], "name": "f", "arguments": "{}"}
                )
        else:
            out.append({"role": m["role"], "content": m["content"] or "."})
    return out


@settings(max_examples=80, deadline=None)
@given(
    transcripts(max_steps=40),
    st.integers(900, 6000),
    LOOP,
    st.booleans(),
    st.sampled_from(STRATEGIES),
)
def test_a_responses_loop_equals_reading_every_request_whole(
    messages: list[Any],
    context_length: int,
    loop: list[tuple[int, str, int]],
    learn: bool,
    strategy: Strategy,
) -> None:
    """The same for Responses input items, whose model items join the ones before them
    and whose reasoning items are known by index: the new items, read alone and
    appended, give exactly the view and the decision of a whole read."""
    items = to_responses(messages)
    incremental = ContextWindowManager(
        context_length=context_length,
        estimator=EST,
        learn_overhead=learn,
        strategy=strategy,
        anchor=False,
    )
    scratch = ContextWindowManager(
        context_length=context_length,
        estimator=EST,
        learn_overhead=learn,
        incremental=False,
        strategy=strategy,
    )
    instructions = {"instructions": "Be brief."}
    drive(incremental, scratch, items, loop, body=instructions, key="input", counted="input_tokens")


def test_a_responses_loop_reads_each_item_once() -> None:
    """Responses items are read once each too, when the loop sends its whole history."""
    manager = ContextWindowManager(context_length=3000, estimator=EST)
    history: list[Any] = [{"role": "user", "content": "u"}]
    usage = None
    pruned = 0
    for k in range(200):
        history = [
            *history,
            {"type": "reasoning", "summary": []},
            {"type": "function_call", "call_id": f"c{k}", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"c{k}", "output": "x" * 200},
        ]
        fitted = manager.fit({"model": "m", "input": history}, last_usage=usage)
        pruned += fitted.pruned
        usage = {"input_tokens": fitted.estimated_tokens_after}
    assert pruned > 100
    assert manager.messages_read == len(history)


@pytest.mark.parametrize("build_on", ["history", "sent"])
def test_a_loop_reads_each_message_once(build_on: str) -> None:
    """200 calls over a growing history (pruned from call ~60 on), built on the whole
    history or on what the last fit kept, estimate each message once: the loop costs
    O(messages), not O(calls × messages)."""
    manager = ContextWindowManager(context_length=3000, estimator=EST)
    history: list[Any] = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    usage = None
    pruned = 0
    total = len(history)
    for k in range(200):
        history = [*history, *tool_turn(k)]
        total += 2
        fitted = manager.fit({"model": "m", "messages": history}, last_usage=usage)
        pruned += fitted.pruned
        usage = {"prompt_tokens": fitted.estimated_tokens_after}
        if build_on == "sent":
            history = fitted.messages
    # built on what was kept, the default block cut leaves room for the next few calls:
    # about one call in seven is cut there (every call but the first ~60 on the history)
    assert pruned > (100 if build_on == "history" else 20)
    assert manager.messages_read == total


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(IDS), max_size=3), max_size=25),
    st.lists(st.tuples(st.integers(0, 25), st.integers(0, 1)), max_size=12),
)
def test_cover_counts_the_ids_spanning_a_boundary(
    named: list[list[str]], questions: list[tuple[int, int]]
) -> None:
    cover = _Cover()
    cover.grow(len(named))
    for at, ids in enumerate(named):
        for call_id in ids:
            cover.add(call_id, at)
    for asked, which in questions:
        boundary = min(asked, len(named))
        spanning = any(
            any(c in named[j] for j in range(boundary)) and any(c in m for m in named[boundary:])
            for c in IDS
        )
        assert cover.spanned(boundary, which) == spanning, boundary


def _gemini_history(calls: int, ids: bool) -> list[list[Any]]:
    """The ``contents`` of each call of a Gemini loop: a call and its response per step,
    the function parts with an ``id`` or (as Gemini pairs them) by name and order."""
    history: list[Any] = [{"role": "user", "parts": [{"text": "u"}]}]
    bodies = []
    for k in range(calls):
        call: dict[str, Any] = {"name": "f", "args": {}}
        response: dict[str, Any] = {"name": "f", "response": {"out": "x" * 200}}
        if ids:
            call["id"] = response["id"] = f"c{k}"
        history = [
            *history,
            {"role": "model", "parts": [{"functionCall": call}]},
            {"role": "user", "parts": [{"functionResponse": response}]},
        ]
        bodies.append(history)
    return bodies


@pytest.mark.parametrize("ids", [True, False])
def test_a_gemini_loop_equals_reading_every_request_whole(ids: bool) -> None:
    """Gemini contents are read alone when their function parts carry ids (each is read
    once over the loop); without ids a call is named by its position and answered by
    name and order across contents, so the whole body is read again. Either way the
    decisions are those of a whole read."""
    incremental = ContextWindowManager(context_length=3000, estimator=EST, anchor=False)
    scratch = ContextWindowManager(context_length=3000, estimator=EST, incremental=False)
    usage: Any = None
    pruned = 0
    bodies = _gemini_history(120, ids)
    for contents in bodies:
        body = {"contents": contents}
        got = attempt(incremental, body, usage)
        want = attempt(scratch, body, usage)
        assert got[:6] == want[:6]
        pruned += got[6].pruned
        usage = {"promptTokenCount": got[6].estimated_tokens_after}
    assert pruned > 50
    total = len(bodies[-1])
    if ids:
        assert incremental.messages_read == total
    else:
        assert incremental.messages_read > 10 * total
