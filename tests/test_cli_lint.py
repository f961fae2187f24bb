"""``ctxwin lint``: every problem, by message and rule; exit 0 clean, 1 problems found."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxwin import core
from fidelity.corpus import corpus_path
from tests.conftest import Cli
from tests.hostile_util import dump, transcript

CORPUS = corpus_path()


def broken() -> dict[str, Any]:
    body = transcript()
    msgs = body["messages"]
    msgs[5] = {"role": "user", "content": "stop"}  # call_1 never answered
    msgs.insert(6, {"role": "tool", "tool_call_id": "call_404", "content": "?"})
    return body


def test_clean_file(tmp_path: Path, cli: Cli) -> None:
    src = tmp_path / "run.json"
    src.write_bytes(dump(transcript()))
    run = cli("lint", str(src))
    assert run.exit_code == 0, run.stderr
    assert run.stdout_bytes == b""
    assert run.stderr == "ctxwin: lint: no problems in 1 file\n"


def test_table_lists_every_problem(tmp_path: Path, cli: Cli) -> None:
    src = tmp_path / "run.json"
    src.write_bytes(dump(broken()))
    run = cli("lint", str(src))
    assert run.exit_code == 1
    table = run.stdout_bytes.decode()
    lines = [line.split() for line in table.splitlines()]
    assert lines[0] == ["where", "rule", "problem"]
    rule_names = {"unanswered-call", "orphan-result"}
    assert [row[:2] for row in lines[1:] if len(row) > 1 and row[1] in rule_names] == [
        ["messages[4]", "unanswered-call"],
        ["messages[6]", "orphan-result"],
    ]
    assert run.stderr == "ctxwin: lint: 2 problems in 1 of 1 file\n"


def test_json_output(tmp_path: Path, cli: Cli) -> None:
    src = tmp_path / "run.json"
    src.write_bytes(dump(broken()))
    run = cli("lint", "--json", "-q", str(src))
    assert run.exit_code == 1
    assert run.stderr == ""
    report = orjson.loads(run.stdout_bytes)
    assert report["clean"] is False
    assert report["problems"] == 2
    (record,) = report["files"]
    assert record["path"] == str(src)
    assert record["format"] == "openai-chat"
    assert record["messages"] == len(broken()["messages"])
    assert record["problems"][0] == {
        "index": 4,
        "where": "messages[4]",
        "rule": "unanswered-call",
        "message": "call id 'call_1' gets no result before messages[5]",
    }


def test_folders_missing_files_and_stdin(tmp_path: Path, cli: Cli) -> None:
    folder = tmp_path / "runs"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.json").write_bytes(dump(transcript()))
    (folder / "sub" / "b.json").write_bytes(dump(broken()))
    (folder / "notes.txt").write_text("not a transcript, not linted")
    run = cli("lint", "--json", str(folder), str(tmp_path / "gone.json"), "-", input=b"[]")
    assert run.exit_code == 1
    records = orjson.loads(run.stdout_bytes)["files"]
    assert [r["path"] for r in records] == [
        str(folder / "a.json"),
        str(folder / "sub" / "b.json"),
        str(tmp_path / "gone.json"),
        "-",
    ]
    assert [len(r["problems"]) for r in records] == [0, 2, 1, 0]
    gone = records[2]["problems"][0]
    assert gone["rule"] == "bad-input"
    assert gone["message"].endswith("gone.json: no such file")
    assert run.stderr == "ctxwin: lint: 3 problems in 2 of 4 files\n"


def test_shape_errors_are_bad_input_with_their_place(cli: Cli) -> None:
    body = transcript()
    body["messages"][2]["tool_calls"][0]["id"] = 7
    run = cli("lint", "--json", input=dump(body))
    assert run.exit_code == 1
    (problem,) = orjson.loads(run.stdout_bytes)["files"][0]["problems"]
    assert problem == {
        "index": None,
        "where": "messages[2].tool_calls[0].id",
        "rule": "bad-input",
        "message": "expected a string, got a number",
    }


def test_big_integer_is_reported(cli: Cli) -> None:
    data = dump(transcript()).replace(b'"model"', b'"seed": 99999999999999999999999, "model"')
    run = cli("lint", "--json", input=data)
    assert run.exit_code == 1
    (problem,) = orjson.loads(run.stdout_bytes)["files"][0]["problems"]
    assert problem["rule"] == "big-integer"
    assert problem["message"].startswith("integer 99999999999999999999999 at line 1 column 10")


def test_lint_and_prune_agree(tmp_path: Path, cli: Cli) -> None:
    """The pruner refuses naming a problem lint lists: one implementation."""
    src = tmp_path / "run.json"
    src.write_bytes(dump(broken()))
    found = orjson.loads(cli("lint", "--json", str(src)).stdout_bytes)["files"][0]["problems"]
    first = next(p for p in found if p["rule"] == "orphan-result")
    run = cli("prune", str(src), "-", "-c", "4000", "--max-tokens", "0")
    assert run.exit_code == 1
    assert f"{first['where']}: {first['message']} [{first['rule']}]" in run.stderr


def _corpus_bodies() -> list[tuple[str, Any]]:
    """Request bodies a provider accepted (Chat, Anthropic, Gemini), from the shared corpus."""
    bodies: list[tuple[str, Any]] = []
    for path in sorted((CORPUS / "openhands_sdk_llmlogs").glob("*.json")):
        if path.name.startswith("nonfncall"):
            continue
        record = orjson.loads(path.read_bytes())
        if isinstance(record, dict) and isinstance(record.get("messages"), list):
            bodies.append((path.name, {"messages": record["messages"]}))
    for path in sorted((CORPUS / "pydantic_ai_cassettes").glob("*.json")):
        for i, interaction in enumerate(orjson.loads(path.read_bytes())["interactions"]):
            body = interaction["request"].get("parsed_body")
            if isinstance(body, dict) and any(k in body for k in ("messages", "contents")):
                bodies.append((f"{path.name}[{i}]", body))
    return bodies


@pytest.mark.corpus
@pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus absent")
def test_requests_providers_accepted_lint_clean() -> None:
    """No false alarms: every recorded request body lints clean, in every format."""
    bodies = _corpus_bodies()
    formats = set()
    for name, body in bodies:
        transcript = core.load(body)
        formats.add(transcript.format)
        assert transcript.problems() == [], name
    assert len(bodies) >= 30
    assert formats >= {"openai-chat", "anthropic", "gemini"}


# session files: linted as the request they would send next ---------------------------

AGENT_TOOLS = CORPUS / "agent_tools"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _claude_code_session() -> bytes:
    """A Claude Code session (JSONL, uuid/parentUuid chain): a call, its result, a reply."""
    base = {"sessionId": "s1", "isSidechain": False, "cwd": "/w", "version": "2.1.0"}
    lines = [
        {
            **base,
            "type": "user",
            "uuid": "u1",
            "parentUuid": None,
            "message": {"role": "user", "content": "list the files"},
        },
        {
            **base,
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "u1",
            "message": {
                "id": "msg_1",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}],
                "usage": {"input_tokens": 900, "output_tokens": 20},
            },
        },
        {
            **base,
            "type": "user",
            "uuid": "u2",
            "parentUuid": "a1",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}],
            },
        },
        {
            **base,
            "type": "assistant",
            "uuid": "a2",
            "parentUuid": "u2",
            "message": {
                "id": "msg_2",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": "one file: a.py"}],
                "usage": {"input_tokens": 930, "output_tokens": 8},
            },
        },
    ]
    return b"\n".join(orjson.dumps(line) for line in lines) + b"\n"


def test_a_claude_code_session_is_read(tmp_path: Path, cli: Cli) -> None:
    src = tmp_path / "session.jsonl"
    src.write_bytes(_claude_code_session())
    run = cli("lint", "--json", str(src))
    assert run.exit_code == 0, run.stderr
    (record,) = orjson.loads(run.stdout_bytes)["files"]
    assert record["problems"] == []
    assert record["format"] == "anthropic" and record["messages"] == 4
    assert record["session"]["shape"] == "claude-code"
    assert run.stderr == "ctxwin: lint: no problems in 1 file\n"
    # the same file from stdin, and a folder holding it (a .jsonl file is picked up)
    assert cli("lint", "-q", input=src.read_bytes()).exit_code == 0
    assert cli("lint", str(tmp_path)).stderr == "ctxwin: lint: no problems in 1 file\n"


def test_a_session_s_next_request_is_what_is_linted(tmp_path: Path, cli: Cli) -> None:
    # the result answers a call id no call made: the next request breaks a rule
    data = _claude_code_session().replace(b'"tool_use_id":"toolu_1"', b'"tool_use_id":"toolu_9"')
    src = tmp_path / "session.jsonl"
    src.write_bytes(data)
    run = cli("lint", "--json", str(src))
    assert run.exit_code == 1
    problems = orjson.loads(run.stdout_bytes)["files"][0]["problems"]
    assert {p["rule"] for p in problems} >= {"orphan-result"}
    # prune reads the same request and names the same problem
    pruned = cli("prune", str(src), "-", "-c", "300", "--max-tokens", "0")
    first = next(p for p in problems if p["rule"] == "orphan-result")
    assert pruned.exit_code == 1 and first["message"] in pruned.stderr


def test_an_openhands_trajectory_is_read(tmp_path: Path, cli: Cli) -> None:
    events = [
        {"id": 0, "source": "user", "action": "message", "args": {"content": "fix the bug"}},
        {
            "id": 1,
            "source": "agent",
            "action": "run",
            "args": {"command": "ls"},
            "tool_call_metadata": {
                "function_name": "execute_bash",
                "tool_call_id": "call_1",
                "model_response": {
                    "id": "r1",
                    "choices": [
                        {
                            "message": {
                                "role": "assistant",
                                "content": "",
                                "tool_calls": [
                                    {
                                        "id": "call_1",
                                        "type": "function",
                                        "function": {
                                            "name": "execute_bash",
                                            "arguments": '{"command": "ls"}',
                                        },
                                    }
                                ],
                            }
                        }
                    ],
                    "usage": {"prompt_tokens": 500, "completion_tokens": 10},
                },
                "total_calls_in_response": 1,
            },
        },
        {
            "id": 2,
            "source": "agent",
            "observation": "run",
            "content": "a.py",
            "cause": 1,
            "tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": "call_1"},
        },
    ]
    src = tmp_path / "trajectory.json"
    src.write_bytes(orjson.dumps(events))
    run = cli("lint", "--json", str(src))
    assert run.exit_code == 0, run.stderr + run.stdout
    (record,) = orjson.loads(run.stdout_bytes)["files"]
    assert record["problems"] == [] and record["session"]["shape"] == "openhands-events"


@pytest.mark.corpus
@pytest.mark.parametrize(
    "tool",
    [
        "claude-code",
        "openhands-events",
        "codex",
        "gemini-cli",
        "../agent_tools_next/pi",
        "../agent_tools_next/copilot-cli",
        "../agent_tools_next/claude-code",
    ],
)
def test_corpus_sessions_are_read(tool: str, cli: Cli) -> None:
    folder = AGENT_TOOLS / tool
    if not folder.is_dir():
        pytest.skip(f"no corpus at {folder}")
    run = cli("lint", "--json", "-q", str(folder))
    records = orjson.loads(run.stdout_bytes)["files"]
    assert records
    for record in records:
        assert "session" in record, record
        assert not [p for p in record["problems"] if p["rule"] == "bad-input"], record


def test_an_empty_folder_or_glob_is_an_error(tmp_path: Path, cli: Cli) -> None:
    (tmp_path / "notes.txt").write_text("not a transcript")
    run = cli("lint", str(tmp_path))
    assert run.exit_code == 1 and run.stdout_bytes == b""
    assert run.stderr == (
        f"ctxwin: error: {tmp_path}: nothing to lint: no .json, .jsonl, .ndjson, .traj file in it\n"
    )
    run = cli("lint", str(tmp_path / "*.json"))
    assert run.exit_code == 1 and run.stdout_bytes == b""
    assert run.stderr == f"ctxwin: error: {tmp_path / '*.json'}: nothing to lint: no file matches\n"


def test_a_folder_of_unreadable_files_fails_saying_so(tmp_path: Path, cli: Cli) -> None:
    (tmp_path / "a.json").write_bytes(b"{not json")
    (tmp_path / "b.jsonl").write_bytes(b'{"hello": 1}\n{"world": 2}\n')
    run = cli("lint", "--json", str(tmp_path))
    assert run.exit_code == 1
    records = orjson.loads(run.stdout_bytes)["files"]
    assert [r["format"] for r in records] == [None, None]
    assert all(r["problems"][0]["rule"] == "bad-input" for r in records)
    assert run.stderr == (
        "ctxwin: lint: 2 problems in 2 of 2 files; "
        "none could be read as a transcript or session file\n"
    )
