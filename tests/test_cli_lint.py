"""``ctxwin lint``: every problem, by message and rule; exit 0 clean, 1 problems found."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxwin import core
from tests.conftest import Cli
from tests.hostile_util import dump, transcript

CORPUS = Path(
    os.environ.get("CTXWIN_CORPUS") or Path(__file__).resolve().parents[2] / "shared" / "corpus"
)


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
