"""The GitHub Copilot CLI reader: its fixtures (tests/fixtures/sessions/copilot-cli, shapes
from the Copilot SDK's session-events schema) and the corpus samples, counted by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxwin.recorded import Run
from ctxwin.runs import read_runs
from ctxwin.sessions import copilot_cli, detect
from tests.conftest import Cli
from tests.test_sessions import AGENT_TOOLS

FIXTURES = Path(__file__).parent / "fixtures" / "sessions" / "copilot-cli"
SAMPLES = AGENT_TOOLS.parent / "agent_tools_next" / "copilot-cli"


def runs_of(path: Path) -> dict[str, Run]:
    runs = read_runs(path.read_bytes())
    assert all(r.error is None and r.shape == "copilot-cli" for r in runs), runs
    return {r.name: r for r in runs}


def events(name: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (FIXTURES / name).read_bytes().splitlines()]


def responses(name: str, agent: str | None = None) -> int:
    """How many responses a fixture logs (assistant.message events, one per apiCallId)."""
    ids = {
        e["data"].get("apiCallId") or e["id"]
        for e in events(name)
        if e["type"] == "assistant.message" and e.get("agentId") == agent
    }
    return len(ids)


def test_detected_by_shape_and_named() -> None:
    assert copilot_cli.NAME == "copilot-cli"
    for path in sorted(FIXTURES.glob("*.jsonl")):
        assert detect(events(path.name), True) == "copilot-cli", path
    assert detect(events("parallel.jsonl")[3:], True) == "copilot-cli"  # no session.start
    assert not copilot_cli.detect([{"type": "user.message", "data": {}}], True)  # no envelope


def test_parallel_calls_results_in_completion_order_and_a_failed_tool() -> None:
    [run] = runs_of(FIXTURES / "parallel.jsonl").values()
    assert run.fmt == "anthropic" and run.current
    assert run.body["system"].startswith("You are the GitHub Copilot CLI")
    messages = run.body["messages"]
    assert "<current_datetime>" in messages[0]["content"]  # transformedContent is sent
    first = messages[1]["content"]
    assert first[0] == {
        "type": "thinking",
        "thinking": "Read both, then test.",
        "signature": "EqQBCkYIBxgCKkAbc",
    }
    assert [b["id"] for b in first if b["type"] == "tool_use"] == ["toolu_A", "toolu_B", "toolu_C"]
    assert [b["tool_use_id"] for b in messages[2]["content"]] == ["toolu_B", "toolu_C", "toolu_A"]
    failed = messages[4]["content"][0]
    assert failed == {
        "type": "tool_result",
        "tool_use_id": "toolu_D",
        "content": "Path does not exist",
        "is_error": True,
    }
    calls = run.calls()
    assert len(calls) == responses("parallel.jsonl") == 3
    assert all(c.usage is None for c in calls)  # no input usage is logged
    assert len(run.sent_at) == 3  # each call sent at its assistant.turn_start
    assert run.warnings == [
        "Copilot counted 15,500 tokens in the context at shutdown (system 560, conversation "
        "3,900, tool definitions 11,040); the tool definitions are not logged, so they are not "
        "in this estimate"
    ]


def test_each_model_is_a_run_and_chunks_of_one_response_are_one_call() -> None:
    runs = runs_of(FIXTURES / "models.jsonl")
    assert list(runs) == ["main", "main gpt-5"]
    claude, gpt = runs["main"], runs["main gpt-5"]
    assert claude.fmt == "anthropic" and claude.body["model"] == "claude-sonnet-4.5"
    assert gpt.fmt == "openai-chat" and gpt.body["messages"][0]["role"] == "system"
    assert len(claude.calls()) == 2 and len(gpt.calls()) == 2
    assert responses("models.jsonl") == 4
    chunked = claude.body["messages"][5]["content"]  # two assistant.message, one apiCallId
    assert [b["type"] for b in chunked] == ["text", "tool_use"]


def test_compaction_and_truncation_start_segments() -> None:
    runs = runs_of(FIXTURES / "compaction.jsonl")
    assert list(runs) == ["main segment 1", "main segment 2", "main segment 3"]
    assert [len(r.calls()) for r in runs.values()] == [3, 2, 1]
    two = runs["main segment 2"].body["messages"]
    assert two[0]["content"].startswith("<overview>")
    # 6 messages before, 4 removed: the last 2 kept (a result without its call is not)
    assert two[1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "src/steps.py holds 89 steps."}],
    }
    # 3 of 6 removed by the truncator; the kept ones start at a user message
    three = runs["main segment 3"].body["messages"]
    assert three[0]["content"].startswith("<current_datetime>") and "Thanks." in three[0]["content"]
    assert runs["main segment 3"].current


def test_subagents_abort_and_a_tool_the_user_ran() -> None:
    runs = runs_of(FIXTURES / "subagents.jsonl")
    assert list(runs) == ["main", "agent-ag-1", "agent-toolu_V"]
    assert len(runs["agent-ag-1"].calls()) == responses("subagents.jsonl", "ag-1") == 2
    assert runs["agent-ag-1"].body["system"] == "You are an exploration agent."
    assert len(runs["agent-toolu_V"].calls()) == 1
    assert not runs["agent-ag-1"].current and runs["main"].current
    main = runs["main"].body["messages"]
    text = orjson.dumps(main).decode()
    assert "exploration agent" not in text and "glob" not in text  # the subagent's is its own
    aborted = main[4]["content"]
    assert aborted[0]["tool_use_id"] == "toolu_U" and aborted[0]["is_error"] is True
    assert aborted[1]["text"] == "On branch main\nnothing to commit"  # the user's git status
    assert len(runs["main"].calls()) == 5


def test_a_resumed_session_goes_on_in_one_run() -> None:
    [run] = runs_of(FIXTURES / "resumed.jsonl").values()
    assert len(run.calls()) == responses("resumed.jsonl") == 4
    assert "12,500 tokens" in run.warnings[0]  # the last shutdown's count


def test_a_missing_required_field_is_named() -> None:
    data = (
        (FIXTURES / "parallel.jsonl")
        .read_bytes()
        .replace(b'"toolCallId": "toolu_B", "name"', b'"name"', 1)
    )
    [run] = read_runs(data)
    assert run.error is not None and run.error.endswith(
        'toolRequests[1].toolCallId: missing "toolCallId"'
    )


def test_estimate_names_the_session(cli: Cli) -> None:
    result = cli.process("estimate", str(FIXTURES / "parallel.jsonl"), "--json")
    assert result.returncode == 0, result.stderr
    report = orjson.loads(result.stdout)
    assert report["session"] == {"run": "main", "shape": "copilot-cli"}
    assert "Copilot counted 15,500 tokens" in result.stderr.decode()


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="../shared/corpus is absent")
@pytest.mark.corpus
@pytest.mark.parametrize(
    ("sample", "calls", "fmt"),
    [
        # 49 assistant.message events, 49 distinct apiCallIds (msg_…: Claude); one abort
        ("agentv-events-b45ebb0f.jsonl", 49, "anthropic"),
        # 1 assistant.message (chatcmpl_…), then session.shutdown (currentTokens 11,468)
        ("agentv-events-db325365.jsonl", 1, "openai-chat"),
    ],
)
def test_samples_every_assistant_message_is_a_call(sample: str, calls: int, fmt: str) -> None:
    [run] = runs_of(SAMPLES / sample).values()
    assert run.fmt == fmt and run.current
    assert len(run.calls()) == calls
    assert all(c.usage is None for c in run.calls())
