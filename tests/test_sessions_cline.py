"""The Cline / Roo Code / Kilo Code reader: task folders (tests/fixtures/sessions/cline,
shapes from the extensions' sources), their usage from metrics or ui_messages.json."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson

from ctxwin.fitting.calibration import prompt_tokens_from_usage
from ctxwin.recorded import Run
from ctxwin.runs import read_runs
from ctxwin.sessions import cline, detect
from tests.conftest import Cli

FIXTURES = Path(__file__).parent / "fixtures" / "sessions" / "cline"


def runs_of(task: str) -> dict[str, Run]:
    path = FIXTURES / task / cline.HISTORY
    runs = read_runs(path.read_bytes(), path=str(path))
    assert all(r.error is None and r.shape == "cline" for r in runs), runs
    return {r.name: r for r in runs}


def prompts(run: Run) -> list[int | None]:
    return [None if c.usage is None else prompt_tokens_from_usage(c.usage) for c in run.calls()]


def test_detected_by_shape() -> None:
    for task in sorted(FIXTURES.iterdir()):
        history = orjson.loads((task / cline.HISTORY).read_bytes())
        assert detect([history], False) == "cline", task
        assert detect([orjson.loads((task / cline.UI).read_bytes())], False) == "cline"
    # a plain Anthropic message list is not a task's
    assert not cline.detect([[{"role": "user", "content": "hi"}]], False)


def test_metrics_on_the_messages_are_the_usage() -> None:
    [run] = runs_of("cline-metrics").values()
    # metrics.tokens.prompt: the whole prompt, cached tokens included
    assert prompts(run) == [14210, 16100, 16300]
    assert run.body["model"] == "claude-sonnet-4-5-20250929" and run.current
    sent = run.body["messages"][1]
    assert set(sent) == {"role", "content"}  # ts, id, modelInfo, metrics are not sent
    assert [b["tool_use_id"] for b in run.body["messages"][2]["content"][:2]] == [
        "toolu_1",
        "toolu_2",
    ]


def test_usage_from_ui_messages_a_retried_request_and_a_deleted_range() -> None:
    runs = runs_of("cline-ui")
    assert list(runs) == ["task segment 1", "task segment 2"]
    one, two = runs.values()
    # tokensIn + cacheReads + cacheWrites (Anthropic); the retried request's usage is the
    # one that succeeded (11,390 + 150 + 3)
    assert prompts(one) == [9000 + 8990, 3 + 8990 + 2400, 3 + 11390 + 150]
    assert prompts(two) == [3 + 2000 + 300]
    # conversationHistoryDeletedRange [1, 4]: messages 1-4 are not sent from then on
    assert [m["content"][0]["text"][:10] for m in two.body["messages"] if m["role"] == "user"] == [
        "<task>\nSum",
        "[list_file",
    ]
    assert two.current and not one.current
    assert two.body["model"] == "claude-3-7-sonnet-20250219"  # from task_metadata.json


def test_roo_condensing_and_truncation_hide_what_they_tag() -> None:
    runs = runs_of("roo-condense")
    assert list(runs) == ["task segment 1", "task segment 2", "task segment 3"]
    one, two, three = runs.values()
    assert prompts(one) == [3 + 7000]
    assert prompts(two) == [2600]  # apiProtocol openai: tokensIn holds the cached tokens
    assert prompts(three) == [2900]
    text = orjson.dumps(two.body).decode()
    assert "call_A" not in text and "## Summary" in text  # condensed away, summary sent
    text = orjson.dumps(three.body).decode()
    assert "call_B" not in text and "Sliding window truncation" in text
    # the summary and the marker are no calls
    assert all(len(r.calls()) == 1 for r in runs.values())


def test_requests_without_an_index_pair_in_order() -> None:
    [run] = runs_of("kilo-in-order").values()
    assert prompts(run) == [6100, 9200]


def test_without_ui_messages_there_is_no_usage(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "cline-ui" / cline.HISTORY, tmp_path / cline.HISTORY)
    path = tmp_path / cline.HISTORY
    [run] = read_runs(path.read_bytes(), path=str(path))
    assert prompts(run) == [None] * 4
    # and without its path (stdin), likewise
    [run] = read_runs(path.read_bytes())
    assert run.shape == "cline" and prompts(run) == [None] * 4


def test_the_files_that_go_with_it_are_not_read_alone(tmp_path: Path, cli: Cli) -> None:
    ui = FIXTURES / "cline-ui" / cline.UI
    assert read_runs(ui.read_bytes(), path=str(ui)) == []
    shutil.copy(ui, tmp_path / cline.UI)
    [alone] = read_runs(ui.read_bytes(), path=str(tmp_path / cline.UI))
    assert (
        alone.error
        == "this cline file goes with api_conversation_history.json, which is not beside it"
    )
    result = cli.process("check", str(FIXTURES), "--json")
    report = orjson.loads(result.stdout)
    assert {Path(r["path"]).name for r in report["rows"]} == {cline.HISTORY}
    assert report["summary"]["counts"]["invalid"] == 0
    result = cli.process("estimate", str(ui))
    assert result.returncode == 1 and b"give that one" in result.stderr


def test_estimate_reads_the_task_folder(cli: Cli) -> None:
    result = cli.process("estimate", str(FIXTURES / "cline-ui" / cline.HISTORY), "--json")
    assert result.returncode == 0, result.stderr
    report = orjson.loads(result.stdout)
    assert report["session"] == {"run": "task segment 2", "shape": "cline"}
    assert report["estimated_tokens"] >= 2303
