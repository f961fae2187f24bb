"""The proxy's remembered conversations are capped in bytes (``--max-memory``), with an
accounting (:func:`~ctxwin.proxy.fitting.held_bytes`) that is an upper bound of what they
really hold, measured with ``tracemalloc``."""

from __future__ import annotations

import gc
import logging
import tracemalloc
from typing import Any

import httpx2 as httpx
import orjson
import pytest

from ctxwin.cli.proxy import parse_size
from ctxwin.errors import UsageError
from ctxwin.fitting.strategy import Strategy
from ctxwin.proxy.fitting import DEFAULT_MAX_MEMORY, Fitter, ProxyConfig
from ctxwin.proxy.routes import CHAT, MESSAGES, Route
from ctxwin.settings import Settings
from tests.conftest import Cli
from tests.hostile_util import assert_one_line_error
from tests.proxy_support import proxied
from tests.test_proxy_fitting import agent_body


def chat(c: int, turns: int, result_bytes: int = 1000) -> bytes:
    body = agent_body(turns, result_bytes)
    body["messages"][1] = {"role": "user", "content": f"task {c}"}
    return orjson.dumps(body)


def tiny(c: int) -> bytes:
    messages: list[Any] = [{"role": "user", "content": f"task {c}"}]
    messages += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"}] * 300
    return orjson.dumps({"model": "gpt-4o", "messages": messages})


def numbers(c: int) -> bytes:
    messages = [
        {"role": "user", "content": f"task {c}"},
        {"role": "assistant", "content": "a", "metadata": {"n": list(range(1000, 5000))}},
    ]
    return orjson.dumps({"model": "gpt-4o", "messages": messages})


def parts(c: int) -> bytes:
    messages: list[Any] = [{"role": "user", "content": [{"type": "text", "text": f"a{c}"}]}]
    for k in range(60):
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "b"}] * 4})
        messages.append({"role": "user", "content": [{"type": "text", "text": str(k)}]})
    return orjson.dumps({"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": messages})


ROOMY = Settings(context_length=128_000)
TIGHT = Settings(context_length=8000)
CLEARING = Settings(context_length=8000, strategy=Strategy(("clear-results", "drop-turns")))
SHAPES: dict[str, tuple[Route, Settings, Any]] = {
    "fits": (CHAT, ROOMY, lambda c: [chat(c, 30)]),
    "pruned": (CHAT, TIGHT, lambda c: [chat(c, 60)]),
    "cleared": (CHAT, CLEARING, lambda c: [chat(c, 30)]),
    "extended": (CHAT, TIGHT, lambda c: [chat(c, t) for t in (8, 10, 12, 14)]),
    "tiny messages": (CHAT, ROOMY, lambda c: [tiny(c)]),
    "one big string": (CHAT, ROOMY, lambda c: [chat(c, 1, 150_000)]),
    "integers": (CHAT, ROOMY, lambda c: [numbers(c)]),
    "content parts": (MESSAGES, ROOMY, lambda c: [parts(c)]),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_the_accounting_is_an_upper_bound_of_what_a_conversation_holds(
    shape: str, caplog: pytest.LogCaptureFixture
) -> None:
    # a refused request's ERROR record is kept by pytest's log capture, not by the proxy
    caplog.set_level(logging.CRITICAL + 1, logger="ctxwin.proxy")
    route, settings, requests = SHAPES[shape]
    n = 8
    fitter = Fitter(ProxyConfig(upstream="http://127.0.0.1:9", settings=settings))
    for raw in requests(n):  # warm the state all conversations share up
        fitter.fit(route, raw)
    first = fitter.held_total
    runs = [requests(c) for c in range(n)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for run in runs:
            for raw in run:
                fitter.fit(route, raw)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    accounted = fitter.held_total - first
    assert len(fitter.conversations.managers) == n + 1
    assert accounted >= held, (accounted, held)
    assert accounted <= 1.6 * held, (accounted, held)  # and close to it


def test_the_cap_in_bytes_forgets_the_least_recent() -> None:
    one = Fitter(ProxyConfig(upstream="http://127.0.0.1:9", settings=TIGHT))
    one.fit(CHAT, chat(0, 40))
    size = one.held_total
    cap = int(size * 3.5)
    fitter = Fitter(ProxyConfig(upstream="http://127.0.0.1:9", settings=TIGHT, max_memory=cap))
    keys: list[tuple[str | None, str]] = []
    for c in range(6):
        fitted = fitter.fit(CHAT, chat(c, 40))
        assert fitted.action == "pruned"
        assert fitted.key is not None
        keys.append(fitted.key)
        assert fitter.held_total <= cap
        assert fitter.held_total == sum(fitter.held.values())
        assert set(fitter.held) == set(fitter.conversations.managers)
        assert set(fitter.conversations.seen) == set(fitter.conversations.managers)
    assert list(fitter.conversations.managers) == keys[-3:]  # the three most recent
    # a remembered conversation sent again becomes the most recent; it now holds its
    # messages twice (this request's and the copies read from its first), so one more goes
    again = fitter.fit(CHAT, chat(3, 40))
    assert fitter.held[keys[3]] > 1.5 * size
    assert list(fitter.conversations.managers) == [keys[5], again.key]
    assert again.key == keys[3]
    assert fitter.held_total <= cap


def test_the_count_cap_still_holds_and_stays_in_step() -> None:
    fitter = Fitter(ProxyConfig(upstream="http://127.0.0.1:9", settings=ROOMY, conversations=3))
    for c in range(7):
        fitter.fit(CHAT, chat(c, 3))
        assert len(fitter.conversations.managers) <= 3
        assert set(fitter.held) == set(fitter.conversations.managers)
        assert fitter.held_total == sum(fitter.held.values())


def test_an_over_large_request_is_fitted_but_not_remembered() -> None:
    small = chat(0, 3)
    probe = Fitter(ProxyConfig(upstream="http://127.0.0.1:9", settings=TIGHT))
    probe.fit(CHAT, small)
    cap = probe.held_total * 4
    fitter = Fitter(ProxyConfig(upstream="http://127.0.0.1:9", settings=TIGHT, max_memory=cap))
    kept = fitter.fit(CHAT, small)
    total = fitter.held_total
    big = fitter.fit(CHAT, chat(1, 200))
    assert big.action == "pruned"  # fitted as ever
    assert big.key not in fitter.conversations.managers  # and forgotten at once
    assert big.key not in fitter.conversations.seen
    assert list(fitter.conversations.managers) == [kept.key]  # nobody was evicted for it
    assert fitter.held_total == total
    # a remembered conversation that grows past the cap is forgotten too
    fitter.fit(CHAT, chat(0, 200))
    assert fitter.held_total == 0 and not fitter.conversations.managers


def test_metrics_show_the_gauge_within_the_cap() -> None:
    probe = Fitter(ProxyConfig(upstream="http://127.0.0.1:9", settings=TIGHT))
    probe.fit(CHAT, chat(0, 40))
    cap = int(probe.held_total * 2.5)
    with proxied(context_length=8000, max_tokens=500, max_memory=cap) as (served, proxy, _):
        values = []
        for c in range(6):
            r = httpx.post(served.url + "/v1/chat/completions", content=chat(c, 40), timeout=60)
            assert r.status_code == 200
            text = httpx.get(served.url + "/metrics").text
            line = next(
                x for x in text.splitlines() if x.startswith("ctxwin_proxy_conversation_bytes ")
            )
            values.append(int(line.split()[1]))
        assert "# TYPE ctxwin_proxy_conversation_bytes gauge" in text
        assert values[-1] == proxy.fitter.held_total
    assert all(0 < v <= cap for v in values)
    assert values[0] < values[1] and values[1] == values[-1]  # two fit, then it is full


def test_the_default_cap() -> None:
    assert ProxyConfig(upstream="http://127.0.0.1:9").max_memory == DEFAULT_MAX_MEMORY == 512 << 20


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("512MiB", 512 << 20),
        ("2GiB", 2 << 30),
        ("300MB", 300_000_000),
        ("4096", 4096),
        ("1.5 KiB", 1536),
    ],
)
def test_sizes(text: str, size: int) -> None:
    assert parse_size("--max-memory", text) == size


@pytest.mark.parametrize("text", ["", "lots", "12XB", "0", "-1MiB", "nan", "inf", "MiB"])
def test_bad_sizes(text: str) -> None:
    with pytest.raises(UsageError, match="--max-memory"):
        parse_size("--max-memory", text)


def test_a_bad_max_memory_is_a_usage_error(cli: Cli) -> None:
    result = cli.process("proxy", "--upstream", "http://127.0.0.1:9", "--max-memory", "lots")
    assert_one_line_error(result, 2, "--max-memory")
