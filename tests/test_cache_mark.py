"""The setting ``cache_mark``: one Anthropic ``cache_control`` mark at the end of the
stable prefix (the last block of the last message), within Anthropic's limit of four,
Anthropic requests only; the library, ``prune --cache-mark``, the SDK wrapper, the proxy,
and what replay predicts it reads from the cache."""

from __future__ import annotations

import copy
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

import ctxwin
from ctxwin.formats.anthropic import MAX_CACHE_MARKS, cache_marks, with_stable_mark
from ctxwin.runs import read_runs
from ctxwin.runs.simulate import replay_run
from ctxwin.settings import Settings

MARK = {"type": "ephemeral"}
WORDS = ["retry", "budget", "backoff", "handler", "request", "route", "attempt", "window"]


def _result(t: int) -> str:
    rng = random.Random(t)
    a, b, c = (rng.choice(WORDS) for _ in range(3))
    return f"def {a}_{b}(x):\n    return x.{c} or {t}\n" * 12


def anthropic_run(turns: int) -> dict[str, Any]:
    """An Anthropic agent loop's transcript: ``turns`` tool calls, each result about 250
    tokens, then a final answer."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Find the retry budget."}]
    for t in range(turns):
        call = f"toolu_{t:04d}"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": call, "name": "read_file", "input": {"p": str(t)}}
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call, "content": _result(t)}],
            }
        )
    messages.append({"role": "assistant", "content": [{"type": "text", "text": "Done."}]})
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1000,
        "system": "You are a coding agent.",
        "tools": [{"name": "read_file", "input_schema": {"type": "object"}}],
        "messages": messages,
    }


def _request(turns: int) -> dict[str, Any]:
    """The request before the final answer of :func:`anthropic_run`."""
    body = anthropic_run(turns)
    body["messages"] = body["messages"][:-1]
    return body


def test_the_mark_goes_on_the_last_block_of_the_last_message() -> None:
    body = {"messages": [{"role": "user", "content": "hi"}]}
    marked = with_stable_mark(body)
    assert marked == {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": MARK}]}
        ]
    }
    assert body == {"messages": [{"role": "user", "content": "hi"}]}  # not changed in place
    thinking = {
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "a"},
                    {"type": "thinking", "thinking": "t", "signature": "s"},
                ],
            },
        ]
    }
    out = with_stable_mark(thinking)
    assert out is not None
    assert out["messages"][0] is thinking["messages"][0]
    assert out["messages"][1]["content"][0]["cache_control"] == MARK
    assert "cache_control" not in out["messages"][1]["content"][1]
    assert with_stable_mark(out) is None  # marked already
    assert with_stable_mark({"messages": [{"role": "user", "content": ""}]}) is None


def test_parallel_results_mark_the_last_result_only() -> None:
    """Parallel tool calls answered in one user message (several tool_result blocks, text
    after them or not): the mark goes on the last block, the others stay as they were."""
    results = [
        {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"result {i}"}
        for i in range(3)
    ]
    body: dict[str, Any] = {
        "messages": [
            {"role": "user", "content": "task"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"toolu_{i}", "name": "read", "input": {}}
                    for i in range(3)
                ],
            },
            {"role": "user", "content": results},
        ]
    }
    out = with_stable_mark(body)
    assert out is not None
    last = out["messages"][-1]["content"]
    assert last[:2] == results[:2] and last[2] == {**results[2], "cache_control": MARK}
    assert out["messages"][:2] == body["messages"][:2] and cache_marks(out) == 1
    with_text = copy.deepcopy(body)
    with_text["messages"][-1]["content"].append({"type": "text", "text": "go on"})
    out = with_stable_mark(with_text)
    assert out is not None
    assert out["messages"][-1]["content"][:3] == results
    assert out["messages"][-1]["content"][3]["cache_control"] == MARK


def test_never_more_than_four_marks() -> None:
    body = _request(6)
    for n in range(MAX_CACHE_MARKS + 1):
        marked = copy.deepcopy(body)
        blocks = [m["content"][0] for m in marked["messages"][1:-1]]
        for b in blocks[:n]:
            b["cache_control"] = MARK
        assert cache_marks(marked) == n
        out = with_stable_mark(marked)
        if n < MAX_CACHE_MARKS:
            assert out is not None and cache_marks(out) == n + 1
            assert out["messages"][-1]["content"][-1]["cache_control"] == MARK
        else:
            assert out is None
    # marks on the tools, the system prompt and inside a result count too
    full = copy.deepcopy(body)
    full["tools"][0]["cache_control"] = MARK
    full["system"] = [{"type": "text", "text": "s", "cache_control": MARK}]
    full["messages"][2]["content"][0]["content"] = [
        {"type": "text", "text": "x", "cache_control": MARK}
    ]
    full["messages"][4]["content"][0]["cache_control"] = MARK
    assert cache_marks(full) == 4
    assert with_stable_mark(full) is None


def test_prune_marks_anthropic_requests_only_and_only_when_asked() -> None:
    body = _request(30)
    out, plan = ctxwin.prune(body, context_length=4000)
    assert plan.result.pruned and cache_marks(out) == 0 and not plan.marked
    out, plan = ctxwin.prune(body, context_length=4000, cache_mark=True)
    assert plan.marked and cache_marks(out) == 1
    assert out["messages"][-1]["content"][-1]["cache_control"] == MARK
    unmarked, _ = ctxwin.prune(body, context_length=4000)
    assert out["messages"][:-1] == unmarked["messages"][:-1]
    # a request that fits gets the mark too; what it is estimated at does not change
    small = _request(2)
    out, plan = ctxwin.prune(small, context_length=100_000, cache_mark=True)
    assert plan.status == "fits" and plan.marked and cache_marks(out) == 1
    again = ctxwin.plan(ctxwin.load(out), context_length=100_000)
    assert again.estimated_tokens == plan.estimated_tokens
    chat = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    out, plan = ctxwin.prune(chat, cache_mark=True)
    assert out is chat and not plan.marked


def test_the_cli_writes_the_mark(tmp_path: Path) -> None:
    path = tmp_path / "in.json"
    path.write_bytes(orjson.dumps(_request(2)))

    def prune(*flags: str) -> bytes:
        out = tmp_path / "out.json"
        done = subprocess.run(
            [sys.executable, "-m", "ctxwin", "prune", str(path), str(out), "-c", "100000", *flags],
            capture_output=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return out.read_bytes()

    assert prune() == path.read_bytes()  # byte for byte without the flag
    assert cache_marks(orjson.loads(prune("--cache-mark"))) == 1


def test_the_wrapper_and_the_proxy_send_the_mark() -> None:
    pytest.importorskip("anthropic")
    from ctxwin.integrations._common import settings_for
    from ctxwin.proxy.routes import MESSAGES
    from tests.test_proxy_fitting import fitter

    assert settings_for(cache_mark=True)["cache_mark"] is True
    body = _request(30)
    fitted = fitter(context_length=4000, cache_mark=True).fit(MESSAGES, orjson.dumps(body))
    assert cache_marks(orjson.loads(fitted.body)) == 1
    small = _request(2)
    fitted = fitter(context_length=100_000, cache_mark=True).fit(MESSAGES, orjson.dumps(small))
    assert fitted.action == "fit" and cache_marks(orjson.loads(fitted.body)) == 1
    plain = fitter(context_length=100_000).fit(MESSAGES, raw := orjson.dumps(small))
    assert plain.body is raw


def test_the_sdk_wrapper_marks_what_it_sends() -> None:
    anthropic = pytest.importorskip("anthropic")
    from ctxwin.integrations.anthropic import wrap
    from tests.provider_standin import Standin, serve

    standin = Standin(window=100_000)
    history = _request(3)
    with serve(standin) as url:
        api = anthropic.Anthropic(base_url=url, api_key="test", max_retries=0)
        wrap(api, cache_mark=True).messages.create(**history)
        wrap(api).messages.create(**history)
    marked, plain = standin.bodies
    assert cache_marks(marked) == 1 and cache_marks(plain) == 0
    assert history == _request(3)  # the caller's history is not changed


def test_replay_prices_the_mark() -> None:
    """A generated Anthropic run marks nothing, so nothing is read from the cache; with
    the mark each call reads the prefix the call before wrote."""
    [run] = read_runs(orjson.dumps(anthropic_run(40)))
    settings = Settings(context_length=8000)
    plain = replay_run(run, settings)
    [run] = read_runs(orjson.dumps(anthropic_run(40)))
    marked = replay_run(run, settings._replace(cache_mark=True))
    assert plain["cached_tokens"] == 0 and plain["cache_marks"] is None
    assert marked["cache_marks"] == "cache_control in the body"
    assert (marked["cached_tokens"] or 0) > 0.7 * marked["tokens_sent"]
    assert (marked["input_cost"] or 0) < (plain["input_cost"] or 0) / 2
