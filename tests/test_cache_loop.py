"""The default cut keeps the provider's prompt cache, and the estimate anchored on the
provider's reports keeps the prompt near the budget: a 100-call OpenAI Chat agent loop at a
6,000-token window, its tool results about 300 tokens each (source files, or JSON log
records), against a stand-in that counts prompts with o200k_base and bills cached prefixes
as OpenAI does (:mod:`tests.provider_standin`). Through the SDK wrapper and through the
proxy, with the default :class:`~ctxwin.fitting.strategy.Strategy`, the loop is billed at
most a quarter of what the same loop is billed with ``Strategy(block=0)`` (just fit: the
fewest turns dropped, which moves the cut, and the cached prefix, on almost every call),
sends at least 80 % of the tokens just-fit sends on average, never overflows, and its
largest prompt is within 5 % of the budget in real tokens."""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable
from typing import Any

import orjson
import pytest

openai = pytest.importorskip("openai")

from ctxwin.fitting.strategy import DEFAULT_STRATEGY, Strategy  # noqa: E402
from ctxwin.integrations.openai import wrap  # noqa: E402
from fidelity.compare import SYSTEM, TASK, source_file  # noqa: E402
from tests.provider_standin import READ_FILE, Standin, serve, tokens  # noqa: E402
from tests.proxy_support import config_for, serve_proxy  # noqa: E402

WINDOW = 6000
CALLS = 100
MODEL = "gpt-4o-mini"
FUNCTIONS = 8
"""Functions per tool result (about 35 tokens each)."""


def result(turn: int) -> str:
    """Tool output of about 300 tokens (a source file read), different at every turn: the
    loop's tool result, as ``python -m fidelity.compare`` writes it into its runs."""
    return source_file(turn, FUNCTIONS)


LEVELS = ("DEBUG", "INFO", "WARN", "ERROR")
SERVICES = ("api-gateway", "billing", "auth", "scheduler", "ingest")


def log_result(turn: int) -> str:
    """Tool output as large as :func:`result`'s (about 280 tokens) but unlike a source
    file: a JSON page of log records (timestamps, hex ids, numbers, paths, nested fields),
    which the bound prices at 1.4x its count (a source file: 1.0x), different at every
    turn."""
    rng = random.Random(1000 + turn)
    records = [
        {
            "ts": f"2026-03-{1 + turn % 28:02d}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:"
            f"{rng.randrange(60):02d}.{rng.randrange(1000):03d}Z",
            "level": rng.choice(LEVELS),
            "service": rng.choice(SERVICES),
            "trace": f"{rng.getrandbits(64):016x}",
            "latency_ms": round(rng.uniform(0.2, 900.0), 2),
            "status": rng.choice((200, 201, 204, 400, 404, 429, 500, 503)),
            "attrs": {"retry": rng.randrange(4), "bytes": rng.randrange(1 << 20)},
            "path": f"/v{rng.randrange(1, 4)}/{rng.randrange(10**4)}",
        }
        for _ in range(4)
    ]
    return orjson.dumps({"page": turn, "records": records}).decode()


RESULTS = {"source": result, "logs": log_result}
"""The loop's tool results, by kind."""


def loop(client: Any, calls: int = CALLS, content: Callable[[int], str] = result) -> None:
    """An agent loop: send the history, append the model's tool call and its result
    (``content(turn)``)."""
    history: list[Any] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TASK},
    ]
    for turn in range(calls):
        completion = client.chat.completions.create(
            model=MODEL, messages=history, tools=[READ_FILE]
        )
        (call,) = completion.choices[0].message.tool_calls
        history.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": "read_file", "arguments": call.function.arguments},
                    }
                ],
            }
        )
        history.append({"role": "tool", "tool_call_id": call.id, "content": content(turn)})


def sdk(url: str) -> Any:
    return openai.OpenAI(base_url=url, api_key="test", max_retries=0)


Run = Callable[..., Standin]


def wrapped(strategy: Strategy | None, content: Callable[[int], str] = result) -> Standin:
    """The loop with ``wrap(client, context_length=6000)`` (and ``strategy=`` when given)."""
    standin = Standin(window=WINDOW)
    options = {} if strategy is None else {"strategy": strategy}
    with serve(standin) as url:
        loop(wrap(sdk(f"{url}/v1"), context_length=WINDOW, **options), content=content)
    return standin


def proxied(strategy: Strategy | None, content: Callable[[int], str] = result) -> Standin:
    """The loop through the proxy at ``context_length=6000`` (``ctxwin proxy
    --context-length 6000``; ``--block 0`` when ``strategy`` is just-fit's)."""
    from ctxwin.proxy.server import Proxy

    standin = Standin(window=WINDOW)
    options = {} if strategy is None else {"strategy": strategy}
    with serve(standin) as url:
        proxy = Proxy(config_for(url, context_length=WINDOW, **options))
        with serve_proxy(proxy) as served:
            loop(sdk(f"{served.url}/v1"), content=content)
    return standin


def budget() -> int:
    """The loop's budget in estimated tokens: the window less the reserve and the safety
    margin, as ctxwin computes it for the loop's requests."""
    from ctxwin.manager import ContextWindowManager

    body = {"model": MODEL, "messages": [{"role": "user", "content": TASK}]}
    return ContextWindowManager(MODEL, context_length=WINDOW).evaluate(body).budget.budget


def figures(standin: Standin) -> tuple[float, float]:
    """``(input billed in token units, mean prompt tokens)`` of the accepted requests."""
    return standin.billed, statistics.fmean(standin.accepted)


@pytest.mark.parametrize("kind", sorted(RESULTS))
@pytest.mark.parametrize("run", [wrapped, proxied], ids=["wrap", "proxy"])
def test_the_default_cut_bills_a_quarter_of_just_fit_and_keeps_four_fifths(
    run: Run, kind: str
) -> None:
    assert DEFAULT_STRATEGY.block > 0  # the default is a block cut
    content = RESULTS[kind]
    default = run(None, content)
    just_fit = run(Strategy(block=0), content)
    for standin in (default, just_fit):
        assert standin.refused == 0  # never a 400
        assert len(standin.accepted) == CALLS
    billed, mean = figures(default)
    just_billed, just_mean = figures(just_fit)
    # the loop does outgrow the window: just-fit's prompts sit at the budget, uncached
    assert max(just_fit.accepted) > 0.7 * WINDOW
    assert sum(just_fit.cached) < 0.25 * sum(just_fit.accepted)
    assert billed <= just_billed / 4
    assert mean >= 0.8 * just_mean
    # the estimate anchored on each report wastes no room: the largest prompt sent, in
    # the stand-in's real tokens, is never over the budget, as large as just-fit's, and
    # within 5 % of the budget where the new turn's bound is its count (source files); the
    # bound prices a log page at 1.4x its count, and the newest turn, which no report
    # has counted yet, is priced at its bound: 94 % there
    top = max(default.accepted)
    assert max(just_fit.accepted) - 0.01 * budget() <= top <= budget()
    assert top >= (0.95 if kind == "source" else 0.93) * budget()


def test_the_stand_in_bills_cached_prefixes_as_openai_does() -> None:
    """A prompt reads the longest prefix it shares with an earlier accepted one, from 1,024
    tokens in steps of 128, at a tenth of the price; a refused prompt caches nothing."""
    from tests.provider_standin import cached_tokens

    assert [cached_tokens(n) for n in (0, 1023, 1024, 1151, 1152, 5000)] == [
        0,
        0,
        1024,
        1024,
        1152,
        4992,
    ]
    standin = Standin(window=2000)
    long = [{"role": "user", "content": result(1) + result(2) + result(3) + result(4)}]
    assert tokens(long[0]["content"]) > 1100
    with serve(standin) as url:
        client = sdk(f"{url}/v1")
        first = client.chat.completions.create(model=MODEL, messages=long)
        more = [*long, {"role": "user", "content": "and then?"}]
        second = client.chat.completions.create(model=MODEL, messages=more)
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model=MODEL, messages=[*more, *more])
        other = [{"role": "user", "content": "x" + long[0]["content"]}]
        third = client.chat.completions.create(model=MODEL, messages=other)
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    cached = second.usage.prompt_tokens_details.cached_tokens
    # the whole first prompt is shared, cut to whole 128-token steps
    assert cached == cached_tokens(first.usage.prompt_tokens) > 0
    assert third.usage.prompt_tokens_details.cached_tokens == 0  # differs from the start
    assert standin.cached == [0, cached, 0]
    assert standin.billed == pytest.approx(
        first.usage.prompt_tokens
        + second.usage.prompt_tokens
        - 0.9 * cached
        + third.usage.prompt_tokens
    )
