"""The strategy steps on hand-made transcripts: what each step writes, and where."""

from __future__ import annotations

import copy
import importlib.util
from collections.abc import Callable
from typing import Any

import pytest

from ctxwin import core
from ctxwin.errors import ContextTruncated, UsageError
from ctxwin.fitting.budget import Budget, resolve_spec
from ctxwin.fitting.pruning import fit
from ctxwin.fitting.strategy import DEFAULT_STRATEGY, Strategy, parse_steps
from tests.test_format_properties import Shape, Turn, anthropic, chat, gemini, responses

CAL = 1.15
BIG = 3000


def _fit(body: Any, budget: int, strategy: Strategy) -> core.Plan:
    t = core.load(body)
    return core.fit_plan(
        t, Budget(resolve_spec(None, context_length=10**9), 0, "flag", 0, budget), CAL, strategy
    )


def _tokens(body: Any) -> int:
    t = core.load(body)
    return fit(t.view, 0, t.estimator, CAL).estimated_tokens


def _shape(n: int = 6, size: int = BIG, thinking: bool = False, calls: bool = True) -> Shape:
    turns = [Turn(thinking, 5, [("read", size)] if calls else [], 5, False) for _ in range(n)]
    return Shape(system=20, first=20, first_media=False, turns=turns, flag=True)


def _results(body: Any) -> list[Any]:
    """Each result's content, in order, as the format holds it."""
    if "contents" in body:
        return [
            p["functionResponse"]["response"]
            for c in body["contents"]
            for p in c["parts"]
            if "functionResponse" in p
        ]
    if "input" in body:
        return [x["output"] for x in body["input"] if x.get("type", "").endswith("_output")]
    out = []
    for m in body["messages"]:
        if m["role"] in ("tool", "function"):
            out.append(m["content"])
        elif isinstance(m["content"], list):
            out += [b["content"] for b in m["content"] if b.get("type") == "tool_result"]
    return out


RENDER = {
    "anthropic": anthropic,
    "openai-responses": responses,
    "gemini": gemini,
    "openai-chat": chat,
}


@pytest.mark.parametrize("fmt", list(RENDER))
def test_clear_results_replaces_the_oldest_results_with_a_placeholder(fmt: str) -> None:
    body = RENDER[fmt](_shape())
    total = _tokens(body)
    budget = total - 2 * 700  # two old results' worth: clearing alone fits
    before = _results(body)
    plain = _fit(body, budget, DEFAULT_STRATEGY)
    assert plain.result.pruned  # drop-turns would drop turns
    p = _fit(body, budget, Strategy(("clear-results", "drop-turns")))
    r = p.result
    assert not r.pruned and r.estimated_tokens_after <= budget and not r.fits
    assert p.result.estimated_tokens == total
    after = _results(p.output())
    cleared = [a for a, b in zip(after, before, strict=True) if a != b]
    assert 1 <= len(cleared) == p.applied.cleared_results
    assert after[len(cleared) :] == before[len(cleared) :]  # the oldest go first
    text = str(cleared[0])
    assert "[cleared by ctxwin: " in text and " tokens of tool output]" in text
    assert p.applied.cleared_tokens > 600 * len(cleared)
    assert p.output() is not body and body == RENDER[fmt](_shape())  # input untouched


@pytest.mark.parametrize("fmt", list(RENDER))
def test_clear_results_keeps_the_newest_and_excluded(fmt: str) -> None:
    body = RENDER[fmt](_shape())
    before = _results(body)
    p = _fit(body, 1, Strategy(("clear-results",), keep_results=2))
    after = _results(p.output())
    assert p.result.overflow_at_floor
    # 6 results: the newest turn's and the newest 2 kept, the first 4 cleared
    assert after[4:] == before[4:]
    assert all("[cleared by ctxwin" in str(a) for a in after[:4])
    p = _fit(
        body, 1, Strategy(("clear-results",), keep_results=0, exclude_tools=frozenset({"read"}))
    )
    assert _results(p.output()) == before and not p.applied.edits


@pytest.mark.parametrize("fmt", list(RENDER))
def test_clear_results_leaves_a_result_its_placeholder_is_not_cheaper_than(fmt: str) -> None:
    # 14 digits: the estimate (an upper bound, 1.75 tokens a digit) puts them above the
    # placeholder, but the placeholder is longer and dearer in every tokenizer
    body = RENDER[fmt](_shape())
    for text in ("20260212165422", "ok"):
        short = _with_results(body, text)
        p = _fit(short, 1, Strategy(("clear-results",), keep_results=0))
        assert not p.applied.edits and p.applied.cleared_results == 0
        assert _results(p.output()) == _results(short)
    # a longer run of digits is still cleared
    long = _with_results(body, "20260212165422" * 4)
    p = _fit(long, 1, Strategy(("clear-results",), keep_results=0))
    assert p.applied.cleared_results == 5


def _with_results(body: Any, text: str) -> Any:
    """A copy of ``body`` with every tool result's text replaced by ``text``."""
    body = copy.deepcopy(body)
    set_results(body, lambda: text)
    return body


def set_results(body: dict[str, Any], text: Callable[[], str]) -> None:
    """Give each tool result of ``body`` the next ``text()`` as its content, in place."""
    if "contents" in body:
        for c in body["contents"]:
            for part in c["parts"]:
                if "functionResponse" in part:
                    part["functionResponse"]["response"] = {"out": text()}
    elif "input" in body:
        for x in body["input"]:
            if x.get("type", "").endswith("_output"):
                x["output"] = text()
    else:
        for m in body["messages"]:
            if m["role"] in ("tool", "function"):
                m["content"] = text()
            elif isinstance(m["content"], list):
                for b in m["content"]:
                    if b.get("type") == "tool_result":
                        b["content"] = text()


def test_clear_at_least_clears_more_than_needed() -> None:
    body = chat(_shape())
    budget = _tokens(body) - 100
    few = _fit(body, budget, Strategy(("clear-results", "drop-turns"), block=0))
    assert few.applied.cleared_results == 1
    many = _fit(
        body, budget, Strategy(("clear-results", "drop-turns"), clear_at_least=1500, block=0)
    )
    assert many.applied.cleared_results == 3
    assert many.applied.cleared_tokens >= 1500 > few.applied.cleared_tokens


def test_clear_results_then_drop_turns_keeps_more_and_clears_only_kept() -> None:
    body = chat(_shape(n=10))
    budget = _tokens(body) // 4
    # at just-fit's arithmetic (block=0): the default block cut rounds both up to a block
    plain = _fit(body, budget, Strategy(block=0))
    p = _fit(body, budget, Strategy(("clear-results", "drop-turns"), keep_results=2, block=0))
    assert len(p.result.keep) > len(plain.result.keep)
    assert p.result.pruned and p.result.estimated_tokens_after <= budget
    kept_indices = set(p.result.keep)
    assert {i for i, _ in p.applied.edits} <= kept_indices


def test_truncate_results_cuts_an_oversize_result_instead_of_giving_up() -> None:
    body = chat(_shape(n=2, size=40_000))
    budget = 4000
    plain = _fit(body, budget, DEFAULT_STRATEGY)
    assert plain.result.overflow_at_floor
    with pytest.raises(ContextTruncated):
        core.prune(body, context_length=budget, max_tokens=0)
    p = _fit(body, budget, Strategy(("drop-turns", "truncate-results")))
    r = p.result
    assert not r.overflow_at_floor and r.estimated_tokens_after <= budget
    assert p.applied.truncated_results == 1 and p.applied.cleared_results == 0
    newest = _results(p.output())[-1]
    original = _results(body)[-1]
    head, _, tail = newest.partition("\n[... ")
    assert original.startswith(head) and len(head) > 100
    marker, _, rest = tail.partition(" ...]\n")
    assert marker.endswith("tokens cut by ctxwin") and original.endswith(rest)
    assert int(marker.split()[0].replace(",", "")) == p.applied.truncated_tokens > 2000
    again = _fit(p.output(), budget, Strategy(("drop-turns", "truncate-results")))
    assert again.result.fits and not again.applied.edits


@pytest.mark.parametrize("fmt", ["anthropic", "gemini"])
def test_clear_thinking_removes_earlier_turns_thinking(fmt: str) -> None:
    body = RENDER[fmt](_shape(n=4, thinking=True, calls=False))
    key = "messages" if fmt == "anthropic" else "contents"
    parts = "content" if fmt == "anthropic" else "parts"

    def thoughts(b: Any) -> list[int]:
        return [
            i
            for i, m in enumerate(b[key])
            for x in m[parts]
            if x.get("type") == "thinking" or x.get("thought") is True
        ]

    assert len(thoughts(body)) == 4
    p = _fit(body, _tokens(body) - 10, Strategy(("clear-thinking", "drop-turns")))
    assert not p.result.pruned and p.applied.cleared_thinking == 1
    assert thoughts(p.output()) == thoughts(body)[1:]
    p = _fit(body, 1, Strategy(("clear-thinking",)))
    # the newest turn keeps its thinking
    assert thoughts(p.output()) == thoughts(body)[-1:] and p.applied.cleared_thinking == 3


def test_responses_reasoning_is_never_cleared() -> None:
    body = responses(_shape(n=3, size=10, thinking=True))
    p = _fit(body, 1, Strategy(("clear-thinking",)))
    assert not p.applied.edits


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("drop-turns,nope", "unknown strategy step 'nope'"),
        ("drop-turns,drop-turns", "listed twice"),
        ("truncate-results,drop-turns", "must be the last"),
        ("", "unknown strategy step ''"),
    ],
)
def test_parse_steps_refuses_bad_lists(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_steps(text)


def test_parse_steps() -> None:
    assert parse_steps("clear-results, drop-turns") == ("clear-results", "drop-turns")
    with pytest.raises(UsageError):
        Strategy(("drop-turns",), keep_results=-1)


def test_prune_takes_a_strategy() -> None:
    body = chat(_shape())
    budget = _tokens(body) - 700
    out, p = core.prune(
        body,
        context_length=budget + 100,
        max_tokens=0,
        strategy=Strategy(("clear-results", "drop-turns")),
    )
    assert p.applied.cleared_results >= 1 and len(out["messages"]) == len(body["messages"])
    plain, _ = core.prune(body, context_length=budget + 100, max_tokens=0)
    same, _ = core.prune(body, context_length=budget + 100, max_tokens=0, strategy=Strategy())
    assert same == plain and len(plain["messages"]) < len(body["messages"])


def test_the_plan_counts_the_overhead_and_learned_factor_the_fit_counts() -> None:
    """The edits are planned against the estimate the fit checks: with an overhead the
    body does not show, clearing makes room for it (rather than turns being dropped);
    with a learned factor below 1 under which the body fits, nothing is edited."""
    body = chat(_shape())
    t = core.load(body)
    total = _tokens(body)
    budget = Budget(resolve_spec(None, context_length=10**9), 0, "flag", 0, total)
    s = Strategy(("clear-results", "drop-turns"))
    p = core.fit_plan(t, budget, CAL, s, overhead=1400)
    assert p.applied.cleared_results >= 1 and not p.result.pruned
    assert p.result.estimated_tokens_after <= total
    tight = Budget(resolve_spec(None, context_length=10**9), 0, "flag", 0, total - 500)
    learned = core.fit_plan(t, tight, 0.8, s, learned=True)
    assert learned.result.fits and not learned.applied.edits
    assert learned.output() is body


def _loop_body(turns: int) -> dict[str, Any]:
    """An agent loop's Chat request after ``turns`` tool calls, each result different."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You read files until the task is done."},
        {"role": "user", "content": "Find where the retry budget is computed."},
    ]
    for t in range(turns):
        call = f"call_{t}"
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "read", "arguments": f'{{"path": "m{t}.py"}}'},
                    }
                ],
            }
        )
        lines = (f"def f{t}_{k}(x):\n    return x.attempt_{k} * {t} + backoff\n" for k in range(25))
        messages.append({"role": "tool", "tool_call_id": call, "content": "".join(lines)})
    return {"model": "gpt-4o-mini", "messages": messages}


def _cleared(p: core.Plan) -> frozenset[str]:
    """The call ids of the results ``p`` cleared."""
    messages = p.source.body["messages"]
    return frozenset(messages[i]["tool_call_id"] for i, _ in p.applied.edits)


def test_clearing_moves_in_batches_so_a_growing_run_keeps_its_prefix() -> None:
    """Under a block strategy, a growing run's cleared set changes only when what must
    be saved crosses the next block; at ``block=0`` it grows with almost every call."""
    budget = _tokens(_loop_body(12))
    changes = {}
    for block in (0.0, 0.45):
        s = Strategy(("clear-results", "drop-turns"), block=block)
        before: frozenset[str] = frozenset()
        cut_before = None
        n = 0
        for turns in range(13, 40):
            p = _fit(_loop_body(turns), budget, s)
            assert p.result.estimated_tokens_after <= budget
            cleared = _cleared(p)
            assert cleared  # the run needs clearing from its first request on
            if p.result.cut == cut_before:
                assert before <= cleared  # a result once cleared stays cleared
            n += cleared != before
            before, cut_before = cleared, p.result.cut
        changes[block] = n
    assert changes[0.0] >= 20  # just fit clears one more result on almost every call
    assert changes[0.45] * 3 <= changes[0.0]


def test_a_batch_clears_at_least_what_the_fewest_edits_clear() -> None:
    for turns in (14, 20, 30):
        body = _loop_body(turns)
        budget = _tokens(_loop_body(10))
        few = _fit(body, budget, Strategy(("clear-results", "drop-turns"), block=0))
        batch = _fit(body, budget, Strategy(("clear-results", "drop-turns")))
        assert few.result.cut == batch.result.cut
        assert _cleared(few) <= _cleared(batch)
        assert batch.result.estimated_tokens_after <= few.result.estimated_tokens_after


@pytest.mark.parametrize("fmt", list(RENDER))
@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "gpt-4o"])
def test_a_placeholder_is_counted_as_text_at_the_seed(fmt: str, model: str) -> None:
    """What a cleared request is estimated at is the estimator's count of the request as
    sent, placeholders included, at the model's seed: the edited body read afresh
    estimates the same."""
    body = RENDER[fmt](_shape(n=10))
    s = Strategy(("clear-results", "drop-turns"), block=0)
    whole = core.plan(core.load(body), model=model, context_length=10**9).estimated_tokens
    window = whole * 7 // 10
    out, p = core.prune(body, model=model, context_length=window, max_tokens=0, strategy=s)
    assert p.applied.cleared_results >= 2
    assert p.result.calibration == core.load(body).estimator.seed(model) > 0
    again = core.plan(core.load(out), model=model, context_length=10**9)
    assert again.estimated_tokens == p.estimated_tokens_after
    placeholders = [r for r in _results(out) if "cleared by ctxwin" in str(r)]
    assert len(placeholders) == p.applied.cleared_results


@pytest.mark.skipif(importlib.util.find_spec("quicktok") is None, reason="needs quicktok")
@pytest.mark.parametrize(("name", "least"), [("content", 100), ("bound", 1), ("seed", 1)])
def test_a_placeholder_is_not_under_counted(name: str, least: int) -> None:
    """Each estimator's count of a placeholder, at its seed for an OpenAI model, against
    o200k_base and cl100k_base, for results of ``least`` tokens to 10 million. ``content``
    is a fit, not a bound: it counts some placeholders stating fewer than 100 tokens under
    o200k_base, as it does other short texts (fidelity/adversarial.md)."""
    import quicktok  # type: ignore[import-not-found, unused-ignore]

    from ctxwin.fitting.strategy import PLACEHOLDER
    from ctxwin.tokens import get_estimator
    from ctxwin.tokens.base import Kind, calibrated

    encodings = [quicktok.get_encoding(e) for e in ("o200k_base", "cl100k_base")]
    est = get_estimator(name)
    sizes = [*range(least, 2000), *(10**k + d for k in range(4, 8) for d in (0, 1, 4999, 99999))]
    for n in sizes:
        text = PLACEHOLDER.format(tokens=n)
        cost = [0] * est.width
        est.add_text(cost, text, Kind.DENSE)
        counted = calibrated(est.raw(cost), est.seed("gpt-4o"))
        assert counted >= max(e.count(text) for e in encodings), (name, n)


def test_cache_marks_stay_on_a_cleared_anthropic_result() -> None:
    """A ``cache_control`` mark on a ``tool_result`` block, or on a block of its content,
    stays on that result when its content is cleared or cut, and replay sees the same
    marked messages in the body as sent."""
    from ctxwin.runs.billing import body_marks

    body = anthropic(_shape(n=8))
    mark = {"type": "ephemeral"}
    hour = {"type": "ephemeral", "ttl": "1h"}
    results = [
        (i, b)
        for i, m in enumerate(body["messages"])
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    (i1, first), (i2, second) = results[0], results[1]
    first["cache_control"] = mark
    second["content"] = [
        {"type": "text", "text": second["content"], "cache_control": hour},
        {"type": "text", "text": "x" * 3000},
    ]
    assert body_marks(body) == [1 + i1, 1 + i2]
    budget = _tokens(body) * 6 // 10
    for s in (
        Strategy(("clear-results", "drop-turns"), keep_results=0, block=0),
        Strategy(("clear-results", "drop-turns"), keep_results=0),
    ):
        p = _fit(body, budget, s)
        assert p.applied.cleared_results >= 2 and not p.result.pruned
        out = p.output()
        sent = [
            b
            for m in out["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
            if b["type"] == "tool_result"
        ]
        assert sent[0]["cache_control"] == mark
        assert str(sent[0]["content"]).startswith("[cleared by ctxwin: ")
        assert "cache_control" not in sent[1]
        (block,) = sent[1]["content"]
        assert block["cache_control"] == hour
        assert block["text"].startswith("[cleared by ctxwin: ")
        assert body_marks(out) == [1 + i1, 1 + i2]
        assert core.load(out).estimator is not None
        again = core.fit_plan(core.load(out), p.budget, CAL, s)
        assert again.result.estimated_tokens == p.result.estimated_tokens_after
