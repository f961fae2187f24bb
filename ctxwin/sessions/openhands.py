"""OpenHands event streams: the V0 trajectory list and the evaluation-output record.

An event stream is a JSON list of events, each an ``action`` or an
``observation`` with its ``source``:

* the ``system`` action holds the system prompt and ``args.tools``;
* agent actions carry ``tool_call_metadata.model_response``: the assistant
  message and its ``usage``; one response may spawn several actions (one per
  tool call), so responses are taken once per ``id``;
* observations answer ``tool_call_metadata.tool_call_id``; a ``recall``
  observation adds the workspace context the agent was given;
* state changes (``agent_state_changed``, ``change_agent_state``) and
  ``null`` observations are the controller's own and never reach the model.

The evaluation output (one record per line, the same events in ``history``)
is read by :mod:`ctxwin.runs`; both become one chat transcript.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxwin.recorded import Run

NAME = "openhands-events"

_NOT_SENT = frozenset(("agent_state_changed", "change_agent_state", "null"))


def _named(value: Any) -> bool:
    """Whether an event's action or observation is one the model is never sent."""
    return isinstance(value, str) and value in _NOT_SENT


def _is_event(value: Any) -> bool:
    return isinstance(value, dict) and ("action" in value or "observation" in value)


def detect(entries: Sequence[Any], jsonl: bool) -> bool:
    """A JSON list of events (objects with ``action`` or ``observation``)."""
    if jsonl or len(entries) != 1 or not isinstance(entries[0], list):
        return False
    events = entries[0]
    return (
        bool(events)
        and all(_is_event(e) for e in events if isinstance(e, dict))
        and any(_is_event(e) for e in events)
    )


def read(entries: Sequence[Any], labels: Sequence[str]) -> list[Run]:
    return [openhands_events(entries[0], labels[0] or "events", NAME)]


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


def _observation_text(event: Mapping[str, Any]) -> Any:
    """What the model is sent for a tool's observation: what OpenHands' agent renders of it,
    not always the event's ``content``.

    * ``run``: the command's output between its metadata's ``prefix`` and ``suffix``, then
      the working directory, the Python interpreter and the exit code (-1: none) on lines
      of their own (``CmdOutputObservation.to_agent_observation``);
    * ``edit``: through the ACI editor (``impl_source: oh_aci``), the editor's own message
      (``formatted_output_and_error`` where the event has one: the ``content`` of those
      versions is a diff the model never sees); a new file written by the LLM-based editor,
      one line naming it; any other edit, its ``content`` (the diff the agent shows is
      drawn from the same lines).
    """
    content = event.get("content", "")
    extras = event.get("extras")
    if not isinstance(extras, Mapping) or not isinstance(content, str):
        return content
    kind = event.get("observation")
    if kind == "run":
        meta = extras.get("metadata")
        if not isinstance(meta, Mapping):
            return content
        prefix, suffix = meta.get("prefix"), meta.get("suffix")
        text = f"{prefix if isinstance(prefix, str) else ''}{content}"
        text += suffix if isinstance(suffix, str) else ""
        if isinstance(meta.get("working_dir"), str) and meta["working_dir"]:
            text += f"\n[Current working directory: {meta['working_dir']}]"
        if isinstance(meta.get("py_interpreter_path"), str) and meta["py_interpreter_path"]:
            text += f"\n[Python interpreter: {meta['py_interpreter_path']}]"
        code = meta.get("exit_code")
        if isinstance(code, int) and code != -1:
            text += f"\n[Command finished with exit code {code}]"
        return text
    if kind == "edit":
        if extras.get("impl_source") == "oh_aci":
            shown = extras.get("formatted_output_and_error")
            return shown if isinstance(shown, str) else content
        if extras.get("prev_exist") is False and isinstance(extras.get("path"), str):
            return f"[New file {extras['path']} is created with the provided content.]\n"
    return content


def openhands_events(events: list[Any], label: str, shape: str = "openhands") -> Run:
    """An OpenHands event list as one chat transcript with usage per model response."""
    messages: list[dict[str, Any]] = []
    tools: Any = None
    usage_at: dict[int, Mapping[str, Any]] = {}
    seen: set[str] = set()
    model: str | None = None
    for event in events:
        if not isinstance(event, dict):
            continue
        if _named(event.get("observation")) or _named(event.get("action")):
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
                        "content": _observation_text(event),
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
    return Run(label, shape, body=body, usage_at=usage_at)
