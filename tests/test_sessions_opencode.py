"""The OpenCode reader: `opencode export` fixtures (tests/fixtures/sessions/opencode,
MessageV2 shapes from OpenCode's source): one call per step, compaction, models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ctxwin.fitting.calibration import prompt_tokens_from_usage
from ctxwin.recorded import Run
from ctxwin.runs import read_runs
from ctxwin.sessions import detect, opencode
from tests.conftest import Cli

FIXTURES = Path(__file__).parent / "fixtures" / "sessions" / "opencode"


def runs_of(name: str) -> dict[str, Run]:
    runs = read_runs((FIXTURES / name).read_bytes())
    assert all(r.error is None and r.shape == "opencode" for r in runs), runs
    return {r.name: r for r in runs}


def prompts(run: Run) -> list[int | None]:
    return [None if c.usage is None else prompt_tokens_from_usage(c.usage) for c in run.calls()]


def step_prompts(name: str) -> list[int]:
    """``input + cache.read + cache.write`` of every step-finish of a fixture."""
    export: dict[str, Any] = orjson.loads((FIXTURES / name).read_bytes())
    out = []
    for message in export["messages"]:
        for part in message["parts"]:
            if part["type"] == "step-finish":
                t = part["tokens"]
                out.append(t["input"] + t["cache"]["read"] + t["cache"]["write"])
    return out


def test_detected_by_shape() -> None:
    for path in sorted(FIXTURES.glob("*.json")):
        assert detect([orjson.loads(path.read_bytes())], False) == "opencode", path
    assert not opencode.detect([{"info": {}, "messages": [{"role": "user"}]}], False)


def test_each_step_is_a_call_and_its_results_are_in_the_next_request() -> None:
    [run] = runs_of("steps.json").values()
    assert prompts(run) == step_prompts("steps.json")  # 5 steps in 2 assistant messages
    messages = run.body["messages"]
    first = messages[1]["content"]
    assert [b["type"] for b in first] == ["thinking", "text", "tool_use", "tool_use"]
    assert [b["tool_use_id"] for b in messages[2]["content"]] == ["toolu_1", "toolu_2"]
    failed = messages[4]["content"][0]
    assert failed["content"] == "Error: pytest not found" and failed["is_error"] is True


def test_compaction_restarts_from_the_summary() -> None:
    runs = runs_of("compaction.json")
    assert list(runs) == ["session segment 1", "session segment 2"]
    one, two = runs.values()
    found = step_prompts("compaction.json")
    # the summary is the last call of the first run; the aborted step (900) opens the second
    assert prompts(one) == found[:4] and prompts(two) == found[4:]
    assert two.body["messages"][0]["content"] == opencode.COMPACTION_TEXT
    assert two.body["messages"][1]["content"][0]["text"].startswith("## Summary")
    text = orjson.dumps(two.body).decode()
    assert "ignored by the model" not in text
    assert opencode.INTERRUPTED in text  # the running tool of the aborted message
    assert opencode.CLEARED in orjson.dumps(one.body).decode()  # pruned output
    assert two.current and not one.current


def test_each_model_is_a_run_in_its_wire_format() -> None:
    runs = runs_of("models.json")
    assert list(runs) == ["session", "session gpt-5"]
    claude, gpt = runs.values()
    assert claude.fmt == "anthropic" and gpt.fmt == "openai-chat"
    assert prompts(gpt) == [420] and prompts(claude) == [1503, 2903]
    # the failed, empty answer is not sent: the two user messages follow each other
    assert claude.body["messages"][2]["content"] == "Read steps.py.\nRead steps.py, with Claude."
    assert claude.body["messages"][0]["content"][1]["type"] == "image"


def test_a_missing_required_field_is_named() -> None:
    data = (FIXTURES / "steps.json").read_bytes().replace(b'"callID": "toolu_2",', b"", 1)
    [run] = read_runs(data)
    assert run.error is not None and run.error.endswith('callID: missing "callID"')


def test_estimate_names_the_session(cli: Cli) -> None:
    result = cli.process("estimate", str(FIXTURES / "compaction.json"), "--json")
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout)["session"] == {
        "run": "session segment 2",
        "shape": "opencode",
    }
