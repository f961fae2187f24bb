"""The round trip: the spans ctxwin writes, dumped as OTLP JSON (or as the SDK's own span
dump), read back by ``ctxwin replay --run-format otel`` as one row per call with what
ctxwin did on it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

openai = pytest.importorskip("openai")

from opentelemetry import trace  # noqa: E402

from ctxwin.integrations.openai import wrap  # noqa: E402
from ctxwin.runs import read_runs  # noqa: E402
from tests.conftest import Cli  # noqa: E402
from tests.otel_support import attrs, named, otlp_json, traced  # noqa: E402
from tests.provider_standin import Standin, serve  # noqa: E402
from tests.test_integrations_openai import MODEL, TOOLS, chat_history  # noqa: E402

CALLS = 30
WINDOW = 4000


def loop(url: str) -> tuple[list[Any], int]:
    """A 30-call agent loop through ``wrap()`` inside one span (the agent run); each call's
    fit, and the agent run's trace id."""
    wrapped = wrap(
        openai.OpenAI(base_url=f"{url}/v1", api_key="test", max_retries=0), context_length=WINDOW
    )
    history = chat_history()
    fits = []
    with trace.get_tracer("agent").start_as_current_span("agent run") as run:
        for _ in range(CALLS):
            response = wrapped.chat.completions.create(
                model=MODEL, messages=history, tools=TOOLS, max_tokens=200
            )
            fits.append(wrapped.ctxwin.last)
            message = response.choices[0].message
            history.append(message)
            history += [
                {"role": "tool", "tool_call_id": c.id, "content": "line of a file\n" * 40}
                for c in message.tool_calls
            ]
    return fits, run.get_span_context().trace_id


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[Any], Standin, int]:
    exporter = traced(monkeypatch)
    standin = Standin(window=WINDOW)
    with serve(standin) as url:
        fits, trace_id = loop(url)
    return exporter.get_finished_spans(), fits, standin, trace_id


def replayed(cli: Cli, path: Path, *flags: str) -> dict[str, Any]:
    result = cli("replay", str(path), "--json", *flags)
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = orjson.loads(result.stdout)
    return out


def test_a_wrapped_loops_spans_replay_as_one_row_per_call(
    recorded: tuple[Any, list[Any], Standin, int], tmp_path: Path, cli: Cli
) -> None:
    spans, fits, standin, trace_id = recorded
    ours = named(spans, "ctxwin.fit")
    assert len(ours) == CALLS and standin.refused == 0
    path = tmp_path / "trace.json"
    path.write_bytes(orjson.dumps(otlp_json(spans)))
    [run] = replayed(cli, path, "--run-format", "otel")["runs"]
    assert run["run"] == f"trace {trace_id:032x}" and run["shape"] == "otel"
    rows = run["rows"]
    assert [r["call"] for r in rows] == list(range(1, CALLS + 1))
    # what ctxwin did on each call: the dropped turns the spans recorded, which are the
    # wrapper's own fits
    assert [r["dropped_turns"] for r in rows] == [attrs(s)["ctxwin.dropped_turns"] for s in ours]
    assert [r["dropped_turns"] for r in rows] == [f.result.dropped_turns for f in fits]
    assert sum(1 for r in rows if r["dropped_turns"]) >= CALLS // 3  # the loop outgrew it
    assert [r["status"] for r in rows] == [f.status for f in fits]
    assert [r["estimated_tokens_after"] for r in rows] == [
        f.result.estimated_tokens_after for f in fits
    ]
    assert [r["reported_tokens"] for r in rows] == standin.prompts
    assert all(r["budget"] == fits[0].budget.budget and r["model"] == MODEL for r in rows)
    first = next(i for i, f in enumerate(fits, 1) if f.changed)
    assert run["first_pruned"] == first and run["first_truncated"] is None
    assert run["calls"] == run["calls_with_usage"] == CALLS
    assert run["final_calibration"] == pytest.approx(fits[-1].result.calibration, abs=1e-4)
    # and without --run-format: the shape is detected
    assert replayed(cli, path)["runs"][0]["rows"] == rows


def test_the_sdks_own_span_dump_reads_the_same(
    recorded: tuple[Any, list[Any], Standin, int], tmp_path: Path, cli: Cli
) -> None:
    spans, _, _, _ = recorded
    otlp = tmp_path / "otlp.json"
    otlp.write_bytes(orjson.dumps(otlp_json(spans)))
    dump = tmp_path / "dump.json"  # ConsoleSpanExporter's lines, gathered into a list
    dump.write_text(json.dumps([json.loads(s.to_json()) for s in spans]))
    a = replayed(cli, otlp, "--run-format", "otel")["runs"][0]["rows"]
    b = replayed(cli, dump, "--run-format", "otel")["runs"][0]["rows"]
    strip = [{k: v for k, v in r.items() if k != "run"} for r in a]
    assert [{k: v for k, v in r.items() if k != "run"} for r in b] == strip


def test_the_table_shows_the_dropped_turns(
    recorded: tuple[Any, list[Any], Standin, int], tmp_path: Path, cli: Cli
) -> None:
    spans, fits, _, _ = recorded
    path = tmp_path / "trace.json"
    path.write_bytes(orjson.dumps(otlp_json(spans)))
    result = cli("replay", str(path), "--run-format", "otel", terminal_width=200)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.strip().startswith("│")]
    body = [line for line in lines if line.split("│")[1].strip().isdigit()]
    assert len(body) == CALLS
    dropped = [int(line.split("│")[7].strip().replace(",", "")) for line in body]
    assert dropped == [f.result.dropped_turns for f in fits]


# --- the reader on spans it did not see written -------------------------------------------


def span(
    attributes: dict[str, Any], trace_id: str = "t1", name: str = "ctxwin.fit"
) -> dict[str, Any]:
    return {"name": name, "traceId": trace_id, "attributes": attributes}


def test_a_trace_with_model_calls_and_ctxwin_spans_gives_two_runs() -> None:
    chat = span(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.input.messages": json.dumps([{"role": "user", "content": "hi"}]),
            "gen_ai.usage.input_tokens": 9,
        },
        name="chat gpt-4o",
    )
    fit = span({"ctxwin.status": "fits", "ctxwin.dropped_turns": 0, "gen_ai.usage.input_tokens": 9})
    runs = read_runs(orjson.dumps({"spans": [fit, chat]}), "otel")
    assert [(r.name, r.fits is not None) for r in runs] == [
        ("trace t1", False),
        ("trace t1 (ctxwin)", True),
    ]
    assert runs[0].recorded is not None and len(runs[0].recorded) == 1
    assert runs[1].fits == [
        {
            "run": "trace t1 (ctxwin)",
            "call": 1,
            "where": "span 1",
            "status": "fits",
            "model": None,
            "dropped_turns": 0,
            "reported_tokens": 9,
        }
    ]


def test_odd_values_on_a_ctxwin_span_never_reach_a_row() -> None:
    odd = span(
        {
            "ctxwin.status": "exploded",
            "ctxwin.dropped_turns": "many",
            "ctxwin.budget": True,
            "ctxwin.calibration": "NaN",
            "ctxwin.estimated_tokens": 1.5,
        }
    )
    [run] = read_runs(orjson.dumps([odd]), "otel")
    [row] = run.fits or []
    assert row["status"] == "invalid" and "exploded" in row["error"]
    assert not {"dropped_turns", "budget", "calibration", "estimated_tokens"} & set(row)


def test_a_replay_of_ctxwin_spans_names_a_truncated_call(tmp_path: Path, cli: Cli) -> None:
    fits = [
        span(
            {
                "ctxwin.status": "fits",
                "ctxwin.context_length": 8000,
                "ctxwin.estimated_tokens_after": 100,
            }
        ),
        span(
            {
                "ctxwin.status": "needs_pruning",
                "ctxwin.dropped_turns": 2,
                "ctxwin.context_length": 8000,
            }
        ),
        span({"ctxwin.status": "truncated", "ctxwin.context_length": 8000, "ctxwin.budget": 7000}),
    ]
    path = tmp_path / "spans.json"
    path.write_bytes(orjson.dumps({"spans": fits}))
    result = cli("replay", str(path), "--json")
    assert result.exit_code == 3
    [run] = orjson.loads(result.stdout)["runs"]
    assert (run["first_pruned"], run["first_truncated"], run["calls"]) == (2, 3, 3)
