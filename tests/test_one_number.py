"""One number for one file: ``estimate``, ``prune``, ``check`` and ``replay`` report the
same ``estimated_tokens`` for the same input and settings, as the library does.

Over the examples and, when it is here, every agent-tool session of the corpus
(``CTXWIN_CORPUS``, else ``../shared/corpus``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from ctxwin import ContextWindowManager, codec, core
from ctxwin.errors import CtxwinError
from ctxwin.runs import read_runs
from ctxwin.runs.simulate import current_run, next_plan, replay_run
from ctxwin.settings import Settings
from fidelity.corpus import corpus_path
from tests.conftest import Cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.json"))
CORPUS = corpus_path()
SESSIONS = sorted(
    p
    for folder in ("agent_tools", "agent_tools_next")
    for p in (CORPUS / folder).rglob("*")
    if p.is_file() and p.suffix in (".json", ".jsonl")
)


def _commands(cli: Cli, path: Path, tmp: Path, *flags: str) -> dict[str, Any]:
    """What each command reports for ``path``: estimate's and prune's reports, check's row
    and replay's next request (of the run the file continues)."""
    est = cli("estimate", "--json", str(path), *flags)
    assert est.exit_code in (0, 3), est.output
    report = tmp / "report.json"
    pruned = cli("prune", str(path), str(tmp / "out.json"), "--report", str(report), "-q", *flags)
    assert pruned.exit_code in (0, 3), pruned.output
    check = cli("check", "--json", "-j", "1", str(path), *flags)
    replay = cli("replay", "--json", "-j", "1", str(path), *flags)
    estimate = json.loads(est.stdout)
    run = estimate.get("session", {}).get("run", "")
    rows = [r for r in json.loads(check.stdout)["rows"] if r["run"] == run]
    runs = [r for r in json.loads(replay.stdout)["runs"] if r["run"] == run]
    assert len(rows) == 1 and len(runs) == 1, (path, run)
    return {
        "estimate": estimate,
        "prune": json.loads(report.read_text()),
        "check": rows[0],
        "replay": runs[0],
    }


def _library(path: Path, settings: Settings) -> int:
    """The estimate the library gives the request ``path`` stands for."""
    data = path.read_bytes()
    body = codec.parse(data) if not codec.looks_like_jsonl(data) else None
    runs = read_runs(data)
    run = current_run(runs)
    assert run is not None
    tokens = next_plan(run, settings).result.estimated_tokens
    if run.shape in ("chat", "body", "messages"):  # a request body: core and the manager too
        assert core.plan_body(body, settings).estimated_tokens == tokens
        assert ContextWindowManager(settings=settings).evaluate(body).estimated_tokens == tokens
    nxt = replay_run(run, settings)["next_request"]
    if nxt is not None:
        assert nxt.get("estimated_tokens") == tokens
    return tokens


def _one_number(cli: Cli, path: Path, tmp: Path, settings: Settings, *flags: str) -> None:
    got = _commands(cli, path, tmp, *flags)
    tokens = got["estimate"]["estimated_tokens"]
    assert isinstance(tokens, int)
    assert got["check"]["estimated_tokens"] == tokens
    nxt = got["replay"]["next_request"]
    if nxt is not None:  # a call log has none: its next request is its last call
        assert nxt["estimated_tokens"] == tokens
        assert got["check"]["peak_context_use"] == got["replay"]["peak_context_use"]
    assert _library(path, settings) == tokens
    report = got["prune"]
    after = report["estimated_tokens_after"]
    if report["estimated_tokens"] is None:  # turns dropped unpriced: a lower bound instead
        assert report["pruned"] and not report["fits"] and report["raw_tokens"] is None
        assert 0 < report["dropped_tokens_at_least"] <= tokens - after
    else:
        assert report["estimated_tokens"] == tokens
        assert report["dropped_tokens_at_least"] == tokens - after
    assert after == got["estimate"]["estimated_tokens_after"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_have_one_number(path: Path, cli: Cli, tmp_path: Path) -> None:
    _one_number(cli, path, tmp_path, Settings())


@pytest.mark.parametrize("window", [16_000, 6_000])
def test_a_prune_that_drops_unpriced_turns_says_so(window: int, cli: Cli, tmp_path: Path) -> None:
    """agent-run.json at a small window: the commands still agree; prune's report gives no
    other total, only a lower bound of what it dropped."""
    path = ROOT / "examples" / "agent-run.json"
    _one_number(cli, path, tmp_path, Settings(context_length=window), "-c", str(window))
    out = cli("prune", str(path), str(tmp_path / "out.json"), "-c", str(window))
    exact = cli("estimate", "--json", str(path), "-c", str(window))
    total = json.loads(exact.stdout)["estimated_tokens"]
    line = out.stderr.strip()
    assert "≥" in line and "tokens kept" in line and f"{total:,}" not in line


@pytest.mark.skipif(not SESSIONS, reason="the corpus is absent")
@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.name[:40])
def test_sessions_have_one_number(path: Path, cli: Cli, tmp_path: Path) -> None:
    _one_number(cli, path, tmp_path, Settings())


def test_a_call_log_names_the_call_it_cannot_read() -> None:
    """The next-request plan of a call log reads every call with usage: a broken call
    before the last is the one the invalid row names, with why."""
    from ctxwin.runs import Call, Run
    from ctxwin.runs.simulate import check_run

    good = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    usage = {"prompt_tokens": 12}
    run = Run(
        "log",
        "pairs",
        recorded=[Call({"nothing": 1}, usage, "line 1"), Call(good, usage, "line 2")],
    )
    row = check_run(run, Settings())
    assert row["status"] == "invalid" and row["requests"] == 2
    assert row["error"].startswith("line 1: ") and row["reason"] == "unsupported_format"
    fine = check_run(Run("log", "pairs", recorded=[Call(good, usage, "line 1")]), Settings())
    assert fine["status"] == "fits" and fine["where"] == "line 1"
    assert (
        fine["estimated_tokens"]
        == next_plan(
            Run("log", "pairs", recorded=[Call(good, usage, "line 1")]), Settings()
        ).result.estimated_tokens
    )


@settings(max_examples=40, deadline=None)
@st.composite
def _runs(draw: st.DrawFn) -> list[Any]:
    """A transcript of whole turns (a call and its result each), so a window can cut it
    anywhere."""
    messages: list[Any] = [{"role": "system", "content": "s"}, {"role": "user", "content": "go"}]
    sizes = draw(st.lists(st.integers(0, 3000), max_size=20))
    for k, size in enumerate(sizes):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        text = draw(st.sampled_from(["x", "word ", "éß ", '{"a": 1}\n', "\u4e2d"])) * size
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": text})
    return messages


@given(_runs(), st.floats(0.2, 1.3), st.lists(st.floats(0.7, 1.3)))
def test_generated_transcripts_have_one_number(
    messages: list[Any], fraction: float, reported: list[float]
) -> None:
    """Over generated transcripts, with and without usage, at windows that cut them or not:
    the plan of a body, check's row, replay's next request and a lazy prune agree (the
    prune's estimate unknown only when it dropped turns it never priced, bounded then)."""
    from ctxwin.core import load
    from ctxwin.runs import Run
    from ctxwin.runs.simulate import check_run
    from ctxwin.view import ASSISTANT

    body = {"model": "gpt-4o", "messages": messages}
    try:
        whole = core.plan_body(body, context_length=10**9).estimated_tokens
    except CtxwinError:
        return  # a transcript no command reads
    # a window that cuts the transcript or not; usage around the raw estimate of each call
    options = Settings(context_length=max(100, int(whole * fraction / 0.97)), max_tokens=0)
    t = load(body)
    view = t.view
    calls = [i for i, item in enumerate(view.items) if item.role == ASSISTANT]
    prefix = list(view.base)
    raw_before = {}
    for i, item in enumerate(view.items):
        raw_before[i] = t.estimator.raw(prefix)
        prefix = [a + b for a, b in zip(prefix, item.cost, strict=True)]
    usage_at: dict[int, Any] = {  # each call's usage near the raw estimate of its request
        i: {"prompt_tokens": max(1, int(n * raw_before[i]))}
        for i, n in zip(calls, reported, strict=False)
    }
    run = Run("r", "chat", body=body, usage_at=usage_at)
    try:
        planned = next_plan(run, options)
    except CtxwinError:
        return  # a transcript the fit refuses: every command refuses it
    tokens = planned.result.estimated_tokens
    event(f"{planned.status}, usage: {bool(usage_at)}")
    assert check_run(run, options)["estimated_tokens"] == tokens
    nxt = replay_run(run, options)["next_request"]
    assert nxt is not None and nxt["estimated_tokens"] == tokens
    if not usage_at:
        assert core.plan_body(body, options).estimated_tokens == tokens
        lazy = core.plan_body(body, options, lazy=True).result
        event(f"lazy priced: {lazy.priced}")
        if lazy.priced:
            assert lazy.estimated_tokens == tokens
        else:
            assert (
                lazy.pruned and 0 <= lazy.dropped_at_least <= tokens - lazy.estimated_tokens_after
            )
            # what the walk priced is over the budget, unless even the floor is
            assert lazy.overflow_at_floor or lazy.dropped_at_least > 0
        assert lazy.estimated_tokens_after == planned.result.estimated_tokens_after
