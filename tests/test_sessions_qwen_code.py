"""The Qwen Code reader: ChatRecord JSONL fixtures (tests/fixtures/sessions/qwen-code, the
record shape of Qwen Code's chatRecordingService.ts)."""

from __future__ import annotations

from pathlib import Path

import orjson

from ctxwin.fitting.calibration import prompt_tokens_from_usage
from ctxwin.recorded import Run
from ctxwin.runs import read_runs
from ctxwin.sessions import detect, qwen_code
from tests.conftest import Cli
from tests.test_sessions import cc_line, jsonl

FIXTURES = Path(__file__).parent / "fixtures" / "sessions" / "qwen-code"


def runs_of(name: str) -> dict[str, Run]:
    runs = read_runs((FIXTURES / name).read_bytes())
    assert all(r.error is None and r.shape == "qwen-code" for r in runs), runs
    return {r.name: r for r in runs}


def prompts(run: Run) -> list[int | None]:
    return [None if c.usage is None else prompt_tokens_from_usage(c.usage) for c in run.calls()]


def test_detected_by_shape_and_not_claude_codes() -> None:
    for path in sorted(FIXTURES.glob("*.jsonl")):
        records = [orjson.loads(line) for line in path.read_bytes().splitlines()]
        assert detect(records, True) == "qwen-code", path
    claude = [orjson.loads(line) for line in jsonl(cc_line("user", "u1", None, "hi")).splitlines()]
    assert not qwen_code.detect(claude, True)
    assert detect(claude, True) == "claude-code"


def test_the_path_to_the_last_record_parallel_calls_thoughts_and_a_subagent() -> None:
    runs = runs_of("rewind-subagent.jsonl")
    assert list(runs) == ["main", "agent-explore-7f3c"]
    main = runs["main"]
    assert main.fmt == "gemini" and main.current and main.context_length == 1_000_000
    # the rewound turn ("Delete steps.py", its call) is off the path
    assert prompts(main) == [12400, 14100, 14160, 14300]
    text = orjson.dumps(main.body).decode()
    assert "Delete steps.py" not in text and "Both at once." not in text  # thoughts not sent
    calls = [p for p in main.body["contents"][1]["parts"] if "functionCall" in p]
    assert [p["functionCall"]["id"] for p in calls] == ["c1", "c2"]
    answers = main.body["contents"][2]["parts"]
    assert [p["functionResponse"]["id"] for p in answers] == ["c1", "c2"]
    assert prompts(runs["agent-explore-7f3c"]) == [3100]


def test_compression_restarts_from_the_compressed_history() -> None:
    runs = runs_of("compression.jsonl")
    assert list(runs) == ["main segment 1", "main segment 2"]
    one, two = runs.values()
    assert prompts(one) == [9000, 9100, 10900] and prompts(two) == [1500, 1560]
    assert two.body["contents"][0]["parts"][0]["text"].startswith("<state_snapshot>")
    assert two.current and not one.current


def test_a_missing_required_field_is_named() -> None:
    data = (FIXTURES / "compression.jsonl").read_bytes()
    broken = data.replace(b'"uuid": "u002", ', b"", 1)
    [run] = read_runs(broken, "qwen-code")
    assert run.error == 'line 2.uuid: missing "uuid"'


def test_estimate_takes_the_sessions_window(cli: Cli) -> None:
    result = cli.process("estimate", str(FIXTURES / "compression.jsonl"), "--json")
    assert result.returncode == 0, result.stderr
    report = orjson.loads(result.stdout)
    assert report["session"] == {"run": "main segment 2", "shape": "qwen-code"}
    assert report["context_length"] == 1_000_000
