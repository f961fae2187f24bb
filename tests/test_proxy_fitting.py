"""The proxy's decision without HTTP: routes, error shapes, fitting, calibration memory, usage."""

from __future__ import annotations

import gzip
import math
import zlib
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxwin
from ctxwin.fitting.pruning import total_cost
from ctxwin.proxy.fitting import (
    CLEARED,
    FIT,
    PRUNED,
    TRUNCATED,
    UNREAD,
    UNSAFE,
    Fitter,
    floor_message,
)
from ctxwin.proxy.metrics import Histogram, Metrics
from ctxwin.proxy.routes import (
    ANTHROPIC,
    CHAT,
    GEMINI,
    MESSAGES,
    OPENAI,
    RESPONSES,
    error_body,
    flavor_for,
    route_for,
)
from ctxwin.proxy.usage import UsageReader, prompt_tokens_of_json
from tests.builders import assistant, system, tool, user
from tests.proxy_support import config_for
from tests.strategies import transcripts


def agent_body(turns: int, result_bytes: int = 2000, **extra: Any) -> dict[str, Any]:
    messages = [system("you are an agent"), user("fix the bug")]
    for i in range(turns):
        messages += [assistant(f"c{i}"), tool(f"c{i}", f"{i} " + "x" * result_bytes)]
    return {"model": "gpt-4o", "messages": messages, **extra}


def fitter(**config: Any) -> Fitter:
    return Fitter(config_for("http://127.0.0.1:9", **config))


# --- routes and error shapes ---------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("POST", "/v1/chat/completions", CHAT),
        ("POST", "/openai/deployments/x/chat/completions/", CHAT),
        ("POST", "/v1/responses", RESPONSES),
        ("POST", "/v1/messages", MESSAGES),
        ("GET", "/v1/chat/completions", None),
        ("POST", "/v1/messages/count_tokens", None),
        ("POST", "/v1/responses/resp_1/cancel", None),
        ("GET", "/v1/models", None),
        ("POST", "/v1/embeddings", None),
    ],
)
def test_routes(method: str, path: str, expected: Any) -> None:
    assert route_for(method, path) == expected


def test_gemini_routes_take_the_model_from_the_path() -> None:
    for verb in ("generateContent", "streamGenerateContent"):
        route = route_for("POST", f"/v1beta/models/gemini-2.0-flash:{verb}")
        assert route is not None
        assert (route.fmt, route.flavor, route.model) == ("gemini", GEMINI, "gemini-2.0-flash")


def test_pass_through_error_flavors() -> None:
    assert flavor_for("/v1/messages/count_tokens") == ANTHROPIC
    assert flavor_for("/v1beta/models/gemini-2.0-flash:countTokens") == GEMINI
    assert flavor_for("/v1/models") == OPENAI


def test_error_shapes_are_the_providers() -> None:
    openai = orjson.loads(error_body(OPENAI, 400, "m", "context_length_exceeded"))
    assert openai == {
        "error": {
            "message": "m",
            "type": "invalid_request_error",
            "param": None,
            "code": "context_length_exceeded",
        }
    }
    anthropic = orjson.loads(error_body(ANTHROPIC, 413, "m", "request_too_large"))
    assert anthropic == {"type": "error", "error": {"type": "request_too_large", "message": "m"}}
    gemini = orjson.loads(error_body(GEMINI, 504, "m", "upstream_timeout"))
    assert gemini == {"error": {"code": 504, "message": "m", "status": "DEADLINE_EXCEEDED"}}


# --- the fitting decision --------------------------------------------------------------


def test_a_body_that_fits_is_forwarded_as_the_same_bytes() -> None:
    raw = orjson.dumps(agent_body(3), option=orjson.OPT_INDENT_2)  # not orjson's compact form
    fitted = fitter(context_length=100_000, max_tokens=1000).fit(CHAT, raw)
    assert fitted.action == FIT
    assert fitted.body is raw
    assert fitted.headers()["x-ctxwin-dropped-turns"] == "0"


def test_a_pruned_body_is_what_the_library_prunes() -> None:
    body = agent_body(30)
    fitted = fitter(context_length=8000, max_tokens=500).fit(CHAT, orjson.dumps(body))
    assert fitted.action == PRUNED
    expected, plan = ctxwin.prune(body, context_length=8000, max_tokens=500, fmt="openai-chat")
    assert orjson.loads(fitted.body) == expected
    headers = fitted.headers()
    assert headers["x-ctxwin-dropped-turns"] == str(plan.result.dropped_turns) != "0"
    assert headers["x-ctxwin-dropped-messages"] == str(len(plan.result.dropped))
    assert int(headers["x-ctxwin-estimated-tokens-after"]) <= int(headers["x-ctxwin-budget"])


@settings(max_examples=60, deadline=None)
@given(transcripts(), st.integers(200, 4000))
def test_forwarded_bodies_match_the_library(messages: list[Any], window: int) -> None:
    """Promise: the proxy forwards exactly what ``ctxwin.prune`` gives, or the original bytes."""
    body = {"model": "gpt-4o", "messages": messages, "max_tokens": 50}
    raw = orjson.dumps(body)
    fitted = fitter(context_length=window).fit(CHAT, raw)
    try:
        expected, _ = ctxwin.prune(body, context_length=window, fmt="openai-chat")
    except ctxwin.ContextTruncated:
        assert fitted.action == TRUNCATED
        assert fitted.body == b""
        return
    except ctxwin.InputError:
        assert fitted.action in (UNREAD, UNSAFE)
        assert fitted.body is raw
        return
    if fitted.action == FIT:
        assert fitted.body is raw
        assert expected is body
    else:
        assert fitted.action == PRUNED
        assert orjson.loads(fitted.body) == expected


@pytest.mark.parametrize(
    ("steps", "action"),
    [(("clear-results", "drop-turns"), CLEARED), (("clear-results",), CLEARED)],
)
def test_a_strategy_clears_results_as_the_library_does(steps: tuple[str, ...], action: str) -> None:
    body = agent_body(25)
    strategy = ctxwin.Strategy(steps=steps)
    fitted = fitter(context_length=8000, max_tokens=500, strategy=strategy).fit(
        CHAT, orjson.dumps(body)
    )
    expected, plan = ctxwin.prune(
        body, context_length=8000, max_tokens=500, fmt="openai-chat", strategy=strategy
    )
    assert fitted.action == action
    assert orjson.loads(fitted.body) == expected
    headers = fitted.headers()
    assert headers["x-ctxwin-cleared-results"] == str(plan.applied.cleared_results) != "0"
    assert headers["x-ctxwin-dropped-turns"] == "0"
    # what calibration learns against is the estimate of the edited body that was sent
    sent = ctxwin.load(expected, "openai-chat")
    assert fitted.plan is not None
    assert fitted.plan.raw_tokens_sent == sent.estimator.raw(total_cost(sent.view))


def test_floor_overflow_is_truncated_with_a_message_naming_ctxwin_and_the_fix() -> None:
    body = agent_body(2, result_bytes=40_000)
    fitted = fitter(context_length=4000, max_tokens=500).fit(CHAT, orjson.dumps(body))
    assert fitted.action == TRUNCATED
    assert fitted.body == b""
    message = floor_message(fitted)
    assert message.startswith("ctxwin proxy: request not forwarded")
    assert "newest" in message and "--context-length" in message


def test_malformed_json_raises_input_error() -> None:
    with pytest.raises(ctxwin.InputError):
        fitter().fit(CHAT, b'{"messages": [')


def test_a_body_the_route_cannot_read_is_forwarded_unread() -> None:
    raw = b'{"model": "gpt-4o", "messages": 7}'
    fitted = fitter().fit(CHAT, raw)
    assert (fitted.action, fitted.body) == (UNREAD, raw)
    assert "messages" in fitted.headers()["x-ctxwin-reason"]


def test_pruning_that_would_break_pairing_is_forwarded_unsafe() -> None:
    body = agent_body(30)
    body["messages"].insert(3, tool("nobody-called-this", "x"))
    raw = orjson.dumps(body)
    fitted = fitter(context_length=8000, max_tokens=500).fit(CHAT, raw)
    assert (fitted.action, fitted.body) == (UNSAFE, raw)


def test_a_big_integer_is_never_rewritten() -> None:
    body = agent_body(30)
    raw = orjson.dumps(body).replace(b'"model"', b'"seed":123456789012345678901234,"model"', 1)
    fitted = fitter(context_length=8000, max_tokens=500).fit(CHAT, raw)
    assert (fitted.action, fitted.body) == (UNSAFE, raw)


def test_gemini_budgets_for_the_model_in_the_path() -> None:
    route = route_for("POST", "/v1beta/models/gemini-2.0-flash:generateContent")
    assert route is not None
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    fitted = fitter().fit(route, orjson.dumps(body))
    assert fitted.plan is not None
    assert fitted.plan.budget.spec.name == "gemini-2.0-flash"


# --- calibration memory ----------------------------------------------------------------


def test_calibration_is_learned_per_conversation_and_only_grows() -> None:
    f = fitter(context_length=8000, max_tokens=500)
    first = f.fit(CHAT, orjson.dumps(agent_body(2)), ["Bearer a"])
    assert first.plan is not None
    raw = first.plan.raw_tokens_sent
    assert f.learn(first, int(raw * 1.5)) == pytest.approx(1.5, rel=0.01)
    assert f.learn(first, raw) == pytest.approx(1.5, rel=0.01)  # never shrinks
    later = f.fit(CHAT, orjson.dumps(agent_body(5)), ["Bearer a"])
    assert later.key == first.key
    assert later.plan is not None
    assert later.plan.result.calibration == pytest.approx(1.5, rel=0.01)
    other_user = f.fit(CHAT, orjson.dumps(agent_body(5)), ["Bearer b"])
    assert other_user.key != first.key
    other_run = orjson.dumps(agent_body(5) | {"messages": [user("another task")]})
    assert f.fit(CHAT, other_run, ["Bearer a"]).key != first.key


@pytest.mark.parametrize("context_length", [100_000, 8000])
def test_a_growing_conversation_is_read_incrementally(context_length: int) -> None:
    """Each request was read whole; a conversation's manager reads only what is new,
    and decides exactly what reading it whole decides (fits, or pruned)."""
    f = fitter(context_length=context_length, max_tokens=500)
    for turns in range(1, 30):
        body = agent_body(turns)
        fitted = f.fit(CHAT, orjson.dumps(body), ["Bearer a"])
        alone = fitter(context_length=context_length, max_tokens=500).fit(CHAT, orjson.dumps(body))
        assert (fitted.action, fitted.body, fitted.headers()) == (
            alone.action,
            alone.body,
            alone.headers(),
        )
    assert fitted.action == (FIT if context_length == 100_000 else PRUNED)
    assert fitted.manager is not None
    assert fitted.manager.messages_read == len(body["messages"])  # each message once


def test_usage_without_a_prompt_count_teaches_nothing() -> None:
    f = fitter()
    fitted = f.fit(CHAT, orjson.dumps(agent_body(1)))
    assert f.learn(fitted, None) is None
    assert f.learned() == 0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.floats(1.0, 3.0)), max_size=200))
def test_calibrations_stay_bounded_and_never_shrink(ops: list[tuple[int, float]]) -> None:
    f = fitter(conversations=8)
    raw_body = orjson.dumps(agent_body(1))
    best: dict[int, float] = {}
    for key, factor in ops:
        fitted = f.fit(CHAT, raw_body, [f"Bearer {key}"])
        assert fitted.plan is not None
        before = fitted.plan.calibration  # the seed for a conversation not remembered
        raw = fitted.plan.raw_tokens_sent
        after = f.learn(fitted, math.ceil(raw * factor))
        assert after == max(math.ceil(raw * factor) / raw, before)
        best[key] = after
        assert len(f.conversations.managers) <= 8
    seed = fitter().fit(CHAT, raw_body).plan
    assert seed is not None
    for key, factor in best.items():
        again = f.fit(CHAT, raw_body, [f"Bearer {key}"]).plan
        assert again is not None
        assert again.calibration in (seed.calibration, factor)  # forgotten, or as learned


# --- usage in responses ----------------------------------------------------------------


def sse(*events: Any) -> bytes:
    return b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events) + b"data: [DONE]\n\n"


STREAMS = [
    (sse({"choices": []}, {"choices": [], "usage": {"prompt_tokens": 321}}), 321),
    (
        b"event: message_start\n"
        + sse(
            {
                "type": "message_start",
                "message": {
                    "usage": {
                        "input_tokens": 10,
                        "cache_read_input_tokens": 300,
                        "cache_creation_input_tokens": 11,
                    }
                },
            },
            {"type": "message_delta", "usage": {"output_tokens": 5}},
        ),
        321,
    ),
    (sse({"type": "response.completed", "response": {"usage": {"input_tokens": 321}}}), 321),
    (sse({"usageMetadata": {"promptTokenCount": 300, "toolUsePromptTokenCount": 21}}), 321),
    (sse({"choices": []}), None),
]


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(STREAMS), st.lists(st.integers(1, 60), max_size=30))
def test_sse_usage_is_found_however_the_stream_is_chunked(
    stream: tuple[bytes, int | None], cuts: list[int]
) -> None:
    data, expected = stream
    reader = UsageReader(sse=True)
    at = 0
    for size in cuts:
        reader.feed(data[at : at + size])
        at += size
    reader.feed(data[at:])
    assert reader.result() == expected


def test_json_usage() -> None:
    assert prompt_tokens_of_json(b'{"usage": {"prompt_tokens": 9}}') == 9
    assert prompt_tokens_of_json(b'[{"usageMetadata": {"promptTokenCount": 4}}]') == 4
    assert prompt_tokens_of_json(b'{"usage": ') is None
    assert prompt_tokens_of_json(b'{"id": 1}') is None
    reader = UsageReader(sse=False)
    packed = gzip.compress(b'{"usage": {"input_tokens": 12}}')
    reader.feed(zlib.decompressobj(47).decompress(packed))
    assert reader.result() == 12


# --- metrics -----------------------------------------------------------------------------


def test_histogram_buckets_are_cumulative() -> None:
    h = Histogram((0.1, 1.0))
    for s in (0.05, 0.5, 0.7, 5.0):
        h.observe(s)
    assert h.lines("x")[:3] == [
        'x_bucket{le="0.1"} 1',
        'x_bucket{le="1.0"} 3',
        'x_bucket{le="+Inf"} 4',
    ]


def test_metrics_render_counts() -> None:
    m = Metrics(lambda: 3)
    m.requests["chat", "pruned"] += 2
    m.count("dropped_turns", 7)
    text = m.render().decode()
    assert 'ctxwin_proxy_requests_total{route="chat",action="pruned"} 2' in text
    assert "ctxwin_proxy_dropped_turns_total 7" in text
    assert "ctxwin_proxy_conversations 3" in text


def test_no_budget_is_not_forwarded_and_names_the_figures() -> None:
    """A window at most reserve + safety used to forward the body unchecked."""
    body = agent_body(1, max_tokens=4000)
    fitted = fitter(context_length=4000).fit(CHAT, orjson.dumps(body))
    assert fitted.action == TRUNCATED
    assert fitted.body == b""
    message = floor_message(fitted)
    assert message.startswith("ctxwin proxy: request not forwarded: ctxwin has no budget")
    assert "4,000-token window (flag)" in message and "4,000-token reserve" in message
    assert "(body)" in message and "120 tokens of safety" in message


def test_no_budget_is_worded_once() -> None:
    """The exception, the command line and the proxy each worded a budget that is not
    positive their own way: now each says :func:`ctxwin.errors.budget_words`."""
    from ctxwin.cli.funnel import no_budget_message
    from ctxwin.errors import budget_words

    body = agent_body(1, max_tokens=4000)
    fitted = fitter(context_length=4000).fit(CHAT, orjson.dumps(body))
    assert fitted.plan is not None
    b = fitted.plan.budget
    with pytest.raises(ctxwin.NoBudget) as raised:
        ctxwin.prune(body, context_length=4000)
    exc = raised.value
    assert (exc.budget, exc.safety) == (b.budget, b.safety) and b.budget <= 0
    figures = (b.context_length, b.reserve, b.safety, b.budget)
    words = budget_words(figures[0], "flag", figures[1], "body", *figures[2:])
    assert f"{b.budget:,} for the prompt" in words and "120 tokens of safety" in words
    assert str(exc).startswith(f"no budget: {words}")
    assert f"has no budget for {b.spec.name or 'the model'}: {words}. " in floor_message(fitted)
    flagged = budget_words(
        figures[0], "--context-length", figures[1], "the body's max_tokens", *figures[2:]
    )
    assert f": {flagged}; nothing was written." in no_budget_message(exc)


def test_the_floor_that_does_not_fit_is_worded_once() -> None:
    """The exception, the command line's verdict and the proxy each worded it their own way."""
    from ctxwin.cli.verdicts import verdict
    from ctxwin.errors import floor_words

    body = agent_body(2, result_bytes=40_000)
    fitted = fitter(context_length=4000, max_tokens=500).fit(CHAT, orjson.dumps(body))
    assert fitted.plan is not None
    r = fitted.plan.result
    words = floor_words(r.estimated_tokens_after, r.budget)
    assert "head plus the newest turn" in words and f"{r.budget:,}" in words
    with pytest.raises(ctxwin.ContextTruncated) as raised:
        ctxwin.prune(body, context_length=4000, max_tokens=500)
    assert str(raised.value) == f"context truncated: {words}"
    assert verdict(fitted.plan.report()) == f"context truncated: {words}"
    assert words in floor_message(fitted)
