"""OpenAI Responses ``compaction`` items.

OpenAI's compaction guide: the latest compaction item carries the context of the
items before it, and a client may drop those items. The API still reads and bills
them when they are sent, so ctxwin counts them; they are the first thing a fit
drops (as one block, the leading system and developer messages aside), and the
compaction item itself, with the messages right after it, joins the head: never
dropped, never edited. Its opaque ``encrypted_content`` is costed at an upper bound,
``ceil(3/4 × length)`` tokens.
"""

from __future__ import annotations

import math
from typing import Any

import orjson
from hypothesis import event, given, settings
from hypothesis import strategies as st

from ctxwin import core
from ctxwin.fitting.budget import Budget, resolve_spec
from ctxwin.fitting.pruning import fit, segment
from ctxwin.fitting.repairing import repair
from ctxwin.fitting.rules import check
from ctxwin.fitting.strategy import CLEARED_PREFIX, DEFAULT_STRATEGY, Strategy
from ctxwin.formats import get_adapter
from ctxwin.formats.base import RESULT
from ctxwin.formats.openai_responses import compaction_tokens
from tests.conftest import Cli
from tests.test_format_properties import SHAPES, responses, responses_rules, txt
from tests.test_strategy_properties import strategies

COMPACTION = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAA" + "Qx9-" * 1000}
BIG = "word " * 20_000


def _body(turns: int = 3) -> dict[str, Any]:
    items: list[Any] = [
        {"role": "developer", "content": "Use the tools."},
        {"role": "user", "content": "Fix the build. " + BIG},
        {"type": "function_call", "call_id": "c0", "name": "read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c0", "output": BIG},
        {"role": "user", "content": "and the tests"},
        COMPACTION,
        {"role": "user", "content": "go on"},
    ]
    for t in range(turns):
        items += [
            {"type": "function_call", "call_id": f"c{t + 1}", "name": "run", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"c{t + 1}", "output": "out " * 600},
            {"role": "assistant", "content": f"step {t} done"},
            {"role": "user", "content": "next"},
        ]
    return {"model": "gpt-5", "instructions": "Be brief.", "input": items}


def _plan(body: Any, budget: int, strategy: Strategy = DEFAULT_STRATEGY) -> core.Plan:
    spec = resolve_spec(None, context_length=10**9)
    return core.fit_plan(core.load(body), Budget(spec, 0, "flag", 0, budget), 1.0, strategy)


def test_everything_is_counted_and_the_item_costs_its_bound() -> None:
    body = _body()
    t = core.load(body)
    assert t.adapter.name == "openai-responses"
    items = t.view.items
    content = COMPACTION["encrypted_content"]
    assert compaction_tokens(content) == math.ceil(3 * len(content) / 4)
    assert items[5].cost[0] == t.estimator.per_message + compaction_tokens(content)
    # what precedes the item is counted: the API reads and bills it
    whole = t.raw_tokens(list(range(len(items))))
    assert whole > t.raw_tokens([0, *range(5, len(items))]) + 20_000
    assert t.view.pinned == 7 and t.view.superseded == (1, 5)
    assert any("compaction item at input[5]" in n for n in t.view.notes)
    # a longer content costs more
    longer = _body()
    longer["input"][5] = {**COMPACTION, "encrypted_content": content * 2}
    assert core.load(longer).raw_tokens([5]) > t.raw_tokens([5]) + 2000


def test_the_block_before_the_item_goes_first_and_the_item_stays() -> None:
    """At just-fit's arithmetic (``block=0``: the fewest units that fit, so a budget just
    above what follows the item drops exactly the superseded block)."""
    body = _body(turns=6)
    t = core.load(body)
    n = len(body["input"])
    everything_after = t.raw_tokens([0, *range(5, n)])
    just_fit = Strategy(block=0)
    p = _plan(body, everything_after + 100, just_fit)
    r = p.result
    assert r.pruned and r.gap == (1, 5) and r.keep == [0, *range(5, n)]
    assert r.dropped == [1, 2, 3, 4] and r.dropped_turns == 1
    out = p.output()
    assert out["input"][1] is COMPACTION and out["input"][2] is body["input"][6]
    # smaller: turns after the head go too, the compaction item and "go on" stay
    p = _plan(body, everything_after - 1000, just_fit)
    r = p.result
    assert r.gap == (1, 5) and r.keep[:3] == [0, 5, 6] and r.cut > 7
    assert not r.overflow_at_floor and r.estimated_tokens_after <= r.budget
    out = p.output()
    assert get_adapter(out).name == "openai-responses"
    assert check(core.load(out).view) == []
    again = _plan(out, everything_after - 1000, just_fit).result
    assert again.fits and not again.pruned
    # the default block cut drops the superseded block first too, and never less
    blocked = _plan(body, everything_after + 100).result
    assert blocked.gap == (1, 5) and blocked.keep[:2] == [0, 5]


def test_a_call_id_across_the_item_keeps_the_items_before_it() -> None:
    body = _body()
    body["input"].insert(
        6, {"type": "function_call_output", "call_id": "c0", "output": "late answer"}
    )
    body["input"][3]["output"] = "early"
    t = core.load(body)
    assert t.view.superseded is None and t.view.pinned == 6
    assert any("a call id links them" in n for n in t.view.notes)


def test_clearing_never_edits_the_head_or_the_item() -> None:
    body = _body(turns=6)
    n = len(body["input"])
    t = core.load(body)
    budget = t.raw_tokens([0, *range(5, n)]) - 400
    # block=0: a just-fit cut that leaves the kept results over budget, so clearing runs
    # (a block cut drops turns enough that nothing needs clearing at this budget)
    s = Strategy(("clear-results", "drop-turns"), keep_results=1, block=0)
    p = _plan(body, budget, s)
    assert p.applied.cleared_results > 0
    assert all(i > 6 for i, _ in p.applied.edits)
    out = p.output()
    assert out["input"][1] is COMPACTION
    assert len(p.result.keep) >= len(_plan(body, budget, Strategy(block=0)).result.keep)


def test_a_bare_item_list_with_a_compaction_item_is_responses() -> None:
    items = [COMPACTION, {"role": "user", "content": "hi"}]
    assert get_adapter(items).name == "openai-responses"
    assert core.load(items).view.pinned == 2


def test_lint_and_repair_leave_the_item_alone(tmp_path: Any, cli: Cli) -> None:
    body = _body()
    assert check(core.load(body).view) == []
    broken = _body()
    del broken["input"][-3]  # the newest call loses its output
    fixed, report = repair(broken)
    assert COMPACTION in fixed["input"] and report.changes
    assert check(core.load(fixed).view) == []
    path = tmp_path / "in.json"
    path.write_bytes(orjson.dumps(body))
    result = cli("lint", str(path))
    assert result.exit_code == 0, result.output


def test_cli_estimate_and_prune(tmp_path: Any, cli: Cli) -> None:
    path = tmp_path / "in.json"
    out = tmp_path / "out.json"
    path.write_bytes(orjson.dumps(_body(turns=6)))
    result = cli("estimate", str(path), "--context-length", "9000", "--max-tokens", "0", "--json")
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.stdout)
    assert report["estimated_tokens"] > 40_000 and not report["fits"]
    result = cli("prune", str(path), str(out), "--context-length", "9000", "--max-tokens", "0")
    assert result.exit_code == 0, result.output
    kept = orjson.loads(out.read_bytes())["input"]
    assert kept[1] == COMPACTION and kept[2] == {"role": "user", "content": "go on"}


def test_the_manager_replay_and_explain_see_the_block() -> None:
    from ctxwin import ContextWindowManager
    from ctxwin.breakdown import explain
    from ctxwin.recorded import Run
    from ctxwin.runs.simulate import replay_run
    from ctxwin.settings import Settings

    body = _body(turns=6)
    whole = core.plan(core.load(body), context_length=9000, max_tokens=0)
    assert whole.result.gap == (1, 5)
    manager = ContextWindowManager(context_length=9000, max_tokens=0)
    for _ in range(2):  # the second request reuses the first one's items
        fitted = manager.evaluate(body)
        assert fitted.result.keep == whole.result.keep
        assert fitted.result.estimated_tokens == whole.result.estimated_tokens
    steps = {s["step"]: s for s in explain(whole)["steps"]}
    block = core.load(body).raw_tokens([1, 2, 3, 4])
    assert steps["drop-turns"]["tokens"] >= block and steps["drop-turns"]["items"] >= 1 + 5
    body["input"].append({"role": "assistant", "content": "done"})
    report = replay_run(Run("", "chat", body=body), Settings(context_length=9000, max_tokens=0))
    assert report["calls"] >= 2
    # each call is counted as its request reads alone (the earlier ones end before the
    # compaction item, and their views must not carry its block)
    for row in report["rows"]:
        if row["status"] == "fits":
            n = row["messages"]
            alone = core.load({**body, "input": body["input"][:n]})
            assert row["raw_tokens"] == alone.raw_tokens(list(range(n)))


# --- property test -------------------------------------------------------------


def _is_model(item: dict[str, Any]) -> bool:
    return item.get("role") == "assistant" or (
        item.get("type", "message") != "message" and not (item.get("type", "").endswith("_output"))
    )


@st.composite
def compacted(draw: st.DrawFn) -> dict[str, Any]:
    """A Responses body with a compaction item (or two) at turn boundaries, perhaps a
    developer message first and a user message right after the latest one."""
    body = responses(draw(SHAPES))
    items: list[Any] = body["input"]
    starts = [
        p
        for p in range(1, len(items) + 1)
        if p == len(items) or (_is_model(items[p]) and not _is_model(items[p - 1]))
    ]
    for k in sorted(draw(st.lists(st.sampled_from(starts), min_size=1, max_size=2, unique=True)))[
        ::-1
    ]:
        size = draw(st.integers(1, 3000))
        items.insert(k, {"type": "compaction", "id": f"cmp_{k}", "encrypted_content": "A" * size})
    if draw(st.booleans()):
        latest = max(i for i, x in enumerate(items) if x.get("type") == "compaction")
        items.insert(latest + 1, {"role": "user", "content": txt(draw(st.integers(1, 400)))})
    if draw(st.booleans()):
        items.insert(0, {"role": "developer", "content": txt(draw(st.integers(1, 400)))})
    return body


def _shadow(body: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """The output with each edited item replaced by its source object (an edit changes
    an output, never the shape), for the raw rules check that finds items by identity."""
    by_id = {orjson.dumps(x.get("call_id")): x for x in body["input"] if "output" in x}
    shadow = [x if "output" not in x else by_id[orjson.dumps(x["call_id"])] for x in out["input"]]
    return {**out, "input": shadow}


@settings(max_examples=300, deadline=None)
@given(compacted(), strategies(), st.floats(-0.1, 1.05))
def test_pruning_a_compacted_body(
    body: dict[str, Any], strategy: Strategy, fraction: float
) -> None:
    t = core.load(body)
    view = t.view
    src = body["input"]
    n = len(src)
    latest = max(i for i, x in enumerate(src) if x.get("type") == "compaction")
    total = fit(view, 0, t.estimator, 1.0).estimated_tokens
    floor = fit(view, 1, t.estimator, 1.0).estimated_tokens_after
    target = max(1, math.ceil(floor + (total - floor) * fraction))
    p = _plan(body, target, strategy)
    r, applied = p.result, p.applied
    out = p.output()
    kept = out["input"]
    # an ordered subsequence; untouched entries are the same objects
    assert r.keep == sorted(set(r.keep)) and len(kept) == len(r.keep)
    edited = {i for i, _ in applied.edits}
    for pos, i in enumerate(r.keep):
        assert (kept[pos] is src[i]) == (i not in edited)
    # the compaction item and what joins the head with it: kept, untouched
    assert set(range(latest, view.pinned)) <= set(r.keep)
    assert not edited & set(range(view.pinned))
    # before it: all kept or, leading system messages aside, all dropped
    before = [i for i in r.keep if i < latest]
    lead = view.superseded[0] if view.superseded else latest
    assert before in (list(range(latest)), list(range(lead)))
    # the newest turn kept; pairing and the provider's rules hold; still Responses
    seg = segment(view.items, view.pinned)
    if seg.turn_starts:
        assert set(range(seg.turn_starts[-1], n)) <= set(r.keep)
    responses_rules(_shadow(body, out), body)
    assert get_adapter(out).name == "openai-responses"
    again = core.load(out)
    assert check(again.view) == []
    # the newest keep_results results untouched unless cut
    parts = [x for x in t.adapter.parts(body, view, t.estimator) if x.kind == RESULT]
    guarded = parts[len(parts) - strategy.keep_results :] if strategy.keep_results else []
    if not applied.truncated_results:
        assert not any((x.index, x.path) in applied.edits for x in guarded)
        assert all(v is None or v.startswith(CLEARED_PREFIX) for v in applied.edits.values())
    # fits, or the floor overflows; the estimate is the output's
    assert r.estimated_tokens_after <= r.budget or r.overflow_at_floor
    assert fit(again.view, 0, t.estimator, 1.0).estimated_tokens == r.estimated_tokens_after
    event("gap dropped" if r.gap else "gap kept")
    # idempotent
    if not r.overflow_at_floor:
        second = _plan(out, target, strategy)
        assert not second.applied.edits and not second.result.pruned
        assert orjson.dumps(second.output()) == orjson.dumps(out)
