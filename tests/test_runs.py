"""Recorded-run readers, replay and check on every shape (synthetic, then the real corpus)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwin.core import INVALID, load
from ctxwin.errors import CtxwinError
from ctxwin.fitting.strategy import Strategy
from ctxwin.manager import ContextWindowManager
from ctxwin.runs import read_runs, usage_of
from ctxwin.runs.calibrating import calibration_rows
from ctxwin.runs.simulate import check_run, replay_run
from ctxwin.settings import Settings
from ctxwin.tokens.models import lookup_model
from fidelity.corpus import corpus_path
from tests.builders import adr_transcript, assistant, system, tool, user
from tests.strategies import transcripts

CORPUS = corpus_path()
OPENHANDS = CORPUS / "openhands" / "multi_swe_bench_output.jsonl"
corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is absent")

SEED = Settings(estimator="seed")


def dumps(value: Any) -> bytes:
    return orjson.dumps(value)


def jsonl(*values: Any) -> bytes:
    return b"".join(orjson.dumps(v) + b"\n" for v in values)


# shapes -------------------------------------------------------------------------------


def test_chat_body_is_one_transcript_with_one_call_per_assistant_message() -> None:
    body = {"model": "gpt-4o", "messages": adr_transcript(), "tools": [{"type": "function"}]}
    [run] = read_runs(dumps(body))
    assert run.is_transcript and run.shape == "chat"
    calls = run.calls()
    assert [c.where for c in calls] == ["messages[2]", "messages[4]", "messages[6]"]
    assert calls[1].request["messages"] == body["messages"][:4]
    assert calls[1].request["tools"] == body["tools"]  # the body's tools stay on every call


def test_bare_messages_array() -> None:
    [run] = read_runs(dumps(adr_transcript()))
    assert run.shape == "messages" and len(run.calls()) == 3


def test_request_response_pairs_jsonl() -> None:
    req = {"model": "gpt-4o", "messages": [system(), user()]}
    data = jsonl(
        {"request": req, "response": {"usage": {"prompt_tokens": 30}}},
        {"request": req, "response": {"usage": {"input_tokens": 3, "cache_read_input_tokens": 9}}},
    )
    runs = read_runs(data)
    assert [r.name for r in runs] == ["line 1", "line 2"]
    assert [r.calls()[0].usage for r in runs] == [
        {"prompt_tokens": 30},
        {"input_tokens": 3, "cache_read_input_tokens": 9},
    ]


def test_a_bad_jsonl_line_is_a_row_not_a_crash() -> None:
    req = {"messages": [system(), user()]}
    runs = read_runs(jsonl({"messages": req["messages"]}) + b"{oops\n")
    assert runs[1].error is not None and "invalid JSON" in runs[1].error
    assert check_run(runs[1], SEED)["status"] == INVALID


def test_a_byte_order_mark_is_ignored() -> None:
    [run] = read_runs(b"\xef\xbb\xbf" + dumps({"messages": adr_transcript()}))
    assert run.error is None and len(run.calls()) == 3


def test_text_that_is_not_json_is_one_invalid_run() -> None:
    [run] = read_runs(b"# a readme\n\nnot json at all\n")
    assert run.error is not None and run.error.startswith("invalid JSON")


def test_taubench_list() -> None:
    data = dumps([{"task_id": 7, "traj": adr_transcript()}, {"task_id": 8, "traj": [user()]}])
    runs = read_runs(data)
    assert [r.name for r in runs] == ["[0] task 7", "[1] task 8"]
    assert runs[0].body == {"messages": adr_transcript()}


def test_swe_agent_traj_uses_the_first_tool_call_id_and_joins_text_parts() -> None:
    history = [
        {"role": "system", "content": "sys", "agent": "main"},
        {"role": "user", "content": [{"type": "text", "text": t} for t in ("fix ", "it")]},
        {**assistant("c1"), "thought": "t", "action": "ls"},
        {"role": "tool", "content": "out", "tool_call_ids": ["c1"], "agent": "main"},
    ]
    [run] = read_runs(dumps({"history": history, "info": {}}))
    messages = run.body["messages"]
    assert messages[1]["content"] == "fix it"
    assert messages[3] == {"role": "tool", "content": "out", "tool_call_id": "c1"}
    assert "thought" not in messages[2]


def _response(rid: str, call_id: str, prompt_tokens: int) -> dict[str, Any]:
    message = {**assistant(call_id, content="let me look"), "role": "assistant"}
    return {
        "id": rid,
        "model": "meta-llama/llama-4-maverick",
        "choices": [{"message": message}],
        "usage": {"prompt_tokens": prompt_tokens},
    }


def test_openhands_events_dedupe_responses_and_pair_observations() -> None:
    r1 = _response("gen-1", "toolu_01", 500)
    r2 = _response("gen-2", "toolu_02", 900)
    history = [
        {"source": "agent", "action": "system", "args": {"content": "sys", "tools": [{"t": 1}]}},
        {"source": "user", "action": "message", "args": {"content": "task"}},
        {"source": "user", "action": "recall", "args": {"query": "task"}},
        {"source": "environment", "observation": "recall", "extras": {"date": "2025-04-30"}},
        {"source": "agent", "action": "run", "tool_call_metadata": {"model_response": r1}},
        {"source": "agent", "action": "run", "tool_call_metadata": {"model_response": r1}},
        {
            "source": "agent",
            "observation": "run",
            "tool_call_metadata": {"tool_call_id": "toolu_01"},
            "content": "files",
        },
        {"source": "agent", "observation": "error", "content": "bad parameter"},
        {"source": "agent", "action": "finish", "tool_call_metadata": {"model_response": r2}},
    ]
    [run] = read_runs(jsonl({"instance_id": "x-1", "history": history}))
    assert run.name == "x-1" and run.shape == "openhands"  # one line: the label is the id
    roles = [m["role"] for m in run.body["messages"]]
    assert roles == ["system", "user", "user", "assistant", "tool", "user", "assistant"]
    assert run.body["tools"] == [{"t": 1}]
    assert run.body["model"] == "meta-llama/llama-4-maverick"
    calls = run.calls()
    assert [c.usage for c in calls] == [{"prompt_tokens": 500}, {"prompt_tokens": 900}]
    assert len(calls[1].request["messages"]) == 6


def test_agent_sdk_log_without_native_tools_sends_no_tools() -> None:
    log = {
        "messages": [system(), user()],
        "tools": [{"type": "function"}],
        "raw_messages": [],
        "response": {"model": "litellm_proxy/deepseek-chat", "usage": {"prompt_tokens": 77}},
    }
    [run] = read_runs(dumps(log))
    [call] = run.calls()
    assert "tools" not in call.request and call.request["model"] == "litellm_proxy/deepseek-chat"
    assert call.usage == {"prompt_tokens": 77}


def test_cassette_interactions_with_usage_and_uri_model() -> None:
    cassette = {
        "interactions": [
            {
                "request": {
                    "uri": "https://x/v1beta/models/gemini-2.0-flash:generateContent",
                    "parsed_body": {"contents": []},
                },
                "response": {"parsed_body": {"usageMetadata": {"promptTokenCount": 23}}},
            },
            {
                "request": {"parsed_body": {"model": "m", "messages": [user()]}},
                "response": {"parsed_body": {"input_tokens": 12}},
            },
        ]
    }
    [run] = read_runs(dumps(cassette))
    calls = run.calls()
    assert calls[0].model == "gemini-2.0-flash"
    assert calls[0].usage == {"promptTokenCount": 23}
    assert calls[1].usage == {"input_tokens": 12}


def test_usage_of_unknown_response_is_none() -> None:
    assert usage_of({"choices": []}) is None
    assert usage_of("text") is None


# replay and check ---------------------------------------------------------------------


def test_replay_learns_from_recorded_usage_against_the_recorded_request() -> None:
    body = {"model": "gpt-4o", "messages": adr_transcript()}
    [run] = read_runs(dumps(body))
    first = replay_run(run, SEED)["rows"][0]
    # The first call reports 3× its raw estimate; the next call is estimated at 3×.
    run.usage_at = {2: {"prompt_tokens": 3 * first["raw_tokens"]}}
    rows = replay_run(run, SEED)["rows"]
    assert rows[0]["calibration"] == pytest.approx(1.15)
    assert rows[1]["calibration"] == pytest.approx(3.0)
    assert rows[1]["estimated_tokens"] == math.ceil(rows[1]["raw_tokens"] * 3)


def test_replay_names_the_first_pruned_and_truncated_calls() -> None:
    messages = [system(), user()]
    for i, size in enumerate((4000, 4000, 4000, 30_000)):
        messages += [assistant(f"c{i}"), tool(f"c{i}", "x" * size)]
    messages.append(assistant(content="done"))
    [run] = read_runs(dumps({"messages": messages}))
    report = replay_run(run, Settings(context_length=6000, max_tokens=500, estimator="seed"))
    statuses = [r["status"] for r in report["rows"]]
    assert statuses == ["fits", "fits", "fits", "needs_pruning", "truncated"]
    assert report["first_pruned"] == 4 and report["first_truncated"] == 5


def test_a_next_request_that_only_needs_clearing_needs_pruning() -> None:
    """The next request's status counted dropped turns only: one over the budget that
    clearing results brings within it was said to fit."""
    messages = [system(), user()]
    for i in range(6):
        messages += [assistant(f"c{i}"), tool(f"c{i}", "x" * 4000)]
    [run] = read_runs(dumps({"messages": messages}))
    strategy = Strategy(("clear-results",))
    settings = Settings(context_length=10_000, max_tokens=500, estimator="seed", strategy=strategy)
    report = replay_run(run, settings)
    nxt = report["next_request"]
    assert nxt is not None
    assert nxt["estimated_tokens"] > nxt["budget"] and nxt["dropped_turns"] == 0
    assert nxt["cleared_results"] > 0
    assert nxt["status"] == report["rows"][-1]["status"] == "needs_pruning"


def test_check_run_statuses() -> None:
    [run] = read_runs(dumps({"messages": adr_transcript()}))
    assert check_run(run, Settings(context_length=100_000, estimator="seed"))["status"] == "fits"
    row = check_run(run, Settings(context_length=5000, max_tokens=500, estimator="seed"))
    assert row["status"] == "needs_pruning" and row["dropped_turns"] > 0
    messages = [*adr_transcript(), assistant("big"), tool("big", "y" * 20_000)]
    [run] = read_runs(dumps({"messages": messages}))
    row = check_run(run, Settings(context_length=5000, max_tokens=500, estimator="seed"))
    assert row["status"] == "truncated" and row["over_by"] > 0


def test_check_run_names_an_unsupported_format() -> None:
    [run] = read_runs(dumps({"prompt": "hi", "stream": True}))
    row = check_run(run, SEED)
    assert row["status"] == INVALID and row["reason"] == "unsupported_format"
    [run] = read_runs(dumps({"messages": [{"role": "user", "content": 5}]}))
    row = check_run(run, SEED)
    assert row["status"] == INVALID and row["reason"] == "bad_input"


# the real corpus ----------------------------------------------------------------------


def _seed_raw(request: dict[str, Any]) -> int:
    """The seed formula of docs/how-it-works.md, counted by hand over an OpenAI chat request."""
    prose = dense = overhead = 0
    if "tools" in request:
        dense += len(orjson.dumps(request["tools"]))
    for m in request["messages"]:
        overhead += 8
        content = m.get("content")
        text = content if isinstance(content, str) else ""
        n = len(text.encode())
        if m["role"] == "tool":
            dense += n + len(m["tool_call_id"].encode())
        else:
            prose += n
        for c in m.get("tool_calls") or ():
            overhead += 12
            prose += len(c["function"]["name"].encode())
            dense += len(c["function"]["arguments"].encode()) + len(c["id"].encode())
    return overhead + math.ceil(prose * 2 / 7) + math.ceil(dense * 2 / 5)


def _recorded_prompt_tokens(line: bytes) -> list[int]:
    """prompt_tokens of each distinct model response of one OpenHands record, in order."""
    seen: dict[str, int] = {}
    for event in orjson.loads(line)["history"]:
        response = (event.get("tool_call_metadata") or {}).get("model_response")
        if "action" in event and response and response["id"] not in seen:
            seen[response["id"]] = response["usage"]["prompt_tokens"]
    return list(seen.values())


@corpus
@pytest.mark.corpus
def test_openhands_replay_matches_a_hand_check() -> None:
    lines = OPENHANDS.read_bytes().splitlines()
    runs = read_runs(OPENHANDS.read_bytes())
    assert sum(len(r.calls()) for r in runs) == 105
    assert all(c.usage is not None for r in runs for c in r.calls())
    options = Settings(context_length=16_000, estimator="seed")
    maverick = lookup_model("llama-4-maverick")
    assert maverick is not None and maverick.max_output_tokens is not None
    # llama-4-maverick's output cap, scaled to the smaller window: under the 1,000 floor
    scaled = math.ceil(maverick.max_output_tokens * 16_000 / maverick.context_length)
    reserve = min(maverick.max_output_tokens, max(1000, scaled))
    budget = 16_000 - reserve - math.ceil(0.03 * 16_000)
    for run, line in zip(runs, lines, strict=True):
        report = replay_run(run, options)
        rows = report["rows"]
        calls = run.calls()
        reported = _recorded_prompt_tokens(line)
        assert [r["reported_tokens"] for r in rows] == reported
        # The provider never reported more than the seed allows: calibration stays 1.15.
        # A call whose messages extend the call before's is anchored on that call's
        # report: the report plus the seed formula of the messages added, at 1.15.
        estimates = []
        for k, call in enumerate(calls, 1):
            raw = _seed_raw(call.request)
            estimate = math.ceil(raw * 1.15)
            if k > 1:
                before = calls[k - 2].request["messages"]
                now = call.request["messages"]
                if now[: len(before)] == before:
                    new = _seed_raw({"messages": now[len(before) :]})
                    estimate = reported[k - 2] + math.ceil(new * 1.15)
            estimates.append((raw, estimate))
        for k in (1, 2, len(rows)):  # three calls per run, counted by hand
            row = rows[k - 1]
            raw, estimate = estimates[k - 1]
            assert row["raw_tokens"] == raw
            assert row["estimated_tokens"] == estimate
            assert row["budget"] == budget
        assert all(r["calibration"] == pytest.approx(1.15) for r in rows)
        # so the first pruned call is the first whose estimate exceeds the budget
        first = next(k for k, (_, e) in enumerate(estimates, 1) if e > budget)
        assert report["first_pruned"] == first
    real = [replay_run(r, SEED) for r in runs]
    assert all(rep["first_pruned"] is None and rep["first_truncated"] is None for rep in real)
    assert all(rep["context_length"] == 1_000_000 for rep in real)


@corpus
@pytest.mark.corpus
def test_every_corpus_file_reads_without_raising() -> None:
    for path in sorted(CORPUS.rglob("*")):
        if path.is_file():
            for run in read_runs(path.read_bytes()):
                check_run(run, SEED)
                calibration_rows(run, SEED)


@settings(max_examples=40, deadline=None)
@given(transcripts(), st.sampled_from([1500, 4000, 20_000]), st.integers(0, 3))
def test_replay_rows_equal_fitting_each_request_afresh(
    messages: list[dict[str, Any]], context: int, usage_every: int
) -> None:
    """The shared-view fast path gives the rows a fresh manager gives on each request."""
    [run] = read_runs(dumps({"model": "m", "messages": messages}))
    calls = run.calls()
    if usage_every:
        for n, call in enumerate(calls):
            if n % usage_every == 0:
                index = int(call.where.split("[")[1].rstrip("]"))
                run.usage_at[index] = {"prompt_tokens": 50 * (n + 1)}
        calls = run.calls()
    options = Settings(context_length=context, max_tokens=300, estimator="seed")
    rows = replay_run(run, options)["rows"]
    manager = ContextWindowManager(settings=options)
    prev: tuple[Any, int] | None = None
    for row, call in zip(rows, calls, strict=True):
        if prev is None:
            manager.reset()
        elif prev[0] is not None:
            manager.observe(prev[0], raw_tokens=prev[1])
        try:
            fitted = manager.evaluate(call.request)
        except CtxwinError:
            assert row["status"] == INVALID
            prev = (None, 0)  # nothing to learn from it; keep what was learned
            continue
        assert row["estimated_tokens"] == fitted.estimated_tokens
        assert row["dropped_turns"] == fitted.dropped_turns
        assert row["calibration"] == fitted.calibration
        prev = (call.usage, fitted.result.raw_tokens)


FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.mark.parametrize(
    ("fixture", "fmt", "key"),
    [
        ("anthropic_agent.json", "anthropic", "messages"),
        ("gemini_agent.json", "gemini", "contents"),
        ("responses_agent.json", "openai-responses", "input"),
    ],
)
def test_replay_splits_every_wire_format_at_its_model_messages(
    fixture: str, fmt: str, key: str
) -> None:
    body = orjson.loads((FIXTURES / fixture).read_bytes())
    [run] = read_runs(orjson.dumps(body))
    t = load(body)
    assert t.format == fmt
    model_turns = [
        i for i, item in enumerate(t.view.items) if item.role == "assistant" and not item.joins
    ]
    calls = run.calls()
    assert [c.where for c in calls] == [t.view.where(i) for i in model_turns]
    for call, i in zip(calls, model_turns, strict=True):
        assert call.request[key] == body[key][:i]
        assert {k: v for k, v in call.request.items() if k != key} == {
            k: v for k, v in body.items() if k != key
        }
    report = replay_run(run, Settings(context_length=1_000_000, estimator="seed"))
    assert [r["status"] for r in report["rows"]] == ["fits"] * len(calls)
    assert check_run(run, SEED)["format"] == fmt
