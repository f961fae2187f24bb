"""``explain()`` and ``ctxwin estimate --explain``: where the tokens go, what steps save."""

from __future__ import annotations

from pathlib import Path

import orjson

from ctxwin import core
from ctxwin.breakdown import explain
from ctxwin.fitting.strategy import Strategy
from tests.conftest import Cli
from tests.test_format_properties import Shape, Turn, chat


def _body() -> dict[str, object]:
    turns = [Turn(False, 5, [("read", 3000)], 5, False) for _ in range(6)]
    return chat(Shape(200, 20, False, turns, False))


def test_explain_adds_up_and_matches_what_the_steps_do() -> None:
    t = core.load(_body())
    strategy = Strategy(("clear-results", "drop-turns"), keep_results=3)
    p = core.plan(t, context_length=3000, max_tokens=0, strategy=strategy)
    d = explain(p)
    assert p.source is t and p.transcript is not t
    assert d["estimated_tokens"] == p.result.estimated_tokens
    parts = d["outside_messages"] + d["head"]["tokens"] + sum(x["tokens"] for x in d["turns"])
    assert abs(parts - d["estimated_tokens"]) <= len(d["turns"]) + 2
    assert [x["messages"] for x in d["turns"]] == [3] * 6 and d["head"]["messages"] == 2
    assert d["largest"][0]["role"] == "tool" and len(d["largest"]) == 5
    steps = {x["step"]: x for x in d["steps"]}
    assert steps["clear-results"]["in_strategy"] and not steps["truncate-results"]["in_strategy"]
    # 6 results: the newest three (the newest turn's among them) are kept, three may go
    assert steps["clear-results"]["items"] == 3
    only = Strategy(("clear-results",), keep_results=3)
    everything = core.plan(t, context_length=1000, max_tokens=0, strategy=only).applied
    assert everything.cleared_results == 3
    # the saving is the results' size less their placeholders
    saved = steps["clear-results"]["tokens"]
    assert everything.cleared_tokens - 3 * 30 < saved < everything.cleared_tokens
    assert steps["drop-turns"]["items"] == 5
    assert steps["clear-thinking"] == {
        "step": "clear-thinking",
        "in_strategy": False,
        "items": 0,
        "tokens": 0,
    }


def test_estimate_explain(tmp_path: Path, cli: Cli) -> None:
    path = tmp_path / "in.json"
    path.write_bytes(orjson.dumps(_body()))
    result = cli("estimate", str(path), "-c", "3000", "--explain", "--json")
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.stdout)
    assert report["explain"]["turns"][0]["first"] == "messages[2]"
    plain = orjson.loads(cli("estimate", str(path), "-c", "3000", "--json").stdout)
    assert "explain" not in plain
    text = cli("estimate", str(path), "-c", "3000", "--explain").stdout
    assert "where the tokens go" in text and "what each step could save" in text
