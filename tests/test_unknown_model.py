"""A model name the table does not know: typed with ``--model`` and no window, it is most
likely a typo (exit 2, naming the closest names); named by the body, it keeps the fallback
window with a warning, in every command and in the library's report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

import ctxwin
from ctxwin import core
from ctxwin.tokens.models import closest_models, did_you_mean
from tests.conftest import Cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = str(ROOT / "examples" / "agent-run.json")


def test_the_closest_names() -> None:
    assert closest_models("gpt4o")[0] == "gpt-4o"
    assert closest_models("openai/gpt-4o-mni")[0] == "gpt-4o-mini"
    assert closest_models("claude-opus-46")[0] == "claude-opus-4-6"
    assert closest_models("zzzz-qqqq") == []
    assert did_you_mean("gpt4o").startswith("did you mean gpt-4o?")
    assert did_you_mean("zzzz-qqqq") == ""


COMMANDS: dict[str, list[str]] = {
    "estimate": ["estimate", EXAMPLE],
    "prune": ["prune", EXAMPLE, "-"],
    "replay": ["replay", EXAMPLE],
    "check": ["check", EXAMPLE],
    "calibrate": ["calibrate", EXAMPLE],
    "proxy": ["proxy", "--upstream", "http://127.0.0.1:9"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_unknown_model_flag_is_a_usage_error(command: str, cli: Cli) -> None:
    result = cli(*COMMANDS[command], "-m", "gpt4o")
    assert result.exit_code == 2, result.output
    assert "unknown model 'gpt4o'" in result.stderr
    assert "did you mean gpt-4o?" in result.stderr
    assert "--context-length" in result.stderr


@pytest.mark.parametrize("command", ["estimate", "prune"])
def test_the_fast_path_refuses_it_too(command: str, cli: Cli) -> None:
    """``estimate`` and ``prune`` without Typer (the README's "gate a send" recipe): exit 2,
    nothing written."""
    result = cli.process(*COMMANDS[command], "-m", "gpt4o")
    assert result.returncode == 2
    assert b"did you mean gpt-4o?" in result.stderr and result.stdout == b""


def test_a_window_given_lets_an_unknown_name_through(cli: Cli, tmp_path: Path) -> None:
    given = cli("estimate", EXAMPLE, "-m", "my-local-model", "-c", "32000", "--json")
    assert given.exit_code == 0, given.output
    report = json.loads(given.stdout)
    assert report["context_length_source"] == "flag" and report["warnings"] == []
    spec = tmp_path / "spec.json"
    spec.write_text('{"context_length": 32000, "max_output_tokens": 1000}')
    assert (
        cli("estimate", EXAMPLE, "-m", "my-local-model", "--model-spec", str(spec)).exit_code == 0
    )
    # a known name, a dated release of it, a provider prefix: no error
    for name in ("gpt-4o", "gpt-4o-2024-08-06", "openai/gpt-4o", "claude-opus-4-6[1m]"):
        assert cli("estimate", EXAMPLE, "-m", name).exit_code == 0, name


def _body_with_calls(model: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(Path(EXAMPLE).read_text())
    body["model"] = model
    return body


def test_a_bodys_unknown_model_warns_in_every_command(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "body.json"
    path.write_bytes(orjson.dumps(_body_with_calls("gpt4o")))
    log = tmp_path / "log.jsonl"
    body = _body_with_calls("gpt4o")
    pair = {"request": body, "response": {"usage": {"prompt_tokens": 16_000}}}
    log.write_bytes(orjson.dumps(pair) + b"\n" + orjson.dumps(pair) + b"\n")
    words = "model 'gpt4o' is not in the model table"
    est = cli("estimate", str(path), "--json")
    assert words in est.stderr and "did you mean gpt-4o?" in est.stderr
    assert any(words in w for w in json.loads(est.stdout)["warnings"])
    pruned = cli("prune", str(path), str(tmp_path / "out.json"), "--report", str(tmp_path / "r"))
    assert words in pruned.stderr
    assert any(words in w for w in json.loads((tmp_path / "r").read_text())["warnings"])
    replayed = cli("replay", str(log), "--json")
    assert words in replayed.stderr
    assert any(words in w for w in json.loads(replayed.stdout)["runs"][0]["warnings"])
    checked = cli("check", str(path), "--jsonl")
    assert words in checked.stderr
    assert any(words in w for w in json.loads(checked.stdout)["warnings"])
    calibrated = cli("calibrate", str(log))
    assert calibrated.exit_code == 0 and words in calibrated.stderr
    quiet = cli("check", str(path), "-q")
    assert "warning" not in quiet.stderr


def test_the_library_report_warns() -> None:
    body = _body_with_calls("gpt4o")
    plan = core.plan_body(body)
    (warning,) = plan.report()["warnings"]
    assert "did you mean gpt-4o?" in warning and "8,192" in warning
    _, pruned = ctxwin.prune({**body, "model": "gpt-4o"})
    assert pruned.report()["warnings"] == []
    nameless = core.plan_body({"messages": body["messages"]})
    assert nameless.report()["warnings"] == [
        "unknown context length (no model named); assuming 8,192 tokens"
    ]
