"""What fills the context: ``ctxwin.breakdown.attribute`` and ``estimate --by``.

``by_kind`` sums to ``estimated_tokens`` exactly, with explain's arithmetic, for every
wire format (bodies built here with every kind of piece) and every run of every file of
the examples and the corpus (``CTXWIN_CORPUS``, else ``../shared/corpus``); the tools'
tokens sum to ``tool_calls + tool_results``; ``by_tool`` names the tools of a Claude Code,
a Codex and a Gemini CLI session.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxwin import core
from ctxwin.breakdown import KINDS, UNNAMED_TOOL, attribute, explain
from ctxwin.errors import CtxwinError
from ctxwin.runs import read_runs
from ctxwin.runs.simulate import current_run, next_plan
from ctxwin.settings import Settings
from fidelity.corpus import corpus_path
from tests.conftest import Cli
from tests.samples import b64, png

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.json"))
CORPUS = corpus_path()
CORPUS_FILES = sorted(
    p for p in CORPUS.rglob("*") if p.is_file() and p.name not in ("MANIFEST.tsv", "README.md")
)
AGENT_TOOLS = CORPUS / "agent_tools"


def _consistent(plan: core.Plan) -> dict[str, Any]:
    """``attribute(plan)``, checked: the kinds sum to the estimate, the tools to the tool
    kinds, the overhead is explain's outside part less what the kinds outside the
    messages hold (the same arithmetic), and no kind but the overhead is negative."""
    filled = attribute(plan)
    kinds = filled["by_kind"]
    assert tuple(kinds) == KINDS
    assert sum(kinds.values()) == plan.result.estimated_tokens
    tools = sum(use["tokens"] for use in filled["by_tool"].values())
    assert tools == kinds["tool_calls"] + kinds["tool_results"]
    assert all(v >= 0 for k, v in kinds.items() if k != "overhead"), kinds
    detail = explain(plan)
    assert kinds["overhead"] - detail["anchored"] - detail["overhead"] >= 0
    sizes = [r["tokens"] for r in filled["largest_results"]]
    assert sizes == sorted(sizes, reverse=True)
    return dict(filled)


def _plan(body: Any, **changes: Any) -> core.Plan:
    return core.plan_body(body, Settings(context_length=10**6, **changes))


IMAGE = b64(png(64, 64))

BODIES: dict[str, Any] = {
    "anthropic": {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "system": "You are terse.",
        "tools": [{"name": "read", "input_schema": {"type": "object"}}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Look at this."},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": IMAGE},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "I should read it.", "signature": "s"},
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a.py"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "print(1)\n" * 40}
                ],
            },
            {"role": "assistant", "content": "Done."},
        ],
    },
    "openai-chat": {
        "model": "gpt-4o",
        "tools": [{"type": "function", "function": {"name": "read", "parameters": {}}}],
        "messages": [
            {"role": "system", "content": "You are terse."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Look at this."},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{IMAGE}"}},
                ],
            },
            {
                "role": "assistant",
                "content": "Reading.",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "read", "arguments": '{"path": "a.py"}'},
                    },
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "grep", "arguments": '{"q": "x"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "print(1)\n" * 40},
            {"role": "tool", "tool_call_id": "c2", "content": "a.py:1"},
            {"role": "assistant", "content": "Done."},
        ],
    },
    "openai-responses": {
        "model": "gpt-5",
        "instructions": "You are terse.",
        "tools": [{"type": "function", "name": "read", "parameters": {}}],
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Look at this."},
                    {"type": "input_image", "image_url": f"data:image/png;base64,{IMAGE}"},
                ],
            },
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Read it."}]},
            {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "print(1)\n" * 40},
            {"type": "web_search_call", "id": "ws1", "status": "completed"},
            {"role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
        ],
    },
    "gemini": {
        "systemInstruction": {"parts": [{"text": "You are terse."}]},
        "tools": [{"functionDeclarations": [{"name": "read"}]}],
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "Look at this."},
                    {"inlineData": {"mimeType": "image/png", "data": IMAGE}},
                ],
            },
            {
                "role": "model",
                "parts": [
                    {"text": "I should read it.", "thought": True},
                    {"text": "Reading."},
                    {"functionCall": {"name": "read", "args": {"path": "a.py"}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "read", "response": {"out": "print(1)\n" * 40}}}
                ],
            },
            {"role": "model", "parts": [{"text": "Done."}]},
        ],
    },
}


@pytest.mark.parametrize("fmt", sorted(BODIES))
def test_every_kind_of_every_format_is_found(fmt: str) -> None:
    """A body holding a piece of every kind its format has: each kind gets tokens, the
    tool is named with its calls and results, and the kinds sum to the estimate."""
    plan = _plan(BODIES[fmt])
    assert plan.transcript.format == fmt
    filled = _consistent(plan)
    kinds = filled["by_kind"]
    expected = {"system", "tools", "user", "assistant", "tool_calls", "tool_results", "media"}
    if fmt != "openai-chat":  # Chat has no thinking
        expected.add("thinking")
    assert {k for k, v in kinds.items() if v > 0} >= expected, kinds
    read = filled["by_tool"]["read"]
    assert read["calls"] == 1 and read["results"] == 1 and read["tokens"] > 0
    biggest = filled["largest_results"][0]
    assert biggest["tool"] == "read" and biggest["tokens"] > 40
    # the result is the largest piece of its message: at most its message's estimate
    assert biggest["tokens"] <= plan.result.estimated_tokens


def test_a_chat_message_of_parallel_calls_names_each_tool() -> None:
    filled = _consistent(_plan(BODIES["openai-chat"]))
    grep = filled["by_tool"]["grep"]
    assert (
        grep["calls"] == grep["results"] == 1
        and 0 < grep["tokens"] < filled["by_tool"]["read"]["tokens"]
    )
    assert next(iter(filled["by_tool"])) == "read"  # the most first


def test_a_result_without_a_known_call_is_unnamed() -> None:
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "nowhere", "content": "x" * 300},
        ],
    }
    filled = _consistent(_plan(body))
    assert filled["by_tool"][UNNAMED_TOOL]["results"] == 1


def test_an_anthropic_compaction_leaves_what_it_drops_uncounted() -> None:
    """The blocks before a compaction block cost nothing: they are in no kind."""
    body = dict(BODIES["anthropic"])
    body["messages"] = [
        *body["messages"][:3],
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t2", "name": "read", "input": {}},
                {"type": "compaction", "content": "Summary of it all."},
                {"type": "text", "text": "Go on."},
            ],
        },
        {"role": "user", "content": "next"},
    ]
    filled = _consistent(_plan(body))
    assert filled["by_kind"]["media"] == 0 and filled["by_kind"]["tool_results"] == 0


def test_a_strategy_plan_is_attributed_as_given() -> None:
    """Under an editing strategy the report's estimate is the input's: so is what fills it."""
    from ctxwin.cli.commands import make_strategy

    strategy = make_strategy("clear-results,drop-turns", 0, "", 0, 0.0)
    plan = core.plan_body(
        BODIES["anthropic"], Settings(context_length=650, max_tokens=0, strategy=strategy)
    )
    assert plan.changed
    _consistent(plan)


def test_a_learned_overhead_and_an_anchor_go_to_the_overhead() -> None:
    """A session's overhead learned from usage, and what its anchored estimate differs by
    from the bound's sum, are in ``overhead``: with the system prompt and the tools (none,
    in a Claude Code log), explain's ``outside_messages``."""
    from tests.test_sessions import cc_line, jsonl, tool_result, tool_use

    data = jsonl(
        cc_line("user", "u1", None, "read the file"),
        cc_line("assistant", "a1", "u1", tool_use("t1"), usage=20_000),
        cc_line("user", "r1", "a1", tool_result("t1")),
        cc_line("assistant", "a2", "r1", tool_use("t2"), usage=20_150),
        cc_line("user", "r2", "a2", tool_result("t2")),
        cc_line("assistant", "a3", "r2", [{"type": "text", "text": "done"}], usage=20_400),
        cc_line("user", "u2", "a3", "thanks"),
    )
    run = current_run(read_runs(data))
    assert run is not None and run.shape == "claude-code"
    plan = next_plan(run, Settings())
    filled = _consistent(plan)
    kinds = filled["by_kind"]
    assert kinds["system"] == kinds["tools"] == 0
    detail = explain(plan)
    assert detail["overhead"] > 0
    assert kinds["overhead"] == detail["outside_messages"]
    assert filled["by_tool"]["Read"] == {
        "calls": 2,
        "results": 2,
        "tokens": kinds["tool_calls"] + kinds["tool_results"],
    }


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_are_attributed_exactly(path: Path) -> None:
    for run in read_runs(path.read_bytes()):
        _consistent(next_plan(run, Settings()))


@pytest.mark.skipif(not CORPUS_FILES, reason="the corpus is absent")
def test_every_run_of_every_corpus_file_is_attributed_exactly() -> None:
    """Every run ctxwin reads in every file of the corpus (the formats no reader knows
    yet are refused, and skipped), every agent-tool sample among them."""
    attributed: set[Path] = set()
    for path in CORPUS_FILES:
        for run in read_runs(path.read_bytes()):
            if run.error is not None:
                continue
            try:
                plan = next_plan(run, Settings())
            except CtxwinError:
                continue
            _consistent(plan)
            attributed.add(path)
    samples = {p for p in CORPUS_FILES if AGENT_TOOLS in p.parents}
    assert samples and samples <= attributed, sorted(map(str, samples - attributed))
    assert len(attributed) >= len(samples) + 20  # the recorded runs too


SESSION_TOOLS = {
    "claude-code/drmaciver-coverage-test-fix.jsonl": {"Read", "Edit", "Bash"},
    "codex/cpolar-connect-rollout-2025-09-16T12-47-48-9cd28a74-da7e-4458-a91a-fffec2be9d7a.jsonl": {
        "shell",
        "update_plan",
    },
    "gemini-cli/gemini-cli-repo-trajectory.json": {"read_file", "replace", "run_shell_command"},
}


@pytest.mark.skipif(not AGENT_TOOLS.is_dir(), reason="the corpus is absent")
@pytest.mark.parametrize("name", sorted(SESSION_TOOLS), ids=lambda n: n.split("/")[0])
def test_by_tool_names_the_tools_of_an_agent_session(name: str, cli: Cli) -> None:
    result = cli("estimate", str(AGENT_TOOLS / name), "--by", "tool", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert set(report["by_tool"]) >= SESSION_TOOLS[name]
    assert sum(report["by_kind"].values()) == report["estimated_tokens"]
    for use in report["by_tool"].values():
        assert use["calls"] >= 0 and use["results"] >= 0
    results = report["largest_results"]
    assert results and all(r["tool"] in report["by_tool"] for r in results)


def test_estimate_by_prints_what_fills_the_context(cli: Cli) -> None:
    path = str(ROOT / "examples" / "agent-run.json")
    by_tool = cli("estimate", path, "--by", "tool", terminal_width=120)
    assert by_tool.exit_code == 0, by_tool.output
    assert "what fills the context, by tool" in by_tool.stdout
    assert "read_file" in by_tool.stdout and "largest tool results" in by_tool.stdout
    by_kind = cli("estimate", path, "--by", "kind", terminal_width=120)
    assert "tool results" in by_kind.stdout and "tool definitions" in by_kind.stdout
    plain = json.loads(cli("estimate", path, "--json").stdout)
    assert "by_kind" not in plain  # only asked for: a plain estimate prices once
    wrong = cli("estimate", path, "--by", "file")
    assert wrong.exit_code == 2 and "--by" in wrong.stderr


def test_estimate_by_on_the_fast_path_agrees(cli: Cli) -> None:
    """The console entry point (no Typer) gives the same report."""
    path = str(ROOT / "examples" / "agent-run.json")
    fast = cli.process("estimate", path, "--by", "kind", "--json")
    assert fast.returncode == 0, fast.stderr
    typer = cli("estimate", path, "--by", "kind", "--json")
    assert json.loads(fast.stdout) == json.loads(typer.stdout)
