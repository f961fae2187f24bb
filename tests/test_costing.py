"""What a replayed run's calls cost: predicted and logged cache use, input cost, and
``replay --compare``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxwin.cost.pricing import Pricing
from ctxwin.errors import UsageError
from ctxwin.fitting.calibration import cache_tokens_from_usage
from ctxwin.fitting.strategy import Strategy
from ctxwin.runs import read_runs
from ctxwin.runs.billing import (
    FIVE_MINUTES,
    HOUR,
    SESSION_MARKS,
    body_marks,
    body_ttl,
    input_cost,
    session_marks,
)
from ctxwin.runs.policies import policies, policy_block
from ctxwin.runs.simulate import replay_run
from ctxwin.settings import Settings
from fidelity.corpus import corpus_path
from tests.test_sessions import cc_line, jsonl, tool_result, tool_use

AGENT_TOOLS = corpus_path() / "agent_tools"
START = datetime(2026, 1, 14, 19, 20, tzinfo=UTC).timestamp()
SONNET = Pricing(3.0, 15.0, 0.3, 3.75, 6.0, above=Pricing(6.0, 22.5, 0.6, 7.5, 12.0, 200_000))


# --- usage and prices ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (
            {"input_tokens": 3, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 50},
            (900, 50),
        ),
        ({"prompt_tokens": 2000, "prompt_tokens_details": {"cached_tokens": 1536}}, (1536, None)),
        ({"input_tokens": 2000, "input_tokens_details": {"cached_tokens": 1024}}, (1024, None)),
        ({"promptTokenCount": 5000, "cachedContentTokenCount": 4000}, (4000, None)),
        ({"usageMetadata": {"promptTokenCount": 9, "cachedContentTokenCount": 7}}, (7, None)),
        ({"prompt_tokens": 10}, (None, None)),
        ({"input_tokens": 10}, (None, None)),
    ],
)
def test_cache_tokens_from_each_providers_usage(
    usage: dict[str, Any], expected: tuple[int | None, int | None]
) -> None:
    assert cache_tokens_from_usage(usage) == expected


def test_input_cost_bills_uncached_cached_and_written_tokens_at_their_prices() -> None:
    # 10,000 tokens: 6,000 read at 0.3, 1,000 written at 3.75, 3,000 fresh at 3.0 per million
    assert input_cost(10_000, 6_000, 1_000, SONNET) == pytest.approx(
        (3_000 * 3.0 + 6_000 * 0.3 + 1_000 * 3.75) / 1e6
    )
    # above 200,000 tokens the long-context tier's prices
    assert input_cost(250_000, 0, 0, SONNET) == pytest.approx(250_000 * 6.0 / 1e6)


def test_one_hour_writes_are_billed_at_their_own_price() -> None:
    # 10,000 tokens: 1,000 written for five minutes at 3.75, 2,000 for an hour at 6.0
    assert input_cost(10_000, 0, 3_000, SONNET, hour=2_000) == pytest.approx(
        (7_000 * 3.0 + 1_000 * 3.75 + 2_000 * 6.0) / 1e6
    )
    # the long-context tier has its own one-hour price
    assert input_cost(250_000, 0, 1_000, SONNET, hour=1_000) == pytest.approx(
        (249_000 * 6.0 + 1_000 * 12.0) / 1e6
    )


def test_an_unknown_price_gives_no_cost_never_a_guess() -> None:
    assert input_cost(1000, 0, 0, None) is None
    no_cache_price = Pricing(input=2.5)
    assert input_cost(1000, 0, 0, no_cache_price) == pytest.approx(2.5 / 1000)
    assert input_cost(1000, 500, 0, no_cache_price) is None
    five_minutes_only = Pricing(3.0, 15.0, 0.3, 3.75)
    assert input_cost(1000, 0, 500, five_minutes_only) is not None
    assert input_cost(1000, 0, 500, five_minutes_only, hour=500) is None


def test_body_ttl_is_the_lifetime_the_last_mark_asks_for() -> None:
    five = {"type": "ephemeral"}
    hour = {"type": "ephemeral", "ttl": "1h"}
    tools = [{"name": "t", "input_schema": {}, "cache_control": hour}]
    system = [{"type": "text", "text": "s", "cache_control": hour}]
    user = {"role": "user", "content": [{"type": "text", "text": "a", "cache_control": five}]}
    assert body_ttl({"tools": tools, "system": system}) == HOUR
    assert body_ttl({"tools": tools, "system": system, "messages": [user]}) == FIVE_MINUTES
    assert body_ttl({"system": [{"type": "text", "text": "s", "cache_control": five}]}) == 300
    assert body_ttl({"messages": [{"role": "user", "content": "a"}]}) is None
    assert body_ttl(["not a body"]) is None


def test_body_marks_are_the_blocks_cache_control_ends() -> None:
    mark = {"cache_control": {"type": "ephemeral"}}
    body = {
        "system": [{"type": "text", "text": "s", **mark}],
        "messages": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": [{"type": "text", "text": "b"}]},
            {"role": "user", "content": [{"type": "text", "text": "c", **mark}]},
        ],
    }
    assert body_marks(body) == [0, 3]
    assert body_marks({"messages": [{"role": "user", "content": "a"}]}) is None


def test_policies_read_just_fit_and_block_shares() -> None:
    read = policies(["just-fit", "block=0.25,block=0.5", "just-fit"])
    assert [(p.label, p.family) for p in read] == [
        ("just-fit", "just-fit"),
        ("block=0.25", "block"),
        ("block=0.5", "block"),
    ]
    assert [policy_block(p.label) for p in read] == [0.0, 0.25, 0.5]
    for bad in ("block=0", "block=1.5", "block=x", "fast"):
        with pytest.raises(UsageError):
            policies([bad])


# --- a recorded Anthropic run with cache marks --------------------------------------------


def _anthropic_run(n: int = 4, ttl: str | None = None) -> bytes:
    """``n`` calls of one growing conversation, each marking its last message and the
    system prompt (``ttl``: the lifetime the marks ask for), each with the usage
    Anthropic would log: the call before's prompt read, the rest written (broken down
    by lifetime when the marks name one)."""
    control: dict[str, Any] = {"type": "ephemeral"}
    if ttl is not None:
        control["ttl"] = ttl
    mark = {"cache_control": control}
    system = [{"type": "text", "text": "You are careful. " * 400, **mark}]
    history: list[dict[str, Any]] = []
    lines = []
    before = 0
    for k in range(n):
        history = [
            *(
                {**m, "content": [{"type": "text", "text": m["content"][0]["text"]}]}
                for m in history
            ),
        ]
        history.append({"role": "user", "content": [{"type": "text", "text": f"step {k} " * 300}]})
        history[-1]["content"][0] |= mark
        prompt = 2000 + 700 * k
        usage: dict[str, Any] = {
            "input_tokens": 0,
            "cache_read_input_tokens": before,
            "cache_creation_input_tokens": prompt - before,
            "output_tokens": 5,
        }
        if ttl is not None:
            hour = prompt - before if ttl == "1h" else 0
            usage["cache_creation"] = {
                "ephemeral_5m_input_tokens": prompt - before - hour,
                "ephemeral_1h_input_tokens": hour,
            }
        body = {"model": "claude-sonnet-4-5", "max_tokens": 1000, "system": system}
        lines.append({"request": {**body, "messages": list(history)}, "response": {"usage": usage}})
        history.append({"role": "assistant", "content": [{"type": "text", "text": f"did {k}"}]})
        before = prompt
    return b"\n".join(orjson.dumps(line) for line in lines)


def _replay(data: bytes, **settings: Any) -> Any:
    from ctxwin.runs import join_recorded

    [run] = join_recorded(read_runs(data))
    return replay_run(run, Settings(**settings))


def test_replay_predicts_cache_use_from_the_bodys_marks_and_prices_it() -> None:
    rep = _replay(_anthropic_run())
    rows = rep["rows"]
    assert rep["cache_marks"] == "cache_control in the body"
    assert rep["price_source"] == "table" and rep["price"]["cache_read"] == 0.3
    assert rows[0]["cached_tokens"] == 0  # nothing before it
    assert rows[0]["cache_write_tokens"] == rows[0]["estimated_tokens_after"]
    for before, row in pairwise(rows):
        # each call reads the whole prompt of the call before (its marked prefix) and
        # writes the rest up to its own last mark: its last message
        assert row["cached_tokens"] == before["estimated_tokens_after"]
        assert row["cached_tokens"] + row["cache_write_tokens"] == row["estimated_tokens_after"]
    for k, row in enumerate(rows):
        assert row["reported_cached_tokens"] == (0 if k == 0 else 2000 + 700 * (k - 1))
        assert (
            row["reported_cache_write_tokens"]
            == row["reported_tokens"] - (row["reported_cached_tokens"])
        )
        expected = input_cost(
            row["estimated_tokens_after"], row["cached_tokens"], row["cache_write_tokens"], SONNET
        )
        assert row["input_cost"] == pytest.approx(expected, abs=1e-6)
    assert rep["cached_tokens"] == sum(r["cached_tokens"] for r in rows)
    assert rep["reported_cached_tokens"] == sum(r["reported_cached_tokens"] for r in rows)
    assert rep["tokens_sent"] == sum(r["estimated_tokens_after"] for r in rows)
    assert rep["input_cost"] == pytest.approx(sum(r["input_cost"] for r in rows), abs=1e-5)


@pytest.mark.parametrize("ttl", ["1h", "5m"])
def test_writes_are_priced_by_the_lifetime_the_marks_ask_for(ttl: str) -> None:
    """Marks with ``ttl: "1h"`` write for an hour, billed at ``cache_write_1h`` (2 ×
    input); the log's ``ephemeral_1h_input_tokens`` prices its own writes the same way."""
    rep = _replay(_anthropic_run(4, ttl))
    for row in rep["rows"]:
        hour = row["cache_write_tokens"] if ttl == "1h" else 0
        assert row["cache_write_1h_tokens"] == hour
        expected = input_cost(
            row["estimated_tokens_after"],
            row["cached_tokens"],
            row["cache_write_tokens"],
            SONNET,
            hour=hour,
        )
        assert row["input_cost"] == pytest.approx(expected, abs=1e-6)
        logged = row["reported_cache_write_tokens"] if ttl == "1h" else 0
        assert row["reported_cache_write_1h_tokens"] == logged
        paid = input_cost(
            row["reported_tokens"],
            row["reported_cached_tokens"],
            row["reported_cache_write_tokens"],
            SONNET,
            hour=logged,
        )
        assert row["reported_input_cost"] == pytest.approx(paid, abs=1e-6)
    assert rep["cache_write_1h_tokens"] == (rep["cache_write_tokens"] if ttl == "1h" else 0)
    five = _replay(_anthropic_run(4))
    assert five["reported_cache_write_1h_tokens"] is None  # the log does not say
    if ttl == "1h":
        assert rep["input_cost"] > five["input_cost"]
        assert rep["reported_input_cost"] > five["reported_input_cost"]
    else:
        assert rep["input_cost"] == five["input_cost"]


def test_a_claude_code_log_of_one_hour_writes_prices_them_so() -> None:
    """Claude Code's log records no marks; its ``ephemeral_1h`` writes show them."""
    [run] = read_runs(_session(4, None, "1h"))
    rep = replay_run(run, Settings())
    assert rep["cache_write_1h_tokens"] == rep["cache_write_tokens"]
    assert (rep["cache_write_tokens"] or 0) > 0
    assert rep["reported_cache_write_1h_tokens"] == rep["reported_cache_write_tokens"]
    [five] = read_runs(_session(4, None, "5m"))
    assert replay_run(five, Settings())["cache_write_1h_tokens"] == 0


def test_a_body_without_marks_reads_nothing_from_an_anthropic_cache() -> None:
    data = _anthropic_run().replace(b',"cache_control":{"type":"ephemeral"}', b"")
    rep = _replay(data)
    assert rep["cached_tokens"] == 0 and rep["cache_write_tokens"] == 0
    assert rep["cache_marks"] is None


def test_a_model_without_a_price_has_no_cost() -> None:
    rep = _replay(_anthropic_run(), model="my-own-model", context_length=100_000)
    assert rep["price"] is None and rep["input_cost"] is None
    assert all(r["input_cost"] is None for r in rep["rows"])
    assert rep["cached_tokens"] is None  # no caching rules known either


def test_a_pruned_request_reads_only_the_prefix_it_keeps() -> None:
    """At a window the last calls do not fit, the cut drops the oldest turns: the request
    then shares only the system prompt with the one before, and its mark on the system
    prompt reads just that."""
    full = _replay(_anthropic_run(6))
    small = _replay(_anthropic_run(6), context_length=full["rows"][-1]["estimated_tokens"])
    pruned = [r for r in small["rows"] if r["dropped_turns"]]
    assert pruned, "the window must cut"
    first = pruned[0]
    before = small["rows"][first["call"] - 2]
    assert first["cached_tokens"] < before["estimated_tokens_after"]
    assert small["cached_tokens"] < full["cached_tokens"]


# --- a Claude Code session: no marks logged ------------------------------------------------


def _session(
    calls: int,
    at: Sequence[float] | None = None,
    ttl: str | None = None,
    mid: str = "msg_",
    reads: Sequence[int] | None = None,
) -> bytes:
    """A session whose logged usage follows Claude Code's marks: call k reads call k-1's
    whole prompt (system prompt and tools of 15,000 tokens written by the first call).

    ``at``: when each call was sent (seconds after the first), logged as its line's
    ``timestamp``; ``ttl`` (``"5m"``, ``"1h"``): the writes' lifetime, logged as
    ``cache_creation``; ``mid``: how the response ids start; ``reads``: what each call
    logs it read, where it is not the whole prompt before."""
    lines: list[dict[str, Any]] = [cc_line("user", "u0", None, "fix the bug")]
    parent = "u0"
    before = 0
    for k in range(calls):
        prompt = 15_000 + 400 * k
        if reads is not None:
            before = reads[k]
        line = cc_line("assistant", f"a{k}", parent, tool_use(f"t{k}"), mid=f"{mid}m{k}")
        line["message"]["usage"] = {
            "input_tokens": 1,
            "cache_read_input_tokens": before,
            "cache_creation_input_tokens": prompt - before - 1,
            "output_tokens": 20,
        }
        if ttl is not None:
            hour = prompt - before - 1 if ttl == "1h" else 0
            line["message"]["usage"]["cache_creation"] = {
                "ephemeral_5m_input_tokens": prompt - before - 1 - hour,
                "ephemeral_1h_input_tokens": hour,
            }
        if at is not None:
            line["timestamp"] = datetime.fromtimestamp(START + at[k], UTC).isoformat()
        lines.append(line)
        lines.append(cc_line("user", f"r{k}", f"a{k}", tool_result(f"t{k}") * 1))
        lines[-1]["message"]["content"][0]["content"] = "x = 1\n" * 200
        parent = f"r{k}"
        before = prompt - 1
    return jsonl(*lines)


def test_a_claude_code_session_is_cached_at_its_assumed_marks() -> None:
    [run] = read_runs(_session(8))
    rep = replay_run(run, Settings())
    rows = rep["rows"]
    assert rep["cache_marks"] == SESSION_MARKS["claude-code"]
    # from the third call on the overhead is learned: each call reads about the whole
    # prompt the call before sent, as the log says
    for row in rows[2:]:
        assert row["cached_tokens"] == pytest.approx(row["reported_cached_tokens"], rel=0.1)
    assert rep["cached_tokens"] == pytest.approx(rep["reported_cached_tokens"], rel=0.1)


MINUTES = [60.0 * m for m in (0, 1, 2, 8, 9, 10)]
"""Six calls a minute apart, but for six minutes between the third and the fourth."""


@pytest.mark.parametrize("ttl", [None, "5m"])
def test_a_call_after_the_cache_lifetime_reads_nothing(ttl: str | None) -> None:
    """Five-minute entries (Anthropic's default, and what a log of ``ephemeral_5m``
    writes shows): the call six minutes after the one before finds nothing cached and
    writes its whole prompt; the calls after it read again."""
    logged = [0, *(15_000 + 400 * k - 1 for k in range(5))]
    logged[3] = 0  # as the provider logged it
    [run] = read_runs(_session(6, MINUTES, ttl, reads=logged))
    rows = replay_run(run, Settings())["rows"]
    assert [r["reported_cached_tokens"] for r in rows] == logged
    late = rows[3]
    assert late["cached_tokens"] == 0
    assert late["cache_write_tokens"] == late["estimated_tokens_after"]
    assert all((r["cached_tokens"] or 0) > 0 for r in rows[1:3] + rows[4:])
    # without times the calls are taken to follow each other within the lifetime
    [untimed] = read_runs(_session(6, None, ttl))
    assert (replay_run(untimed, Settings())["rows"][3]["cached_tokens"] or 0) > 0


def test_one_hour_writes_outlive_a_gap_of_minutes() -> None:
    """A log whose writes are ``ephemeral_1h`` shows marks with ``ttl: "1h"``: what the
    third call wrote is still cached six minutes later."""
    [run] = read_runs(_session(6, MINUTES, "1h"))
    rows = replay_run(run, Settings())["rows"]
    assert rows[3]["cached_tokens"] == rows[2]["estimated_tokens_after"]
    [far] = read_runs(_session(6, [0, 60, 120, 3900, 3960, 4020], "1h"))
    assert replay_run(far, Settings())["rows"][3]["cached_tokens"] == 0  # 63 minutes


def _reads(calls: int, *misses: int) -> list[int]:
    """What each call of :func:`_session` logs it read: the call before's whole prompt,
    but nothing at ``misses``."""
    out = [0, *(15_000 + 400 * k - 1 for k in range(calls - 1))]
    for k in misses:
        out[k] = 0
    return out


def test_a_log_that_reads_less_than_the_call_before_cached_is_reported() -> None:
    """The fourth call, a minute after the third, logs a read of nothing: one cache
    would have read what the third wrote. The log's shortfall is reported; the
    prediction stays the rules' (one cache)."""
    minutes = [60.0 * k for k in range(6)]
    reads = _reads(6, 3)
    [run] = read_runs(_session(6, minutes, "5m", reads=reads))
    rep = replay_run(run, Settings())
    rows = rep["rows"]
    cached_before = 15_000 + 400 * 2 - 1  # the third call's logged read plus write
    assert [r.get("reported_cache_break_tokens") for r in rows] == [None] * 3 + [
        cached_before,
        None,
        None,
    ]
    assert rep["reported_cache_breaks"] == 1
    assert rep["reported_cache_break_tokens"] == cached_before
    assert (rows[3]["cached_tokens"] or 0) > 0  # the rules read; the log says otherwise
    assert (rep["reported_cached_tokens"] or 0) + cached_before == sum(_reads(6))


def test_a_miss_after_the_cache_lifetime_is_no_break() -> None:
    """Six minutes after the call before, a five-minute entry is gone: reading nothing
    is what one cache does. An hour-long entry would still be there."""
    reads = _reads(6, 3)
    [five] = read_runs(_session(6, MINUTES, "5m", reads=reads))
    rep = replay_run(five, Settings())
    assert rep["reported_cache_breaks"] == 0 and rep["reported_cache_break_tokens"] == 0
    [hour] = read_runs(_session(6, MINUTES, "1h", reads=reads))
    assert replay_run(hour, Settings())["reported_cache_breaks"] == 1
    # a log without times: the calls follow each other within the lifetime
    [untimed] = read_runs(_session(6, None, "5m", reads=reads))
    assert replay_run(untimed, Settings())["reported_cache_breaks"] == 1


def test_a_log_without_cache_counts_or_of_separate_requests_is_not_checked() -> None:
    """No breaks are claimed where the log cannot show one: usage without reads and
    writes, or recorded requests that need not extend each other."""
    [run] = read_runs(_session(4))
    assert replay_run(run, Settings())["reported_cache_breaks"] == 0  # checked: none
    rep = _replay(_anthropic_run())
    assert rep["reported_cache_breaks"] is None  # recorded calls: not checked
    no_counts = _session(4).replace(b'"cache_read_input_tokens"', b'"other_tokens"')
    [bare] = read_runs(no_counts)
    assert replay_run(bare, Settings())["reported_cache_breaks"] is None


def _uncached(data: bytes) -> bytes:
    """``data``'s lines with every usage logging its whole prompt as uncached input."""
    lines = [orjson.loads(line) for line in data.splitlines()]
    for line in lines:
        usage = (line.get("message") or line.get("response") or {}).get("usage")
        if usage:
            usage["input_tokens"] += usage["cache_read_input_tokens"]
            usage["input_tokens"] += usage["cache_creation_input_tokens"]
            usage["cache_read_input_tokens"] = usage["cache_creation_input_tokens"] = 0
    return b"\n".join(orjson.dumps(line) for line in lines) + b"\n"


def test_a_log_of_marked_calls_that_never_touch_the_cache_is_reported(tmp_path: Path) -> None:
    """Claude Code marks its requests; a log whose calls, long past the model's shortest
    cacheable prefix, read and write nothing shows requests that reached the provider
    without their marks (caching turned off, or a gateway dropping ``cache_control``)."""
    plain = _uncached(_session(5))
    [run] = read_runs(plain)
    rep = replay_run(run, Settings())
    assert [r["reported_cached_tokens"] for r in rep["rows"]] == [0] * 5
    assert [r["reported_cache_write_tokens"] for r in rep["rows"]] == [0] * 5
    assert rep["reported_uncached_calls"] == 5
    assert rep["reported_cache_breaks"] == 0  # nothing was cached to forget
    [cached] = read_runs(_session(5))
    assert replay_run(cached, Settings())["reported_uncached_calls"] == 0
    path = tmp_path / "off.jsonl"
    path.write_bytes(plain)
    words = b" ".join(_cli("replay", str(path)).stdout.split())
    assert b"the log shows 5 marked calls long enough to cache reading and writing" in words
    # a recorded body without marks reads and writes nothing at Anthropic: as expected
    unmarked = _anthropic_run().replace(b',"cache_control":{"type":"ephemeral"}', b"")
    assert _replay(_uncached(unmarked))["reported_uncached_calls"] == 0
    assert _replay(_uncached(_anthropic_run()))["reported_uncached_calls"] == 4


@pytest.mark.parametrize(
    ("prefix", "service"),
    [
        ("msg_bdrk_01", "Amazon Bedrock"),
        ("msg_vrtx_01", "Google Vertex AI"),
        ("msg_01", "Anthropic"),
        ("resp_", None),
    ],
)
def test_a_claude_code_run_names_the_service_its_response_ids_name(
    prefix: str, service: str | None
) -> None:
    [run] = read_runs(_session(3, mid=prefix))
    assert run.served_by == service
    assert replay_run(run, Settings())["served_by"] == service


def test_the_summary_says_where_the_log_read_less_than_one_cache(tmp_path: Path) -> None:
    path = tmp_path / "bedrock.jsonl"
    path.write_bytes(_session(6, [60.0 * k for k in range(6)], "5m", "msg_bdrk_", _reads(6, 3)))
    words = b" ".join(_cli("replay", str(path)).stdout.split())
    assert b"the log shows 1 call reading 15,799 tokens less than the call before" in words
    assert b"(served by Amazon Bedrock)" in words
    direct = tmp_path / "direct.jsonl"
    direct.write_bytes(_session(6, [60.0 * k for k in range(6)], "5m"))
    assert b"less than the call before" not in _cli("replay", str(direct)).stdout


def test_each_model_and_each_subagent_of_a_session_has_its_own_cache() -> None:
    """A small model's call between two of the main model's, and a subagent's calls, are
    runs of their own: they read nothing the main model's calls wrote (another model,
    another system prompt and tools), and the main model's second call still reads its
    first's prompt."""

    def at(seconds: float) -> str:
        return datetime.fromtimestamp(START + seconds, UTC).isoformat()

    big = "x = 1\n" * 3000
    data = jsonl(
        cc_line("user", "u1", None, big, timestamp=at(0)),
        cc_line("assistant", "a1", "u1", tool_use("t1"), usage=20_000, timestamp=at(5)),
        cc_line("user", "r1", "a1", tool_result("t1"), timestamp=at(6)),
        cc_line(
            "assistant",
            "h1",
            "r1",
            "Title",
            usage=20_100,
            model="claude-haiku-4-5",
            timestamp=at(7),
        ),
        cc_line("user", "x1", None, big, isSidechain=True, agentId="ab12", timestamp=at(8)),
        cc_line(
            "assistant",
            "x2",
            "x1",
            "found",
            usage=9_000,
            isSidechain=True,
            agentId="ab12",
            timestamp=at(9),
        ),
        cc_line("user", "x3", "x2", "more", isSidechain=True, agentId="ab12", timestamp=at(10)),
        cc_line(
            "assistant",
            "x4",
            "x3",
            "done",
            usage=9_100,
            isSidechain=True,
            agentId="ab12",
            timestamp=at(11),
        ),
        cc_line("assistant", "a2", "h1", "done", usage=20_300, timestamp=at(12)),
    )
    runs = {r.name: replay_run(r, Settings()) for r in read_runs(data)}
    main, side, agent = runs["main"], runs["main claude-haiku-4-5"], runs["agent-ab12"]
    assert [r["cached_tokens"] for r in side["rows"]] == [0]
    assert agent["rows"][0]["cached_tokens"] == 0
    # each second call reads its run's first prompt (sized at the scale learned since)
    for rep in (agent, main):
        first, second = rep["rows"]
        assert second["cached_tokens"] == pytest.approx(first["reported_tokens"], rel=0.05)


def test_claude_code_marks_its_system_prompt_and_last_two_messages() -> None:
    """Block 0 is what comes before the messages, block ``1 + j`` message ``j``. The mark
    on the message before the last lets a request that adds more than the lookback's
    blocks still read what the call before wrote: it lies within reach of that mark."""
    from ctxwin.cost.caching import LOOKBACK, Block, Cache, Sent

    assert [session_marks(n) for n in (1, 2, 3, 6)] == [[0], [0, 1], [0, 1, 2], [0, 4, 5]]
    before = [Block(0, 15_000), *(Block(k, 100) for k in range(1, 5))]
    after = [*before, *(Block(k, 50) for k in range(5, 5 + LOOKBACK))]
    cache = Cache(run_rules())
    cache.send(Sent(before, session_marks(len(before))))
    # what the call before wrote ends LOOKBACK blocks before the last mark: out of reach ...
    assert cache.send(Sent(after, [0, len(after) - 1])).read == 15_000
    cache = Cache(run_rules())
    cache.send(Sent(before, session_marks(len(before))))
    # ... but within it from the mark on the message before the last
    assert cache.send(Sent(after, session_marks(len(after)))).read == 15_400


def test_session_blocks_end_at_the_calls_estimate_pruned_or_not() -> None:
    """The ends of the blocks are the estimates of the request's prefixes: the last is
    the estimate of what is sent, with turns dropped or not."""
    from ctxwin.core import load
    from ctxwin.cost.caching import Cache, Sent
    from ctxwin.fitting.incremental import Prefixes
    from ctxwin.recorded import model_messages
    from ctxwin.runs.billing import Ledger, laid_prefix

    [run] = read_runs(_session(12))
    settings = Settings(context_length=18_000)
    est = settings.make_estimator()
    t = load(run.body, "anthropic", est)
    prefixes = Prefixes(t.view, est, t.adapter.problems, complete=True)
    ledger = Ledger("claude-code")
    pruned = 0
    for i in model_messages(t.view):
        result = prefixes.fit(i, 4_000, 1.0, overhead=2_000, learned=True)
        ledger.rescale(result, True)
        laid = laid_prefix(prefixes, result, ledger.now)
        assert laid.ends[-1] == result.estimated_tokens_after
        assert len(laid.ends) == len(laid.keys) + 1 == result.kept_count + 2
        pruned += result.pruned
        Cache(run_rules()).send(Sent(laid, [0, len(laid.keys) - 1]))
    assert pruned


def run_rules() -> Any:
    from ctxwin.cost.pricing import CacheRules

    return CacheRules("breakpoints", 1024, None, 300, 4)


def test_replay_with_edits_keys_messages_by_content() -> None:
    """Under clear-results (each request read whole) a cleared result is a new message:
    the cache reads only up to it. At ``block=0`` every call clears one more; in batches
    (the default block) calls that keep the cleared set read more from the cache."""
    [run] = read_runs(_session(10))
    # content's sizes: the first calls fit, every call is sent, and three calls clear
    settings = Settings(context_length=19_000, max_tokens=1000, estimator="content")
    plain = replay_run(run, settings)
    strategy = Strategy(("clear-results", "drop-turns"), 1, block=0)
    cleared = replay_run(run, settings._replace(strategy=strategy))
    batched = replay_run(run, settings._replace(strategy=strategy._replace(block=0.45)))
    assert (batched["cached_tokens"] or 0) > (cleared["cached_tokens"] or 0) > 0
    rows = cleared["rows"]
    edited = [r for r in rows if r.get("cleared_results")]
    assert edited
    for row in edited:
        before = rows[row["call"] - 2]
        # the first cleared result ends the prefix it shares with the call before
        assert (row["cached_tokens"] or 0) < before["estimated_tokens_after"] - 1000
    for row in rows[1:]:
        assert row["cached_tokens"] is not None
        assert row["cached_tokens"] <= row["estimated_tokens_after"]
    assert plain["cached_tokens"] is not None


# --- the command line -----------------------------------------------------------------------


def _cli(*args: str, data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "ctxwin", *args],
        input=data,
        capture_output=True,
        check=False,
    )


def test_replay_json_and_summary_carry_the_costs(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_bytes(_anthropic_run())
    out = _cli("replay", str(path), "--json")
    assert out.returncode == 0, out.stderr
    [rep] = orjson.loads(out.stdout)["runs"]
    assert rep["input_cost"] > 0 and rep["rows"][1]["cached_tokens"] > 0
    text = _cli("replay", str(path))
    assert b"cache read" in text.stdout and b"input cost $" in text.stdout
    assert b"from the model table" in text.stdout
    assert b"for an hour" not in text.stdout
    hour = tmp_path / "hour.jsonl"
    hour.write_bytes(_anthropic_run(ttl="1h"))
    [rep] = orjson.loads(_cli("replay", str(hour), "--json").stdout)["runs"]
    words = b" ".join(_cli("replay", str(hour)).stdout.split())
    assert f"{rep['cache_write_1h_tokens']:,} of them for an hour) (predicted)".encode() in words
    assert f"{rep['reported_cache_write_1h_tokens']:,} of them for an hour)".encode() in words


def test_compare_replays_once_per_policy(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(_session(30))
    args = ("replay", str(path), "--context-length", "22000", "--max-tokens", "1000", "--json")
    out = _cli(*args, "--compare", "just-fit", "--compare", "block=0.25,block=0.5")
    assert out.returncode == 0, out.stderr
    payload = orjson.loads(out.stdout)
    rows = payload["policies"]
    assert [r["policy"] for r in rows] == ["just-fit", "block=0.25", "block=0.5"]
    for r in rows:
        assert r["calls"] == 30 and r["pruned_calls"] > 0
        assert r["min_tokens_sent"] <= r["mean_tokens_sent"] <= 22000
        assert r["input_cost"] > 0
    # the same run replayed alone at --block 0 (the default cuts in blocks) gives the
    # just-fit row
    one = orjson.loads(_cli(*args, "--block", "0").stdout)["runs"][0]
    assert rows[0]["cached_tokens"] == one["cached_tokens"]
    assert rows[0]["input_cost"] == pytest.approx(one["input_cost"], abs=1e-5)
    # a block cut keeps the prefix longer: fewer tokens written to the cache
    assert rows[2]["cache_write_tokens"] < rows[0]["cache_write_tokens"]
    assert payload["prices"][0]["price_source"] == "table"
    table = _cli(*args[:-1], "--compare", "just-fit,block=0.5")
    assert table.returncode == 0 and b"block=0.5" in table.stdout and b"input" in table.stdout
    assert max(map(len, table.stdout.decode().splitlines())) <= 80


def test_compare_exit_codes(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(_session(6))
    bad = _cli("replay", str(path), "--compare", "block=2")
    assert bad.returncode == 2 and b"0 < SHARE <= 1" in bad.stderr
    assert len(bad.stderr.decode().strip().splitlines()) == 1
    assert b"Traceback" not in bad.stderr
    tiny = _cli("replay", str(path), "--compare", "just-fit", "--context-length", "3000")
    assert tiny.returncode == 3, tiny.stderr


# --- the recorded Claude Code sessions -----------------------------------------------------


DIRECT = ("drmaciver-coverage-test-fix.jsonl", "drmaciver-python-to-rust-port.jsonl")
"""Sessions whose calls reached Anthropic's API directly (each logs a ``requestId``)."""


@pytest.mark.corpus
@pytest.mark.skipif(not AGENT_TOOLS.is_dir(), reason="../shared/corpus is absent")
@pytest.mark.parametrize("name", DIRECT)
def test_claude_code_sessions_predicted_cache_reads_match_the_logs(name: str) -> None:
    """Replayed without pruning (the requests as logged), the predicted cache reads of a
    session sent straight to Anthropic are within 10 % of its logged
    ``cache_read_input_tokens``."""
    data = (AGENT_TOOLS / "claude-code" / name).read_bytes()
    for run in read_runs(data):
        rep = replay_run(run, Settings(context_length=1_000_000))
        assert rep["first_pruned"] is None
        assert rep["cached_tokens"] == pytest.approx(rep["reported_cached_tokens"], rel=0.10)


@pytest.mark.corpus
@pytest.mark.skipif(not AGENT_TOOLS.is_dir(), reason="../shared/corpus is absent")
def test_claude_code_corpus_cache_reads_in_total() -> None:
    """Over every Claude Code session of the corpus, replayed without pruning: where the
    log shows one cache (no call read less than the call before had cached), the
    predicted reads are within 10 % of the logged ones in total; over all sessions they
    are within 10 % of what one cache would have read by the logs' own counts (the
    logged reads plus the shortfalls the logs show). The shortfalls come only where a
    service other than Anthropic's API answered (Amazon Bedrock: calls routed to caches
    that do not share entries), never in a session sent straight to Anthropic; and every
    session's calls did cache (the marks reached the provider)."""
    reps = [
        replay_run(run, Settings(context_length=1_000_000))
        for path in sorted((AGENT_TOOLS / "claude-code").glob("*.jsonl"))
        for run in read_runs(path.read_bytes())
    ]
    assert all(r["first_pruned"] is None for r in reps)
    one = [r for r in reps if r["reported_cache_breaks"] == 0]
    split = [r for r in reps if r["reported_cache_breaks"]]
    assert one and split and len(one) + len(split) == len(reps)

    def total(key: str, group: list[Any]) -> int:
        return sum(r[key] or 0 for r in group)

    assert total("cached_tokens", one) == pytest.approx(
        total("reported_cached_tokens", one), rel=0.10
    )
    assert total("cached_tokens", reps) == pytest.approx(
        total("reported_cached_tokens", reps) + total("reported_cache_break_tokens", reps),
        rel=0.10,
    )
    assert all(r["served_by"] not in (None, "Anthropic") for r in split)
    # the gateway passed the marks on: no marked call long enough to cache went uncached
    assert all(r["reported_uncached_calls"] == 0 for r in reps)
    assert all(r["reported_cache_breaks"] == 0 for r in reps if r["served_by"] == "Anthropic")
