"""Session files that carry history written before them, and Gemini CLI's JSONL chats.

Codex rollouts that start from another rollout's history (a fork, a subagent, a resume
written to a new file) replay the parent's lines after their own ``session_meta``: those
are context, not calls of this file. Gemini CLI's JSONL ChatRecording appends records
(header, messages, ``$set`` updates, ``$rewindTo``) that apply in file order. The shapes
follow the writers (codex-rs ``RolloutRecorder`` and ``record_initial_history``; gemini-cli
``ChatRecordingService`` and ``loadConversationRecord``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxwin.runs import read_runs
from tests.conftest import Cli
from tests.test_sessions import AGENT_TOOLS, corpus, jsonl, reported

# --- Codex ------------------------------------------------------------------------------

COPY = "2026-03-01T10:00:00.120Z"
"""When the parent's lines were replayed into the new rollout (all at once)."""
LATER = "2026-03-01T10:00:07.500Z"
"""When the new rollout's own first turn began."""


def line(kind: str, payload: dict[str, Any], ts: str = "2026-02-01T09:00:00.000Z") -> Any:
    return {"timestamp": ts, "type": kind, "payload": payload}


def meta(ident: str, ts: str, **extra: Any) -> Any:
    return line("session_meta", {"id": ident, "base_instructions": {"text": "Codex."}, **extra}, ts)


def user(text: str, ts: str) -> Any:
    content = [{"type": "input_text", "text": text}]
    return line("response_item", {"type": "message", "role": "user", "content": content}, ts)


def answer(text: str, ts: str) -> Any:
    content = [{"type": "output_text", "text": text}]
    return line("response_item", {"type": "message", "role": "assistant", "content": content}, ts)


def count(total: int, last: int, ts: str) -> Any:
    info = {
        "total_token_usage": {"input_tokens": total},
        "last_token_usage": {"input_tokens": last},
    }
    return line("event_msg", {"type": "token_count", "info": info}, ts)


def turn(ts: str, text: str, total: int, last: int) -> list[Any]:
    return [
        line("turn_context", {"model": "gpt-5-codex"}, ts),
        user(text, ts),
        answer(f"done: {text}", ts),
        count(total, last, ts),
    ]


def parent_lines(ident: str = "p1") -> list[Any]:
    """A fresh rollout with two calls (its own file, as written over time)."""
    return [
        meta(ident, "2026-02-01T09:00:00.000Z"),
        *turn("2026-02-01T09:00:05.000Z", "first", 5000, 5000),
        *turn("2026-02-01T09:03:00.000Z", "second", 10100, 5100),
    ]


def replayed(lines: list[Any]) -> list[Any]:
    """``lines`` as a new rollout replays them: the same payloads, stamped at the copy."""
    return [dict(v, timestamp=COPY) for v in lines]


def test_fresh_rollout_counts_every_call() -> None:
    [run] = read_runs(jsonl(*parent_lines()))
    assert (run.name, reported(run)) == ("p1", [5000, 5100])


def codex_tool(ident: str, ts: str) -> list[Any]:
    call = {"type": "function_call", "call_id": ident, "name": "shell", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": ident, "output": "ok " * 40}
    return [line("response_item", call, ts), line("response_item", output, ts)]


def reasoning(ts: str) -> Any:
    return line("response_item", {"type": "reasoning", "summary": []}, ts)


@pytest.mark.parametrize("early", [True, False])
def test_each_count_goes_to_the_response_it_counts(early: bool) -> None:
    """Codex 0.36-0.42 write a response's token count before its items (a count that
    comes when the open response has one is the next response's); later versions
    after its model items and before the tools' outputs (the open response has none
    yet). Either way each count is the prompt of the response it was reported for, the
    first one included (tests/test_sessions_codex.py has every version's order)."""
    ts = "2026-02-01T09:00:05.000Z"
    first = [reasoning(ts), *codex_tool("a", ts)]
    second = [reasoning(ts), *codex_tool("b", ts)]
    third = [answer("done", ts)]
    if early:
        rest = [count(100, 100, ts), *first, count(300, 200, ts), *second, count(600, 300, ts)]
        rest += third
    else:
        rest = [*first[:2], count(100, 100, ts), first[2], *second[:2], count(300, 200, ts)]
        rest += [second[2], *third, count(600, 300, ts)]
    [run] = read_runs(jsonl(meta("s1", ts), user("go", ts), *rest))
    calls = run.calls()
    assert [c.usage for c in calls] == [{"input_tokens": n} for n in (100, 200, 300)]
    # each call's request ends with what came before its response: the prompt, then
    # the outputs of the tools the response before it called
    assert [len(c.request["input"]) for c in calls] == [1, 4, 7]


def test_resumed_rollout_counts_only_its_new_calls_and_keeps_the_history() -> None:
    data = jsonl(
        meta("c1", COPY, forked_from_id="p1"),
        *replayed(parent_lines()),
        *turn(LATER, "third", 15300, 5200),
    )
    [run] = read_runs(data)
    assert run.name == "c1"
    assert reported(run) == [5200]
    # the replayed turns are the context the new call carries
    texts = [i["content"][0]["text"] for i in run.body["input"] if i.get("role") == "user"]
    assert texts == ["first", "second", "third"]
    [call] = run.calls()
    assert call.usage == {"input_tokens": 5200}


def test_rollout_resumed_twice_skips_every_ancestors_calls() -> None:
    first = [
        meta("c1", "2026-02-02T08:00:00.000Z", forked_from_id="p1"),
        *[dict(v, timestamp="2026-02-02T08:00:00.010Z") for v in parent_lines()],
        *turn("2026-02-02T08:01:00.000Z", "third", 15300, 5200),
    ]
    data = jsonl(
        meta("c2", COPY, forked_from_id="c1"),
        *replayed(first),
        *turn(LATER, "fourth", 20700, 5400),
        *turn("2026-03-01T10:02:00.000Z", "fifth", 26300, 5600),
    )
    [run] = read_runs(data)
    assert run.name == "c2"
    assert reported(run) == [5400, 5600]
    assert sum(1 for i in run.body["input"] if i.get("role") == "user") == 5


def test_forked_rollout_that_writes_its_own_meta_again_ends_the_replay_there() -> None:
    # newer versions write the new rollout's session_meta again after the copy; its first
    # turn may follow at once (a subagent), so the line time cannot tell it
    data = jsonl(
        meta("c1", COPY, forked_from_id="p1"),
        *replayed(parent_lines()),
        meta("c1", COPY, forked_from_id="p1"),
        *turn(COPY, "subtask", 15300, 5200),
    )
    [run] = read_runs(data)
    assert (run.name, reported(run)) == ("c1", [5200])


def test_fork_with_no_turn_yet_has_no_call_but_its_history() -> None:
    [run] = read_runs(jsonl(meta("c1", COPY, forked_from_id="p1"), *replayed(parent_lines())))
    assert run.error is None
    assert (run.name, reported(run)) == ("c1", [])
    assert len(run.body["input"]) == 4


def test_compaction_in_the_replayed_history_and_after_it() -> None:
    summary = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "S"}]}
    ]
    parent = [
        *parent_lines(),
        line("compacted", {"message": "S", "replacement_history": summary}),
        *turn("2026-02-01T10:00:00.000Z", "after compaction", 13000, 2900),
    ]
    data = jsonl(
        meta("c1", COPY, forked_from_id="p1"),
        *replayed(parent),
        *turn(LATER, "mine", 16100, 3100),
        line(
            "compacted", {"message": "S2", "replacement_history": summary}, "2026-03-01T11:00:00Z"
        ),
        *turn("2026-03-01T11:00:01.000Z", "mine again", 19000, 2900),
    )
    runs = read_runs(data)
    # the parent's first segment is the parent's run; this file has the segment it
    # continued (replayed history, then its own call) and the one after its compaction
    assert [r.name for r in runs] == ["c1 segment 1", "c1 segment 2"]
    assert [reported(r) for r in runs] == [[3100], [2900]]
    assert [r.current for r in runs] == [False, True]


@corpus
@pytest.mark.corpus
def test_real_rollout_resumed_counts_one_call_not_the_replayed_ones() -> None:
    path = (
        AGENT_TOOLS
        / "codex"
        / "cpolar-connect-rollout-2025-09-16T12-47-48-9cd28a74-da7e-4458-a91a-fffec2be9d7a.jsonl"
    )
    parent = [orjson.loads(v) for v in path.read_bytes().splitlines() if v.strip()]
    [alone] = read_runs(path.read_bytes())
    assert len(reported(alone)) == 56
    data = jsonl(
        meta("c1", COPY, forked_from_id=parent[0]["payload"]["id"]),
        *replayed(parent),
        *turn(LATER, "run the tests again", 10**7, 31000),
    )
    [run] = read_runs(data)
    assert (run.name, reported(run)) == ("c1", [31000])
    assert len(run.body["input"]) == len(alone.body["input"]) + 2


# --- Gemini CLI JSONL --------------------------------------------------------------------

HEADER = {
    "sessionId": "g1",
    "projectHash": "ph",
    "startTime": "2026-03-01T10:00:00.000Z",
    "lastUpdated": "2026-03-01T10:00:00.000Z",
    "kind": "main",
}


def gmsg(ident: str, kind: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {
        "id": ident,
        "timestamp": "2026-03-01T10:00:01.000Z",
        "type": kind,
        "content": content,
        **extra,
    }


def tool_call(result: bool) -> dict[str, Any]:
    call: dict[str, Any] = {
        "id": "ls-1",
        "name": "list_directory",
        "args": {"path": "."},
        "status": "success" if result else "executing",
        "timestamp": "2026-03-01T10:00:02.000Z",
    }
    if result:
        answer = {"id": "ls-1", "name": "list_directory", "response": {"output": "a.py"}}
        call["result"] = [{"functionResponse": answer}]
    return call


def tokens(prompt: int) -> dict[str, int]:
    return {
        "input": prompt,
        "output": 9,
        "cached": 0,
        "thoughts": 4,
        "tool": 0,
        "total": prompt + 13,
    }


def chat_lines() -> list[Any]:
    """What the writer appends for: a question, a tool call (written, then re-written with
    its result and tokens), an info message, an answer, metadata updates."""
    thoughts = [{"subject": "Listing", "description": "look", "timestamp": "t"}]
    return [
        HEADER,
        gmsg("u1", "user", [{"text": "list files"}]),
        {"$set": {"lastUpdated": "2026-03-01T10:00:01.000Z"}},
        gmsg(
            "m1",
            "gemini",
            "",
            toolCalls=[tool_call(False)],
            thoughts=thoughts,
            model="gemini-2.5-pro",
        ),
        gmsg(
            "m1",
            "gemini",
            "",
            toolCalls=[tool_call(True)],
            thoughts=thoughts,
            model="gemini-2.5-pro",
            tokens=tokens(3000),
        ),
        gmsg("i1", "info", "Switched model"),
        gmsg("e1", "error", "quota warning"),
        gmsg(
            "m2",
            "gemini",
            "One file: a.py",
            thoughts=[],
            tokens=tokens(3050),
            model="gemini-2.5-pro",
        ),
        {"$set": {"summary": "Listed files", "directories": ["/repo"]}},
    ]


def test_gemini_jsonl_reads_each_message_as_last_written() -> None:
    [run] = read_runs(jsonl(*chat_lines()))
    assert run.error is None
    assert (run.shape, run.name) == ("gemini-cli", "g1")
    assert reported(run) == [3000, 3050]
    assert [c["role"] for c in run.body["contents"]] == ["user", "model", "user", "model"]
    assert run.body["contents"][2]["parts"][0]["functionResponse"]["response"] == {"output": "a.py"}
    assert run.body["model"] == "gemini-2.5-pro"
    assert run.warnings == []


def test_gemini_jsonl_rewind_removes_the_message_and_those_after_it() -> None:
    lines = [
        *chat_lines(),
        {"$rewindTo": "m2"},
        gmsg("u2", "user", "only the tool output please"),
        gmsg("m3", "gemini", "a.py", tokens=tokens(3100)),
    ]
    [run] = read_runs(jsonl(*lines))
    assert reported(run) == [3000, 3100]
    # the tool's answer and the new question are one user content
    assert run.body["contents"][-2]["parts"][-1] == {"text": "only the tool output please"}
    assert {"text": "One file: a.py"} not in [p for c in run.body["contents"] for p in c["parts"]]
    # an id never written: the writer's loader drops every message
    [empty] = read_runs(jsonl(*chat_lines(), {"$rewindTo": "zz"}, gmsg("u9", "user", "again")))
    assert empty.body["contents"] == [{"role": "user", "parts": [{"text": "again"}]}]


def test_gemini_jsonl_set_messages_replaces_the_history_then_later_records_apply() -> None:
    masked = gmsg(
        "m1", "gemini", "", toolCalls=[dict(tool_call(True), result=[{"text": "<masked>"}])]
    )
    lines = [
        *chat_lines(),
        {"$set": {"messages": [gmsg("u1", "user", "list files"), masked], "sessionId": "g1"}},
        gmsg("m4", "gemini", "next", tokens=tokens(1200)),
    ]
    [run] = read_runs(jsonl(*lines))
    assert reported(run) == [None, 1200]  # the re-written m1 carries no tokens
    parts = [p for c in run.body["contents"] for p in c["parts"]]
    assert {"text": "<masked>"} in parts and {"text": "One file: a.py"} not in parts


def test_gemini_jsonl_migrated_from_a_json_session_and_a_subagent_header() -> None:
    # resuming a .json session writes a header then every message into the .jsonl
    migrated = [HEADER, *chat_lines()[1:], {"$set": {"sessionId": "g1"}}]
    [run] = read_runs(jsonl(*migrated))
    assert (run.name, reported(run)) == ("g1", [3000, 3050])
    sub = dict(HEADER, sessionId="sub-7", kind="subagent", directories=["/repo"])
    [agent] = read_runs(
        jsonl(sub, gmsg("u1", "user", "task"), gmsg("m1", "gemini", "ok", tokens=tokens(800)))
    )
    assert (agent.name, reported(agent)) == ("sub-7", [800])


@pytest.mark.parametrize(
    ("bad", "where"),
    [
        ({"$rewindTo": []}, "line 3.$rewindTo"),
        ({"$set": [1]}, "line 3.$set"),
        ({"$set": {"messages": {}}}, "line 3.$set.messages"),
        ({"id": 7, "type": "user", "content": "x"}, "line 3.id"),
        ([1, 2], "line 3"),
        ({"id": "m9", "type": "gemini", "content": 5}, "line 3.content"),
    ],
)
def test_gemini_jsonl_damaged_record_names_the_line(bad: Any, where: str) -> None:
    [run] = read_runs(jsonl(HEADER, gmsg("u1", "user", "hi"), bad, gmsg("m1", "gemini", "ok")))
    assert run.error is not None and run.error.startswith(where), run.error


def test_gemini_json_session_and_trajectory_still_read() -> None:
    session = {
        "sessionId": "g1",
        "projectHash": "ph",
        "messages": chat_lines()[1:2] + chat_lines()[4:5],
    }
    [run] = read_runs(orjson.dumps(session))
    assert (run.name, reported(run)) == ("g1", [3000])
    [hist] = read_runs(orjson.dumps([{"role": "user", "parts": [{"text": "hi"}]}]))
    assert (hist.shape, hist.name) == ("gemini-cli", "history")


# --- on the command line ------------------------------------------------------------------


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    chat = tmp_path / "session-2026-03-01T10-00-g1.jsonl"
    chat.write_bytes(jsonl(*chat_lines(), gmsg("u2", "user", "and the tests?")))
    rollout = tmp_path / "rollout-c1.jsonl"
    rollout.write_bytes(
        jsonl(
            meta("c1", COPY, forked_from_id="p1"),
            *replayed(parent_lines()),
            *turn(LATER, "third", 15300, 5200),
            *turn("2026-03-01T10:01:00.000Z", "fourth", 20700, 5400),
        )
    )
    return {"gemini-cli": chat, "codex": rollout}


@pytest.mark.parametrize("shape", ["gemini-cli", "codex"])
def test_estimate_prune_replay_check_read_the_file(
    shape: str, files: dict[str, Path], tmp_path: Path, cli: Cli
) -> None:
    path = files[shape]
    est = cli.process("estimate", str(path), "--json")
    assert est.returncode == 0, est.stderr
    report = orjson.loads(est.stdout)
    assert report["session"]["shape"] == shape
    out = tmp_path / "next.json"
    pruned = cli.process("prune", str(path), str(out))
    assert pruned.returncode == 0, pruned.stderr
    assert orjson.loads(out.read_bytes())
    rep = cli("replay", str(path), "--json")
    assert rep.exit_code == 0, rep.output
    [run] = orjson.loads(rep.stdout)["runs"]
    assert run["calls"] == 2
    checked = cli("check", str(path), "--jsonl", "--fail-on", "never")
    assert checked.exit_code == 0, checked.output


@pytest.mark.parametrize("shape", ["gemini-cli", "codex"])
def test_damaged_line_is_bad_input_with_one_line(
    shape: str, files: dict[str, Path], cli: Cli
) -> None:
    path = files[shape]
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = b'{"type": "bro\n'
    path.write_bytes(b"".join(lines))
    for command in ("estimate", "replay", "check"):
        result = cli.process(command, str(path), "-c", "100000")
        assert result.returncode == 1, (command, result.stderr)
        assert b"Traceback" not in result.stderr and b"internal error" not in result.stderr
        if command == "estimate":
            assert result.stderr.count(b"\n") == 1, result.stderr
