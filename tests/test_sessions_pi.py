"""The pi reader: its fixtures (tests/fixtures/sessions/pi, every shape pi's
session-manager.ts writes) and the corpus sample, with counts taken from the files by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxwin.fitting.calibration import prompt_tokens_from_usage
from ctxwin.recorded import Run
from ctxwin.runs import read_runs
from ctxwin.sessions import detect, pi
from tests.conftest import Cli
from tests.test_sessions import AGENT_TOOLS

FIXTURES = Path(__file__).parent / "fixtures" / "sessions" / "pi"
SAMPLE = AGENT_TOOLS.parent / "agent_tools_next" / "pi" / "pi-mono-large-session.jsonl"


def runs_of(name: str) -> dict[str, Run]:
    runs = read_runs((FIXTURES / name).read_bytes())
    assert all(r.error is None and r.shape == "pi" for r in runs), runs
    return {r.name: r for r in runs}


def prompts(run: Run) -> list[int | None]:
    return [None if c.usage is None else prompt_tokens_from_usage(c.usage) for c in run.calls()]


def lines(name: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (FIXTURES / name).read_bytes().splitlines()]


def fixture_prompts(name: str, **where: Any) -> list[int]:
    """``input + cacheRead + cacheWrite`` of the assistant messages of a fixture (those
    whose fields match ``where``), read straight from the file."""
    out = []
    for line in lines(name):
        msg = line.get("message") or {}
        if msg.get("role") == "assistant" and all(msg.get(k) == v for k, v in where.items()):
            u = msg["usage"]
            out.append(u["input"] + u["cacheRead"] + u["cacheWrite"])
    return out


def test_detected_by_shape_and_named() -> None:
    assert pi.NAME == "pi"
    for path in sorted(FIXTURES.glob("*.jsonl")):
        entries = [orjson.loads(line) for line in path.read_bytes().splitlines()]
        assert detect(entries, True) == "pi", path
    # a pi file without its header (cut from a longer one) is still pi's
    assert detect(lines("branches.jsonl")[1:], True) == "pi"
    # Claude Code's lines carry a uuid: not pi's
    cc = {"type": "message", "uuid": "u", "message": {"role": "user", "content": "x"}}
    assert not pi.detect([cc, cc], True)
    assert not pi.detect([lines("branches.jsonl")[0]], False)


def test_parallel_calls_and_branches() -> None:
    runs = runs_of("branches.jsonl")
    assert list(runs) == ["main", "branch 1"]
    main, left = runs["main"], runs["branch 1"]
    assert main.current and not left.current
    assert main.fmt == "anthropic" and main.body["model"] == "claude-sonnet-4-5"
    # the path to the last entry: the first exchange, the branch summary, the rename
    roles = [m["role"] for m in main.body["messages"]]
    assert roles == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    first = main.body["messages"][1]["content"]
    assert [b["type"] for b in first] == ["thinking", "text", "tool_use", "tool_use"]
    assert first[0]["signature"] == "EqMBCkYIBxgCKkB"
    results = main.body["messages"][2]["content"]
    assert [b["tool_use_id"] for b in results] == ["toolu_01A", "toolu_01B"]
    summary = main.body["messages"][4]["content"]
    assert summary.startswith(pi.BRANCH_PREFIX + "Ran npm test") and "Instead, rename" in summary
    # the calls: 4 on the main path, the 2 of the branch left that are not on it
    all_prompts = fixture_prompts("branches.jsonl")
    assert len(all_prompts) == 6
    assert prompts(main) == [all_prompts[0], all_prompts[1], all_prompts[4], all_prompts[5]]
    assert prompts(left) == all_prompts[2:4]
    assert [m["role"] for m in left.body["messages"]][-4:] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]


def test_compaction_segments_keep_what_pi_keeps() -> None:
    runs = runs_of("compaction.jsonl")
    assert list(runs) == ["main segment 1", "main segment 2", "main segment 3"]
    assert [r.current for r in runs.values()] == [False, False, True]
    all_prompts = fixture_prompts("compaction.jsonl")
    assert [len(r.calls()) for r in runs.values()] == [4, 2, 2]
    assert [p for r in runs.values() for p in prompts(r)] == all_prompts
    two = runs["main segment 2"].body["messages"]
    # the summary, then (in the same user turn) the first kept message, its read and the
    # answer, then what follows the compaction
    summary, kept = two[0]["content"].split(pi.COMPACTION_SUFFIX + "\n")
    assert summary.startswith(pi.COMPACTION_PREFIX + "## Goal") and kept == "And the sources?"
    assert len(two) == 1 + 3 + 4
    three = runs["main segment 3"].body["messages"]
    # the second compaction keeps from the last answer of segment 2
    assert three[1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "One: tests/steps.test.ts."}],
    }
    # a kept model message is context, not a call of the later segment
    assert runs["main segment 3"].calls_at == frozenset({3, 5})


def test_version_1_compaction_by_index_and_the_headers_model() -> None:
    runs = runs_of("v1-compaction.jsonl")
    assert list(runs) == ["main segment 1", "main segment 2"]
    two = runs["main segment 2"]
    assert two.body["messages"][0]["content"].endswith(pi.COMPACTION_SUFFIX + "\nRead the notes.")
    assert two.body["model"] == "claude-sonnet-4-5"
    assert prompts(runs["main segment 1"]) + prompts(two) == fixture_prompts("v1-compaction.jsonl")


def test_each_model_is_a_run_in_its_own_wire_format() -> None:
    runs = runs_of("models.jsonl")
    assert list(runs) == ["main", "main gpt-5"]
    claude, gpt = runs["main"], runs["main gpt-5"]
    assert claude.fmt == "anthropic" and gpt.fmt == "openai-chat"
    assert prompts(claude) == fixture_prompts("models.jsonl", model="claude-sonnet-4-5")
    assert prompts(gpt) == fixture_prompts("models.jsonl", model="gpt-5")
    # GPT-5 is sent Claude's thinking as text; Claude keeps its own thinking block
    assert gpt.body["messages"][1]["content"].startswith("They are linear in x.")
    assert claude.body["messages"][1]["content"][0]["type"] == "thinking"
    # and Claude is sent GPT-5's reasoning as text
    third = claude.body["messages"][3]["content"]
    assert third[0] == {"type": "text", "text": "3*x + 9."}
    assert gpt.body["messages"][3]["tool_calls"][0]["function"]["name"] == "read"
    assert claude.current and claude.body["model"] == "claude-sonnet-4-5"


def test_what_pi_never_sends_again_is_a_call_of_its_own() -> None:
    runs = runs_of("not-sent.jsonl")
    assert list(runs) == ["main", "main aborted", "main gpt-5.1-codex aborted"]
    main, aborted, other = runs["main"], runs["main aborted"], runs["main gpt-5.1-codex aborted"]
    sent = fixture_prompts("not-sent.jsonl")
    assert len(sent) == 8  # 5 sent again, 2 aborted or failed Claude calls, 1 aborted GPT call
    assert prompts(main) == [sent[1], sent[3], sent[4], sent[6], sent[7]]
    assert aborted.recorded is not None and len(aborted.recorded) == 2
    assert prompts(aborted) == [sent[2], sent[5]]  # the error with calls, the aborted answer
    assert prompts(other) == [None]  # aborted before any usage: no report
    messages = main.body["messages"]
    # the failed message and its calls are nowhere; the retry's calls are answered
    assert "toolu_04A" not in orjson.dumps(messages).decode()
    # the call the user interrupted gets pi's error result before the next user message
    orphan = messages[6]["content"][0]
    assert orphan == {
        "type": "tool_result",
        "tool_use_id": "toolu_04D",
        "content": "No result provided",
        "is_error": True,
    }
    text = orjson.dumps(messages).decode()
    assert "Ran `git status --short`" in text and "secrets.env" not in text
    assert "Command exited with code 1" in text and "[Output truncated. Full output:" in text
    assert "Remember: run the tests" in text and "prefer one file" in text
    assert messages[0]["content"][2]["type"] == "image"
    # the aborted call's request is the conversation as it was then
    last = aborted.recorded[1].request["messages"]
    assert last[-1]["content"][-1] == {"type": "text", "text": "Stop, just commit."}
    assert aborted.recorded[1].where.startswith("line ")


def test_a_fork_copies_its_parents_calls_as_context() -> None:
    runs = runs_of("forked.jsonl")
    assert list(runs) == ["main"]
    run = runs["main"]
    assert prompts(run) == fixture_prompts("forked.jsonl")[2:]
    assert run.body["messages"][0]["content"] == "Read src/steps.ts."
    assert len(run.body["messages"]) == 8


def test_a_resumed_session_goes_on_with_its_new_model() -> None:
    runs = runs_of("resumed.jsonl")
    assert list(runs) == ["main", "main claude-sonnet-4-5"]
    assert runs["main"].body["model"] == "claude-opus-4-5" and runs["main"].current
    assert prompts(runs["main"]) == fixture_prompts("resumed.jsonl", model="claude-opus-4-5")


def test_a_missing_required_field_is_named() -> None:
    data = b"".join(orjson.dumps(line) + b"\n" for line in lines("branches.jsonl"))
    broken = data.replace(b'"toolCallId":"toolu_01A",', b"", 1)
    [run] = read_runs(broken)
    assert run.error == 'line 6.message.toolCallId: missing "toolCallId"'
    assert run.error.startswith("line ")


def test_forced_with_run_format(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "no-header.jsonl"
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines("branches.jsonl")[1:]))
    result = cli.process("estimate", str(path), "--run-format", "pi", "--json")
    assert result.returncode == 0, result.stderr
    report = orjson.loads(result.stdout)
    assert report["session"] == {"run": "main", "shape": "pi"}
    assert report["format"] == "anthropic"


@pytest.mark.skipif(not SAMPLE.is_file(), reason="../shared/corpus is absent")
@pytest.mark.corpus
def test_sample_every_assistant_message_is_a_call() -> None:
    # 453 assistant messages: 431 sent again (first 1,687, last 177,604, sum 46,656,408
    # prompt tokens), 22 aborted or failed (8 of them with a prompt count, 870,342 in all;
    # one of them, gpt-5.1-codex, aborted before any usage)
    runs = {r.name: r for r in read_runs(SAMPLE.read_bytes())}
    assert list(runs) == ["main", "main aborted", "main gpt-5.1-codex aborted"]
    main = prompts(runs["main"])
    assert (len(main), main[0], main[-1], sum(p or 0 for p in main)) == (
        431,
        1687,
        177604,
        46656408,
    )
    aborted = prompts(runs["main aborted"]) + prompts(runs["main gpt-5.1-codex aborted"])
    assert len(aborted) == 22
    assert sum(p or 0 for p in aborted) == 870342 and sum(p is not None for p in aborted) == 8
