"""``ctxwin repair`` and ``ctxwin.repair``: examples in each format, and the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

import ctxwin
from ctxwin.fitting.repairing import STUB_TEXT, RepairError, repair
from tests.conftest import Cli
from tests.hostile_util import dump


def call(cid: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def chat_broken() -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
            {"role": "tool", "tool_call_id": "a", "content": "A"},
            {"role": "tool", "tool_call_id": "zz", "content": "orphan"},
            {"role": "user", "content": "more"},
            {"role": "tool", "tool_call_id": "a", "content": "again"},
            {"role": "assistant", "content": "ok"},
        ]
    }


def test_chat_each_kind_of_fix() -> None:
    body = chat_broken()
    out, done = repair(body)
    assert [m.get("tool_call_id") or m["role"] for m in out["messages"]] == [
        "user",
        "assistant",
        "a",
        "b",
        "user",
        "assistant",
    ]
    assert out["messages"][3]["content"] == STUB_TEXT
    assert [(c.action, c.where, c.call_id) for c in done.changes] == [
        ("stubbed", "messages[1]", "b"),
        ("removed-orphan", "messages[3]", "zz"),
        ("removed-duplicate", "messages[5]", "a"),
    ]
    assert out["messages"][2] is body["messages"][2]
    assert repair(out)[0] is out


def test_result_before_its_call_is_moved_after_it() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "a", "content": "A"},
            {"role": "assistant", "content": None, "tool_calls": [call("a")]},
            {"role": "user", "content": "x"},
        ]
    }
    out, done = repair(body)
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "tool", "user"]
    assert [c.action for c in done.changes] == ["moved"]


def test_anthropic_results_go_into_the_next_user_message_first() -> None:
    body = {
        "system": "s",
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "a", "name": "f", "input": {}},
                    {"type": "tool_use", "id": "b", "name": "f", "input": {}},
                ],
            },
            {"role": "user", "content": "no results here"},
            {"role": "assistant", "content": "ok"},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "a", "content": "A"},
                    {"type": "tool_result", "tool_use_id": "q", "content": "orphan"},
                ],
            },
            {"role": "assistant", "content": "done"},
        ],
    }
    out, done = repair(body)
    user = out["messages"][2]["content"]
    assert [b.get("tool_use_id") or b["type"] for b in user] == ["a", "b", "text"]
    assert user[1]["is_error"] is True
    assert len(out["messages"]) == 5
    assert [c.action for c in done.changes] == [
        "stubbed",
        "removed-orphan",
        "moved",
        "removed-empty-message",
    ]


def test_responses_and_gemini() -> None:
    responses = {
        "input": [
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
            {"role": "user", "content": "x"},
            {"type": "function_call_output", "call_id": "a", "output": "A"},
        ]
    }
    out, _ = repair(responses)
    assert [it.get("type", "message") for it in out["input"]] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    gemini = {
        "contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}, "id": "k"}}]},
            {"role": "model", "parts": [{"text": "hm"}]},
            {"role": "user", "parts": [{"text": "x"}]},
        ]
    }
    out, done = repair(gemini)
    assert out["contents"][2] == {
        "role": "user",
        "parts": [{"functionResponse": {"id": "k", "name": "f", "response": {"error": STUB_TEXT}}}],
    }
    assert [c.action for c in done.changes] == ["stubbed"]


def test_call_left_open_at_the_end_is_the_pending_step() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [call("a")]},
        ]
    }
    out, done = repair(body)
    assert out is body and not done.changed


def test_refuses_what_would_need_a_guess() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [call("a"), call("a")]},
            {"role": "tool", "tool_call_id": "a", "content": "A"},
        ]
    }
    with pytest.raises(RepairError, match="made again"):
        repair(body)
    first_is_model = {
        "system": "s",
        "messages": [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "x"}],
    }
    with pytest.raises(RepairError, match="first-is-user"):
        repair(first_is_model)


def test_library_exports() -> None:
    assert ctxwin.repair is repair
    assert ctxwin.Repaired.__name__ == "Repaired"


def test_cli_repairs_reports_and_lints_clean(tmp_path: Path, cli: Cli) -> None:
    src = tmp_path / "in.json"
    src.write_bytes(dump(chat_broken()))
    dst = tmp_path / "out.json"
    run = cli("repair", str(src), str(dst), "--json")
    assert run.exit_code == 0, run.stderr
    report = orjson.loads(run.stdout_bytes)
    assert report["changed"] is True
    assert [c["action"] for c in report["changes"]] == [
        "stubbed",
        "removed-orphan",
        "removed-duplicate",
    ]
    assert report["messages_before"] == 7 and report["messages_after"] == 6
    assert "messages[3]: removed the result for call id 'zz'" in run.stderr
    assert cli("lint", str(dst)).exit_code == 0
    again = cli("repair", str(dst), "-")
    assert again.exit_code == 0
    assert again.stdout_bytes == dst.read_bytes()
    assert "nothing to repair" in again.stderr


def test_cli_valid_input_is_written_byte_for_byte(cli: Cli) -> None:
    data = b'{ "messages": [ {"role": "user", "content": "hi"} ] }\n'
    run = cli("repair", "-", "-", input=data)
    assert run.exit_code == 0
    assert run.stdout_bytes == data


def test_cli_refusal_writes_nothing(tmp_path: Path, cli: Cli) -> None:
    src = tmp_path / "in.json"
    src.write_bytes(
        dump(
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": None, "tool_calls": [call("a"), call("a")]},
                ]
            }
        )
    )
    dst = tmp_path / "out.json"
    dst.write_bytes(b"keep me")
    run = cli("repair", str(src), str(dst))
    assert run.exit_code == 1
    assert run.stderr.count("\n") == 1 and "cannot repair without guessing" in run.stderr
    assert dst.read_bytes() == b"keep me"


def test_cli_usage_errors(cli: Cli) -> None:
    assert cli("repair", "-", "-", "--json", input=b"[]").exit_code == 2
    assert cli("repair", "-", "-", "--format", "nope", input=b"[]").exit_code == 2
