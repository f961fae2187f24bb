"""ctxwin.integrations.agents against the real OpenAI Agents SDK (``openai-agents``) and the
stand-in provider on 127.0.0.1 (a real tokenizer, OpenAI's own 400 on overflow)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

agents = pytest.importorskip("agents")

import openai  # noqa: E402
from agents import (  # noqa: E402
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    function_tool,
)
from agents.run_config import CallModelData, ModelInputData  # noqa: E402

import ctxwin  # noqa: E402
from ctxwin.fitting.strategy import PLACEHOLDER, Strategy  # noqa: E402
from ctxwin.formats.openai_responses import OpenAIResponses  # noqa: E402
from ctxwin.integrations.agents import ContextWindowFilter  # noqa: E402
from tests.provider_standin import FINAL, UNDER_COUNTING, Standin, assert_taught, serve  # noqa: E402

WINDOW = 4000
STEPS = 14
"""Tool calls before the stand-in answers with a final text."""
INSTRUCTIONS = "You are a coding agent. Read files with read_file before you answer."
TASK = "Find where the scaling factor goes wrong."
SOURCE = "".join(
    f"def scale_{i}(x):\n    return x * {i}  # factor {i} of the table\n" for i in range(40)
)


@function_tool
def read_file(path: str) -> str:
    """Read a source file of the repository."""
    return SOURCE


def agent(url: str, api: str = "responses") -> Agent[Any]:
    client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="test", max_retries=0)
    model: Any = (
        OpenAIResponsesModel("gpt-4o", client)
        if api == "responses"
        else OpenAIChatCompletionsModel("gpt-4o", client)
    )
    return Agent(
        name="coder",
        instructions=INSTRUCTIONS,
        tools=[read_file],
        model=model,
        model_settings=ModelSettings(max_tokens=200),
    )


def run(url: str, fit: ContextWindowFilter | None, task: str = TASK, api: str = "responses") -> Any:
    config = RunConfig(tracing_disabled=True, call_model_input_filter=fit)
    return asyncio.run(
        Runner.run(agent(url, api), task, run_config=config, hooks=fit, max_turns=STEPS + 5)
    )


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_a_long_run_overflows_without_the_filter_and_completes_with_it(api: str) -> None:
    standin = Standin(window=WINDOW, final_after=STEPS)
    with serve(standin) as url:
        with pytest.raises(openai.BadRequestError) as caught:
            run(url, None, api=api)
        assert caught.value.status_code == 400
        assert caught.value.code == "context_length_exceeded"
        assert standin.refused == 1
        standin.bodies.clear()
        standin.prompts.clear()
        standin.refused = 0
        fit = ContextWindowFilter(context_length=WINDOW)
        result = run(url, fit, api=api)
    assert result.final_output == FINAL
    assert len(standin.bodies) == STEPS + 1 and standin.refused == 0
    assert max(standin.prompts) + 200 <= WINDOW
    assert fit.last is not None and fit.last.pruned
    sent = standin.bodies[-1]["input" if api == "responses" else "messages"]
    assert len(sent) < fit.last.result.items  # old turns were left out of what was sent
    first = sent[0] if api == "responses" else sent[1]
    assert first == {"role": "user", "content": TASK}  # the task always goes
    assert len(fit.managers) == 1


class Recorder:
    """The filter, recording what it was given and what it returned."""

    def __init__(self, fit: ContextWindowFilter) -> None:
        self.fit = fit
        self.calls: list[tuple[list[Any], list[Any]]] = []

    def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        given = list(data.model_data.input)
        out = self.fit(data)
        self.calls.append((given, list(out.input)))
        return out


def test_the_items_sent_are_the_runners_own_objects() -> None:
    standin = Standin(window=WINDOW, final_after=STEPS)
    fit = ContextWindowFilter(context_length=WINDOW)
    recorder = Recorder(fit)
    with serve(standin) as url:
        config = RunConfig(tracing_disabled=True, call_model_input_filter=recorder)
        asyncio.run(Runner.run(agent(url), TASK, run_config=config, max_turns=STEPS + 5))
    assert any(len(out) < len(given) for given, out in recorder.calls)  # something was dropped
    for given, out in recorder.calls:
        ids = [id(item) for item in given]
        kept = [ids.index(id(item)) for item in out]  # each one is an object given...
        assert kept == sorted(kept)  # ...in the order given


def test_a_strategy_clears_old_outputs_in_copies() -> None:
    standin = Standin(window=WINDOW, final_after=STEPS)
    fit = ContextWindowFilter(
        context_length=WINDOW, strategy=Strategy(steps=("clear-results", "drop-turns"))
    )
    recorder = Recorder(fit)
    with serve(standin) as url:
        config = RunConfig(tracing_disabled=True, call_model_input_filter=recorder)
        asyncio.run(Runner.run(agent(url), TASK, run_config=config, max_turns=STEPS + 5))
    given, out = recorder.calls[-1]
    cleared = [i for i in out if str(i.get("output", "")).startswith(PLACEHOLDER[:20])]
    assert cleared and all(not any(i is g for g in given) for i in cleared)  # copies
    assert all(i["output"] == SOURCE for i in given if i.get("type") == "function_call_output")
    assert all(any(i is g for g in given) for i in out if i not in cleared)
    assert standin.refused == 0


def test_usage_teaches_an_overhead() -> None:
    """What the provider counted beyond the estimate is learned as an overhead."""
    standin = Standin(window=100_000, final_after=0)
    fit = ContextWindowFilter(context_length=100_000, calibration=1.0, estimator=UNDER_COUNTING)
    with serve(standin) as url:
        result = run(url, fit)
    assert result.final_output == FINAL
    (manager,) = fit.managers.values()
    assert fit.last is not None
    assert manager.overhead == standin.prompts[0] - fit.last.raw_tokens_sent > 0


def test_usage_teaches_the_calibration_without_overhead_learning() -> None:
    standin = Standin(window=100_000, final_after=0)
    fit = ContextWindowFilter(
        context_length=100_000, calibration=1.0, estimator=UNDER_COUNTING, learn_overhead=False
    )
    with serve(standin) as url:
        run(url, fit)
    assert_taught(fit, standin)


def test_a_floor_that_does_not_fit_raises_before_the_model_is_called() -> None:
    standin = Standin(window=WINDOW)
    fit = ContextWindowFilter(context_length=WINDOW)
    with serve(standin) as url, pytest.raises(ctxwin.ContextTruncated) as caught:
        run(url, fit, task=SOURCE * 10)
    assert standin.bodies == []  # nothing reached the provider
    assert caught.value.result.overflow_at_floor


@pytest.mark.parametrize("learn_overhead", [True, False])
def test_handoffs_count_as_the_tools_the_model_is_shown(learn_overhead: bool) -> None:
    """Each handoff is a tool declaration in the request: the fit counts them (and were
    they not counted, only overhead learning would keep the run going)."""
    duties = "Handles every question about the billing tables, invoices and refunds. " * 12
    specialists = [
        Agent(name=f"specialist_{n}", instructions="Answer.", handoff_description=duties)
        for n in range(6)
    ]
    standin = Standin(window=WINDOW, final_after=STEPS)
    fit = ContextWindowFilter(context_length=WINDOW, learn_overhead=learn_overhead)
    with serve(standin) as url:
        coder = agent(url).clone(handoffs=specialists)
        config = RunConfig(tracing_disabled=True, call_model_input_filter=fit)
        result = asyncio.run(
            Runner.run(coder, TASK, run_config=config, hooks=fit, max_turns=STEPS + 5)
        )
    assert result.final_output == FINAL
    assert len(standin.bodies[0]["tools"]) == 7 and standin.refused == 0
    assert max(standin.prompts) + 200 <= WINDOW


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_a_run_reads_each_item_once(api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner rebuilds the input items for every call; the filter still reads each
    item once: the run's 15 calls read as many items as the last call's input holds
    (one read a call, of its new items), not the sum of the 15 inputs."""
    reads: list[int] = []
    real = OpenAIResponses.read

    def counting(self: OpenAIResponses, body: Any, estimator: Any) -> Any:
        view = real(self, body, estimator)
        reads.append(len(view.items))
        return view

    monkeypatch.setattr(OpenAIResponses, "read", counting)
    standin = Standin(window=WINDOW, final_after=STEPS)
    fit = ContextWindowFilter(context_length=WINDOW)
    with serve(standin) as url:
        result = run(url, fit, api=api)
    assert result.final_output == FINAL
    assert fit.last is not None and fit.last.pruned
    last = fit.last.result.items  # the items of the last call
    (manager,) = fit.managers.values()
    assert len(reads) == STEPS + 1
    assert sum(reads) == manager.messages_read == fit.conversations.entries_read == last
    assert sum(range(1, last + 1, 2)) > 3 * last  # what reading every call whole reads


def test_every_call_fits_as_a_fresh_filter_fits_it() -> None:
    """Reading only the new items changes nothing: each call's input is fitted exactly as
    a fresh filter (which reads the call whole) fits it."""
    standin = Standin(window=WINDOW, final_after=STEPS)
    fit = ContextWindowFilter(context_length=WINDOW, learn_overhead=False)
    compared: list[bool] = []

    def checked(data: CallModelData[Any]) -> ModelInputData:
        out = fit(data)
        fresh = ContextWindowFilter(context_length=WINDOW, learn_overhead=False)
        want = fresh(data)
        assert fit.last is not None and fresh.last is not None
        compared.append(fit.last.pruned)
        assert list(out.input) == list(want.input)
        assert fit.last.result == fresh.last.result
        return out

    config = RunConfig(tracing_disabled=True, call_model_input_filter=checked)
    with serve(standin) as url:
        result = asyncio.run(Runner.run(agent(url), TASK, run_config=config, max_turns=STEPS + 5))
    assert result.final_output == FINAL
    assert len(compared) == STEPS + 1 and any(compared)
    (manager,) = fit.managers.values()
    assert fit.last is not None and manager.messages_read == fit.last.result.items
