"""Fuzzing the CLI with mutated transcripts.

Valid transcripts are generated (Chat Completions) or taken from the format
fixtures (Anthropic, Gemini, Responses, legacy Chat), perhaps given provider compaction
(an Anthropic ``compaction`` block in a model message, OpenAI Responses ``compaction``
items: where the provider puts them, or anywhere, once or several times), then mutated:
messages dropped, duplicated, moved; fields given values of the wrong type; huge strings
injected; the serialized bytes truncated, corrupted or wrapped. Each case runs ``estimate``,
``prune``, ``lint`` or ``repair`` in-process and asserts:

* the exit code is one ctxwin documents, and nothing escapes as a traceback
  or an "internal error";
* ``prune`` either writes nothing to OUT (any failure, and a budget that is not
  positive), or writes the input unchanged (it fit), or writes a transcript
  that breaks no pairing or format rule, has no more advisory problems than
  the input (``ctxwin.fitting.rules``), is an ordered subsequence of the input and
  is within the budget;
* ``repair`` either writes nothing (exit 1), or writes the input unchanged
  (nothing to fix), or writes a transcript with no lint problem (but
  ``reused-call-id``) that a second repair leaves as it is.

``make test`` runs 500 cases; ``make fuzz`` sets ``CTXWIN_FUZZ_EXAMPLES`` to
10,000 and prints the count.
"""

from __future__ import annotations

import copy
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxwin import codec, core
from ctxwin.fitting import rules
from tests.conftest import Cli
from tests.hostile_util import EXIT_CODES, WIDE

EXAMPLES = int(os.environ.get("CTXWIN_FUZZ_EXAMPLES", "500"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# --- valid transcripts -------------------------------------------------------------------


@st.composite
def transcripts(draw: st.DrawFn) -> dict[str, Any]:
    """A Chat Completions body that breaks no rule: parallel calls, results, user turns."""
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": "sys " * draw(st.integers(0, 50))})
    messages.append({"role": "user", "content": "task " * draw(st.integers(0, 50))})
    next_id = 0
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["calls", "calls", "calls", "text", "user"]))
        if kind == "user":
            messages.append({"role": "user", "content": "more " * draw(st.integers(0, 30))})
            continue
        if kind == "text":
            messages.append({"role": "assistant", "content": "ok " * draw(st.integers(0, 40))})
            continue
        ids = [f"call_{next_id + k}" for k in range(draw(st.integers(1, 3)))]
        next_id += len(ids)
        calls = [
            {
                "id": i,
                "type": "function",
                "function": {"name": "run", "arguments": '{"cmd": "ls"}'},
            }
            for i in ids
        ]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        for i in draw(st.permutations(ids)):
            size = draw(st.integers(0, 3000))
            messages.append({"role": "tool", "tool_call_id": i, "content": "r" * size})
    body: dict[str, Any] = {"messages": messages}
    if draw(st.booleans()):
        body = {"model": draw(st.sampled_from(["gpt-4o", "mystery-model"])), **body}
    if draw(st.booleans()):
        body["tools"] = [{"type": "function", "function": {"name": "run", "parameters": {}}}]
    return body


FIXTURES = Path(__file__).parent / "fixtures"
SEEDS = [orjson.loads(p.read_bytes()) for p in sorted(FIXTURES.glob("*.json"))]
"""Valid bodies of every wire format (Anthropic, Gemini, Responses, legacy Chat)."""


def items_key(body: dict[str, Any]) -> str:
    """The key of the body's item list (``messages``, ``contents`` or ``input``)."""
    return next(k for k in ("messages", "contents", "input") if isinstance(body.get(k), list))


def seeds() -> st.SearchStrategy[dict[str, Any]]:
    generated = transcripts()
    return st.one_of(generated, generated, st.sampled_from(SEEDS)) if SEEDS else generated


# --- mutations ---------------------------------------------------------------------------

INT64 = st.integers(-(2**63), 2**63 - 1)
JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    INT64,
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.lists(INT64, max_size=3),
    st.dictionaries(st.text(max_size=5), INT64, max_size=3),
)
FIELDS = ["role", "content", "tool_calls", "tool_call_id", "name", "type", "parts", "call_id"]
CALL_FIELDS = ["id", "type", "function"]
FUNCTION_FIELDS = ["name", "arguments"]


def _compaction(draw: st.DrawFn, responses: bool) -> dict[str, Any]:
    """A compaction element as the provider writes it (an Anthropic block, a Responses
    item), sometimes with a field of the wrong type or missing."""
    if responses:
        element: dict[str, Any] = {"type": "compaction", "id": f"cmp_{draw(st.integers(0, 9))}"}
        element["encrypted_content"] = "gAAAA" + "Qx9-" * draw(st.integers(0, 2000))
        field_name = "encrypted_content"
    else:
        element = {
            "type": "compaction",
            "content": "Summary: " + "done. " * draw(st.integers(0, 80)),
        }
        field_name = "content"
    damage = draw(st.integers(0, 9))
    if damage == 0:
        element[field_name] = draw(JSON_VALUES)
    elif damage == 1:
        del element[field_name]
    return element


def _is_reasoning(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "reasoning"


@st.composite
def add_compaction(draw: st.DrawFn, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with one or more compaction elements: Responses items anywhere in
    ``input``; Anthropic blocks in a model message's content (a string content becomes a
    text block before it). Other bodies are left as they are."""
    key = items_key(body)
    msgs: list[Any] = body[key]
    if key == "input":
        for _ in range(draw(st.integers(1, 2))):
            # mostly where OpenAI puts one (not right after a reasoning item), else anywhere
            after_reasoning = {k + 1 for k, x in enumerate(msgs) if _is_reasoning(x)}
            spots = [k for k in range(len(msgs) + 1) if k not in after_reasoning]
            if draw(st.integers(0, 3)) == 0:
                spots = list(range(len(msgs) + 1))
            msgs.insert(draw(st.sampled_from(spots)), _compaction(draw, True))
        TALLY.compacted["openai-responses"] += 1
        return body
    model = [m for m in msgs if isinstance(m, dict) and m.get("role") == "assistant"]
    text = str(msgs)
    if key != "messages" or not model or "tool_calls" in text or "function_call" in text:
        return body  # Chat bodies with calls stay Chat
    for _ in range(draw(st.integers(1, 2))):
        m = draw(st.sampled_from(model))
        content = m.get("content")
        if not isinstance(content, list):
            content = [{"type": "text", "text": content}] if isinstance(content, str) else []
            m["content"] = content
        content.insert(draw(st.integers(0, len(content))), _compaction(draw, False))
    TALLY.compacted["anthropic"] += 1
    return body


@st.composite
def mutate_body(draw: st.DrawFn, body: dict[str, Any]) -> dict[str, Any] | list[Any]:
    """Structural mutations of the parsed body (after compaction, one time in two)."""
    body = copy.deepcopy(body)
    key = items_key(body)
    if draw(st.booleans()):
        body = draw(add_compaction(body))
    msgs: list[Any] = body[key]
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2, 4]))):
        if not msgs:
            break
        i = draw(st.integers(0, len(msgs) - 1))
        op = draw(
            st.sampled_from(
                ["drop", "duplicate", "move", "field", "call", "huge", "replace", "swap-ids"]
            )
        )
        if op == "drop":
            del msgs[i]
        elif op == "duplicate":
            msgs.insert(draw(st.integers(0, len(msgs))), copy.deepcopy(msgs[i]))
        elif op == "move":
            msgs.insert(draw(st.integers(0, len(msgs) - 1)), msgs.pop(i))
        elif op == "replace":
            msgs[i] = draw(JSON_VALUES)
        elif op == "field" and isinstance(msgs[i], dict):
            msgs[i][draw(st.sampled_from(FIELDS))] = draw(JSON_VALUES)
        elif (
            op == "call"
            and isinstance(msgs[i], dict)
            and isinstance(msgs[i].get("tool_calls"), list)
            and msgs[i]["tool_calls"]
            and isinstance(msgs[i]["tool_calls"][0], dict)
        ):
            call = msgs[i]["tool_calls"][0]
            if draw(st.booleans()):
                call[draw(st.sampled_from(CALL_FIELDS))] = draw(JSON_VALUES)
            elif isinstance(call.get("function"), dict):
                call["function"][draw(st.sampled_from(FUNCTION_FIELDS))] = draw(JSON_VALUES)
        elif op == "huge" and isinstance(msgs[i], dict):
            huge = "h" * draw(st.sampled_from([10_000, 200_000, 1_000_000]))
            if isinstance(msgs[i].get("content"), list) and msgs[i]["content"]:
                msgs[i]["content"][0] = {"type": "text", "text": huge}
            elif isinstance(msgs[i].get("parts"), list):
                msgs[i]["parts"] = [{"text": huge}]
            else:
                msgs[i]["content"] = huge
        elif op == "swap-ids":
            ids = [
                m.get("tool_call_id")
                for m in msgs
                if isinstance(m, dict) and isinstance(m.get("tool_call_id"), str)
            ]
            if ids and isinstance(msgs[i], dict):
                msgs[i]["tool_call_id"] = draw(st.sampled_from(ids))
    if key == "messages" and draw(st.integers(0, 9)) == 0:
        return msgs  # a bare messages array
    return body


@st.composite
def mutate_bytes(draw: st.DrawFn, data: bytes) -> bytes:
    """Byte-level damage: truncation, bad bytes, BOM, NaN, deep nesting, big integers."""
    op = draw(
        st.sampled_from(
            ["none", "none", "none", "truncate", "flip", "insert", "bom", "nan", "deep", "bigint"]
        )
    )
    if op == "truncate":
        return data[: draw(st.integers(0, len(data)))]
    if op == "flip" and data:
        i = draw(st.integers(0, len(data) - 1))
        return data[:i] + bytes([draw(st.integers(0, 255))]) + data[i + 1 :]
    if op == "insert":
        i = draw(st.integers(0, len(data)))
        return data[:i] + draw(st.binary(min_size=1, max_size=4)) + data[i:]
    if op == "bom":
        return b"\xef\xbb\xbf" + data
    if op == "nan" and data.startswith(b"{"):
        return b'{"temperature": ' + draw(st.sampled_from([b"NaN", b"-Infinity"])) + b"," + data[1:]
    if op == "deep" and data.startswith(b"{"):
        n = draw(st.sampled_from([10, 300, 1024, 1100]))
        return b'{"meta": ' + b"[" * n + b"]" * n + b"," + data[1:]
    if op == "bigint" and data.startswith(b"{"):
        return b'{"seed": 123456789012345678901234567890,' + data[1:]
    return data


@st.composite
def cases(draw: st.DrawFn) -> tuple[bytes, list[str]]:
    body = draw(mutate_body(draw(seeds())))
    data = orjson.dumps(body)
    if draw(st.booleans()):
        data = orjson.dumps(body, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    data = draw(mutate_bytes(data))
    size = _estimate(data)
    if size is not None and draw(st.integers(0, 3)) < 3:
        # Aim the budget below the transcript's size, so pruning is usually needed.
        reserve = draw(st.integers(0, size // 10 + 1))
        budget = draw(st.integers(size // 3, size + 8))
        window = (budget + reserve) * 100 // 97 + 1  # the safety margin is 3 % of the window
    else:
        reserve = draw(st.integers(0, 2000))
        window = draw(st.integers(1, 60_000))
    return data, ["-c", str(max(window, 1)), "--max-tokens", str(reserve)]


def _estimate(data: bytes) -> int | None:
    """The input's token estimate, or ``None`` when it cannot be read."""
    try:
        transcript = core.load(codec.parse(data))
        return core.plan(transcript, context_length=1 << 40, max_tokens=0).result.estimated_tokens
    except Exception:  # a crash here shows up as a failure of the CLI run itself
        return None


# --- the checks --------------------------------------------------------------------------


@dataclass
class Tally:
    cases: int = 0
    crashes: int = 0
    invalid: int = 0
    pruned_checked: int = 0
    """prune outputs that differ from the input, checked against the rules and the budget."""
    unchanged: int = 0
    """prune outputs equal to the input, checked to have fit."""
    repaired: int = 0
    """repair outputs that differ from the input, checked to lint clean."""
    codes: dict[int, int] = field(default_factory=dict)
    compacted: dict[str, int] = field(
        default_factory=lambda: {"anthropic": 0, "openai-responses": 0}
    )
    """Cases given provider compaction, by format (mutations may have hit them too)."""
    compaction_checked: int = 0
    """prune outputs checked (pruned or unchanged) whose input holds a compaction element."""


TALLY = Tally()


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    # A memory file system where there is one: every prune fsyncs its OUT.
    with tempfile.TemporaryDirectory(prefix="ctxwin-fuzz-", dir=shm) as tmp:
        yield Path(tmp)
    if EXAMPLES > 500:
        print(
            f"\nfuzz: {TALLY.cases:,} cases, {TALLY.crashes} crashes, "
            f"{TALLY.invalid} invalid outputs; exit codes {dict(sorted(TALLY.codes.items()))}; "
            f"prune outputs checked: {TALLY.pruned_checked:,} pruned, "
            f"{TALLY.unchanged:,} unchanged; repair outputs checked: {TALLY.repaired:,}; "
            f"given compaction: {TALLY.compacted['anthropic']:,} Anthropic, "
            f"{TALLY.compacted['openai-responses']:,} Responses, "
            f"{TALLY.compaction_checked:,} of them with a prune output checked"
        )


def _fits(data: bytes, flags: list[str]) -> bool:
    """Whether the input as given is within its budget (a prune that exits 0 never has
    a budget that is not positive)."""
    transcript = core.load(codec.parse(data))
    plan = core.plan(transcript, context_length=int(flags[1]), max_tokens=int(flags[3]))
    assert plan.result.enforced
    return plan.result.fits


STRATEGIES: list[list[str]] = [
    [],
    [],
    ["--strategy", "clear-results,drop-turns", "--keep-results", "1"],
    ["--strategy", "clear-thinking,clear-results,drop-turns", "--clear-at-least", "50"],
    ["--strategy", "drop-turns,truncate-results", "--exclude-tools", "f,search"],
]
"""The strategy flags a fuzz case is run with (none: the default, drop-turns)."""


def _outline(entry: object) -> object:
    """An entry without the content a strategy may edit (what must stay as it was)."""
    if isinstance(entry, dict):
        return {k: v for k, v in entry.items() if k not in ("content", "output", "parts")}
    return entry


def check_output(data: bytes, out: bytes, flags: list[str], edits: bool = False) -> None:
    """A prune output is the input unchanged (it fit), or valid and within the budget;
    under a strategy that ``edits``, entries may differ in their content only."""
    TALLY.compaction_checked += b'"compaction"' in data
    if out == data:
        assert _fits(data, flags), "input returned unchanged although it needed pruning"
        TALLY.unchanged += 1
        return
    src = codec.parse(data)
    body = codec.parse(out)
    transcript = core.load(body)
    found = transcript.problems()
    assert rules.blocking(found) == [], found
    advisory = len(core.load(src).problems())  # the input had no blocking ones
    assert len(found) <= advisory, found
    plan = core.plan(transcript, context_length=int(flags[1]), max_tokens=int(flags[3]))
    assert plan.result.estimated_tokens <= plan.result.budget
    src_msgs = src if isinstance(src, list) else src[items_key(src)]
    out_msgs = body if isinstance(body, list) else body[items_key(body)]
    it = iter(src_msgs)
    same = (lambda a, b: _outline(a) == _outline(b)) if edits else (lambda a, b: a == b)
    assert all(any(same(m, s) for s in it) for m in out_msgs), "output is not a subsequence"
    TALLY.pruned_checked += 1


def check_repair(data: bytes, code: int, out: Path, stderr: str) -> None:
    """A repair wrote nothing (exit 1, one error line), the input (nothing to fix), or
    a transcript that lints clean and that repairing again leaves as it is."""
    from ctxwin.fitting.repairing import LEFT_AS_IS, repair

    assert code in (0, 1), stderr
    if code == 1:
        assert not out.exists()
        assert stderr.startswith("ctxwin: error: ") and stderr.count("\n") == 1, stderr
        return
    written = out.read_bytes()
    before = core.load(codec.parse(data))
    if written == data:
        assert [p for p in before.problems() if p.rule not in LEFT_AS_IS] == []
        return
    body = codec.parse(written)
    after = core.load(body, before.format)
    assert [p for p in after.problems() if p.rule not in LEFT_AS_IS] == []
    again, done = repair(body, before.format)
    assert again is body and not done.changes, done
    TALLY.repaired += 1


@given(
    case=cases(),
    command=st.sampled_from(["prune", "prune", "estimate", "lint", "repair"]),
    strategy=st.sampled_from(STRATEGIES),
)
@FUZZ
def test_fuzz_cli(
    workdir: Path, case: tuple[bytes, list[str]], command: str, strategy: list[str], cli: Cli
) -> None:
    data, flags = case
    out = workdir / "out.json"
    out.unlink(missing_ok=True)
    if command == "prune":
        args = ["prune", "-", str(out), *flags, *strategy]
    elif command == "estimate":
        args = ["estimate", "-", "--json", *flags, *strategy]
    elif command == "repair":
        args = ["repair", "-", str(out), "-q"]
    else:
        args = ["lint", "--json", "-"]
    TALLY.cases += 1
    try:
        run = cli(*args, input=data)
    except BaseException:
        TALLY.crashes += 1
        raise
    TALLY.codes[run.exit_code] = TALLY.codes.get(run.exit_code, 0) + 1
    try:
        assert run.exit_code in EXIT_CODES - {4}, run.stderr
        assert "Traceback" not in run.stderr
        assert "internal error" not in run.stderr, run.stderr
        if command == "prune":
            if run.exit_code == 0:
                check_output(data, out.read_bytes(), flags, edits=bool(strategy))
            else:
                assert not out.exists()
                last = run.stderr.splitlines()[-1]
                if run.exit_code == 3:
                    assert last.startswith(("ctxwin: context truncated: ", "ctxwin: no budget")), (
                        run.stderr
                    )
                else:
                    assert last.startswith("ctxwin: error: "), run.stderr
                assert run.stderr.count("error:") == (run.exit_code != 3), run.stderr
        elif command == "repair":
            check_repair(data, run.exit_code, out, run.stderr)
        elif command == "lint" and run.exit_code in (0, 1):
            orjson.loads(run.stdout_bytes)
        elif command == "estimate" and run.exit_code in (0, 3):
            budget = int(flags[1]) - int(flags[3]) - -(-int(flags[1]) * 3 // 100)
            if budget <= 0:  # no budget: exit 3, no report
                assert (run.exit_code, run.stdout_bytes) == (3, b""), run.stderr
                assert run.stderr.splitlines()[-1].startswith("ctxwin: no budget"), run.stderr
            else:
                assert orjson.loads(run.stdout_bytes)["budget"] == budget
    except AssertionError:
        TALLY.invalid += 1
        raise


@given(case=cases())
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
def test_fuzz_real_process(case: tuple[bytes, list[str]], cli: Cli) -> None:
    """A few cases as real processes: the exit code and stderr a shell would see."""
    data, flags = case
    run = cli.process("prune", "-", "-", *flags, stdin=data, env=WIDE)
    stderr = run.stderr.decode("utf-8", "replace")
    assert run.returncode in EXIT_CODES - {4}, stderr
    assert "Traceback" not in stderr
    assert "internal error" not in stderr
    if run.returncode == 0:
        check_output(data, run.stdout, flags)
    else:
        assert run.stdout == b""
