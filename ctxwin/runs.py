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
raises for a bad entry: the run carries its ``error`` instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ctxwin.core import Transcript, load
from ctxwin.errors import InputError
from ctxwin.estimate import Estimator
from ctxwin.formats import AUTO
from ctxwin.view import ASSISTANT, View


@dataclass(frozen=True, slots=True)
class Call:
    """One provider call: the request body sent and the usage reported."""

    request: Any
    usage: Mapping[str, Any] | None = None
    where: str = ""
    """Where the call is in its source (``interactions[2]``, ``messages[14]``)."""
    model: str | None = None
    """Model named outside the body (a request URI), for bodies that name none."""


@dataclass(slots=True)
class Run:
    """One recorded run: a transcript body, or recorded calls, or an error."""

    name: str
    """Label within its file (``line 3``, ``[17]``, an instance id); ``""`` for the whole file."""
    shape: str
    """Which recorded shape it came from (``chat``, ``pairs``, ``openhands``, ...)."""
    body: Any = None
    """The whole transcript, for transcript runs."""
    usage_at: dict[int, Mapping[str, Any]] = field(default_factory=dict)
    """Usage reported for the call that produced the model message at each index."""
    recorded: list[Call] | None = None
    """The recorded calls, for runs that are lists of calls."""
    error: str | None = None
    """Why the entry could not be read (the run is then empty)."""

    @property
    def is_transcript(self) -> bool:
        return self.recorded is None and self.error is None

    def requests(self) -> list[Any]:
        """The request bodies to check: the whole transcript, or every recorded call."""
        if self.error is not None:
            return []
        if self.recorded is not None:
            return [c.request for c in self.recorded]
        return [self.body]

    def calls(self, estimator: Estimator | None = None, fmt: str = AUTO) -> list[Call]:
        """The provider calls of this run, in order (see the module docstring).

        Raises :class:`~ctxwin.errors.InputError` when the transcript cannot be read.
        """
        if self.error is not None:
            raise InputError(self.error)
        if self.recorded is not None:
            return list(self.recorded)
        return calls_from_transcript(self.body, self.usage_at, estimator, fmt)


def calls_from_transcript(
    body: Any,
    usage_at: Mapping[int, Mapping[str, Any]] | None = None,
    estimator: Estimator | None = None,
    fmt: str = AUTO,
) -> list[Call]:
    """One call per model message of ``body``: the request is everything before it."""
    return [call for call, _ in prepared_calls(body, usage_at, estimator, fmt)]


def prepared_calls(
    body: Any,
    usage_at: Mapping[int, Mapping[str, Any]] | None = None,
    estimator: Estimator | None = None,
    fmt: str = AUTO,
) -> list[tuple[Call, Transcript]]:
    """The calls of a transcript, each with its request already read.

    ``body`` is read once; every call's view shares the items (and their
    cost vectors) of that one reading, so a run of *n* calls costs one
    estimate of the transcript, not *n*.
    """
    t = load(body, fmt, estimator)
    view = t.view
    usage_at = usage_at or {}
    out = []
    for i, item in enumerate(view.items):
        if item.role == ASSISTANT and not item.joins:
            request = t.adapter.write(body, list(range(i)))
            sub = View(
                view.format,
                view.items[:i],
                view.base,
                view.model,
                view.max_tokens,
                view.items_path,
                list(view.notes),
            )
            call = Call(request, usage_at.get(i), view.where(i))
            out.append((call, Transcript(request, t.adapter, sub, t.estimator)))
    return out


# --- reading -----------------------------------------------------------------


def parse_values(data: bytes) -> Iterator[tuple[str, Any, str | None]]:
    """The JSON values of a file: one, or one per JSONL line.

    Yields ``(label, value, error)``; ``label`` is ``""`` for a single JSON
    document and ``line N`` for JSONL; ``error`` is set for a line that is
    not JSON. A leading UTF-8 byte order mark is ignored.
    """
    if data[:3] == b"\xef\xbb\xbf":
        data = data[3:]
    try:
        yield "", orjson.loads(data), None
        return
    except orjson.JSONDecodeError as exc:
        first_error = str(exc)
    lines = [(n, line) for n, line in enumerate(data.splitlines(), 1) if line.strip()]
    if not lines:
        yield "", None, "empty input (expected JSON or JSONL)"
        return
    try:
        first = orjson.loads(lines[0][1])
    except orjson.JSONDecodeError:
        first = None
    if len(lines) < 2 or first is None:
        yield "", None, f"invalid JSON: {first_error}"
        return
    for n, line in lines:
        try:
            yield f"line {n}", orjson.loads(line), None
        except orjson.JSONDecodeError as exc:
            yield f"line {n}", None, f"invalid JSON: {exc}"


def read_runs(data: bytes) -> list[Run]:
    """Every run in a recorded file's bytes (JSON or JSONL); never raises for bad content."""
    runs: list[Run] = []
    for label, value, error in parse_values(data):
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
    if not isinstance(response, Mapping):
        return None
    for key in ("usage", "usageMetadata"):
        usage = response.get(key)
        if isinstance(usage, Mapping):
            return usage  # OpenAI and Anthropic `usage`, Gemini `usageMetadata`
    if "input_tokens" in response:  # Anthropic count_tokens answers {"input_tokens": N}
        return {"input_tokens": response["input_tokens"]}
    return None


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


def _recall_text(extras: Any) -> str:
    if not isinstance(extras, dict):
        return ""
    parts: list[str] = []
    for key in (
        "repo_name",
        "repo_directory",
        "repo_instructions",
        "additional_agent_instructions",
    ):
        text = extras.get(key)
        if isinstance(text, str) and text:
            parts.append(text)
    hosts = extras.get("runtime_hosts")
    if isinstance(hosts, dict) and hosts:
        parts.append("\n".join(f"* {h} (port {p})" for h, p in hosts.items()))
    date = extras.get("date")
    if isinstance(date, str) and date:
        parts.append(f"Today's date is {date}")
    for k in extras.get("microagent_knowledge") or ():
        if isinstance(k, dict) and isinstance(k.get("content"), str):
            parts.append(k["content"])
    return "\n\n".join(parts)


def _openhands(value: dict[str, Any], label: str) -> Run:
    """An OpenHands evaluation record: its event history as one chat transcript."""
    name = value.get("instance_id")
    label = _join(label, str(name)) if name is not None else label
    messages: list[dict[str, Any]] = []
    tools: Any = None
    usage_at: dict[int, Mapping[str, Any]] = {}
    seen: set[str] = set()
    model: str | None = None
    for event in value["history"]:
        if not isinstance(event, dict):
            continue
        action = event.get("action")
        observation = event.get("observation")
        raw_meta = event.get("tool_call_metadata")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        raw_args = event.get("args")
        args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        if action == "system":
            messages.append({"role": "system", "content": args.get("content", "")})
            tools = args.get("tools")
        elif action is not None:
            response = meta.get("model_response")
            if isinstance(response, dict):
                rid = str(response.get("id"))
                if rid in seen:
                    continue
                seen.add(rid)
                choice = response["choices"][0]["message"]
                msg: dict[str, Any] = {"role": "assistant", "content": choice.get("content")}
                if choice.get("tool_calls"):
                    msg["tool_calls"] = choice["tool_calls"]
                usage = response.get("usage")
                if isinstance(usage, Mapping):
                    usage_at[len(messages)] = usage
                if model is None and isinstance(response.get("model"), str):
                    model = response["model"]
                messages.append(msg)
            elif action == "message":
                role = "user" if event.get("source") == "user" else "assistant"
                messages.append({"role": role, "content": args.get("content", "")})
        elif observation is not None:
            call_id = meta.get("tool_call_id")
            content = event.get("content", "")
            if call_id is not None:
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call_id,
                        "content": content,
                    }
                )
            elif observation == "recall":
                text = _recall_text(event.get("extras"))
                if text:
                    messages.append({"role": "user", "content": text})
            else:
                messages.append({"role": "user", "content": content})
    body: dict[str, Any] = {}
    if model is not None:
        body["model"] = model
    body["messages"] = messages
    if tools:
        body["tools"] = tools
    return Run(label, "openhands", body=body, usage_at=usage_at)


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
