"""The context policies of ``replay --compare``, each checked call by call against its
documented behaviour on generated Claude Code sessions (docs/strategies.md cites the
providers' and agents' documentation)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxwin.errors import UsageError
from ctxwin.runs import read_runs
from ctxwin.runs.policies import (
    CLEAR_KEEP,
    CLEAR_TRIGGER,
    FAMILIES,
    Clear,
    ClearThinking,
    Compact,
    Policy,
    Request,
    Timeline,
    _prompt,
    candidates,
    compare_row,
    outcomes,
    parse_policy,
    policies,
    recommend,
)
from ctxwin.runs.simulate import replay_run
from ctxwin.settings import Settings
from fidelity.corpus import corpus_path
from tests.conftest import Cli
from tests.test_sessions import cc_line, jsonl, tool_result, tool_use

GROWTH = 3_000
"""What each call adds to the logged prompt: its tool call and the result."""
START = 15_000
"""The first call's prompt: the system prompt and tools."""


def _session(
    calls: int, thinking: bool = False, tools: tuple[str, ...] = ("Read",), turns: int = 0
) -> Any:
    """A Claude Code session of ``calls`` calls, each a tool use whose result is large,
    logged with Claude Code's usage (each call reads the whole prompt before); the tool
    of call k is ``tools[k % len(tools)]``; with ``thinking``, each response thinks first;
    with ``turns``, the user prompts again after every ``turns`` calls."""
    lines: list[dict[str, Any]] = [cc_line("user", "u0", None, "fix the bug")]
    parent = "u0"
    before = 0
    for k in range(calls):
        prompt = START + GROWTH * k
        use = tool_use(f"t{k}")
        use[0]["name"] = tools[k % len(tools)]
        line = cc_line("assistant", f"a{k}", parent, use, mid=f"msg_m{k}")
        if thinking:
            think = {"type": "thinking", "thinking": f"plan {k} " * 200, "signature": "sig"}
            line["message"]["content"] = [think, *use]
        line["message"]["usage"] = {
            "input_tokens": 1,
            "cache_read_input_tokens": before,
            "cache_creation_input_tokens": prompt - before - 1,
            "output_tokens": 50,
        }
        lines.append(line)
        lines.append(cc_line("user", f"r{k}", f"a{k}", tool_result(f"t{k}")))
        lines[-1]["message"]["content"][0]["content"] = f"line {k} = 1\n" * 400
        parent = f"r{k}"
        if turns and (k + 1) % turns == 0:
            lines.append(cc_line("user", f"p{k}", parent, "go on"))
            parent = f"p{k}"
        before = prompt - 1
    [run] = read_runs(jsonl(*lines))
    return run


SETTINGS = Settings(context_length=200_000)


def _timeline(run: Any) -> Timeline:
    return Timeline(run, SETTINGS, replay_run(run, SETTINGS))


def _steps(tl: Timeline, decide: Any) -> list[tuple[int, int, dict[int, int]]]:
    """``(prompt before the policy moves, prompt sent, what is cleared)`` of each call."""
    req = Request(tl)
    out = []
    for k in range(len(tl.ends)):
        before = _prompt(tl, k, req)
        summary = decide(tl, k, req, before)
        if summary is not None:
            req.compact(tl.ends[k], summary)
        out.append((before, _prompt(tl, k, req), dict(req.saved)))
    return out


def test_the_timeline_sends_the_run_as_logged_when_a_policy_edits_nothing() -> None:
    run = _session(12)
    tl = _timeline(run)
    req = Request(tl)
    for k in range(12):
        assert _prompt(tl, k, req) == START + GROWTH * k
    # every result can be cleared, and saves at most its message
    assert len(tl.results) == 12
    assert all(0 < saved <= tl.tokens[item] for item, saved, _, _ in tl.results)


@pytest.mark.parametrize("keep", [1, 3])
def test_anthropic_clear_clears_nothing_below_the_trigger_and_all_but_keep_above(
    keep: int,
) -> None:
    run = _session(20)
    tl = _timeline(run)
    trigger = START + GROWTH * 8 + 10
    policy = parse_policy(f"anthropic-clear:trigger={trigger},keep={keep}")
    cleared_before: set[int] = set()
    for k, (before, sent, cleared) in enumerate(_steps(tl, Clear(policy))):
        if before <= trigger:
            assert set(cleared) == cleared_before  # nothing new below the trigger
            assert sent == before
            continue
        results = [r[0] for r in tl.results if r[0] < tl.ends[k]]
        # above it: every result but the newest keep is cleared, oldest first
        assert set(cleared) == set(results[: len(results) - keep])
        assert sent < before
        cleared_before = set(cleared)
    assert cleared_before  # the trigger was crossed


def test_anthropic_clear_clears_at_least_clear_at_least_tokens_at_a_time() -> None:
    run = _session(30)
    tl = _timeline(run)
    trigger = START + GROWTH * 6
    at_least = 5 * min(saved for _, saved, _, _ in tl.results)
    policy = parse_policy(f"anthropic-clear:trigger={trigger},keep=2,clear-at-least={at_least}")
    done: dict[int, int] = {}
    moves = 0
    for before, _sent, cleared in _steps(tl, Clear(policy)):
        new = {i: s for i, s in cleared.items() if i not in done}
        if new:
            moves += 1
            assert before > trigger
            assert sum(new.values()) >= at_least
        done = cleared
    assert moves >= 2


def test_anthropic_clear_never_clears_an_excluded_tool() -> None:
    run = _session(16, tools=("Read", "Bash"))
    tl = _timeline(run)
    policy = parse_policy(f"anthropic-clear:trigger={START},keep=1,exclude=Bash")
    bash = {item for item, _, tool, _ in tl.results if tool == "Bash"}
    assert bash
    for _, _, cleared in _steps(tl, Clear(policy)):
        assert not bash & set(cleared)


def test_anthropic_clear_breaks_the_cache_at_the_first_cleared_block() -> None:
    run = _session(20)
    base = Policy("as-logged")
    clear = parse_policy(f"anthropic-clear:trigger={START + GROWTH * 10},keep=2")
    logged, cleared = outcomes(run, SETTINGS, [base, clear])
    assert isinstance(logged, dict) and isinstance(cleared, dict)
    # clearing rewrites the prompt from the first cleared result on: more written than
    # the run wrote, fewer tokens sent
    assert cleared["cache_write_tokens"] > logged["cache_write_tokens"]
    assert sum(cleared["sent"]) < sum(logged["sent"])


def test_anthropic_clear_thinking_keeps_the_newest_turns_thinking() -> None:
    run = _session(12, thinking=True, turns=3)  # four user turns of three calls each
    tl = _timeline(run)
    assert len(tl.thinking) == 12
    for keep in (1, 2):
        policy = parse_policy(f"anthropic-clear-thinking:keep={keep}")
        for k, (_, _, cleared) in enumerate(_steps(tl, ClearThinking(policy))):
            sent = [i for i, _ in tl.thinking if i < tl.ends[k]]
            turns = sorted({tl.turn[i] for i in sent})
            # the thinking of every turn but the newest keep, each turn's whole tool loop
            assert set(cleared) == {i for i in sent if tl.turn[i] in turns[: -keep or None]}
            if len(turns) > keep:
                assert cleared
    # within one turn (a tool loop), no thinking is ever cleared
    one = _timeline(_session(12, thinking=True))
    policy = parse_policy("anthropic-clear-thinking")
    assert all(not cleared for _, _, cleared in _steps(one, ClearThinking(policy)))


def test_auto_compact_replaces_the_history_with_a_summary_at_its_threshold() -> None:
    run = _session(30)
    tl = _timeline(run)
    at = START + GROWTH * 10
    steps = _steps(tl, Compact(at, 2_000))
    compacted = [k for k, (before, sent, _) in enumerate(steps) if sent < before]
    assert compacted
    for k, (before, sent, _) in enumerate(steps):
        if k in compacted:
            assert before >= at  # only at the threshold
            assert sent == tl.before[k] + 2_000  # the summary alone after it
        else:
            assert before < at and sent == before
    # priced: one summarising call per compaction, its summary at the output price
    [row] = outcomes(run, SETTINGS, [parse_policy(f"auto-compact:at={at},summary=2000")])
    assert isinstance(row, dict)
    assert row["summary_calls"] == len(compacted)
    output = row["price"]["output"]
    assert row["summary_cost"] == pytest.approx(len(compacted) * 2_000 * output / 1e6)
    assert row["total_cost"] == pytest.approx(
        row["input_cost"] + row["output_cost"] + row["summary_cost"], abs=1e-5
    )


def test_auto_compact_presets_are_the_tools_thresholds() -> None:
    run = _session(4)
    [row] = outcomes(run, SETTINGS, [parse_policy("auto-compact:at=claude-code")])
    assert isinstance(row, dict) and row["summary_calls"] == 0  # 167,000 is not reached
    from ctxwin.runs.policies import compact_at

    rep = replay_run(run, SETTINGS)
    assert compact_at("claude-code", run, rep, SETTINGS) == 200_000 - 20_000 - 13_000
    assert compact_at(0.5, run, rep, SETTINGS) == 100_000
    assert compact_at(None, run, rep, SETTINGS) == 167_000  # the session's own tool


def test_anthropic_compact_fires_at_its_default_trigger() -> None:
    policy = parse_policy("anthropic-compact")
    assert policy.get("trigger") == 150_000
    run = _session(60)  # up to 192,000 tokens
    [row] = outcomes(run, SETTINGS, [policy])
    assert isinstance(row, dict) and row["summary_calls"] >= 1
    assert max(row["sent"]) < 150_000 + GROWTH


def test_as_logged_is_the_runs_own_bill() -> None:
    run = _session(8)
    rep = replay_run(run, SETTINGS)
    [row] = outcomes(run, SETTINGS, [Policy("as-logged")])
    assert isinstance(row, dict)
    assert row["cached_tokens"] == rep["reported_cached_tokens"]
    assert row["cache_write_tokens"] == rep["reported_cache_write_tokens"]
    assert row["input_cost"] == pytest.approx(rep["reported_input_cost"], abs=1e-5)
    assert row["sent"] == [START + GROWTH * k for k in range(8)]
    # 50 output tokens a call at Sonnet 4.5's $15 per million
    price = rep["price"]
    assert price is not None
    assert row["output_cost"] == pytest.approx(8 * 50 * price["output"] / 1e6)


ALL_KEYS = {
    "policy",
    "calls",
    "pruned_calls",
    "truncated_calls",
    "mean_tokens_sent",
    "min_tokens_sent",
    "cached_tokens",
    "cache_write_tokens",
    "input_cost",
    "overflow_calls",
    "summary_calls",
    "summary_cost",
    "output_cost",
    "total_cost",
}


def test_every_policy_gives_a_row_with_every_key() -> None:
    run = _session(12, thinking=True)
    chosen = [
        Policy(name) if not f.positional else parse_policy(f"{name}=0.45")
        for name, f in FAMILIES.items()
    ]
    for policy, outcome in zip(chosen, outcomes(run, SETTINGS, chosen), strict=True):
        assert isinstance(outcome, dict), outcome
        row = compare_row(policy.label, [outcome])
        assert set(row) >= ALL_KEYS
        assert row["total_cost"] is not None


def test_policies_are_read_as_written() -> None:
    read = policies(
        ["as-logged,just-fit,block=0.45,anthropic-clear:trigger=50000,keep=5,auto-compact"]
    )
    assert [p.label for p in read] == [
        "as-logged",
        "just-fit",
        "block=0.45",
        "anthropic-clear:trigger=50000,keep=5",
        "auto-compact",
    ]
    clear = read[3]
    assert clear.get("clear-at-least") == 0 and clear.get("keep") == 5
    assert Policy("anthropic-clear").get("trigger") == CLEAR_TRIGGER
    assert Policy("anthropic-clear").get("keep") == CLEAR_KEEP
    with pytest.raises(UsageError, match="anthropic-clear"):
        parse_policy("nope")
    with pytest.raises(UsageError, match="trigger, keep, clear-at-least, exclude, clear-inputs"):
        parse_policy("anthropic-clear:trig=5")
    with pytest.raises(UsageError):
        parse_policy("anthropic-clear:keep=-1")


def test_the_anthropic_config_is_a_valid_context_management_object() -> None:
    policy = parse_policy("anthropic-clear:trigger=60000,keep=4,clear-at-least=20000,exclude=a|b")
    config = policy.config()["anthropic"]["context_management"]
    [edit] = config["edits"]
    assert edit == {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "input_tokens", "value": 60000},
        "keep": {"type": "tool_uses", "value": 4},
        "clear_at_least": {"type": "input_tokens", "value": 20000},
        "exclude_tools": ["a", "b"],
    }
    thinking = parse_policy("anthropic-clear-thinking:keep=2").config()
    assert thinking["anthropic"]["context_management"]["edits"] == [
        {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 2}}
    ]
    orjson.dumps(config)  # JSON as it is
    # a compaction at 60 % of a 200,000-token window: Claude Code's override is a share of
    # its effective window (less 20,000 for the summary), LangChain's trigger a fraction
    compact = parse_policy("auto-compact:at=0.6").config(200_000)
    assert compact["claude-code"] == {"env": {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "67"}}
    assert compact["langchain"] == {"SummarizationMiddleware": {"trigger": ["fraction", 0.6]}}
    assert parse_policy("auto-compact:at=90000").config()["codex"] == {
        "model_auto_compact_token_limit": 90000
    }
    assert parse_policy("openai-compact:at=120000").config()["openai"] == {
        "context_management": [{"type": "compaction", "compact_threshold": 120000}]
    }


def test_recommend_picks_the_cheapest_within_the_floor_and_the_window() -> None:
    tried = [
        Policy("as-logged"),
        parse_policy("block=0.25"),
        parse_policy("block=0.5"),
        parse_policy("anthropic-clear:keep=1"),
    ]
    rows = [
        {"policy": p.label, "total_cost": c, "overflow_calls": o, "mean_tokens_sent": m}
        for p, (c, o, m) in zip(
            tried, [(10.0, 0, 100), (6.0, 0, 80), (4.0, 1, 90), (5.0, 0, 70)], strict=True
        )
    ]
    rec = recommend(rows, tried, 0.75)
    assert rec is not None and rec["policy"] == "block=0.25"  # 0.5 overflows, clear is thin
    assert rec["saving"] == 4.0
    assert rec["config"] == {"ctxwin": "--block 0.25"}
    assert recommend(rows, tried, 0.95) is None
    assert recommend(rows, tried, 0.5)["policy"] == "anthropic-clear:keep=1"  # type: ignore[index]


def test_the_grid_holds_the_named_policy_and_as_logged() -> None:
    named = parse_policy("anthropic-clear:keep=3")
    tried = candidates([named])
    assert tried[0] == Policy("as-logged") and tried[1] == named
    assert all(p.get("keep") == 3 for p in tried[1:])
    assert len({p.label for p in tried}) == len(tried) > 10


def _gemini_session(calls: int) -> Any:
    """A Gemini CLI ChatRecording session on Gemini 2.5 Pro whose calls log their cached
    prompt tokens (implicit caching: each reads the prompt before)."""
    messages: list[dict[str, Any]] = [{"id": "u", "type": "user", "content": "list files"}]
    for k in range(calls):
        prompt = 6_000 + 2_000 * k
        messages.append(
            {
                "id": f"g{k}",
                "type": "gemini",
                "content": "",
                "model": "gemini-2.5-pro",
                "toolCalls": [
                    {
                        "id": f"c{k}",
                        "name": "read_file",
                        "args": {"path": f"{k}.py"},
                        "result": [
                            {
                                "functionResponse": {
                                    "id": f"c{k}",
                                    "name": "read_file",
                                    "response": {"output": f"x{k} = 1\n" * 500},
                                }
                            }
                        ],
                    }
                ],
                "tokens": {
                    "input": prompt,
                    "cached": 0 if k == 0 else prompt - 2_000,
                    "output": 40,
                    "thoughts": 60,
                },
            }
        )
    [run] = read_runs(orjson.dumps({"sessionId": "g", "messages": messages}))
    return run


def test_gemini_sessions_are_priced_with_their_cache() -> None:
    run = _gemini_session(6)
    logged, cut = outcomes(run, SETTINGS, [Policy("as-logged"), Policy("just-fit")])
    assert isinstance(logged, dict) and isinstance(cut, dict)
    assert logged["cache_rules"] == {"kind": "implicit", "min_prefix": 2048}
    reads = sum(6_000 + 2_000 * k - 2_000 for k in range(1, 6))
    assert logged["cached_tokens"] == reads
    price = logged["price"]
    fresh = 6_000 + 2_000 * 5  # the first prompt, then 2,000 new tokens a call
    paid = fresh * price["input"] + reads * price["cache_read"]
    assert logged["input_cost"] == pytest.approx(paid / 1e6, rel=1e-4)
    assert logged["output_cost"] == pytest.approx(6 * 100 * price["output"] / 1e6)
    # the replay predicts the implicit cache's reads, no longer "no caching rules known"
    assert cut["cached_tokens"] is not None and cut["cached_tokens"] > 0
    assert cut["input_cost"] is not None


def _compacted_session(summary_words: int) -> bytes:
    """A session of 12 calls, then Claude Code's compaction (a ``compact_boundary`` and
    its summary of ``summary_words`` words), then one more call."""
    lines: list[dict[str, Any]] = [cc_line("user", "u0", None, "fix the bug")]
    parent = "u0"
    for k in range(12):
        prompt = START + GROWTH * k
        line = cc_line("assistant", f"a{k}", parent, tool_use(f"t{k}"), mid=f"msg_m{k}")
        line["message"]["usage"] = {"input_tokens": prompt, "output_tokens": 50}
        lines.append(line)
        lines.append(cc_line("user", f"r{k}", f"a{k}", tool_result(f"t{k}")))
        lines[-1]["message"]["content"][0]["content"] = f"line {k} = 1\n" * 400
        parent = f"r{k}"
    lines.append(
        {
            "type": "system",
            "subtype": "compact_boundary",
            "uuid": "b1",
            "parentUuid": None,
            "logicalParentUuid": parent,
        }
    )
    summary = "Summary: " + "the work so far " * (summary_words // 4)
    lines.append(cc_line("user", "c1", "b1", summary, isCompactSummary=True))
    lines.append(cc_line("assistant", "z", "c1", "continuing", usage=START))
    return bytes(jsonl(*lines))


def test_compaction_summaries_are_sized_from_the_sessions_own_records() -> None:
    from ctxwin.runs.policies import SUMMARY_TOKENS
    from ctxwin.runs.replaying import ReplayedRun, replay_bytes

    at = START + GROWTH * 5
    costs = []
    for words in (400, 4_000):
        done = replay_bytes(
            _compacted_session(words),
            "s.jsonl",
            SETTINGS,
            chosen=[parse_policy(f"auto-compact:at={at}")],
        )
        first = done.runs[0]
        assert isinstance(first, ReplayedRun)
        [row] = first.results
        assert isinstance(row, dict) and row["summary_calls"] >= 1
        per_summary = row["summary_cost"] / row["summary_calls"] / row["price"]["output"] * 1e6
        costs.append(per_summary)
    small, large = costs
    # about a token a word (and not ctxwin's default when the session has its own)
    assert 200 < small < 1_000 < large < 8_000 != SUMMARY_TOKENS


# --- the recorded Claude Code and Codex sessions -----------------------------------------

AGENT_TOOLS = corpus_path() / "agent_tools"

SESSIONS = sorted(
    [*AGENT_TOOLS.glob("claude-code/*.jsonl"), *AGENT_TOOLS.glob("codex/*.jsonl")],
    key=lambda p: p.name,
)
COMPARED = "as-logged,just-fit,block=0.45,anthropic-clear,auto-compact"

corpus = pytest.mark.skipif(not AGENT_TOOLS.is_dir(), reason="../shared/corpus is absent")


@pytest.mark.corpus
@corpus
@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.name[:40])
def test_every_session_compares_every_policy_with_every_key(path: Path, cli: Cli) -> None:
    out = cli("replay", str(path), "--compare", COMPARED, "--json", "--quiet")
    assert out.exit_code in (0, 3), out.output
    payload = orjson.loads(out.stdout)
    rows = payload["policies"]
    assert [r["policy"] for r in rows] == COMPARED.split(",")
    for row in rows:
        assert set(row) >= ALL_KEYS, row["policy"]
    logged, clear = rows[0], rows[3]
    [reports] = [orjson.loads(cli("replay", str(path), "--json", "-q").stdout)["runs"]]
    if logged["cached_tokens"] is not None:
        # the run's own reads, as logged
        assert logged["cached_tokens"] == sum(r["reported_cached_tokens"] or 0 for r in reports)
    if all(r["served_by"] == "Anthropic" for r in reports):
        # Anthropic's own API, one cache: the requests as sent (no clearing below the
        # trigger) read within 10 % of what the log says they read
        assert clear["mean_tokens_sent"] == logged["mean_tokens_sent"]
        assert clear["cached_tokens"] == pytest.approx(logged["cached_tokens"], rel=0.10)
    # a recommendation over the same policies' grids: no overflow, no dearer than any
    # compared policy that keeps the same share of the context
    rec = cli("replay", str(path), "--compare", COMPARED, "--recommend", "--json", "-q")
    assert rec.exit_code in (0, 3), rec.output
    got = orjson.loads(rec.stdout)
    pick = got["recommendation"]
    if logged["total_cost"] is None:
        assert pick is None  # no bill to beat: never a guess
        return
    floor = 0.75 * logged["mean_tokens_sent"]
    meeting = [
        r
        for r in rows[1:]
        if r["total_cost"] is not None
        and not r["overflow_calls"]
        and r["mean_tokens_sent"] >= floor
    ]
    if pick is None:
        assert not meeting
        return
    assert set(pick) == {"policy", "params", "total_cost", "saving", "config"}
    [chosen] = [r for r in got["policies"] if r["policy"] == pick["policy"]] or [None]
    assert chosen is None or chosen["overflow_calls"] == 0
    assert all(pick["total_cost"] <= r["total_cost"] for r in meeting)
    assert pick["saving"] == pytest.approx(logged["total_cost"] - pick["total_cost"], abs=1e-5)


@pytest.mark.corpus
@corpus
def test_a_folder_is_compared_and_recommended_as_the_sum_of_its_sessions(cli: Cli) -> None:
    paths = [str(p) for p in SESSIONS if p.name.startswith(("drmaciver", "cpolar"))]
    assert len(paths) == 3
    out = orjson.loads(cli("replay", *paths, "--compare", COMPARED, "--json", "-q").stdout)
    each = [
        orjson.loads(cli("replay", p, "--compare", COMPARED, "--json", "-q").stdout)["policies"]
        for p in paths
    ]
    for i, row in enumerate(out["policies"]):
        assert row["calls"] == sum(rows[i]["calls"] for rows in each)
        assert row["total_cost"] == pytest.approx(sum(rows[i]["total_cost"] for rows in each))
    rec = orjson.loads(
        cli("replay", *paths, "--compare", COMPARED, "--recommend", "--json", "-q").stdout
    )
    assert rec["recommendation"] is not None
    assert rec["recommendation"]["total_cost"] <= min(
        r["total_cost"]
        for r in out["policies"]
        if r["mean_tokens_sent"] >= 0.75 * out["policies"][0]["mean_tokens_sent"]
    )


def test_the_table_fits_80_columns_and_says_where_a_policy_stops(tmp_path: Path, cli: Cli) -> None:
    path = tmp_path / "s.jsonl"
    run_lines = _session_bytes(24)
    path.write_bytes(run_lines)
    long_name = "anthropic-clear:trigger=30000,keep=1,clear-at-least=5000,exclude=Bash|Grep"
    out = cli.process(
        "replay",
        str(path),
        "--compare",
        f"as-logged,{long_name},just-fit",
        "--context-length",
        "60000",
        env={"COLUMNS": "80"},
    )
    assert out.returncode == 3, out.stderr
    lines = out.stdout.decode().splitlines()
    assert max(map(len, lines)) <= 80
    # folded over lines, never cut: the policy column's pieces, read down, are the name
    column = "".join(line.split()[0] for line in lines if line.strip())
    assert long_name in column
    # the policies that stop the run say at which call and why, under the table and on
    # stderr
    said = out.stderr.decode()
    assert "as-logged would stop the run at call" in said
    assert "over the window" in said
    assert "as-logged: stops at call" in out.stdout.decode()


def _session_bytes(calls: int) -> bytes:
    """The lines of :func:`_session`'s session (prompts of 15,000 + 3,000 a call)."""
    lines: list[dict[str, Any]] = [cc_line("user", "u0", None, "fix the bug")]
    parent = "u0"
    for k in range(calls):
        line = cc_line("assistant", f"a{k}", parent, tool_use(f"t{k}"), mid=f"msg_m{k}")
        line["message"]["usage"] = {"input_tokens": START + GROWTH * k, "output_tokens": 50}
        lines.append(line)
        lines.append(cc_line("user", f"r{k}", f"a{k}", tool_result(f"t{k}")))
        lines[-1]["message"]["content"][0]["content"] = f"line {k} = 1\n" * 400
        parent = f"r{k}"
    return bytes(jsonl(*lines))


def _call_log(calls: int, broken: bool = False) -> Any:
    """An Anthropic Messages call log of one growing tool loop (each request the one
    before plus the call and its result), with Anthropic's usage; ``broken``: the last
    request starts another conversation."""
    from ctxwin.runs import join_recorded

    system = [{"type": "text", "text": "You are careful. " * 300}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug"}]
    lines = []
    for k in range(calls):
        prompt = START + GROWTH * k
        body = {"model": "claude-sonnet-4-5", "max_tokens": 1000, "system": system}
        sent = list(messages) if not (broken and k == calls - 1) else messages[:1]
        if broken and k == calls - 1:
            sent[0] = {"role": "user", "content": "another task"}
        usage = {"input_tokens": prompt, "output_tokens": 50}
        lines.append({"request": {**body, "messages": sent}, "response": {"usage": usage}})
        call = {"type": "tool_use", "id": f"t{k}", "name": "Read", "input": {"path": "a"}}
        messages.append({"role": "assistant", "content": [call]})
        result = {"type": "tool_result", "tool_use_id": f"t{k}", "content": f"{k} = 1\n" * 400}
        messages.append({"role": "user", "content": [result]})
    [run] = join_recorded(read_runs(b"\n".join(orjson.dumps(line) for line in lines)))
    return run


def test_a_log_of_one_growing_conversation_is_replayed_under_the_providers_policies() -> None:
    run = _call_log(12)
    logged, kept, cleared = outcomes(
        run,
        SETTINGS,
        [
            Policy("as-logged"),
            parse_policy("anthropic-clear:trigger=1000000"),
            parse_policy(f"anthropic-clear:trigger={START + GROWTH * 5},keep=2"),
        ],
    )
    assert isinstance(logged, dict) and isinstance(kept, dict) and isinstance(cleared, dict)
    # nothing cleared: the requests as logged
    assert kept["sent"] == logged["sent"] == [START + GROWTH * k for k in range(12)]
    assert sum(cleared["sent"]) < sum(kept["sent"])
    [broken] = outcomes(_call_log(6, broken=True), SETTINGS, [Policy("anthropic-clear")])
    assert isinstance(broken, str) and "one growing conversation" in broken
