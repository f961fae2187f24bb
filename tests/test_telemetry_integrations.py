"""What an SDK wrapper (``ctxwin.integrations.openai``, against the real ``openai`` package
and the stand-in provider on 127.0.0.1) and a framework hook (the LangGraph
``pre_model_hook``, on LangChain's own messages) tell an operator: log records under their
own loggers, spans in the SDK's in-memory exporter, nothing of the messages or keys."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

openai = pytest.importorskip("openai")
pytest.importorskip("langchain_core")

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage  # noqa: E402
from opentelemetry import trace  # noqa: E402

import ctxwin  # noqa: E402
from ctxwin.integrations.langchain import pre_model_hook  # noqa: E402
from ctxwin.integrations.openai import wrap  # noqa: E402
from tests.otel_support import assert_nothing_of, attrs, named, traced  # noqa: E402
from tests.provider_standin import Standin, serve  # noqa: E402
from tests.test_integrations_openai import (  # noqa: E402
    FILE,
    MODEL,
    SEED,
    SYSTEM,
    TASK,
    WINDOW,
    async_chat_loop,
    chat_loop,
)

API_KEY = "sk-test-secret-0c9d"
OPENAI = "ctxwin.integrations.openai"
LANGCHAIN = "ctxwin.integrations.langchain"


def client(url: str, asynchronous: bool = False) -> Any:
    cls = openai.AsyncOpenAI if asynchronous else openai.OpenAI
    return cls(base_url=f"{url}/v1", api_key=API_KEY, max_retries=0)


def records(caplog: pytest.LogCaptureFixture, name: str, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == name and r.levelno == level]


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="ctxwin")
    return caplog


# --- the OpenAI wrapper ------------------------------------------------------------------


def test_the_wrapper_logs_each_fit_that_drops_turns(logs: pytest.LogCaptureFixture) -> None:
    standin = Standin(window=WINDOW)
    with serve(standin) as url:
        wrapped = wrap(client(url), context_length=WINDOW)
        chat_loop(wrapped, turns=12)
    infos = records(logs, OPENAI, logging.INFO)
    assert infos, "the loop outgrew the window: some fit dropped turns"
    last = wrapped.ctxwin.last
    f: dict[str, Any] = vars(infos[-1])
    assert f["ctxwin_dropped_turns"] == last.result.dropped_turns > 0
    assert f["ctxwin_estimated_tokens_after"] == last.result.estimated_tokens_after
    assert f["ctxwin_budget"] == last.budget.budget
    assert f["ctxwin_context_length"] == WINDOW and f["ctxwin_model"] == MODEL
    # one record per fit that changed the request: call k's history holds 2 + 2k messages
    changed = [len(b["messages"]) < 2 + 2 * k for k, b in enumerate(standin.bodies)]
    assert len(infos) == sum(changed) and not changed[0]
    assert_nothing_of([FILE[:60], SYSTEM, TASK, API_KEY, f"Bearer {API_KEY}"], logs.records)


def test_the_wrapper_warns_and_errors(logs: pytest.LogCaptureFixture) -> None:
    standin = Standin(window=100_000)
    history = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    with serve(standin) as url:
        # an estimator that under-counts the stand-in's tokenizer, seeded at 1.0: the
        # first report grows the calibration past the share
        wrapped = wrap(client(url), context_length=100_000, calibration=1.0, estimator=SEED)
        chat_loop(wrapped, turns=2)
        # a model the table does not know, no window given: the fallback
        unknown = wrap(client(url))
        unknown.chat.completions.create(model="acme-agent-7", messages=history, max_tokens=50)
        unknown.chat.completions.create(model="acme-agent-7", messages=history, max_tokens=50)
        small = wrap(client(url), context_length=WINDOW)
        with pytest.raises(ctxwin.ContextTruncated):
            small.chat.completions.create(
                model=MODEL, messages=[*history, {"role": "user", "content": FILE * 20}]
            )
    warnings = {vars(r)["ctxwin_warning"] for r in records(logs, OPENAI, logging.WARNING)}
    assert warnings == {"calibration_growth", "unknown_model"}
    [error] = records(logs, OPENAI, logging.ERROR)
    assert vars(error)["ctxwin_status"] == "truncated"
    assert_nothing_of([FILE[:60], SYSTEM, TASK, API_KEY], logs.records)


@pytest.mark.parametrize(("asynchronous", "stream"), [(False, False), (True, False), (False, True)])
def test_each_wrapped_call_is_a_ctxwin_fit_span(
    monkeypatch: pytest.MonkeyPatch, asynchronous: bool, stream: bool
) -> None:
    exporter = traced(monkeypatch)
    standin = Standin(window=WINDOW)
    with serve(standin) as url, trace.get_tracer("agent").start_as_current_span("run") as run:
        wrapped = wrap(client(url, asynchronous), context_length=WINDOW)
        if asynchronous:
            asyncio.run(async_chat_loop(wrapped, turns=12, stream=stream))
        else:
            chat_loop(wrapped, turns=12, stream=stream)
    spans = exporter.get_finished_spans()
    fits = named(spans, "ctxwin.fit")
    assert len(fits) == len(standin.bodies) == 12
    for s, prompt, body in zip(fits, standin.prompts, standin.bodies, strict=True):
        a = attrs(s)
        assert s.parent is not None and s.parent.trace_id == run.get_span_context().trace_id
        assert a["ctxwin.source"] == OPENAI and a["gen_ai.request.model"] == MODEL
        assert a["ctxwin.context_length"] == WINDOW
        assert a["ctxwin.messages"] - a["ctxwin.dropped_messages"] == len(body["messages"])
        # the response's usage lands on the span, unless streamed (it comes after)
        assert a.get("gen_ai.usage.input_tokens") == (None if stream else prompt)
    pruned = [s for s in fits if attrs(s)["ctxwin.dropped_turns"]]
    assert pruned and all(e.name == "ctxwin.edit" for s in pruned for e in s.events)
    assert attrs(fits[-1])["ctxwin.dropped_turns"] == wrapped.ctxwin.last.result.dropped_turns
    assert_nothing_of([FILE[:60], SYSTEM, TASK, API_KEY], spans=spans)


def test_a_call_refused_before_sending_is_an_error_span(monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = traced(monkeypatch)
    history = [{"role": "user", "content": FILE * 20}]
    with serve(Standin(window=WINDOW)) as url:
        with pytest.raises(ctxwin.ContextTruncated):
            wrap(client(url), context_length=WINDOW).chat.completions.create(
                model=MODEL, messages=history
            )
        with pytest.raises(openai.BadRequestError):  # the provider refuses: the call's error
            wrap(client(url), context_length=10 * WINDOW).chat.completions.create(
                model=MODEL, messages=history, max_tokens=10
            )
    truncated, refused = named(exporter.get_finished_spans(), "ctxwin.fit")
    assert attrs(truncated)["ctxwin.status"] == "truncated"
    assert truncated.status.status_code.name == "ERROR"
    assert attrs(refused)["ctxwin.status"] == "fits"
    assert attrs(refused)["error.type"] == "BadRequestError"
    assert refused.status.description == "BadRequestError"


# --- the LangGraph pre_model_hook ------------------------------------------------------


def history(turns: int, usage: int | None = None) -> list[Any]:
    """LangChain messages of an agent loop; each answer reports ``usage`` input tokens."""
    out: list[Any] = [SystemMessage(SYSTEM), HumanMessage(TASK)]
    for i in range(turns):
        meta = None
        if usage is not None:
            meta = {"input_tokens": usage, "output_tokens": 5, "total_tokens": usage + 5}
        call = {"id": f"c{i}", "name": "read_file", "args": {"path": f"src/{i}.py"}}
        out += [
            AIMessage("", tool_calls=[call], usage_metadata=meta),
            ToolMessage(FILE, tool_call_id=f"c{i}"),
        ]
    return out


def test_the_hook_logs_its_fits(logs: pytest.LogCaptureFixture) -> None:
    hook = pre_model_hook(model=MODEL, context_length=WINDOW, max_tokens=200)
    for turns in (1, 6, 12):
        hook({"messages": history(turns)})
    [info, *_] = records(logs, LANGCHAIN, logging.INFO)
    assert vars(info)["ctxwin_status"] == "needs_pruning"
    assert vars(info)["ctxwin_dropped_turns"] > 0
    last = hook.last
    assert last is not None
    assert vars(records(logs, LANGCHAIN, logging.INFO)[-1])["ctxwin_dropped_turns"] == (
        last.result.dropped_turns
    )
    with pytest.raises(ctxwin.ContextTruncated):
        hook({"messages": [SystemMessage(SYSTEM), HumanMessage(FILE * 20)]})
    [error] = records(logs, LANGCHAIN, logging.ERROR)
    assert vars(error)["ctxwin_status"] == "truncated"
    # no window, no model: the fallback, once; usage three times the estimate: a jump
    bare = pre_model_hook(learn_overhead=False, calibration=1.0)
    grown = history(3, usage=3000)  # one history growing, object for object
    for turns in (1, 2, 3):
        bare({"messages": grown[: 2 + 2 * turns]})
    warnings = [vars(r)["ctxwin_warning"] for r in records(logs, LANGCHAIN, logging.WARNING)]
    assert warnings == ["fallback_window", "calibration_growth"]
    assert_nothing_of([FILE[:60], SYSTEM, TASK], logs.records)


def test_the_hook_opens_a_span_per_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = traced(monkeypatch)
    hook = pre_model_hook(model=MODEL, context_length=WINDOW, max_tokens=200)
    for turns in (1, 6, 12):
        hook({"messages": history(turns)})
    fits = named(exporter.get_finished_spans(), "ctxwin.fit")
    assert [attrs(s)["ctxwin.source"] for s in fits] == [LANGCHAIN] * 3
    assert attrs(fits[0])["ctxwin.status"] == "fits"
    assert attrs(fits[-1])["ctxwin.status"] == "needs_pruning"
    assert attrs(fits[-1])["ctxwin.dropped_turns"] == hook.last.result.dropped_turns  # type: ignore[union-attr]
    assert_nothing_of([FILE[:60], SYSTEM, TASK], spans=fits)


def test_every_integration_records_under_its_own_logger() -> None:
    """The wrappers, hooks and callbacks not driven above name their module's logger too."""
    pytest.importorskip("anthropic")
    pytest.importorskip("pydantic_ai")
    pytest.importorskip("litellm")
    pytest.importorskip("agents")
    import anthropic

    from ctxwin.integrations import agents, litellm, pydantic_ai
    from ctxwin.integrations.anthropic import wrap as wrap_anthropic

    client = anthropic.Anthropic(base_url="http://127.0.0.1:9", api_key=API_KEY)
    [fitting] = wrap_anthropic(client).ctxwin.fittings
    assert fitting.manager("claude-sonnet-4-5").logger == "ctxwin.integrations.anthropic"
    processor = pydantic_ai.history_processor()
    assert processor.fitting.manager.logger == "ctxwin.integrations.pydantic_ai"
    callback = litellm.ContextWindowCallback()
    assert callback.conversations.manager("gpt-4o", [{"role": "user", "content": "x"}]).logger == (
        "ctxwin.integrations.litellm"
    )
    filtered = agents.ContextWindowFilter()
    assert filtered.conversations.manager("gpt-4o", [{"role": "user", "content": "x"}]).logger == (
        "ctxwin.integrations.agents"
    )
