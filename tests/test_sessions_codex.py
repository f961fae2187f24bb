"""Codex CLI rollouts as each version writes them: which count is which response's, what
Codex sends of what the rollout records, compaction and rollback.

The orders follow codex-rs: 0.36-0.42 send a response's ``TokenCount`` when it completes
and record its items afterwards, each call followed by its output (``run_turn``'s
``items_to_record_in_conversation_history``); later versions record the model items as
they stream and the tools' outputs after the response (``drain_in_flight``), with the
count between them (0.104-0.125) or, from 0.140, after the outputs (the count waits for
the tools). A compaction without ``replacement_history`` is rebuilt as
``build_compacted_history`` does, a ``thread_rolled_back`` event drops the last user
turns (``drop_last_n_user_turns``), and a tool's output is cut as
``ContextManager::process_item`` cuts it.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwin.core import load
from ctxwin.formats.openai_responses import REASONING_TOKENS
from ctxwin.runs import read_runs
from ctxwin.sessions import codex
from tests.test_docs import _MARK
from tests.test_sessions import AGENT_TOOLS, corpus, jsonl

ROOT = Path(__file__).resolve().parents[1]

TS = "2026-04-01T10:00:00.000Z"


def line(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": TS, "type": kind, "payload": payload}


def item(payload: dict[str, Any]) -> dict[str, Any]:
    return line("response_item", payload)


def user(text: str) -> dict[str, Any]:
    content = [{"type": "input_text", "text": text}]
    return item({"type": "message", "role": "user", "content": content})


def answer(text: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text}]
    return item({"type": "message", "role": "assistant", "content": content})


def reasoning(n: int) -> dict[str, Any]:
    return item({"type": "reasoning", "summary": [], "encrypted_content": "gAAAAB" + "Zm9v" * n})


def call(ident: str) -> dict[str, Any]:
    return item({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": ident})


def output(ident: str, text: str = "ok") -> dict[str, Any]:
    return item({"type": "function_call_output", "call_id": ident, "output": text})


class Counter:
    """``token_count`` events with a growing total (repeats of a total are ignored)."""

    def __init__(self) -> None:
        self.total = 0

    def __call__(self, prompt: int, reasoning_tokens: int = 0) -> dict[str, Any]:
        self.total += prompt
        last = {
            "input_tokens": prompt,
            "cached_input_tokens": prompt // 2,
            "output_tokens": reasoning_tokens + 10,
            "reasoning_output_tokens": reasoning_tokens,
        }
        info = {"total_token_usage": {"input_tokens": self.total}, "last_token_usage": last}
        return line("event_msg", {"type": "token_count", "info": info})


# One session, three ways: responses as (reasoning tokens or None, call ids, final text).
RESPONSES: list[tuple[int | None, list[str], str | None]] = [
    (50, ["a", "b"], None),  # two parallel calls
    (20, ["c"], None),
    (None, [], "done"),
]
PROMPTS = [1000, 1300, 1600]


def response_lines(order: str, count: Counter, n: int) -> list[dict[str, Any]]:
    think, calls, text = RESPONSES[n]
    model = [reasoning(40)] if think is not None else []
    tokens = think or 0
    if order == "0.36":  # count first; each call followed by its output
        out = [line("turn_context", {"model": "gpt-5-codex"}), count(PROMPTS[n], tokens), *model]
        for ident in calls:
            out += [call(ident), output(ident)]
        return out + ([answer(text)] if text else [])
    model += [call(i) for i in calls] + ([answer(text)] if text else [])
    outputs = [output(i) for i in calls]
    if order == "0.104":  # count after the model items, before the outputs
        return [*model, count(PROMPTS[n], tokens), *outputs]
    return [*model, *outputs, count(PROMPTS[n], tokens)]  # 0.140: after the outputs


def session(order: str) -> list[dict[str, Any]]:
    count = Counter()
    lines = [line("session_meta", {"id": "s", "base_instructions": {"text": "Codex."}})]
    lines += [line("turn_context", {"model": "gpt-5-codex"}), user("go")]
    for n in range(len(RESPONSES)):
        lines += response_lines(order, count, n)
    return lines


def sent_outputs(request: Any) -> list[str]:
    return [i["call_id"] for i in request["input"] if i.get("type") == "function_call_output"]


@pytest.mark.parametrize("order", ["0.36", "0.104", "0.140"])
def test_each_version_pairs_a_count_with_its_response(order: str) -> None:
    [run] = read_runs(jsonl(*session(order)))
    calls = run.calls()
    assert [c.usage["input_tokens"] for c in calls if c.usage] == PROMPTS
    assert len(calls) == len(PROMPTS)
    # each request carries the outputs of the responses before it, never its own calls'
    assert [sent_outputs(c.request) for c in calls] == [[], ["a", "b"], ["a", "b", "c"]]
    assert [len(c.request["input"]) for c in calls] == [1, 6, 9]
    usage = calls[0].usage
    assert usage is not None
    assert usage["input_tokens_details"] == {"cached_tokens": 500}
    assert usage["output_tokens_details"] == {"reasoning_tokens": 50}


@pytest.mark.parametrize("order", ["0.36", "0.104", "0.140"])
def test_reasoning_items_carry_their_responses_reasoning_tokens(order: str) -> None:
    [run] = read_runs(jsonl(*session(order)))
    notes = [i.get(REASONING_TOKENS) for i in run.body["input"] if i["type"] == "reasoning"]
    assert notes == [50, 20]


def test_an_old_rollout_resumed_by_a_newer_version_keeps_pairing() -> None:
    """Resumed in place, a 0.36 rollout goes on in the order of the version resuming it."""
    count = Counter()
    lines = [line("session_meta", {"id": "s"}), user("go")]
    lines += response_lines("0.36", count, 0) + response_lines("0.36", count, 2)
    lines += [user("more")]
    lines += response_lines("0.140", count, 1) + response_lines("0.140", count, 2)
    [run] = read_runs(jsonl(*lines))
    assert [c.usage["input_tokens"] for c in run.calls() if c.usage] == [1000, 1600, 1300, 1600]
    assert [sent_outputs(c.request) for c in run.calls()][2:] == [["a", "b"], ["a", "b", "c"]]


def test_a_count_of_no_response_is_no_call() -> None:
    """After its response is counted, a count with no items of its own (a compaction's
    request) is dropped, not given to the next response."""
    count = Counter()
    lines = session("0.140")
    lines += [count(900), user("next"), answer("ok"), count(1700)]
    [run] = read_runs(jsonl(*lines))
    assert [c.usage["input_tokens"] for c in run.calls() if c.usage] == [*PROMPTS, 1700]


def test_a_count_without_a_prompt_is_no_report() -> None:
    """After a compaction Codex reports its own estimate: no input tokens, a new total.
    It is no response's count, not even that of a response cut off before its own."""
    count = Counter()
    estimate = count(0)
    estimate["payload"]["info"]["last_token_usage"]["total_tokens"] = 41_000
    interrupted = [user("next"), reasoning(4), call("z")]
    lines = [*session("0.140"), *interrupted, estimate, user("again"), answer("ok"), count(1700)]
    [run] = read_runs(jsonl(*lines))
    assert [c.usage["input_tokens"] if c.usage else None for c in run.calls()] == [
        *PROMPTS,
        None,
        1700,
    ]


def test_interleaved_outputs_stay_in_their_response() -> None:
    """0.36-0.42 write a parallel response's calls each followed by its output: one call."""
    [run] = read_runs(jsonl(*session("0.36")))
    starts = sorted(run.calls_at or ())
    types = [run.body["input"][i]["type"] for i in starts]
    assert types == ["reasoning", "reasoning", "message"]


def raw(body: Any) -> int:
    t = load(body, "openai-responses")
    return t.raw_tokens(list(range(len(t.view.items))))


def test_a_reasoning_item_is_priced_at_its_reasoning_tokens() -> None:
    [run] = read_runs(jsonl(*session("0.140")))
    reasoning = [i for i in run.body["input"] if i["type"] == "reasoning"]
    bare = [{k: v for k, v in i.items() if k != REASONING_TOKENS} for i in reasoning]
    empty = [dict(i, encrypted_content="") for i in bare]
    # noted: each item costs its framing plus its response's reasoning tokens (50, 20)
    assert raw(dict(run.body, input=reasoning)) - raw(dict(run.body, input=empty)) == 70
    # without the note the ciphertext is priced as text, which costs more
    assert raw(dict(run.body, input=bare)) > raw(dict(run.body, input=reasoning))


# --- what Codex sends of what it records --------------------------------------------------


def policy(mode: str, limit: int) -> dict[str, Any]:
    return line(
        "turn_context", {"model": "gpt-5", "truncation_policy": {"mode": mode, "limit": limit}}
    )


@pytest.mark.parametrize(("mode", "limit", "budget"), [("tokens", 100, 480), ("bytes", 1000, 1200)])
def test_a_long_tool_output_is_cut_as_codex_keeps_it(mode: str, limit: int, budget: int) -> None:
    long = "".join(f"line {n:04d} é\n" for n in range(400))  # 5,600 bytes, 2 bytes for é
    fits = "x" * budget
    lines = [
        line("session_meta", {"id": "s"}),
        policy(mode, limit),
        user("go"),
        call("a"),
        call("b"),
        output("a", long),
        output("b", fits),
        answer("done"),
    ]
    [run] = read_runs(jsonl(*lines))
    cut, kept = (i["output"] for i in run.body["input"] if i["type"] == "function_call_output")
    assert kept == fits  # at the budget: as recorded
    found = re.fullmatch(
        r"Total output lines: 401\n\n(.*)…(\d+) tokens truncated…\n(.*)", cut, re.DOTALL
    )
    assert found is not None
    head, removed, tail = found[1].encode(), int(found[2]), found[3].encode()
    whole = long.encode()
    assert whole.startswith(head) and whole.endswith(tail)
    # half the budget from each end, less a split é (2 bytes) at either cut
    assert budget // 2 - 1 <= len(head) <= budget // 2
    assert budget - budget // 2 - 1 <= len(tail) <= budget - budget // 2
    assert removed == -(-(len(whole) - budget) // 4)


def test_what_codex_never_sends_is_not_in_the_body() -> None:
    """``ghost_snapshot`` items (for ``/undo``) and ``system`` messages stay out of prompts."""
    snapshot = item({"type": "ghost_snapshot", "ghost_commit": {"id": "abc", "parent": None}})
    system = item(
        {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "x"}]}
    )
    lines = [line("session_meta", {"id": "s"}), snapshot, system, user("go"), answer("ok")]
    [run] = read_runs(jsonl(*lines))
    assert [i["type"] for i in run.body["input"]] == ["message", "message"]


def test_without_a_policy_outputs_stay_as_recorded() -> None:
    long = "y" * 100_000
    lines = [
        line("session_meta", {"id": "s"}),
        user("go"),
        call("a"),
        output("a", long),
        answer("ok"),
    ]
    [run] = read_runs(jsonl(*lines))
    assert run.body["input"][2]["output"] == long


# --- compaction and rollback ----------------------------------------------------------------


def developer(text: str) -> dict[str, Any]:
    content = [{"type": "input_text", "text": text}]
    return item({"type": "message", "role": "developer", "content": content})


def texts(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(i["role"], codex._text(i)) for i in items]


def test_a_legacy_compaction_keeps_the_user_messages_and_the_summary() -> None:
    count = Counter()
    lines = [
        line("session_meta", {"id": "s"}),
        developer("<permissions instructions>"),
        user("<environment_context>cwd</environment_context>"),
        user("first"),
        answer("one"),
        count(100),
        user("second"),
        answer("two"),
        count(200),
        line("compacted", {"message": "S"}),
        user("third"),
        answer("three"),
        count(300),
    ]
    first, second = read_runs(jsonl(*lines))
    assert [c.usage["input_tokens"] for c in first.calls() if c.usage] == [100, 200]
    assert texts(second.body["input"]) == [
        ("developer", "<permissions instructions>"),
        ("user", "<environment_context>cwd</environment_context>"),
        ("user", "first"),
        ("user", "second"),
        ("user", "S"),
        ("user", "third"),
        ("assistant", "three"),
    ]
    assert [c.usage["input_tokens"] for c in second.calls() if c.usage] == [300]


def test_a_legacy_compaction_keeps_the_newest_user_messages_up_to_its_limit() -> None:
    big = "a" * 60_000 + "b" * 40_000  # 25,000 of Codex's tokens: more than the 20,000 left
    lines = [
        line("session_meta", {"id": "s"}),
        user("oldest"),
        answer("0"),
        user(big),
        answer("1"),
        user("newest"),
        answer("2"),
        line("compacted", {"message": ""}),
        user("go on"),
    ]
    _, second = read_runs(jsonl(*lines))
    kept = [t for _, t in texts(second.body["input"])]
    assert kept[1:] == ["newest", "(no summary available)", "go on"]
    found = re.fullmatch(r"Total output lines: 1\n\n(a*)…\d+ tokens truncated…\n(b*)", kept[0])
    assert found is not None
    # "newest" is 2 of Codex's tokens: 19,998 are left, 79,992 bytes, half from each end
    assert (len(found[1]), len(found[2])) == (39_996, 39_996)


def test_a_rollback_drops_the_last_user_turns_and_keeps_their_calls() -> None:
    count = Counter()
    lines = [
        line("session_meta", {"id": "s"}),
        user("<environment_context>cwd</environment_context>"),
        user("a"),
        answer("A"),
        count(100),
        developer("<model switch>"),
        user("b"),
        answer("B"),
        count(200),
        line("event_msg", {"type": "thread_rolled_back", "num_turns": 1}),
        user("c"),
        answer("C"),
        count(150),
    ]
    first, second = read_runs(jsonl(*lines))
    assert [c.usage["input_tokens"] for c in first.calls() if c.usage] == [100, 200]
    assert [t for _, t in texts(second.body["input"])] == [
        "<environment_context>cwd</environment_context>",
        "a",
        "A",
        "c",
        "C",
    ]
    assert [c.usage["input_tokens"] for c in second.calls() if c.usage] == [150]
    assert second.current and not first.current


@pytest.mark.parametrize("turns", [2, 5])
def test_rolling_back_every_turn_keeps_what_came_before_the_first(turns: int) -> None:
    lines = [
        line("session_meta", {"id": "s"}),
        user("<environment_context>cwd</environment_context>"),
        user("a"),
        answer("A"),
        user("b"),
        answer("B"),
        line("event_msg", {"type": "thread_rolled_back", "num_turns": turns}),
    ]
    runs = read_runs(jsonl(*lines))
    assert texts(runs[-1].body["input"]) == [
        ("user", "<environment_context>cwd</environment_context>")
    ]


# --- generated sessions ------------------------------------------------------------------

Turn = list[tuple[int | None, int]]
"""A user turn: its responses as (reasoning tokens or None, number of parallel calls);
a response with no call ends the turn with a message."""


def generated(order: str, turns: list[Turn]) -> tuple[list[dict[str, Any]], list[list[str]]]:
    """A rollout in ``order``, and for each response the call ids whose outputs its
    request carries."""
    count = Counter()
    lines = [line("session_meta", {"id": "g"})]
    sent: list[list[str]] = []
    done: list[str] = []
    prompt = 1000
    for t, responses in enumerate(turns):
        lines += [line("turn_context", {"model": "gpt-5"}), user(f"turn {t}")]
        for r, (think, calls) in enumerate(responses):
            ids = [f"t{t}r{r}c{k}" for k in range(calls)]
            first = [reasoning(8)] if think is not None else []
            last = [] if ids else [answer("done")]
            prompt += 100
            counted = count(prompt, think or 0)
            if order.startswith("0.36"):  # count first, each call followed by its output
                lines += [line("turn_context", {})] if order == "0.36" else []
                lines += [counted, *first]
                for i in ids:
                    lines += [call(i), output(i)]
                lines += last
            else:
                model = [*first, *map(call, ids), *last]
                outputs = [output(i) for i in ids]
                if order == "0.104":
                    lines += [*model, counted, *outputs]
                else:
                    lines += [*model, *outputs, counted]
            sent.append(list(done))
            done += ids
            if not ids:
                break
    return lines, sent


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(["0.36", "0.36 without turn_context lines", "0.104", "0.140"]),
    st.lists(
        st.lists(
            st.tuples(st.one_of(st.none(), st.integers(0, 900)), st.integers(0, 4)),
            min_size=1,
            max_size=5,
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_generated_sessions_pair_every_count_with_its_response(
    order: str, turns: list[Turn]
) -> None:
    lines, sent = generated(order, turns)
    [run] = read_runs(jsonl(*lines))
    calls = run.calls()
    assert len(calls) == len(sent)
    assert [c.usage["input_tokens"] for c in calls if c.usage] == [
        1100 + 100 * n for n in range(len(sent))
    ]
    assert [sent_outputs(c.request) for c in calls] == sent


# --- measured on the samples --------------------------------------------------------------

REASONED = ("cpolar-connect", "agentic-neurodata", "codemie-rollout-2026-05-11T11")


def texts_of(item: dict[str, Any]) -> list[str]:
    """The text an item carries, but a reasoning item's (names, arguments, outputs)."""
    t = item["type"]
    if t == "reasoning":
        return []
    if t == "message":
        return [codex._text(item)]
    if t in ("function_call", "custom_tool_call"):
        return [item["name"], item.get("arguments", item.get("input", ""))]
    out = item.get("output")
    return [out if isinstance(out, str) else orjson.dumps(item).decode()]


def step_excesses() -> list[int]:
    """Between two calls of one turn, over each step whose response reasoned: how much
    more the reported count grew than the response's reasoning tokens, the exact o200k
    tokens of its other items and 9 tokens an item."""
    quicktok = pytest.importorskip("quicktok")
    count = quicktok.get_encoding("o200k_base").count
    found = []
    for path in sorted((AGENT_TOOLS / "codex").glob("*.jsonl")):
        if not path.name.startswith(REASONED):
            continue
        for run in read_runs(path.read_bytes()):
            items, starts = run.body["input"], sorted(run.usage_at)
            for a, b in itertools.pairwise(starts):
                step = items[a:b]
                details = run.usage_at[a].get("output_tokens_details", {})
                tokens = details.get("reasoning_tokens", 0)
                if not tokens or any(codex._user_text(i) is not None for i in step):
                    continue
                other = sum(count(t) for i in step for t in texts_of(i))
                grew = run.usage_at[b]["input_tokens"] - run.usage_at[a]["input_tokens"]
                found.append(grew - tokens - other - 9 * len(step))
    return found


@corpus
@pytest.mark.corpus
def test_a_resent_reasoning_item_counts_its_reasoning_tokens() -> None:
    """The figure docs/sessions.md quotes: re-sent within a turn, a reasoning item adds
    about its response's reasoning tokens to the next reported count."""
    excess = step_excesses()
    page = " ".join(_MARK.sub("", (ROOT / "docs" / "sessions.md").read_text()).split())
    found = re.search(r"never by more than (\d+) tokens over that on the (\d+) steps", page)
    assert found is not None
    assert (max(excess), len(excess)) == (int(found[1]), int(found[2]))


@corpus
@pytest.mark.corpus
def test_a_ciphertext_priced_as_text_costs_many_times_its_reasoning_tokens() -> None:
    """The figure docs/sessions.md quotes, on the samples whose text was not redacted."""
    ratios = []
    for path in sorted((AGENT_TOOLS / "codex").glob("*.jsonl")):
        if path.name.startswith("localpush"):  # free text, ciphertexts too, replaced
            continue
        for run in read_runs(path.read_bytes()):
            for it in run.body["input"]:
                tokens = it.get(REASONING_TOKENS) if it["type"] == "reasoning" else None
                if not tokens:
                    continue
                bare = {k: v for k, v in it.items() if k not in (REASONING_TOKENS, "summary")}
                text = raw({"input": [bare]}) - raw({"input": [dict(bare, encrypted_content="")]})
                ratios.append(text / tokens)
    ratios.sort()
    page = " ".join(_MARK.sub("", (ROOT / "docs" / "sessions.md").read_text()).split())
    found = re.search(
        r"costs ([\d.]+)–([\d.]+) times the reasoning tokens it carries "
        r"\(median ([\d.]+), over the (\d+) items",
        page,
    )
    assert found is not None
    median = ratios[len(ratios) // 2]
    quoted = (f"{ratios[0]:.1f}", f"{ratios[-1]:.0f}", f"{median:.1f}", str(len(ratios)))
    assert quoted == found.groups()


@pytest.mark.parametrize("parent", ["0.36", "0.104", "0.140"])
def test_a_fork_reads_its_parents_order_and_its_own(parent: str) -> None:
    """A rollout forked by a newer Codex replays its parent's lines as the parent's
    version wrote them: the replayed reasoning gets its own response's tokens, the
    replayed counts are no call, and the fork's own counts pair in its own order."""
    copy, later = "2026-04-01T10:00:00.100Z", "2026-04-01T10:00:09.000Z"
    replayed = [dict(v, timestamp=copy) for v in session(parent)]
    replayed[0]["payload"] = {"id": "s", "base_instructions": {"text": "Codex."}}
    count = Counter()
    count.total = 10_000
    own = [user("go on"), *response_lines("0.140", count, 1), *response_lines("0.140", count, 2)]
    lines = [
        line("session_meta", {"id": "fork", "forked_from_id": "s"}),
        *replayed,
        *(dict(v, timestamp=later) for v in own),
    ]
    [run] = read_runs(jsonl(*lines))
    calls = run.calls()
    assert [c.usage["input_tokens"] if c.usage else None for c in calls] == [1300, 1600]
    notes = [i.get(REASONING_TOKENS) for i in run.body["input"] if i["type"] == "reasoning"]
    assert notes == [50, 20, 20]
