"""Recorded agent runs: turn the shapes teams keep into request bodies and calls.

A recorded file holds one or more :class:`Run`. A run is either

* a **transcript**: one request body (``body``) holding a whole conversation;
  every model message in it marks one provider call, whose request is
  everything before that message (plus the body's tools and system), and
  ``usage_at`` maps a model message's index to the usage its call reported;
* or a list of **recorded calls**: the exact request bodies that were sent,
  each with the usage its response reported, if any.

Shapes read (by shape, never by file name):

* an OpenAI Chat Completions body, or a bare ``messages`` array (any other
  body a format adapter knows is read as a transcript too);
* ``{"request": body, "response": body-with-usage}`` pairs, one per JSONL line
  (as proxies and SDK logs write them);
* tau-bench: a list of ``{"traj": messages, ...}``;
* SWE-agent ``.traj``: ``history`` is an OpenAI-like message list (tool
  messages carry ``tool_call_ids[0]``; content may be a list of text parts);
* OpenHands evaluation output: ``history`` is an event list (the ``system``
  action holds the system prompt and ``args.tools``; agent actions carry
  ``tool_call_metadata.model_response`` with the assistant message and its
  ``usage``, one response per id however many actions it spawned;
  observations carry ``tool_call_metadata.tool_call_id``);
* agent-sdk per-call logs: ``messages``, ``tools``, ``response.usage`` (a log
  with ``raw_messages`` described the tools in text: it sent no ``tools``);
* pydantic-ai cassettes: ``interactions[i].request.parsed_body`` with
  ``response.parsed_body.usage`` or ``usageMetadata``.

JSON files may also be JSONL: one body or run per line. Reading never
raises for a bad entry: the run carries its ``error`` instead. JSON Lines that no
session reader detects and whose records are none of these shapes is one invalid run
(:func:`unknown_records`), not one per line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from itertools import chain
from typing import Any

import orjson

from ctxwin import sessions
from ctxwin.codec import explain_error, looks_like_jsonl
from ctxwin.errors import InputError
from ctxwin.fitting.calibration import usage_in
from ctxwin.recorded import Call, Run, calls_from_transcript, prepared_calls
from ctxwin.sessions._common import Beside, Besides
from ctxwin.sessions.openhands import openhands_events

__all__ = [
    "UNKNOWN_RECORDS",
    "Call",
    "Run",
    "calls_from_transcript",
    "join_recorded",
    "looks_like_jsonl",
    "parse_values",
    "prepared_calls",
    "read_runs",
    "read_session",
    "runs_from_value",
    "unknown_records",
    "usage_of",
]


# --- reading -----------------------------------------------------------------


_NON_SPACE = re.compile(rb"\S")


def _lines(data: bytes, start: int) -> Iterator[tuple[int, int, int]]:
    """``(number, start, end)`` of each line of ``data`` that is not blank."""
    n = 0
    pos = start
    size = len(data)
    while pos < size:
        end = data.find(b"\n", pos)
        if end < 0:
            end = size
        n += 1
        found = _NON_SPACE.search(data, pos, end)
        if found is not None:
            yield n, pos, end
        pos = end + 1


def parse_values(data: bytes) -> Iterator[tuple[str, Any, str | None]]:
    """The JSON values of a file: one, or one per JSONL line.

    Yields ``(label, value, error)``; ``label`` is ``""`` for a single JSON
    document and ``line N`` for JSONL; ``error`` is set for a line that is
    not JSON. A leading UTF-8 byte order mark is ignored. Lines are parsed one
    at a time from ``data`` (no copy of the file), and what session readers
    never use is dropped as each line is read (:func:`ctxwin.sessions.slim`).
    """
    start = 3 if data[:3] == b"\xef\xbb\xbf" else 0
    view = memoryview(data)
    first_error = "not JSON"
    if not looks_like_jsonl(data):
        try:
            yield "", orjson.loads(view[start:]), None
            return
        except orjson.JSONDecodeError as exc:
            first_error = explain_error(bytes(view[start:]), exc)
    lines = _lines(data, start)
    head = next(lines, None)
    if head is None:
        yield "", None, "empty input (expected JSON or JSONL)"
        return
    second = next(lines, None)
    try:
        first = orjson.loads(view[head[1] : head[2]])
    except orjson.JSONDecodeError:
        first = None
    if second is None or first is None:
        yield "", None, first_error
        return
    yield f"line {head[0]}", sessions.slim(first), None
    for n, a, b in chain([second], lines):
        try:
            yield f"line {n}", sessions.slim(orjson.loads(view[a:b])), None
        except orjson.JSONDecodeError as exc:
            # the line's own position: a column, its line being the label
            words = explain_error(bytes(view[a:b]), exc).replace(
                " at line 1 column ", " at column "
            )
            yield f"line {n}", None, words


def read_runs(data: bytes, run_format: str = "auto", path: str | None = None) -> list[Run]:
    """Every run in a recorded file's bytes (JSON or JSONL); never raises for bad content.

    Session files of agent tools (:mod:`ctxwin.sessions`) are detected by shape
    first; ``run_format`` names a session reader to use without detection.
    A JSONL session whose last line is cut off (still being written) is read
    up to its last complete line, with a warning on each run. ``path`` is the
    file's, for the readers of tools that keep a session in several files of one
    folder (:func:`beside`): a file that only goes with another one beside it
    has no runs of its own (its runs are that file's).
    """
    values = list(parse_values(data))
    session = _read_session(values, run_format, beside(path))
    if session is not None:
        return session
    unknown = _unknown(values)
    if unknown is not None:
        return [Run("", "invalid", error=unknown)]
    runs: list[Run] = []
    for label, value, error in values:
        if error is not None:
            runs.append(Run(label, "invalid", error=error))
            continue
        try:
            runs.extend(runs_from_value(value, label))
        except InputError as exc:
            runs.append(Run(label, "invalid", error=str(exc)))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            runs.append(Run(label, "invalid", error=f"unexpected shape: {type(exc).__name__}"))
    return runs


def read_session(
    data: bytes, run_format: str = "auto", value: Any = None, path: str | None = None
) -> list[Run] | None:
    """The runs of a session file (:mod:`ctxwin.sessions`), or ``None`` when ``data``
    is not one and ``run_format`` is ``auto``. ``value`` is ``data`` already parsed
    (a single JSON document), when the caller has it; ``path`` the file's, as for
    :func:`read_runs`. JSON Lines that no reader recognises (:func:`unknown_records`)
    is one invalid run saying so."""
    values: list[tuple[str, Any, str | None]] = (
        [("", value, None)] if value is not None else list(parse_values(data))
    )
    session = _read_session(values, run_format, beside(path))
    if session is None and (unknown := _unknown(values)) is not None:
        return [Run("", "invalid", error=unknown)]
    return session


UNKNOWN_RECORDS = "JSON Lines, but no reader recognises it"
"""How the error of JSON Lines that no reader recognises begins (:func:`unknown_records`)."""

_RECORD_KEYS = frozenset(("interactions", "history", "request", "messages", "input", "contents"))
"""Keys of an object that :func:`runs_from_value` reads as a run or a request body."""

_HEAD = 20
"""How many records of JSON Lines decide whether any reader knows them."""


def _known_record(value: Any) -> bool:
    """Whether :func:`runs_from_value` reads ``value`` as something: a messages array
    (or tau-bench list), or an object with the key of one of its shapes or of a wire
    format's body."""
    if isinstance(value, list):
        return True
    return isinstance(value, dict) and not _RECORD_KEYS.isdisjoint(value)


def _unknown(values: list[tuple[str, Any, str | None]]) -> str | None:
    """The error of JSON Lines that parse, that no session reader took, and of whose first
    records none is a shape :func:`runs_from_value` reads; else ``None``."""
    if len(values) < 2 or not values[0][0].startswith("line "):
        return None
    if any(error is not None for _, _, error in values):
        return None
    if any(_known_record(v) for _, v, _ in values[:_HEAD]):
        return None
    return unknown_records(values[0][1])


def unknown_records(first: Any) -> str:
    """The error of JSON Lines that no reader recognises: the first record's keys (what the
    file is made of) and the readers that can be named instead of detecting one."""
    if isinstance(first, dict):
        keys = list(first)
        shown = ", ".join(keys[:12]) + (f", … ({len(keys)} keys)" if len(keys) > 12 else "")
        what = f"first record's keys: {shown or 'none'}"
    else:
        what = f"first record: {type(first).__name__ if first is not None else 'null'}"
    return f"{UNKNOWN_RECORDS} ({what}); readers: {', '.join(sessions.names())}"


def beside(path: str | None) -> Beside | None:
    """The files next to the local file ``path``, by name (parsed JSON, or ``None``):
    ``None`` for no path, standard input (``-``) or a URL."""
    if path is None or path == "-" or "://" in path or not os.path.isfile(path):
        return None
    folder = os.path.dirname(path)
    read: dict[str, Any] = {}

    def load(name: str) -> Any:
        if name not in read:
            try:
                with open(os.path.join(folder, name), "rb") as fh:
                    read[name] = orjson.loads(fh.read())
            except (OSError, orjson.JSONDecodeError):
                read[name] = None
        return read[name]

    return load


def _read_session(
    values: list[tuple[str, Any, str | None]],
    run_format: str,
    beside_it: Beside | None = None,
) -> list[Run] | None:
    """The runs of a session file, or ``None`` when it is not one (auto-detection)."""
    sessions.check_name(run_format)
    jsonl = bool(values) and values[0][0].startswith("line ")
    warnings: list[str] = []
    if jsonl and len(values) > 1 and values[-1][2] is not None:
        label = values[-1][0]
        if all(e is None for _, _, e in values[:-1]):
            warnings.append(
                f"{label} is cut off (the session may still be being written): "
                f"read up to {values[-2][0]}"
            )
            values = values[:-1]
    if any(e is not None for _, _, e in values):
        if run_format == sessions.AUTO:
            return None
        label, _, error = next(v for v in values if v[2] is not None)
        return [Run(label, "invalid", error=error)]
    entries = [v for _, v, _ in values]
    labels = [label for label, _, _ in values]
    name = run_format if run_format != sessions.AUTO else sessions.detect(entries, jsonl)
    if name is None:
        return None
    try:
        runs = sessions.read(name, entries, labels, beside_it)
    except Besides as part:
        if beside_it is not None and beside_it(part.main) is not None:
            return []  # read with the file it goes with
        return [
            Run("", name, error=f"this {name} file goes with {part.main}, which is not beside it")
        ]
    except InputError as exc:
        return [Run("", name, error=str(exc))]
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        return [Run("", name, error=f"not a {name} session: {type(exc).__name__}")]
    if not runs:
        return [Run("", name, error=f"no model calls in this {name} session")]
    for run in runs:
        run.warnings.extend(warnings)
    return runs


def _join(label: str, sub: str) -> str:
    return f"{label} {sub}" if label else sub


def runs_from_value(value: Any, label: str = "") -> list[Run]:
    """The runs in one parsed JSON value, detected by shape."""
    if isinstance(value, list):
        if value and all(isinstance(v, dict) and "traj" in v for v in value):
            return [_taubench(v, _join(label, f"[{i}]")) for i, v in enumerate(value)]
        return [Run(label, "messages", body=value)]
    if not isinstance(value, dict):
        return [Run(label, "invalid", error="not a transcript: expected a JSON object or array")]
    if isinstance(value.get("interactions"), list):
        return [_cassette(value, label)]
    history = value.get("history")
    if isinstance(history, list) and "messages" not in value:
        if history and all(isinstance(e, dict) and "role" in e for e in history):
            return [_swe_agent(history, label)]
        return [_openhands(value, label)]
    if "request" in value and "response" in value:
        return [_pair(value, label)]
    if isinstance(value.get("messages"), list) and isinstance(value.get("response"), dict):
        return [_sdk_log(value, label)]
    return [Run(label, "chat" if "messages" in value else "body", body=value)]


def usage_of(response: Any) -> Mapping[str, Any] | None:
    """The usage object of a provider response body, if it has one."""
    usage = usage_in(response)  # OpenAI and Anthropic `usage`, Gemini `usageMetadata`
    if usage is None and isinstance(response, Mapping) and "input_tokens" in response:
        return {"input_tokens": response["input_tokens"]}  # Anthropic count_tokens answers
    return usage


def _pair(value: dict[str, Any], label: str) -> Run:
    response = value["response"]
    if isinstance(response, Mapping) and isinstance(response.get("body"), Mapping):
        response = response["body"]
    request = value["request"]
    if isinstance(request, Mapping) and isinstance(request.get("body"), Mapping):
        request = request["body"]
    return Run(label, "pairs", recorded=[Call(request, usage_of(response), "request")])


_URI_MODEL = re.compile(r"/models/([^/:?]+)")


def _cassette(value: dict[str, Any], label: str) -> Run:
    calls = []
    for i, inter in enumerate(value["interactions"]):
        if not isinstance(inter, dict):
            continue
        request = inter.get("request")
        if not isinstance(request, dict) or "parsed_body" not in request:
            continue
        response = inter.get("response")
        parsed = response.get("parsed_body") if isinstance(response, dict) else None
        uri = request.get("uri")
        found = _URI_MODEL.search(uri) if isinstance(uri, str) else None
        model = found.group(1) if found else None
        calls.append(Call(request["parsed_body"], usage_of(parsed), f"interactions[{i}]", model))
    return Run(label, "cassette", recorded=calls)


def _sdk_log(value: dict[str, Any], label: str) -> Run:
    response = value["response"]
    body: dict[str, Any] = {}
    model = response.get("model")
    if isinstance(model, str):
        body["model"] = model
    body["messages"] = value["messages"]
    if value.get("tools") and "raw_messages" not in value:
        body["tools"] = value["tools"]
    return Run(label, "agent-sdk-log", recorded=[Call(body, usage_of(response), "messages")])


def _taubench(item: dict[str, Any], label: str) -> Run:
    task = item.get("task_id")
    name = f"{label} task {task}" if task is not None else label
    return Run(name, "taubench", body={"messages": item["traj"]})


def _text_of(content: Any) -> Any:
    if isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") == "text" for p in content
    ):
        return "".join(str(p.get("text", "")) for p in content)
    return content


def _swe_agent(history: list[dict[str, Any]], label: str) -> Run:
    messages: list[dict[str, Any]] = []
    for entry in history:
        msg: dict[str, Any] = {"role": entry["role"], "content": _text_of(entry.get("content"))}
        if entry.get("tool_calls"):
            msg["tool_calls"] = entry["tool_calls"]
        ids = entry.get("tool_call_ids")
        if entry["role"] == "tool" and isinstance(ids, list) and ids:
            msg["tool_call_id"] = ids[0]
        messages.append(msg)
    return Run(label, "swe-agent", body={"messages": messages})


def _openhands(value: dict[str, Any], label: str) -> Run:
    """An OpenHands evaluation record: its event history as one chat transcript."""
    name = value.get("instance_id")
    label = _join(label, str(name)) if name is not None else label
    return openhands_events(value["history"], label)


def join_recorded(runs: list[Run], name: str = "") -> list[Run]:
    """One run of every recorded call in ``runs``, in order; transcripts stay as they are.

    A proxy log (one ``{"request", "response"}`` per line) or a folder of
    per-call logs is one agent run, call after call: replaying it needs one
    manager that sees every call. The joined run takes the place of the
    first recorded run; each call's ``where`` keeps the entry it came from.
    """
    recorded = [r for r in runs if r.recorded is not None and r.error is None]
    if len(recorded) < 2:
        return runs
    calls = [
        Call(c.request, c.usage, f"{r.name} {c.where}".strip() if r.name else c.where, c.model)
        for r in recorded
        for c in r.recorded or ()
    ]
    joined = Run(name, recorded[0].shape, recorded=calls)
    out: list[Run] = []
    for r in runs:
        if r is recorded[0]:
            out.append(joined)
        elif not (r.recorded is not None and r.error is None):
            out.append(r)
    return out
