"""Claude Code sessions whose responses call tools in parallel, as Claude Code logs them.

Claude Code writes one API response as one line per content block (thinking, text,
each tool_use), all sharing ``message.id``, and runs each tool as soon as its block
arrives: a tool's result line is written when the tool finishes, between the lines
of the response that is still streaming, in the order the tools finish. The result
names the block it answers (``parentUuid``) and the next block names the result.
The reader rebuilds what the provider saw: one assistant message per response, then
one user message with every result of that response in the order of its calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxwin.runs import read_runs
from tests.conftest import Cli
from tests.test_sessions import AGENT_TOOLS, cc_line, corpus, jsonl, reported

AGENT = "a7c41e2"
REMINDER = {"type": "text", "text": "<system-reminder>the file changed on disk</system-reminder>"}


@dataclass
class Log:
    """A session file being written: lines in file order, the last one written."""

    sidechain: bool = False
    lines: list[dict[str, Any]] = field(default_factory=list)
    last: str | None = None
    responses: list[tuple[str, int]] = field(default_factory=list)
    """(message.id, reported prompt) of every response, in order."""

    def extra(self) -> dict[str, Any]:
        return {"isSidechain": True, "agentId": AGENT} if self.sidechain else {}

    def user(self, uuid: str, content: Any, parent: str | None = None) -> None:
        line = cc_line("user", uuid, parent or self.last, content, **self.extra())
        self.lines.append(line)
        self.last = uuid

    def response(
        self, n: int, schedule: str, prompt: int, size: int = 1500, parent: str | None = None
    ) -> None:
        """Response ``n`` logged by ``schedule``: ``T`` a thinking block, ``X`` a text
        block, ``cK`` the tool_use of call K, ``rK`` its result (written when the tool
        finishes). The first result carries a reminder in the same line."""
        mid = f"msg_{n:02d}"
        self.responses.append((mid, prompt))
        piece_of: dict[str, str] = {}
        first_result = True
        output = 1
        self.last = parent or self.last
        for step in schedule.split():
            uuid = f"{mid}-{step}"
            if step[0] == "r":
                call = f"toolu_{n:02d}_{step[1:]}"
                content: list[Any] = [
                    {"type": "tool_result", "tool_use_id": call, "content": f"{step} " * size}
                ]
                if first_result:
                    content.append(REMINDER)
                    first_result = False
                line = cc_line(
                    "user", uuid, piece_of[call], content, toolUseResult={"stdout": "copy"}
                )
                self.lines.append(line | self.extra())
                self.last = uuid
                continue
            if step == "T":
                block: dict[str, Any] = {
                    "type": "thinking",
                    "thinking": f"Plan for step {n}: read what the task names, then act.",
                    "signature": f"sig-{n}",
                }
            elif step == "X":
                block = {"type": "text", "text": f"Step {n}: reading the files in parallel."}
            else:
                call = f"toolu_{n:02d}_{step[1:]}"
                piece_of[call] = uuid
                block = {"type": "tool_use", "id": call, "name": "Read", "input": {"n": step}}
            output += 40
            line = cc_line(
                "assistant", uuid, self.last, [block], mid=mid, usage=prompt, requestId=f"req_{n}"
            )
            line["message"]["usage"]["output_tokens"] = output  # grows as the response streams
            self.lines.append(line | self.extra())
            self.last = uuid

    def data(self) -> bytes:
        return jsonl(*self.lines)


SCHEDULES = [
    # a thinking and a text block before the tool uses; results between the tool uses
    "T X c0 r0 c1 c2 r2 r1",
    # results out of call order, the first one before the other calls are logged
    "T X c0 c1 r1 c2 r0 r2",
    # thinking, a call and its result, then a text block and two more calls
    "T c0 r0 X c1 c2 r1 r2",
    # one call
    "X c0 r0",
]


def parallel_session(sidechain: bool = False, turns: int = 12, size: int = 1500) -> Log:
    """A session of ``turns`` responses with parallel tool calls, then a final answer."""
    log = Log(sidechain=sidechain)
    log.user("u0", "Port the parser and check every caller.")
    prompt = 18000
    for n in range(turns):
        schedule = SCHEDULES[n % len(SCHEDULES)]
        log.response(n, schedule, prompt, size)
        prompt += 3200 * schedule.count("r")  # a result of `size` words: ~3,200 tokens
    log.response(turns, "X", prompt)
    return log


def calls_by_message(messages: list[dict[str, Any]]) -> list[tuple[list[str], list[str]]]:
    """For every assistant message: the calls it makes and the results the next holds."""
    out = []
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        calls = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
        after = messages[i + 1]["content"] if i + 1 < len(messages) else []
        answers = [b["tool_use_id"] for b in after if b.get("type") == "tool_result"]
        out.append((calls, answers))
    return out


@pytest.mark.parametrize("sidechain", [False, True])
def test_each_message_id_is_one_call_with_its_results_next(sidechain: bool) -> None:
    log = parallel_session(sidechain)
    [run] = read_runs(log.data())
    assert run.name == (f"agent-{AGENT}" if sidechain else "main")
    messages = run.body["messages"]
    assert reported(run) == [p for _, p in log.responses]
    assistants = [m for m in messages if m["role"] == "assistant"]
    assert len(assistants) == len(log.responses) == 13
    # the blocks of a response in their logged order
    kinds = [[b["type"] for b in m["content"]] for m in assistants[:4]]
    assert kinds == [
        ["thinking", "text", "tool_use", "tool_use", "tool_use"],
        ["thinking", "text", "tool_use", "tool_use", "tool_use"],
        ["thinking", "tool_use", "text", "tool_use", "tool_use"],
        ["text", "tool_use"],
    ]
    # every call is answered in the next message, in the order of the calls
    for calls, answers in calls_by_message(messages)[:-1]:
        assert calls and answers == calls
    # roles alternate; what was logged with the results stays after them
    assert [m["role"] for m in messages] == ["user", "assistant"] * 13
    after_first = messages[2]["content"]
    assert [b["type"] for b in after_first] == ["tool_result"] * 3 + ["text"]
    assert after_first[-1] == REMINDER
    assert "toolUseResult" not in orjson.dumps(run.body).decode()


def test_a_subagent_file_reads_like_its_main_session(tmp_path: Path) -> None:
    main = parallel_session().data()
    sub = tmp_path / "subagents" / f"agent-{AGENT}.jsonl"
    sub.parent.mkdir()
    sub.write_bytes(parallel_session(sidechain=True).data())
    [main_run] = read_runs(main)
    [sub_run] = read_runs(sub.read_bytes())
    assert sub_run.name == f"agent-{AGENT}"
    assert sub_run.body == main_run.body
    assert reported(sub_run) == reported(main_run)
    assert len(sub_run.calls()) == 13


def test_replay_lists_one_call_per_message_id(tmp_path: Path, cli: Cli) -> None:
    for sidechain in (False, True):
        log = parallel_session(sidechain)
        path = tmp_path / f"s-{sidechain}.jsonl"
        path.write_bytes(log.data())
        result = cli("replay", str(path), "--json")
        assert result.exit_code == 0, result.output
        [rep] = orjson.loads(result.stdout)["runs"]
        assert rep["calls"] == rep["calls_with_usage"] == len(log.responses)
        assert rep["invalid_calls"] == 0
        assert [r["reported_tokens"] for r in rep["rows"]] == [p for _, p in log.responses]


@pytest.mark.parametrize("sidechain", [False, True])
def test_prune_a_parallel_session_writes_a_clean_body(
    sidechain: bool, tmp_path: Path, cli: Cli
) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(parallel_session(sidechain).data())
    out = tmp_path / "next.json"
    result = cli.process("prune", str(path), str(out), "-c", "60000", "--max-tokens", "4096")
    assert result.returncode in (0, 3), result.stderr
    assert b"dropped" in result.stderr  # the session is over the window: turns were dropped
    body = orjson.loads(out.read_bytes())
    assert 1 < len(body["messages"]) < 26
    lint = cli("lint", str(out))
    assert lint.exit_code == 0, lint.output
    for calls, answers in calls_by_message(body["messages"])[:-1]:
        assert answers == calls


def test_lines_logged_twice_count_once() -> None:
    """A line written twice (same uuid), a tool use logged again in another line of its
    response, and a result logged twice: the provider saw each once."""
    log = Log()
    log.user("u0", "read both")
    log.response(0, "T X c0 c1 r1 r0", 20000)
    again = [ln for ln in log.lines if ln["uuid"] in ("msg_00-T", "msg_00-c1", "msg_00-r0")]
    copy = orjson.loads(orjson.dumps(again[1]))
    copy["uuid"] = "msg_00-c1-again"
    log.lines[4:4] = [again[0], copy]  # the thinking line again, the second call again
    log.lines.append({**again[2], "uuid": "msg_00-r0-again"})
    log.response(1, "X", 24000)
    [run] = read_runs(log.data())
    messages = run.body["messages"]
    assert [b["type"] for b in messages[1]["content"]] == [
        "thinking",
        "text",
        "tool_use",
        "tool_use",
    ]
    assert [b["tool_use_id"] for b in messages[2]["content"][:2]] == ["toolu_00_0", "toolu_00_1"]
    assert len(messages[2]["content"]) == 3  # the two results and the reminder
    assert reported(run) == [20000, 24000]


def test_a_reused_message_id_with_another_request_is_another_call() -> None:
    """A proxy can answer every response with one id: a line with another requestId,
    or (without one) another prompt count, starts a new response."""
    log = Log()
    log.user("u0", "go")
    log.response(0, "X c0 r0", 20000)
    log.response(1, "X c0 r0", 22000)
    for line in log.lines:
        if line["type"] == "assistant":
            line["message"]["id"] = "msg_proxy"
    [run] = read_runs(log.data())
    assert reported(run) == [20000, 22000]
    for line in log.lines:
        line.pop("requestId", None)
    [run] = read_runs(log.data())
    assert reported(run) == [20000, 22000]
    assert [m["role"] for m in run.body["messages"]] == ["user", "assistant"] * 2 + ["user"]


def test_a_prompt_ends_the_responses_before_it() -> None:
    """The same id after a user's prompt (a proxy without requestId or usage) is a new
    response, not more of the one before the prompt."""
    log = Log()
    log.user("u0", "hi")
    log.lines.append(cc_line("assistant", "a1", "u0", "hello", mid="msg_same"))
    log.user("u1", "and now?", parent="a1")
    log.lines.append(cc_line("assistant", "a2", "u1", "now this", mid="msg_same"))
    [run] = read_runs(log.data())
    assert [m["role"] for m in run.body["messages"]] == ["user", "assistant"] * 2


def test_a_result_named_by_a_progress_line_is_kept() -> None:
    """Newer versions thread parallel calls through progress lines: a result off the
    path whose parent is such a line still answers a call the response made."""
    log = Log()
    log.user("u0", "read both")
    log.response(0, "X c0 c1 r1 r0", 20000)
    progress = {"type": "progress", "uuid": "p0", "parentUuid": "msg_00-c0", "data": {}}
    at = next(i for i, ln in enumerate(log.lines) if ln["uuid"] == "msg_00-r0")
    log.lines.insert(at, progress)
    log.lines[at + 1]["parentUuid"] = "p0"
    log.response(1, "X", 23000, parent="msg_00-r1")
    [run] = read_runs(log.data())
    [(calls, answers), _] = calls_by_message(run.body["messages"])
    assert answers == calls == ["toolu_00_0", "toolu_00_1"]


def interleave(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A session's lines in the order Claude Code writes them when each tool finishes
    while the next block of its response streams: the result of call k after the piece
    of call k + 1, the results still running at the end last call first (``parentUuid``
    kept: these files chain some results through each other)."""
    out: list[dict[str, Any]] = []
    results = {
        b["tool_use_id"]: ln
        for ln in lines
        if ln.get("type") == "user" and isinstance(ln["message"]["content"], list)
        for b in ln["message"]["content"]
        if b.get("type") == "tool_result"
    }
    moved: set[str] = set()
    pending: list[dict[str, Any]] = []
    pending_mid: str | None = None

    def mid(line: dict[str, Any]) -> str | None:
        return line["message"].get("id") if line.get("type") == "assistant" else None

    for ln in lines:
        if ln.get("uuid") in moved:
            continue
        if ln.get("type") != "assistant":
            out += reversed(pending)
            pending = []
            out.append(ln)
            pending_mid = None if ln.get("type") == "user" else pending_mid
            continue
        if pending_mid != mid(ln):  # another response: the last one's results first
            out += reversed(pending)
            pending = []
        pending_mid = mid(ln)
        out.append(ln)
        if pending:
            out.append(pending.pop(0))
        for b in ln["message"]["content"]:
            result = results.get(b.get("id")) if b.get("type") == "tool_use" else None
            if result is not None and result["uuid"] not in moved:
                moved.add(result["uuid"])
                pending.append(result)
    return out + list(reversed(pending))


@corpus
@pytest.mark.corpus
def test_corpus_sessions_read_the_same_with_their_results_interleaved() -> None:
    """The samples' results are logged after the pieces of their response; logged
    between them (as tools finish), they are read into the same requests."""
    rewritten = 0
    for path in sorted((AGENT_TOOLS / "claude-code").glob("*.jsonl")):
        lines = [orjson.loads(ln) for ln in path.read_bytes().splitlines() if ln.strip()]
        mixed = interleave(lines)
        assert sorted(map(orjson.dumps, mixed)) == sorted(map(orjson.dumps, lines))
        rewritten += mixed != lines
        runs = read_runs(jsonl(*lines))
        assert len(read_runs(jsonl(*mixed))) == len(runs)
        for plain, other in zip(runs, read_runs(jsonl(*mixed)), strict=True):
            assert other.body == plain.body, path
            assert reported(other) == reported(plain), path
    assert rewritten == 3  # the samples with a response of two calls or more
