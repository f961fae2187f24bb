"""OpenTelemetry spans of LLM calls: GenAI semantic conventions and OpenInference.

Accepted containers: OTLP JSON (``{"resourceSpans": [{"scopeSpans": [{"spans"}]}]}``),
SDK span dumps (``{"spans": [...]}`` or a list of spans, attributes as a plain
object) and a single span. Attributes may be OTLP ``[{"key", "value":
{"stringValue" | "intValue" | ...}}]`` pairs or a plain object.

A span is a model call when it has a prompt token count or says it is one
(``gen_ai.operation.name`` ``chat``/``call_llm``/``generate_content``/
``text_completion``, ``openinference.span.kind`` ``LLM``). Per call:

* request: ``input.value`` when it is a JSON request body with ``messages``
  (OpenInference); else ``gen_ai.input.messages`` (plain chat messages or
  the ``parts`` form), ``gen_ai.system_instructions``,
  ``llm.input_messages.N.message.*`` or ``gen_ai.prompt.N.*``; tools from
  ``llm.tools.N.tool.json_schema`` or ``gen_ai.tool.definitions``;
* usage: ``gen_ai.usage.input_tokens`` (or ``gen_ai.usage.prompt_tokens``,
  ``llm.token_count.prompt``);
* model: ``gen_ai.request.model``, ``gen_ai.response.model`` or ``llm.model_name``.

Spans are grouped into runs by trace id. When every call of a trace records
its input, each is a recorded call. When only the first does (any-agent), the
conversation is rebuilt: the first input, then each call's output
(``gen_ai.output``: text or ``[{"tool.name", "tool.args"}]``) as an assistant
message and each ``execute_tool`` span's ``gen_ai.output`` as the tool result.

The spans ctxwin writes itself (a ``ctxwin.fit`` span, the proxy's server span: any span
with a ``ctxwin.status``, :mod:`ctxwin.telemetry.otel`) hold what ctxwin did at each call
and no message: a trace's such spans are a run of their own whose rows are theirs
(:attr:`~ctxwin.recorded.Run.fits`; named ``trace ID (ctxwin)`` when the trace also
holds model calls, which are read as above), ``ctxwin.NAME`` as each row's ``NAME`` and
``gen_ai.usage.input_tokens`` as its reported tokens.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ctxwin.codec import dumps
from ctxwin.core import INVALID, STATUSES
from ctxwin.fitting.rows import Fitted
from ctxwin.recorded import Call, Run
from ctxwin.sessions._common import as_dict, as_int, as_str

NAME = "otel"

_LLM_OPS = frozenset(("chat", "call_llm", "generate_content", "text_completion", "completion"))
_PROMPT_KEYS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
_FIT_KEY = "ctxwin.status"
"""The attribute that marks a span ctxwin wrote of one of its fits."""
_ROW_KEYS = tuple(k for k in Fitted.__annotations__ if k not in ("status", "model", "error"))
"""The numeric keys of a fit's row, each ``ctxwin.KEY`` on its span (the row's status and
model are read apart)."""


def _value(v: Any) -> Any:
    """The plain value of an OTLP ``AnyValue`` (or the value itself when plain)."""
    if not isinstance(v, dict) or len(v) != 1:
        return v
    ((kind, inner),) = v.items()
    if kind in ("stringValue", "boolValue", "doubleValue"):
        return inner
    if kind == "intValue":
        return as_int(inner)
    if kind == "arrayValue":
        return [_value(x) for x in as_dict(inner).get("values", [])]
    if kind == "kvlistValue":
        return {
            kv.get("key"): _value(kv.get("value"))
            for kv in as_dict(inner).get("values", [])
            if isinstance(kv, dict)
        }
    return v


def _attrs(span: Mapping[str, Any]) -> dict[str, Any]:
    raw = span.get("attributes")
    if isinstance(raw, dict):
        return {k: _value(v) for k, v in raw.items()}
    if isinstance(raw, list):
        return {
            kv["key"]: _value(kv.get("value"))
            for kv in raw
            if isinstance(kv, dict) and isinstance(kv.get("key"), str)
        }
    return {}


def _is_span(value: Any) -> bool:
    return isinstance(value, dict) and "attributes" in value and "name" in value


def _spans(value: Any) -> list[dict[str, Any]] | None:
    """The spans of a container, or ``None`` when it is not one."""
    if isinstance(value, dict) and isinstance(value.get("resourceSpans"), list):
        out: list[dict[str, Any]] = []
        for rs in value["resourceSpans"]:
            for ss in (
                as_dict(rs).get("scopeSpans")
                or as_dict(rs).get("instrumentationLibrarySpans")
                or []
            ):
                out.extend(s for s in as_dict(ss).get("spans") or [] if isinstance(s, dict))
        return out
    if isinstance(value, dict) and isinstance(value.get("spans"), list):
        spans = [s for s in value["spans"] if _is_span(s)]
        return spans if spans else None
    if isinstance(value, list) and value and all(_is_span(s) for s in value):
        return list(value)
    if _is_span(value):
        return [value]
    return None


def _is_fit(attrs: Mapping[str, Any]) -> bool:
    """A span ctxwin wrote of one of its fits (its attributes say what it did)."""
    return isinstance(attrs.get(_FIT_KEY), str)


def _is_llm(attrs: Mapping[str, Any]) -> bool:
    if _is_fit(attrs):
        return False
    if any(k in attrs for k in _PROMPT_KEYS):
        return True
    if as_str(attrs.get("gen_ai.operation.name")) in _LLM_OPS:
        return True
    return attrs.get("openinference.span.kind") == "LLM"


def detect(entries: Sequence[Any], jsonl: bool) -> bool:
    """Spans (in any container above), at least one of them a model call."""
    candidates = entries if jsonl else entries[:1]
    for value in candidates:
        spans = _spans(value)
        if spans and any(_is_llm(a) or _is_fit(a) for a in map(_attrs, spans)):
            return True
    return False


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    return value


def _indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``prefix.N.rest`` attributes as a list of ``{rest: value}`` (flattened)."""
    rows: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        head, _, rest = key[len(prefix) :].partition(".")
        if head.isdigit():
            rows.setdefault(int(head), {})[rest] = value
    return [rows[i] for i in sorted(rows)]


def _text(parts: Any) -> Any:
    if isinstance(parts, list):
        texts = [
            str(p.get("content", p.get("text", "")))
            for p in parts
            if isinstance(p, dict) and p.get("type") in ("text", None)
        ]
        return "".join(texts)
    return parts


def _from_parts(msg: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A GenAI ``{"role", "parts"}`` message as chat messages."""
    role = as_str(msg.get("role")) or "user"
    parts = [p for p in msg.get("parts") or [] if isinstance(p, dict)]
    calls = [p for p in parts if p.get("type") == "tool_call"]
    answers = [p for p in parts if p.get("type") == "tool_call_response"]
    out: list[dict[str, Any]] = []
    if answers:
        for a in answers:
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": str(a.get("id", "")),
                    "content": _stringify(a.get("response", a.get("result", ""))),
                }
            )
        return out
    m: dict[str, Any] = {
        "role": role,
        "content": _text([p for p in parts if p.get("type") == "text"]),
    }
    if calls:
        m["tool_calls"] = [
            {
                "id": str(c.get("id", f"call_{k}")),
                "type": "function",
                "function": {
                    "name": str(c.get("name", "")),
                    "arguments": _stringify(c.get("arguments", {})),
                },
            }
            for k, c in enumerate(calls)
        ]
    return [m]


def _stringify(value: Any) -> str:
    return value if isinstance(value, str) else dumps(value).decode()


def _messages(attrs: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The input messages of a call span, or ``None`` when it records none."""
    out: list[dict[str, Any]] = []
    system = _json(attrs.get("gen_ai.system_instructions"))
    if system is not None:
        out.append(
            {
                "role": "system",
                "content": _text(system) if isinstance(system, list) else str(system),
            }
        )
    raw = _json(attrs.get("gen_ai.input.messages"))
    if isinstance(raw, list):
        for m in raw:
            if not isinstance(m, dict):
                continue
            if "parts" in m and "content" not in m:
                out.extend(_from_parts(m))
            else:
                out.append(dict(m))
        return out
    for prefix in ("llm.input_messages.", "gen_ai.prompt."):
        rows = _indexed(attrs, prefix)
        if rows:
            for row in rows:
                role = row.get("message.role", row.get("role", "user"))
                content = row.get("message.content", row.get("content", ""))
                out.append({"role": role, "content": content if content is not None else ""})
            return out
    return out or None


def _tools(attrs: Mapping[str, Any]) -> list[Any] | None:
    rows = _indexed(attrs, "llm.tools.")
    tools = [_json(r.get("tool.json_schema")) for r in rows if r.get("tool.json_schema")]
    if tools:
        return [t for t in tools if isinstance(t, dict)]
    defs = _json(attrs.get("gen_ai.tool.definitions"))
    return defs if isinstance(defs, list) and defs else None


def _request(attrs: Mapping[str, Any]) -> dict[str, Any] | None:
    body = _json(attrs.get("input.value"))
    if isinstance(body, dict) and isinstance(body.get("messages"), list):
        return body
    messages = _messages(attrs)
    if messages is None:
        return None
    request: dict[str, Any] = {}
    model = _model(attrs)
    if model:
        request["model"] = model
    request["messages"] = messages
    tools = _tools(attrs)
    if tools:
        request["tools"] = tools
    return request


def _model(attrs: Mapping[str, Any]) -> str | None:
    for key in ("gen_ai.request.model", "gen_ai.response.model", "llm.model_name"):
        model = as_str(attrs.get(key))
        if model:
            return model
    return None


def _usage(attrs: Mapping[str, Any]) -> dict[str, Any] | None:
    for key in _PROMPT_KEYS:
        n = as_int(attrs.get(key))
        if n is not None:
            return {"prompt_tokens": n}
    return None


def _trace_and_start(span: Mapping[str, Any]) -> tuple[str | int, int]:
    ctx = as_dict(span.get("context"))
    trace: Any = span.get("traceId", ctx.get("trace_id", ""))
    start = as_int(span.get("startTimeUnixNano", span.get("start_time"))) or 0
    # a 128-bit id written as a JSON number does not survive as one: number the traces
    return (trace if isinstance(trace, str | int) else ""), start


def read(entries: Sequence[Any], labels: Sequence[str]) -> list[Run]:
    spans: list[dict[str, Any]] = []
    for value in entries:
        spans.extend(_spans(value) or [])
    traces: dict[str, list[tuple[int, int, dict[str, Any]]]] = {}
    for order, span in enumerate(spans):
        trace, start = _trace_and_start(span)
        traces.setdefault(str(trace), []).append((start, order, _attrs(span)))
    runs = []
    for n, (trace, items) in enumerate(traces.items(), 1):
        items.sort(key=lambda t: (t[0], t[1]))
        attrs_list = [a for _, _, a in items]
        name = f"trace {trace}" if trace else (labels[0] or f"trace {n}")
        fits = [a for a in attrs_list if _is_fit(a)]
        if not fits:
            runs.append(_trace_run(attrs_list, name))
            continue
        rest = [a for a in attrs_list if not _is_fit(a)]
        if any(_is_llm(a) for a in rest):
            runs.append(_trace_run(rest, name))
            name = f"{name} (ctxwin)"
        runs.append(_fits_run(fits, name))
    return runs


def _fits_run(spans: list[dict[str, Any]], name: str) -> Run:
    """The run of ctxwin's own spans of a trace: one row per fit, as recorded."""
    rows: list[dict[str, Any]] = []
    for k, attrs in enumerate(spans, 1):
        row: dict[str, Any] = {"run": name, "call": k, "where": f"span {k}"}
        status = attrs[_FIT_KEY]
        if status in STATUSES and status != INVALID:
            row["status"] = status
        else:
            row.update({"status": INVALID, "error": f"unknown ctxwin.status {status[:40]!r}"})
        row["model"] = as_str(attrs.get("ctxwin.model")) or _model(attrs)
        for key in _ROW_KEYS:
            value = attrs.get(f"ctxwin.{key}")
            if key == "calibration" and isinstance(value, int | float) and value == value:
                row[key] = float(value)
            elif isinstance(value, int) and not isinstance(value, bool):
                row[key] = value
        usage = _usage(attrs)
        row["reported_tokens"] = usage["prompt_tokens"] if usage is not None else None
        rows.append(row)
    return Run(name, NAME, recorded=[], fits=rows)


def _trace_run(spans: list[dict[str, Any]], name: str) -> Run:
    calls = [a for a in spans if _is_llm(a)]
    requests = [_request(a) for a in calls]
    if all(r is not None for r in requests):
        recorded = [
            Call(r, _usage(a), f"span {k}", _model(a))
            for k, (r, a) in enumerate(zip(requests, calls, strict=True), 1)
            if r is not None
        ]
        return Run(name, NAME, recorded=recorded)
    return _rebuilt(spans, name)


def _output_message(
    attrs: Mapping[str, Any], k: int, pending: list[tuple[str, str]]
) -> dict[str, Any]:
    out = _json(attrs.get("gen_ai.output"))
    raw_msgs = _json(attrs.get("gen_ai.output.messages"))
    if isinstance(raw_msgs, list) and raw_msgs and isinstance(raw_msgs[0], dict):
        [msg, *_] = _from_parts(raw_msgs[0]) if "parts" in raw_msgs[0] else [dict(raw_msgs[0])]
        msg["role"] = "assistant"
    elif (
        isinstance(out, list) and out and all(isinstance(o, dict) and "tool.name" in o for o in out)
    ):
        msg = {"role": "assistant", "content": None, "tool_calls": []}
        for j, o in enumerate(out):
            call_id = f"call_{k}_{j}"
            msg["tool_calls"].append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": str(o["tool.name"]),
                        "arguments": _stringify(o.get("tool.args", {})),
                    },
                }
            )
            pending.append((call_id, str(o["tool.name"])))
    else:
        text = attrs.get("gen_ai.output")
        msg = {"role": "assistant", "content": _stringify(text) if text is not None else ""}
    return msg


def _rebuilt(spans: list[dict[str, Any]], name: str) -> Run:
    messages: list[dict[str, Any]] = []
    usage_at: dict[int, Mapping[str, Any]] = {}
    model: str | None = None
    tools: list[Any] | None = None
    pending: list[tuple[str, str]] = []
    k = 0
    for attrs in spans:
        if _is_llm(attrs):
            if not messages:
                messages.extend(_messages(attrs) or [])
                tools = _tools(attrs)
            model = model or _model(attrs)
            usage = _usage(attrs)
            if usage is not None:
                usage_at[len(messages)] = usage
            k += 1
            messages.append(_output_message(attrs, k, pending))
        elif attrs.get("gen_ai.operation.name") == "execute_tool":
            tool = as_str(attrs.get("gen_ai.tool.name")) or ""
            call_id = as_str(attrs.get("gen_ai.tool.call.id"))
            match = next((p for p in pending if p[1] == tool), pending[0] if pending else None)
            if match is not None:
                pending.remove(match)
                # the assistant message named its own id; answer that one
                if call_id is not None:
                    _rename(messages, match[0], call_id)
                call_id = call_id or match[0]
            output = attrs.get("gen_ai.output")
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call_id or tool,
                    "content": _stringify(output) if output is not None else "",
                }
            )
    body: dict[str, Any] = {}
    if model:
        body["model"] = model
    body["messages"] = messages
    if tools:
        body["tools"] = tools
    return Run(name, NAME, body=body, usage_at=usage_at, fmt="openai-chat")


def _rename(messages: list[dict[str, Any]], old: str, new: str) -> None:
    for m in reversed(messages):
        for call in m.get("tool_calls") or ():
            if call.get("id") == old:
                call["id"] = new
                return
