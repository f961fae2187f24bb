"""What the manager tells an operator (ctxwin.telemetry): log records with their fields, and
spans in the SDK's in-memory exporter; nothing of the request's content; and, without
``opentelemetry-api`` or without an SDK, the same fits and no span."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from typing import Any

import pytest

import ctxwin
from ctxwin import telemetry
from ctxwin.fitting.strategy import Strategy
from ctxwin.tokens.seed import SeedEstimator
from tests.builders import assistant, system, tool, user
from tests.otel_support import assert_nothing_of, attrs, named, traced

MARKER = "CONTENT-MARKER-7f3a"
"""Text inside every message: no record or span may carry it."""


def body(turns: int, model: str | None = "gpt-4o", result: str = MARKER * 40) -> dict[str, Any]:
    messages = [system(f"sys {MARKER}"), user(f"task {MARKER}")]
    for i in range(turns):
        messages += [assistant(f"c{i}", content=MARKER), tool(f"c{i}", result)]
    out: dict[str, Any] = {"messages": messages}
    if model is not None:
        out["model"] = model
    return out


def manager(**kw: Any) -> ctxwin.ContextWindowManager:
    kw.setdefault("context_length", 6000)
    kw.setdefault("max_tokens", 500)
    return ctxwin.ContextWindowManager(estimator=SeedEstimator(), **kw)


def ours(caplog: pytest.LogCaptureFixture, level: int | None = None) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name.startswith("ctxwin") and (level is None or r.levelno == level)
    ]


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="ctxwin")
    return caplog


# --- log records ----------------------------------------------------------------------


def test_a_fit_that_changes_the_request_is_one_info_record_with_its_fields(
    logs: pytest.LogCaptureFixture,
) -> None:
    m = manager()
    m.fit(body(2))
    assert ours(logs) == []  # a request that fits as it is: nothing to say
    p = m.fit(body(40), last_usage={"prompt_tokens": 400})
    assert p.result.pruned
    [record] = ours(logs, logging.INFO)
    assert record.name == "ctxwin.manager"
    f: dict[str, Any] = vars(record)
    assert f["ctxwin_status"] == "needs_pruning"
    assert f["ctxwin_model"] == "gpt-4o"
    assert (f["ctxwin_context_length"], f["ctxwin_context_length_source"]) == (6000, "flag")
    assert f["ctxwin_budget"] == p.budget.budget and f["ctxwin_reserve"] == 500
    assert f["ctxwin_estimated_tokens"] == p.result.estimated_tokens
    assert f["ctxwin_estimated_tokens_after"] == p.result.estimated_tokens_after
    assert f["ctxwin_dropped_turns"] == p.result.dropped_turns > 0
    assert f["ctxwin_dropped_messages"] == len(p.result.dropped)
    assert f["ctxwin_steps"] == ["drop-turns"] and f["ctxwin_strategy"] == "drop-turns"
    assert f["ctxwin_cleared_results"] == 0
    message = record.getMessage()
    assert f"dropped {p.result.dropped_turns} turns" in message
    assert f"{p.result.estimated_tokens:,} → {p.result.estimated_tokens_after:,}" in message
    assert set(telemetry.FIELDS) <= {k.removeprefix("ctxwin_") for k in f}
    assert_nothing_of([MARKER], ours(logs))


def test_the_fields_are_the_replay_rows_keys_and_more() -> None:
    p = manager().before_send(body(40))
    f = telemetry.fields(p)
    row = p.row()
    assert {k: f[k] for k in row} == {**row, "calibration": round(row["calibration"], 4)}


def test_a_clearing_strategy_names_the_steps_it_took(logs: pytest.LogCaptureFixture) -> None:
    steps = Strategy(steps=("clear-results", "drop-turns"), keep_results=1)
    p = manager(strategy=steps, context_length=5000).before_send(body(12))
    assert p.applied.cleared_results > 0
    [record] = ours(logs, logging.INFO)
    f: dict[str, Any] = vars(record)
    assert f["ctxwin_cleared_results"] == p.applied.cleared_results
    assert f["ctxwin_cleared_tokens"] == p.applied.cleared_tokens > 0
    assert f["ctxwin_steps"] == telemetry.steps_taken(p)
    assert "clear-results" in f["ctxwin_steps"]
    assert f"cleared {p.applied.cleared_results} tool results" in record.getMessage()
    assert_nothing_of([MARKER], ours(logs))


@pytest.mark.parametrize("no_budget", [False, True])
def test_a_request_nothing_may_be_sent_for_is_an_error_record(
    logs: pytest.LogCaptureFixture, no_budget: bool
) -> None:
    m = manager(context_length=1200 if no_budget else 2500, max_tokens=1200 if no_budget else 500)
    big = body(1, result=MARKER * 2000)
    with pytest.raises(ctxwin.ContextTruncated) as caught:
        m.fit(big)
    assert isinstance(caught.value, ctxwin.NoBudget) == no_budget
    [record] = ours(logs, logging.ERROR)
    assert record.name == "ctxwin.manager"
    assert vars(record)["ctxwin_status"] == ("no_budget" if no_budget else "truncated")
    assert record.getMessage().startswith(str(caught.value))
    assert ours(logs, logging.INFO) == []
    assert_nothing_of([MARKER], ours(logs))


@pytest.mark.parametrize(
    ("model", "kind"), [(None, "fallback_window"), ("acme-7", "unknown_model")]
)
def test_a_fallback_window_is_one_warning_per_manager_and_model(
    logs: pytest.LogCaptureFixture, model: str | None, kind: str
) -> None:
    m = ctxwin.ContextWindowManager(estimator=SeedEstimator())
    for turns in (1, 2, 3):
        m.fit(body(turns, model=model), last_usage=None if turns == 1 else {"prompt_tokens": 90})
    [record] = ours(logs, logging.WARNING)
    f: dict[str, Any] = vars(record)
    assert f["ctxwin_warning"] == kind
    assert f["ctxwin_context_length"] == 8192 and f["ctxwin_context_length_source"] == "fallback"
    assert "fallback 8,192-token window" in record.getMessage()
    if model is not None:
        assert "unknown model acme-7" in record.getMessage()
    ctxwin.ContextWindowManager(estimator=SeedEstimator()).fit(body(1, model=model))
    assert len(ours(logs, logging.WARNING)) == 2  # another manager says it again


def test_a_model_name_cannot_forge_a_log_line(logs: pytest.LogCaptureFixture) -> None:
    ctxwin.ContextWindowManager(estimator=SeedEstimator()).fit(body(1, model="x\nFORGED line"))
    [record] = ours(logs, logging.WARNING)
    assert "\n" not in record.getMessage() and "x\\nFORGED" in record.getMessage()


def test_zero_usage_is_one_warning_per_run(logs: pytest.LogCaptureFixture) -> None:
    m = manager()
    m.fit(body(1))
    for turns in (2, 3, 4):
        m.fit(body(turns), last_usage={"prompt_tokens": 0})
    [record] = ours(logs, logging.WARNING)
    assert vars(record)["ctxwin_warning"] == "zero_usage"
    assert "0 prompt tokens" in record.getMessage()
    m.fit(body(1))  # a new run
    m.fit(body(2), last_usage={"prompt_tokens": 0})
    assert len(ours(logs, logging.WARNING)) == 2


def test_a_jump_of_the_calibration_past_the_share_is_a_warning(
    logs: pytest.LogCaptureFixture,
) -> None:
    m = manager(calibration=1.0)
    first = m.fit(body(1))
    raw = first.raw_tokens_sent
    m.fit(body(2), last_usage={"prompt_tokens": int(raw * 1.2)})  # +20 %: under the share
    assert ours(logs, logging.WARNING) == []
    before = m.calibration
    second_raw = m.before_send(body(3)).raw_tokens_sent
    m.observe({"prompt_tokens": int(second_raw * before * 1.6)})
    [record] = ours(logs, logging.WARNING)
    f: dict[str, Any] = vars(record)
    assert f["ctxwin_warning"] == "calibration_growth"
    assert f["ctxwin_calibration_before"] == round(before, 4)
    assert f["ctxwin_calibration"] == round(m.calibration, 4) > before * 1.25
    assert f["ctxwin_raw_tokens"] == second_raw
    quiet = manager(calibration=1.0, growth_warning=None)
    quiet.fit(body(1))
    quiet.fit(
        body(2), last_usage={"prompt_tokens": 10 * quiet.before_send(body(1)).raw_tokens_sent}
    )
    assert len(ours(logs, logging.WARNING)) == 1


def test_evaluate_and_replays_say_nothing(logs: pytest.LogCaptureFixture) -> None:
    m = manager(context_length=3000)
    m.evaluate(body(40))
    m.observe({"prompt_tokens": 0})
    m.observe({"prompt_tokens": 10**6}, raw_tokens=100)
    assert ours(logs) == []


def test_the_library_installs_no_handler() -> None:
    """In a fresh interpreter (the command line adds its own to ``ctxwin.proxy``): a fit,
    the wrappers' and the proxy's modules leave every ctxwin logger without a handler."""
    code = (
        "import logging\n"
        "import ctxwin, ctxwin.proxy.server, ctxwin.integrations.openai\n"
        "m = ctxwin.ContextWindowManager(context_length=3000)\n"
        "msgs = [{'role': 'user', 'content': 'x ' * 3000}]\n"
        "try:\n    m.fit({'messages': msgs})\nexcept ctxwin.ContextTruncated:\n    pass\n"
        "names = [n for n in logging.root.manager.loggerDict if n.startswith('ctxwin')]\n"
        "assert 'ctxwin.manager' in names, names\n"
        "print(sorted(n for n in names if logging.getLogger(n).handlers))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"
    assert "context truncated" in proc.stderr  # Python's last resort printed the ERROR


# --- spans ----------------------------------------------------------------------------


def test_each_fit_is_a_ctxwin_fit_span_with_its_attributes_and_edits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exporter = traced(monkeypatch)
    m = manager()
    from opentelemetry import trace

    with trace.get_tracer("agent").start_as_current_span("agent run") as run:
        kept = m.fit(body(2))
        p = m.fit(body(40), last_usage={"prompt_tokens": 400})
    spans = exporter.get_finished_spans()
    fits = named(spans, "ctxwin.fit")
    assert len(fits) == 2
    for s in fits:  # children of the caller's span
        assert s.parent is not None and s.parent.span_id == run.get_span_context().span_id
    a = attrs(fits[0])
    assert a["ctxwin.status"] == "fits" and a["ctxwin.dropped_turns"] == 0
    assert a["ctxwin.estimated_tokens"] == kept.result.estimated_tokens
    assert fits[0].events == ()
    a = attrs(fits[1])
    assert a["ctxwin.source"] == "ctxwin.manager"
    assert a["gen_ai.request.model"] == "gpt-4o"
    assert a["ctxwin.status"] == "needs_pruning"
    assert a["ctxwin.context_length"] == 6000 and a["ctxwin.budget"] == p.budget.budget
    assert a["ctxwin.estimated_tokens"] == p.result.estimated_tokens
    assert a["ctxwin.estimated_tokens_after"] == p.result.estimated_tokens_after
    assert a["ctxwin.dropped_turns"] == p.result.dropped_turns > 0
    assert a["ctxwin.cleared_results"] == 0 and a["ctxwin.strategy"] == "drop-turns"
    [edit] = fits[1].events
    assert edit.name == "ctxwin.edit"
    assert dict(edit.attributes or {}) == {
        "ctxwin.edit.step": "drop-turns",
        "ctxwin.edit.message": p.result.head,
        "ctxwin.edit.messages": len(p.result.dropped),
        "ctxwin.edit.turns": p.result.dropped_turns,
    }
    assert_nothing_of([MARKER], spans=spans)


def test_an_event_per_cleared_result(monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = traced(monkeypatch)
    steps = Strategy(steps=("clear-results", "drop-turns"), keep_results=1)
    p = manager(strategy=steps, context_length=5000).before_send(body(12))
    [span] = exporter.get_finished_spans()
    cleared = [
        e for e in span.events if (e.attributes or {}).get("ctxwin.edit.step") == "clear-results"
    ]
    assert len(cleared) == p.applied.cleared_results > 0
    assert [(e.attributes or {})["ctxwin.edit.message"] for e in cleared] == sorted(
        entry for entry, _ in p.applied.edits
    )
    assert attrs(span)["ctxwin.steps"] == tuple(telemetry.steps_taken(p))
    assert_nothing_of([MARKER], spans=[span])


def test_a_truncated_fit_is_an_error_span(monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = traced(monkeypatch)
    with pytest.raises(ctxwin.ContextTruncated):
        manager(context_length=2500).fit(body(1, result=MARKER * 2000))
    [span] = exporter.get_finished_spans()
    assert attrs(span)["ctxwin.status"] == "truncated"
    assert span.status.status_code.name == "ERROR" and span.status.description == "truncated"


def test_a_body_that_cannot_be_read_is_an_error_span_naming_only_the_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exporter = traced(monkeypatch)
    with pytest.raises(ctxwin.InputError):
        manager().fit({"messages": MARKER})
    [span] = exporter.get_finished_spans()
    assert span.status.status_code.name == "ERROR"
    assert attrs(span)["error.type"] in ("PairingError", "InputError")
    assert_nothing_of([MARKER], spans=[span])


# --- without opentelemetry, or without an SDK --------------------------------------------

LOOP = """
import sys, json
{hide}
import ctxwin
from ctxwin import telemetry
from ctxwin.tokens.seed import SeedEstimator
from tests.builders import assistant, system, tool, user

def body(turns, result="r" * 400):
    messages = [system(), user()]
    for i in range(turns):
        messages += [assistant(f"c{{i}}"), tool(f"c{{i}}", result)]
    return {{"model": "gpt-4o", "messages": messages}}

m = ctxwin.ContextWindowManager(estimator=SeedEstimator(), context_length=6000, max_tokens=500)
rows, usage = [], None
for turns in range(1, 41, 3):
    p = m.fit(body(turns), last_usage=usage)
    usage = {{"prompt_tokens": p.estimated_tokens_after}}
    rows.append(p.row())
try:
    m.fit(body(1, result="x" * 40000))
except ctxwin.ContextTruncated as exc:
    rows.append(str(exc))
print(json.dumps({{
    "rows": rows,
    "traces": telemetry.traces() is not None,
    "sdk": "opentelemetry.sdk" in sys.modules,
    "api": "opentelemetry.trace" in sys.modules,
}}))
"""


def _loop(hide: str) -> dict[str, Any]:
    import orjson

    code = LOOP.format(hide=hide)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="."
    )
    out: dict[str, Any] = orjson.loads(proc.stdout)
    out["stderr"] = proc.stderr
    return out


def test_without_opentelemetry_ctxwin_imports_and_fits_the_same() -> None:
    absent = _loop("sys.modules['opentelemetry'] = None")
    present = _loop("")
    assert absent["traces"] is False and absent["api"] is False
    assert present["traces"] is True and present["sdk"] is False  # the API, no SDK
    assert absent["rows"] == present["rows"]
    assert any(r["dropped_turns"] for r in absent["rows"][:-1])
    assert absent["rows"][-1].startswith("context truncated")
    # the ERROR record reaches Python's last-resort handler (no handler is installed)
    assert absent["stderr"] == present["stderr"] != ""
    assert "context truncated" in absent["stderr"]


def test_the_extra_names_itself_when_its_module_is_imported_without_it() -> None:
    code = (
        "import sys\nsys.modules['opentelemetry'] = None\n"
        "from ctxwin.extras import MissingExtra\n"
        "try:\n    import ctxwin.telemetry.otel\n"
        "except MissingExtra as exc:\n    print(exc.extra)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "otel"


def test_a_provider_the_environment_names_is_followed() -> None:
    code = (
        "from ctxwin.telemetry import fit_span\n"
        "span = fit_span('ctxwin.manager')\n"
        "print(None if span is None else (type(span).__module__, span.is_recording()))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OTEL_PYTHON_TRACER_PROVIDER"}
    for by_env, expected in [(False, "None"), (True, "('opentelemetry.sdk.trace', True)")]:
        if by_env:
            env["OTEL_PYTHON_TRACER_PROVIDER"] = "sdk_tracer_provider"
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
        )
        assert proc.stdout.strip() == expected
