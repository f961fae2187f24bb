"""Session-file readers: each format reads its corpus samples with hand-checked counts,
and small synthetic sessions cover compaction, sidechains, side models, unknown and
missing fields, a cut-off last line and an empty file."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwin.fitting.budget import SAFETY_PERCENT
from ctxwin.fitting.calibration import (
    FRESH_FACTOR,
    LEAST_FACTOR,
    OverheadLearner,
    prompt_tokens_from_usage,
)
from ctxwin.manager import ContextWindowManager
from ctxwin.recorded import Run
from ctxwin.runs import read_runs
from ctxwin.runs.simulate import check_run, replay_run
from ctxwin.sessions import names
from ctxwin.settings import Settings
from fidelity import replays
from fidelity.corpus import corpus_path

AGENT_TOOLS = corpus_path() / "agent_tools"
corpus = pytest.mark.skipif(not AGENT_TOOLS.is_dir(), reason="../shared/corpus is absent")
AGENT_TOOLS_NEXT = AGENT_TOOLS.parent / "agent_tools_next"
"""Samples of the readers added after ``agent_tools/`` (pi, GitHub Copilot CLI, one more
Claude Code session)."""


def reported(run: Run) -> list[int | None]:
    return [prompt_tokens_from_usage(c.usage) if c.usage is not None else None for c in run.calls()]


def jsonl(*lines: Any) -> bytes:
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


# --- corpus samples: counts checked by hand against the files ---------------------------
# Each figure below was counted from the raw file with a separate throwaway script
# (distinct message ids, token_count events that change the total, ...), not by ctxwin.

SAMPLES = [
    # (file, reader, run name, calls, first reported, last reported, sum of reported)
    (
        "claude-code/drmaciver-coverage-test-fix.jsonl",
        "claude-code",
        "main",
        14,
        18549,
        22899,
        294215,
    ),
    (
        "claude-code/codemie-subagents-agent-a485154.jsonl",
        "claude-code",
        "agent-a485154",
        6,
        17162,
        57743,
        212744,
    ),
    (
        "claude-code/codemie-session-3fe1b6bc.jsonl",
        "claude-code",
        "main",
        67,
        31740,
        130533,
        6880294,
    ),
    (
        "codex/localpush-rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl",
        "codex",
        "019c8bfe-ec25-79e0-97d7-bda6a9c575ff",
        6,
        42772,
        63441,
        298373,
    ),
    (
        "gemini-cli/codemie-session-2025-12-01T21-45-5b959dae.json",
        "gemini-cli",
        "5b959dae-8655-4cd1-b10f-720b8c336ea2",
        11,
        2752,
        18325,
        101630,
    ),
    (
        "mini-swe-agent/django__django-16255.traj.json",
        "mini-swe-agent",
        "django__django-16255",
        17,
        1779,
        5053,
        61068,
    ),
    ("otel-genai/any-agent-OPENAI_trace.json", "otel", "trace 1", 3, 269, 392, 1020),
    ("otel-genai/envoy-ai-gateway-chat-tools.json", "otel", "trace 1", 1, 162, 162, 162),
]


@corpus
@pytest.mark.corpus
@pytest.mark.parametrize(("path", "shape", "name", "calls", "first", "last", "total"), SAMPLES)
def test_sample_counts(
    path: str, shape: str, name: str, calls: int, first: int, last: int, total: int
) -> None:
    [run] = read_runs((AGENT_TOOLS / path).read_bytes())
    assert run.error is None
    assert (run.shape, run.name) == (shape, name)
    counts = reported(run)
    assert len(counts) == calls
    assert None not in counts
    assert (counts[0], counts[-1], sum(c or 0 for c in counts)) == (first, last, total)


@corpus
@pytest.mark.corpus
def test_openhands_event_stream_sample() -> None:
    # 18 events: 4 model responses (ids chatcmpl-6bb9..., -5593..., -34fe..., -51a8...)
    # and the agent's final message (no usage); state changes and null observations skipped.
    [run] = read_runs(
        (AGENT_TOOLS / "openhands-events/trajectory-visualizer-demo1.json").read_bytes()
    )
    assert run.shape == "openhands-events"
    assert reported(run) == [3439, 3601, 4769, 5488, None]
    roles = [m["role"] for m in run.body["messages"]]
    assert roles.count("tool") == 4
    assert all(m.get("content") != "" for m in run.body["messages"] if m["role"] == "user")
    # the model is sent what the agent renders of an observation: the ACI editor's message,
    # not the diff the event holds; a command's output with its exit code
    results = [m["content"] for m in run.body["messages"] if m["role"] == "tool"]
    assert results[1] == "File created successfully at: /workspace/todo-app/index.html"
    assert results[0].endswith("[Command finished with exit code 0]")


@corpus
@pytest.mark.corpus
def test_gemini_content_history_sample() -> None:
    # 105 contents, 52 of them role "model" (no usage recorded); one functionResponse
    # (id nlcjynug, a command the user ran) answers no call and is read as text.
    [run] = read_runs((AGENT_TOOLS / "gemini-cli/gemini-cli-repo-trajectory.json").read_bytes())
    assert run.shape == "gemini-cli"
    assert len(run.body["contents"]) == 105
    assert reported(run) == [None] * 52
    assert run.warnings and "1 function responses" in run.warnings[0]


@corpus
@pytest.mark.corpus
def test_codex_rollout_without_token_counts() -> None:
    # Codex Desktop 0.128: 3 user messages, 38 function calls, no token_count lines.
    path = "codex/codemie-rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl"
    [run] = read_runs((AGENT_TOOLS / path).read_bytes())
    counts = reported(run)
    assert counts and set(counts) == {None}
    items = run.body["input"]
    assert sum(1 for i in items if i.get("type") == "function_call") == 38


SWE_AGENT = AGENT_TOOLS.parent / "sweagent" / "demo_fc__marshmallow-1867.traj"


@pytest.mark.skipif(not SWE_AGENT.is_file(), reason="../shared/corpus is absent")
@pytest.mark.corpus
def test_swe_agent_traj_sample() -> None:
    # SWE-agent 1.x function-calling trajectory: history of 1 system, 1 user, 11 assistant
    # and 11 tool messages; info.model_stats.api_calls is 11 and no per-call usage is kept.
    [run] = read_runs(SWE_AGENT.read_bytes())
    assert run.shape == "swe-agent" and run.error is None
    assert len(run.body["messages"]) == 24
    assert reported(run) == [None] * 11


@corpus
@pytest.mark.corpus
@pytest.mark.parametrize("folder", [AGENT_TOOLS, AGENT_TOOLS_NEXT], ids=lambda p: p.name)
def test_every_agent_tools_sample_replays_without_invalid_calls(folder: Path) -> None:
    options = Settings()
    assert len(list(folder.rglob("*.json*"))) >= 4
    for path in sorted(folder.rglob("*.json*")):
        for run in read_runs(path.read_bytes(), path=str(path)):
            assert run.error is None, (path, run.error)
            assert run.shape in names(), path
            rep = replay_run(run, options)
            assert rep["calls"] > 0, path
            assert rep["invalid_calls"] == 0, (path, rep["rows"])
            assert check_run(run, options)["status"] != "invalid", path


@corpus
@pytest.mark.corpus
def test_agent_tools_next_predictions_after_the_first_call() -> None:
    """Every model call of the new samples is found (pi: each assistant message; Copilot
    CLI: each assistant.message); with usage logged, the median prediction ÷ reported
    after each run's first call is at most 1.05 per agent tool, and none is under 0.97×
    (new content is priced at the model family's seed at least)."""
    measured = replays.measure(AGENT_TOOLS_NEXT)
    found: dict[str, int] = {}
    for r in measured:
        assert r.invalid == 0, (r.sample, r.run)
        found[r.tool] = found.get(r.tool, 0) + r.found
    pi_lines = (AGENT_TOOLS_NEXT / "pi" / "pi-mono-large-session.jsonl").read_bytes().splitlines()
    copilot = [p.read_bytes() for p in (AGENT_TOOLS_NEXT / "copilot-cli").glob("*.jsonl")]
    assert found["pi"] == sum(b'"role":"assistant"' in line for line in pi_lines) == 453
    assert found["copilot-cli"] == sum(d.count(b'"type":"assistant.message"') for d in copilot)
    for tool in ("pi", "claude-code"):
        calls = [c for r in measured if r.tool == tool for c in r.calls]
        assert calls and statistics.median(c.ratio for c in calls) <= 1.05, tool
    under = {(r.tool, r.run, c.call) for r in measured for c in r.calls if c.ratio < 0.97}
    assert under == set()


# --- synthetic Claude Code sessions ----------------------------------------------------


def cc_line(
    kind: str,
    uuid: str,
    parent: str | None,
    content: Any,
    *,
    mid: str | None = None,
    usage: int | None = None,
    model: str = "claude-sonnet-4-5",
    **extra: Any,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": kind, "content": content}
    if kind == "assistant":
        message |= {"id": mid or f"msg_{uuid}", "model": model, "type": "message"}
        if usage is not None:
            message["usage"] = {
                "input_tokens": 3,
                "cache_creation_input_tokens": usage - 103,
                "cache_read_input_tokens": 100,
                "output_tokens": 9,
            }
    return {
        "type": kind,
        "uuid": uuid,
        "parentUuid": parent,
        "isSidechain": False,
        "sessionId": "s1",
        "message": message,
        **extra,
    }


def tool_use(call_id: str) -> list[dict[str, Any]]:
    return [{"type": "tool_use", "id": call_id, "name": "Read", "input": {"path": "a.py"}}]


def tool_result(call_id: str) -> list[dict[str, Any]]:
    return [{"type": "tool_result", "tool_use_id": call_id, "content": "print(1)\n"}]


def test_claude_code_parallel_tools_and_skipped_lines() -> None:
    data = jsonl(
        {"type": "queue-operation", "operation": "enqueue", "sessionId": "s1"},
        {"type": "file-history-snapshot", "messageId": "x", "snapshot": {}},
        cc_line("user", "u1", None, "read both files"),
        cc_line("assistant", "a1", "u1", [{"type": "text", "text": "ok"}], mid="m1", usage=20000),
        cc_line("assistant", "a2", "a1", tool_use("t1"), mid="m1", usage=20000),
        {"type": "progress", "uuid": "p1", "parentUuid": "a2", "data": {}},
        cc_line("assistant", "a3", "a2", tool_use("t2"), mid="m1", usage=20000),
        cc_line("user", "r1", "a2", tool_result("t1"), toolUseResult={"big": "copy"}),
        cc_line("user", "r2", "a3", tool_result("t2")),
        {"type": "system", "subtype": "turn_duration", "uuid": "s1", "parentUuid": "r2"},
        cc_line("assistant", "a4", "s1", [{"type": "text", "text": "done"}], usage=20300),
        {"type": "summary", "summary": "Reading files", "leafUuid": "a4"},
        cc_line("user", "u2", "a4", "thanks", futureField={"anything": 1}),
    )
    [run] = read_runs(data)
    assert run.shape == "claude-code" and run.fmt == "anthropic"
    assert reported(run) == [20000, 20300]
    messages = run.body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert [b["type"] for b in messages[1]["content"]] == ["text", "tool_use", "tool_use"]
    assert [b["tool_use_id"] for b in messages[2]["content"]] == ["t1", "t2"]
    assert "toolUseResult" not in orjson.dumps(run.body).decode()


def test_claude_code_compaction_sidechain_and_side_model() -> None:
    data = jsonl(
        cc_line("user", "u1", None, "hello"),
        cc_line("assistant", "a1", "u1", "hi", usage=25000),
        cc_line("assistant", "h1", "a1", "Greeting", usage=300, model="claude-haiku-4-5"),
        cc_line("user", "u2", "h1", "explore the repo"),
        cc_line("assistant", "a2", "u2", tool_use("task1"), usage=25100),
        # an inline subagent (older versions): its own chain, its own run
        cc_line("user", "x1", None, "find tests", isSidechain=True, agentId="ab12"),
        cc_line("assistant", "x2", "x1", "found 3", usage=9000, isSidechain=True, agentId="ab12"),
        cc_line("user", "r1", "a2", tool_result("task1")),
        cc_line("assistant", "a3", "r1", "explored", usage=26000),
        {
            "type": "system",
            "subtype": "compact_boundary",
            "uuid": "b1",
            "parentUuid": None,
            "logicalParentUuid": "a3",
            "compactMetadata": {"trigger": "manual", "preTokens": 26000},
        },
        cc_line("user", "c1", "b1", "Summary: explored the repo", isCompactSummary=True),
        cc_line("assistant", "a4", "c1", "continuing", usage=24000),
    )
    runs = {r.name: r for r in read_runs(data)}
    assert set(runs) == {
        "main segment 1",
        "main segment 1 claude-haiku-4-5",
        "main segment 2",
        "agent-ab12",
    }
    assert reported(runs["main segment 1"]) == [25000, 25100, 26000]
    assert reported(runs["main segment 1 claude-haiku-4-5"]) == [300]
    assert reported(runs["main segment 2"]) == [24000]
    assert runs["main segment 2"].body["messages"][0]["content"][0]["text"].startswith("Summary")
    # the summary the compaction wrote, for the policies that compact
    assert runs["main segment 2"].summary == "Summary: explored the repo"
    assert runs["main segment 1"].summary is None
    assert reported(runs["agent-ab12"]) == [9000]


def test_claude_code_calls_are_timed_by_the_first_line_of_their_response() -> None:
    """A response is sent once: its time is that of its first line (the lines after it
    are written as its blocks stream); a line without a time, or with a time that is
    not ISO 8601 with a zone, gives the call none."""
    data = jsonl(
        cc_line("user", "u1", None, "read both", timestamp="2026-01-21T06:19:38.056Z"),
        cc_line(
            "assistant",
            "a1",
            "u1",
            "ok",
            mid="m1",
            usage=20000,
            timestamp="2026-01-21T06:19:40.612Z",
        ),
        cc_line(
            "assistant",
            "a2",
            "a1",
            tool_use("t1"),
            mid="m1",
            usage=20000,
            timestamp="2026-01-21T06:20:05.000Z",
        ),
        cc_line("user", "r1", "a2", tool_result("t1"), timestamp="2026-01-21T06:20:06.000Z"),
        cc_line(
            "assistant", "a3", "r1", "done", usage=20300, timestamp="2026-01-21T07:26:07+01:00"
        ),
        cc_line("user", "u2", "a3", "and?"),
        cc_line("assistant", "a4", "u2", "more", usage=20400, timestamp="yesterday"),
        cc_line("user", "u3", "a4", "and?"),
        cc_line("assistant", "a5", "u3", "more", usage=20500),
    )
    [run] = read_runs(data)
    first = datetime(2026, 1, 21, 6, 19, 40, 612000, tzinfo=UTC).timestamp()
    third = datetime(2026, 1, 21, 6, 26, 7, tzinfo=UTC).timestamp()
    assert run.sent_at == {1: first, 3: third}
    assert sorted(run.usage_at) == [1, 3, 5, 7]


def test_claude_code_missing_field_is_named() -> None:
    broken = cc_line("assistant", "a1", "u1", "x", usage=10)
    del broken["message"]["content"]
    [run] = read_runs(jsonl(cc_line("user", "u1", None, "hi"), broken))
    assert run.error is not None
    assert "line 2.message.content" in run.error and 'missing "content"' in run.error


def test_cut_off_last_line_reads_up_to_it_with_a_warning() -> None:
    data = jsonl(
        cc_line("user", "u1", None, "hi"),
        cc_line("assistant", "a1", "u1", "hello", usage=18000),
        cc_line("user", "u2", "a1", "more"),
    )
    cut = data + orjson.dumps(cc_line("assistant", "a2", "u2", "partial", usage=18100))[:40]
    [run] = read_runs(cut)
    assert run.error is None
    assert reported(run) == [18000]
    assert run.warnings == [
        "line 4 is cut off (the session may still be being written): read up to line 3"
    ]


def test_empty_session_is_invalid() -> None:
    [run] = read_runs(b"")
    assert run.error is not None and "empty" in run.error


def test_run_format_forces_a_reader_and_names_unknown_ones() -> None:
    data = jsonl(cc_line("user", "u1", None, "hi"), cc_line("assistant", "a1", "u1", "x", usage=5))
    [run] = read_runs(data, "claude-code")
    assert run.shape == "claude-code"
    [bad] = read_runs(data, "codex")
    assert bad.error is not None
    with pytest.raises(Exception, match="unknown run format 'nope'"):
        read_runs(data, "nope")


# --- synthetic Codex, Gemini, mini-swe-agent, OpenTelemetry ---------------------------


def codex_line(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2026-01-01T00:00:00Z", "type": kind, "payload": payload}


def token_count(total: int, last: int) -> dict[str, Any]:
    info = {
        "total_token_usage": {"input_tokens": total},
        "last_token_usage": {"input_tokens": last, "cached_input_tokens": 0},
    }
    return codex_line("event_msg", {"type": "token_count", "info": info})


def test_codex_rollout_calls_usage_and_compaction() -> None:
    msg = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix"}]}
    call = {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}
    data = jsonl(
        codex_line("session_meta", {"id": "r1", "base_instructions": {"text": "You are Codex."}}),
        codex_line("event_msg", {"type": "task_started", "model_context_window": 258400}),
        codex_line("turn_context", {"model": "gpt-5-codex", "unknownSetting": True}),
        codex_line("response_item", msg),
        codex_line("event_msg", {"type": "user_message", "message": "fix"}),
        codex_line("response_item", {"type": "reasoning", "summary": [], "content": None}),
        codex_line("response_item", call),
        token_count(9000, 9000),
        token_count(9000, 9000),  # repeated: ignored
        codex_line(
            "response_item", {"type": "function_call_output", "call_id": "c1", "output": "ok"}
        ),
        codex_line(
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "done"}],
            },
        ),
        token_count(18100, 9100),
        codex_line("compacted", {"message": "summary of the work so far"}),
        codex_line("response_item", msg),
        codex_line(
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}],
            },
        ),
        token_count(25100, 7000),
    )
    first, second = read_runs(data)
    assert (first.name, second.name) == ("r1 segment 1", "r1 segment 2")
    assert (first.summary, second.summary) == (None, "summary of the work so far")
    assert reported(first) == [9000, 9100]
    assert reported(second) == [7000]
    # the legacy record (no replacement_history) restarts from the user messages before
    # it and the summary, as Codex's build_compacted_history rebuilds it
    texts = [(i["role"], i["content"][0]["text"]) for i in second.body["input"]]
    assert texts == [
        ("user", "fix"),
        ("user", "summary of the work so far"),
        ("user", "fix"),
        ("assistant", "ok"),
    ]
    assert first.body["instructions"] == "You are Codex." and first.context_length == 258400
    assert first.body["model"] == "gpt-5-codex"


def test_gemini_chat_recording_pairs_calls_and_results() -> None:
    session = {
        "sessionId": "g1",
        "projectHash": "h",
        "messages": [
            {"id": "1", "type": "user", "content": "list files"},
            {"id": "2", "type": "info", "content": "Switched model"},
            {
                "id": "3",
                "type": "gemini",
                "content": "",
                "model": "gemini-2.5-pro",
                "thoughts": [{"subject": "s", "description": "d"}],
                "toolCalls": [
                    {
                        "id": "ls-1",
                        "name": "list_directory",
                        "args": {"path": "."},
                        "result": [
                            {
                                "functionResponse": {
                                    "id": "ls-1",
                                    "name": "list_directory",
                                    "response": {"output": "a.py"},
                                }
                            }
                        ],
                    }
                ],
                "tokens": {"input": 3000, "output": 10, "cached": 0, "tool": 0},
            },
            {"id": "4", "type": "gemini", "content": "One file.", "tokens": {"input": 3050}},
        ],
    }
    [run] = read_runs(orjson.dumps(session))
    assert run.name == "g1"
    assert reported(run) == [3000, 3050]
    # cached prompt tokens and the output, as the API's usageMetadata names them
    first = next(iter(run.usage_at.values()))
    assert first["cachedContentTokenCount"] == 0 and first["candidatesTokenCount"] == 10
    roles = [c["role"] for c in run.body["contents"]]
    assert roles == ["user", "model", "user", "model"]
    assert run.warnings == []


def test_gemini_missing_message_type_is_named() -> None:
    [run] = read_runs(orjson.dumps({"sessionId": "g", "messages": [{"content": "hi"}]}))
    assert run.error == 'messages[0].type: missing "type"'


def test_mini_swe_agent_usage_from_extra() -> None:
    traj = {
        "trajectory_format": "mini-swe-agent-1",
        "info": {"config": {"model": {"model_name": "gpt-4o"}}},
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Fix the bug."},
            {
                "role": "assistant",
                "content": "```bash\nls\n```",
                "extra": {"response": {"usage": {"prompt_tokens": 120}}},
            },
            {"role": "user", "content": "<output>a.py</output>", "extra": {"unknown": 1}},
            {
                "role": "assistant",
                "content": "```bash\nexit\n```",
                "extra": {"response": {"usage": {"prompt_tokens": 160}}},
            },
        ],
    }
    [run] = read_runs(orjson.dumps(traj))
    assert run.shape == "mini-swe-agent" and run.body["model"] == "gpt-4o"
    assert reported(run) == [120, 160]
    assert all(set(m) == {"role", "content"} for m in run.body["messages"])


def otlp(attrs: dict[str, Any], trace: str = "t1", start: int = 1) -> dict[str, Any]:
    def value(v: Any) -> dict[str, Any]:
        return {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}

    return {
        "traceId": trace,
        "spanId": f"s{start}",
        "name": "chat",
        "startTimeUnixNano": str(start),
        "attributes": [{"key": k, "value": value(v)} for k, v in attrs.items()],
    }


def test_otlp_genai_parts_messages_are_recorded_calls() -> None:
    first = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.system_instructions": '[{"type": "text", "content": "Be brief."}]',
        "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]',
        "gen_ai.usage.input_tokens": 21,
    }
    second = dict(first)
    history = [
        {"role": "user", "parts": [{"type": "text", "content": "hi"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "f"}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "42"}]},
    ]
    second["gen_ai.input.messages"] = orjson.dumps(history).decode()
    second["gen_ai.usage.input_tokens"] = 48
    doc = {
        "resourceSpans": [
            {"scopeSpans": [{"spans": [otlp(second, start=2), otlp(first, start=1)]}]}
        ]
    }
    [run] = read_runs(orjson.dumps(doc))
    assert run.shape == "otel" and run.recorded is not None
    assert reported(run) == [21, 48]
    assert [m["role"] for m in run.recorded[1].request["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
    ]


# --- the overhead learner and its targets ------------------------------------------------


def test_learner_first_prediction_is_the_seed_then_the_line_through_the_report() -> None:
    learner = OverheadLearner(1.15)
    assert learner.predict(1000) == 1150 and not learner.learned
    learner.observe(1000, 26000)  # a system prompt and tools the log never showed
    # one report measures no slope: the line through it at the fresh factor
    assert learner.factor == FRESH_FACTOR
    assert learner.overhead == 26000 - 3 * 1000
    assert learner.predict(1100) == 26000 + 300
    assert learner.predict(1000) == 26000


@given(
    seed=st.floats(min_value=1.0, max_value=2.0),
    calls=st.lists(
        st.tuples(st.integers(0, 200_000), st.integers(1, 400_000)), min_size=1, max_size=40
    ),
)
def test_learner_line_stays_on_or_above_every_report_seen(
    seed: float, calls: list[tuple[int, int]]
) -> None:
    """The ADR's "errs high": the learned line is an upper bound on what was seen."""
    learner = OverheadLearner(seed)
    seen: list[tuple[int, int]] = []
    for raw, reported in calls:
        learner.observe(raw, reported)
        seen.append((raw, reported))
        assert LEAST_FACTOR <= learner.factor <= 2 * FRESH_FACTOR
        assert learner.overhead >= 0
        assert all(learner.predict(r) >= rep for r, rep in seen)


def test_learner_a_large_unlogged_first_call_is_overhead_not_factor() -> None:
    """A first call whose log holds almost nothing (a hidden system prompt and tools)
    and a later call with an unlogged jump: neither fixes the factor; the factor
    follows what the run's growth costs, and the jump raises the overhead."""
    learner = OverheadLearner(1.0)
    hidden = 9_700
    raw, points = 96, []
    for k in range(40):
        jump = 5_000 if k >= 10 else 0  # call 10 carries content the file never logs
        reported = hidden + jump + raw // 2  # the provider counts half the raw estimate
        points.append((raw, reported))
        raw += 800 + 37 * (k % 5)
    predictions = []
    for k, (r, rep) in enumerate(points):
        if k:
            predictions.append(learner.predict(r) / rep)
        learner.observe(r, rep)
    assert learner.factor < 0.6  # under the old learner: 3.0, for good
    assert learner.overhead >= hidden + 5_000 - learner.factor * points[10][0]
    assert statistics.median(predictions) <= 1.10


def test_learner_the_factor_comes_down_when_later_growth_is_cheaper() -> None:
    learner = OverheadLearner(1.0)
    learner.observe(10, 20_000)
    learner.observe(2_000, 40_000)  # one report 10x the growth: a jump
    assert learner.factor == 2 * FRESH_FACTOR  # one slope so far, at the cap
    for k in range(2, 30):
        learner.observe(2_000 + 1_000 * k, 40_000 + 1_000 * k)
    assert learner.factor == 1.0


def test_manager_learns_a_hidden_overhead_from_usage() -> None:
    hidden = 20_000
    manager = ContextWindowManager("claude-sonnet-4-5", learn_overhead=True)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    usage = None
    for k in range(6):
        sent = manager.fit({"model": "claude-sonnet-4-5", "messages": messages}, last_usage=usage)
        truth = hidden + sent.raw_tokens_sent  # the provider counts what the body shows, plus
        if k:
            assert sent.estimated_tokens >= truth  # after the first report: never under
            assert sent.estimated_tokens <= 1.1 * truth
        usage = {"input_tokens": truth}
        messages += [
            {"role": "assistant", "content": f"step {k}"},
            {"role": "user", "content": "output line\n" * 20},
        ]
    # the learned line covers the last request the provider counted
    assert manager.overhead + manager.calibration * sent.raw_tokens_sent >= truth


def _session_rows(with_redacted: bool) -> Sequence[tuple[Mapping[str, Any], bool]]:
    """Replay rows of every call after a run's first report, on the samples, each with
    whether the run's next call with usage is under its reported count.

    The two localpush Codex rollouts had all their free text replaced by short
    placeholders by their publisher (the token counts are real): no estimate of
    the text can follow their counts.
    """
    out = []
    for path in sorted(AGENT_TOOLS.rglob("*.json*")):
        if not with_redacted and "localpush" in path.name:
            continue
        for run in read_runs(path.read_bytes()):
            rows = [r for r in replay_run(run, Settings())["rows"] if r.get("reported_tokens")]
            nexts = [bool(r["under_estimate"]) for r in rows[2:]] + [False]
            out += list(zip(rows[1:], nexts[: len(rows[1:])], strict=True))
    return out


def _session_predictions(with_redacted: bool) -> list[tuple[int, int]]:
    """(prediction, reported) of every call after a run's first report, on the samples."""
    return [(r["estimated_tokens"], r["reported_tokens"]) for r, _ in _session_rows(with_redacted)]


@corpus
@pytest.mark.corpus
def test_session_median_prediction_is_within_five_percent_of_reported_per_tool() -> None:
    by_tool: dict[str, list[float]] = {}
    for run in replays.measure(AGENT_TOOLS):
        by_tool.setdefault(run.tool, []).extend(c.ratio for c in run.calls)
    assert sum(map(len, by_tool.values())) > 250
    medians = {tool: statistics.median(r) for tool, r in by_tool.items()}
    assert {t for t, m in medians.items() if m > 1.05} == set(), medians
    assert min(medians.values()) >= 1.0 - 0.005, medians  # a median under is a promise broken


@corpus
@pytest.mark.corpus
def test_every_prediction_short_by_more_than_the_safety_share_is_marked_unlogged() -> None:
    """A prediction made from the run's earlier reports is under its report by more than
    3 % of it, or by the safety margin, only where the report counted what the file does
    not show: each such row says so (``unlogged_tokens``, its cause in docs/sessions.md),
    redacted rollouts too; no row short by less is marked."""
    rows = _session_rows(with_redacted=True)
    assert len(rows) > 250
    unmarked, wrongly = [], []
    for row, _ in rows:
        safety = -((-SAFETY_PERCENT * row["context_length"]) // 100)
        short = row["reported_tokens"] - row["estimated_tokens"]
        beyond = short > min(safety, -((-SAFETY_PERCENT * row["reported_tokens"]) // 100))
        if beyond and row.get("unlogged_tokens") != short:
            unmarked.append((row["run"], row["call"], short))
        if not beyond and "unlogged_tokens" in row:
            wrongly.append((row["run"], row["call"], short))
    assert unmarked == [] and wrongly == []
    assert sum(1 for row, _ in rows if row["estimated_tokens"] < 0.97 * row["reported_tokens"])
    assert all(
        "unlogged_tokens" in row
        for row, _ in rows
        if row["estimated_tokens"] < 0.97 * row["reported_tokens"]
    )


@corpus
@pytest.mark.corpus
def test_after_a_miss_the_next_prediction_counts_the_missed_report() -> None:
    """The report of a call predicted under is learned: the run's next prediction is at
    least that report (its request holds all of the missed one), redacted rollouts too."""
    misses = 0
    for run in replays.measure(AGENT_TOOLS):
        for call, after in pairwise(run.calls):
            if call.predicted < call.reported:
                misses += 1
                assert after.predicted >= call.reported, (run.sample, run.run, call.call)
    assert misses > 10


@corpus
@pytest.mark.corpus
@pytest.mark.xfail(
    strict=True,
    reason="a prediction after a run's first call is under when a step costs more than the "
    "run's factor (docs/sessions.md)",
)
def test_no_prediction_after_a_runs_first_call_is_under_reported() -> None:
    pairs = _session_predictions(with_redacted=False)
    assert [(p, r) for p, r in pairs if p < r] == []


def test_openhands_observations_are_read_as_the_agent_renders_them() -> None:
    """The shapes OpenHands' V0 agent turns an observation into (``to_agent_observation``
    of a command; ``FileEditObservation.__str__``), whatever the event's ``content``."""

    def act(k: int, name: str) -> dict[str, Any]:
        response = {
            "id": f"r{k}",
            "model": "gpt-4o",
            "choices": [
                {
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"t{k}",
                                "type": "function",
                                "function": {"name": name, "arguments": "{}"},
                            }
                        ],
                    }
                }
            ],
            "usage": {"prompt_tokens": 100 + k},
        }
        meta = {"tool_call_id": f"t{k}", "function_name": name, "model_response": response}
        return {"id": 2 * k, "source": "agent", "action": "run", "tool_call_metadata": meta}

    def obs(k: int, kind: str, content: str, extras: dict[str, Any]) -> dict[str, Any]:
        meta = {"tool_call_id": f"t{k}", "function_name": "x"}
        return {
            "id": 2 * k + 1,
            "source": "agent",
            "observation": kind,
            "content": content,
            "extras": extras,
            "tool_call_metadata": meta,
        }

    run_meta = {
        "exit_code": 0,
        "prefix": "",
        "suffix": "\n[The command completed with exit code 0.]",
        "working_dir": "/w",
        "py_interpreter_path": "/usr/bin/python",
    }
    events = [
        {"id": 0, "source": "user", "action": "message", "args": {"content": "go"}},
        act(1, "execute_bash"),
        obs(1, "run", "out", {"command": "ls", "metadata": run_meta}),
        act(2, "str_replace_editor"),  # ACI editor, early versions: content is a diff
        obs(
            2,
            "edit",
            "--- a\n+++ a\n+x",
            {"path": "/w/a", "impl_source": "oh_aci", "formatted_output_and_error": "File created"},
        ),
        act(3, "str_replace_editor"),  # ACI editor, later versions: content is the message
        obs(3, "edit", "The file /w/b is edited.", {"path": "/w/b", "impl_source": "oh_aci"}),
        act(4, "edit_file"),  # the LLM-based editor writing a new file
        obs(4, "edit", "--- b\n+++ b\n+y", {"path": "/w/c", "prev_exist": False}),
        act(5, "edit_file"),  # the LLM-based editor changing a file: its diff
        obs(5, "edit", "--- d\n+++ d\n-z\n+y", {"path": "/w/d", "prev_exist": True}),
        act(6, "execute_bash"),  # a command still running: no exit code line
        obs(6, "run", "partial", {"metadata": {**run_meta, "exit_code": -1}}),
    ]
    [run] = read_runs(orjson.dumps(events))
    results = [m["content"] for m in run.body["messages"] if m["role"] == "tool"]
    assert results == [
        "out\n[The command completed with exit code 0.]\n[Current working directory: /w]\n"
        "[Python interpreter: /usr/bin/python]\n[Command finished with exit code 0]",
        "File created",
        "The file /w/b is edited.",
        "[New file /w/c is created with the provided content.]\n",
        "--- d\n+++ d\n-z\n+y",
        "partial\n[The command completed with exit code 0.]\n[Current working directory: /w]\n"
        "[Python interpreter: /usr/bin/python]",
    ]
