"""OpenAI Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

One ``{"timestamp", "type", "payload"}`` object per line:

* ``session_meta``: the session; ``base_instructions.text`` (or
  ``instructions``) becomes the body's ``instructions``;
* ``turn_context``: the ``model`` and the ``truncation_policy`` of what follows;
* ``response_item``: a Responses-API item (``message``, ``reasoning``,
  ``function_call``, ``function_call_output``, ``custom_tool_call``, ...) as Codex
  records it into its history (a ``ghost_snapshot`` item is never sent: skipped);
* ``event_msg`` of type ``token_count``: ``info.last_token_usage`` is the usage of
  one response (``input_tokens``, its prompt; repeated events that change nothing
  are ignored); ``thread_rolled_back``: the last ``num_turns`` user turns leave the
  history. Other events repeat what the items hold and are skipped;
* ``compacted``: the history restarts from ``replacement_history``, or, in the
  legacy record that has none, from what Codex's ``build_compacted_history``
  makes of it (:func:`_compacted`).

Which count is which response's. Codex writes one ``token_count`` per response (per
sampling request), at a place that changed across versions:

* 0.36-0.42: before the response's items (it is sent when the response completes,
  and the items and the tools' outputs are recorded after, each call followed by its
  output: ``count, reasoning, call1, out1, call2, out2``);
* later versions (0.104-0.125 in the samples): after the response's model items,
  before the tools' outputs (``reasoning, call1, call2, count, out1, out2``);
* 0.140-0.142: after the tools' outputs too (``reasoning, call1, call2, out1, out2,
  count``): Codex waits for the tools before it sends the count.

So a count belongs to the open response (the latest) when that has none yet, and is
otherwise the next response's, waiting for its items. Which responses the items form
follows from the same order: a response ends with its count, at a ``turn_context``
line (written before each sampling request by the versions that write the count
first) and at any item that is no output of its own calls; a response whose count came
first keeps its calls' outputs between its calls. A count that comes when the open
response already has one, in a rollout whose counts come after their responses, is
another request's (a compaction's) and is no call's; one with no input tokens is
Codex's own estimate after a compaction, no report.

What Codex sends is what its history holds, which is not always what the rollout
records: it truncates a tool's output as it records it into the history (the
rollout keeps it whole), to the ``truncation_policy`` of the turn times 1.2, keeping
the head and the tail (:func:`_truncated`); a ``reasoning`` item carries its
response's reasoning tokens (:func:`ctxwin.formats.openai_responses.add_reasoning`).

Resumed and forked rollouts. A fresh rollout has one ``session_meta`` line, and
resuming it in place appends to the same file. A rollout that starts from
another one's history (a fork, a subagent given its parent's history, a resume
written to a new file) opens with its own ``session_meta`` (with
``forked_from_id``) and then replays the parent's lines as they are: the parent's
``session_meta`` (and its ancestors' in a rollout resumed more than once),
``turn_context``, ``response_item``, ``compacted`` and ``event_msg`` lines,
``token_count`` events included, all stamped with the time of the copy. The
replayed items are the context the new calls carry, so they stay in the body;
their ``token_count`` events are the parent's calls, already counted in the
parent's file, so they are no call here (paired as the parent's version wrote them,
they only give the replayed reasoning items their reasoning tokens). The replay begins at the first
``session_meta`` with another ``id`` than the first line's and ends at a
``session_meta`` with the rollout's own ``id`` (newer versions write it again
after the copy) or, when none follows, at the first line stamped later than
the copy (more than :data:`COPY_GAP` after the line before it). A history
segment that lies wholly in the replay is the parent's run, not one of this file.

The whole rollout reads as OpenAI Responses bodies with usage per call: one run per
history (a compaction or a rollback starts the next).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from ctxwin.formats.openai_responses import REASONING_TOKENS
from ctxwin.recorded import Run
from ctxwin.sessions._common import as_dict, as_int, as_str, line_time, need

NAME = "codex"

COPY_GAP = timedelta(seconds=1)
"""Replayed lines are written at once; a longer pause before a line ends the replay."""

_TYPES = frozenset(("session_meta", "turn_context", "response_item", "event_msg", "compacted"))
_MODEL_ITEMS = frozenset(
    (
        "reasoning",
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "web_search_call",
        "tool_search_call",
        "image_generation_call",
    )
)
_OUTPUTS = frozenset(("function_call_output", "custom_tool_call_output"))

BYTES_PER_TOKEN = 4
"""Codex's token estimate (``approx_token_count``): 4 bytes a token, rounded up."""

TRUNCATION_HEADROOM = 1.2
"""Codex records a tool's output into its history cut to its ``truncation_policy``
times this (``ContextManager::process_item``; versions without the headroom cut to
the policy itself, which keeps less)."""

COMPACT_USER_MESSAGES_TOKENS = 20_000
"""Of the user messages before a compaction, the newest this many (Codex's estimate)
are kept (``COMPACT_USER_MESSAGE_MAX_TOKENS``)."""

_CONTEXTUAL = (
    "<environment_context",
    "<user_instructions",
    "# AGENTS.md instructions",
    "<user_shell_command",
    "<turn_aborted",
    "<subagent_notification",
    "<skill",
)
"""How the user-role messages Codex writes itself begin (no user turn of their own:
``event_mapping::parse_turn_item``)."""


def detect(entries: Sequence[Any], jsonl: bool) -> bool:
    """JSONL of ``{"type", "payload"}`` lines with Codex's line types."""
    if not jsonl:
        return False
    head = [v for v in entries[:20] if isinstance(v, dict)]
    return bool(head) and all(
        as_str(v.get("type")) in _TYPES and isinstance(v.get("payload"), dict) for v in head
    )


def _is_model(item: Mapping[str, Any]) -> bool:
    t = item.get("type")
    if t == "message" or t is None:
        return item.get("role") == "assistant"
    return isinstance(t, str) and t in _MODEL_ITEMS


def _sent(item: Mapping[str, Any]) -> bool:
    """Whether Codex sends a recorded item: not a ``ghost_snapshot`` (the state ``/undo``
    restores, kept in the history and left out of every prompt: ``for_prompt``) nor a
    ``system`` message (``is_api_message``)."""
    if item.get("type") == "ghost_snapshot":
        return False
    return not (item.get("type") == "message" and item.get("role") == "system")


def _text(item: Mapping[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(
        p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
    )


def _user_text(item: Mapping[str, Any]) -> str | None:
    """The text of a user's own message (one that opens a user turn), else ``None``."""
    if item.get("type", "message") != "message" or item.get("role") != "user":
        return None
    text = _text(item)
    return None if text.lstrip().startswith(_CONTEXTUAL) else text


def _message(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _middle_cut(text: str, budget: int) -> str:
    """``text`` with its middle cut so that ``budget`` bytes of it are kept, half from
    each end, as Codex cuts it (``truncate_text``), marker and line count included."""
    data = text.encode()
    if len(data) <= budget:
        return text
    half = budget // 2
    head = data[:half].decode(errors="ignore")
    tail = data[len(data) - (budget - half) :].decode(errors="ignore")
    removed = -(-(len(data) - budget) // BYTES_PER_TOKEN)
    lines = text.count("\n") + 1
    return f"Total output lines: {lines}\n\n{head}…{removed} tokens truncated…\n{tail}"


def _budget(policy: Mapping[str, Any] | None) -> int | None:
    """The bytes of a tool's output Codex keeps in its history, from a turn's
    ``truncation_policy`` (``{"mode": "tokens" | "bytes", "limit"}``); ``None``: no cut."""
    if policy is None:
        return None
    limit = as_int(policy.get("limit"))
    mode = policy.get("mode")
    if limit is None or limit < 0 or mode not in ("tokens", "bytes"):
        return None
    scale = BYTES_PER_TOKEN if mode == "tokens" else 1
    return math.ceil(limit * TRUNCATION_HEADROOM) * scale


def _truncated(item: dict[str, Any], budget: int | None) -> dict[str, Any]:
    """A tool's output as Codex keeps it in the history it sends (cut to ``budget``
    bytes, head and tail, when longer; an upper bound on what it keeps: the marker
    and the line count are counted whether or not the version writes them)."""
    output = item.get("output")
    if budget is None or item.get("type") not in _OUTPUTS or not isinstance(output, str):
        return item
    if len(output) <= budget // 4 or len(output.encode()) <= budget:
        return item
    return dict(item, output=_middle_cut(output, budget))


def _compacted(items: Sequence[dict[str, Any]], summary: str) -> list[dict[str, Any]]:
    """The history Codex builds from a legacy ``compacted`` record (one without
    ``replacement_history``): ``build_compacted_history`` over the user messages before
    it, the newest first up to :data:`COMPACT_USER_MESSAGES_TOKENS` (the one that
    overflows cut in the middle to what is left), in their order, then the summary. The
    session's opening context (the messages before the first user turn) comes first:
    Codex sends it again with the next turn."""
    head: list[dict[str, Any]] = []
    for item in items:
        if _user_text(item) is not None or item.get("type", "message") != "message":
            break
        head.append(item)
    texts = [t for t in (_user_text(i) for i in items) if t is not None]
    left = COMPACT_USER_MESSAGES_TOKENS
    kept: list[str] = []
    for text in reversed(texts):
        if left == 0:
            break
        tokens = -(-len(text.encode()) // BYTES_PER_TOKEN)
        if tokens <= left:
            kept.append(text)
            left -= tokens
        else:
            kept.append(_middle_cut(text, left * BYTES_PER_TOKEN))
            break
    kept.reverse()
    return [*head, *map(_message, kept), _message(summary or "(no summary available)")]


def _rolled_back(items: Sequence[dict[str, Any]], turns: int) -> list[dict[str, Any]]:
    """The history without its last ``turns`` user turns (``drop_last_n_user_turns``):
    cut at the user message that opens the first of them (at the first user message
    when there are fewer), and before the context updates recorded just before it;
    what precedes the first user message stays."""
    starts = [i for i, item in enumerate(items) if _user_text(item) is not None]
    if turns <= 0 or not starts:
        return list(items)
    cut = starts[0] if turns >= len(starts) else starts[-turns]
    while cut > starts[0] and items[cut - 1].get("type", "message") == "message":
        role = items[cut - 1].get("role")
        if role not in ("developer", "system", "user") or _user_text(items[cut - 1]) is not None:
            break
        cut -= 1
    return list(items[:cut])


def _usage(last: Mapping[str, Any]) -> dict[str, Any] | None:
    """A ``last_token_usage`` as a Responses usage object (``None`` without a prompt: a
    prompt of 0 is Codex's own estimate after a compaction, ``recompute_token_usage``,
    which reports its estimate as ``total_tokens`` and no input)."""
    prompt = as_int(last.get("input_tokens"))
    if prompt is None or prompt <= 0:
        return None
    usage: dict[str, Any] = {"input_tokens": prompt}
    cached = as_int(last.get("cached_input_tokens"))
    if cached is not None:
        usage["input_tokens_details"] = {"cached_tokens": cached}
    output = as_int(last.get("output_tokens"))
    if output is not None:
        usage["output_tokens"] = output
    reasoning = as_int(last.get("reasoning_output_tokens"))
    if reasoning is not None:
        usage["output_tokens_details"] = {"reasoning_tokens": reasoning}
    return usage


class _Replay:
    """Tells the lines a rollout replayed from its parent from its own."""

    def __init__(self) -> None:
        self.own_id: str | None = None
        self.metas = 0
        self.active = False
        self.last: datetime | None = None

    def step(self, t: Any, payload: Mapping[str, Any], value: Mapping[str, Any]) -> bool:
        """Whether this line was replayed (the parent's) rather than written by this rollout."""
        stamp = line_time(value)
        if t == "session_meta":
            ident = as_str(payload.get("id"))
            self.metas += 1
            if self.metas == 1:
                self.own_id = ident
            else:
                self.active = ident is None or ident != self.own_id
        elif self.active and (stamp is None or self.last is None or stamp - self.last > COPY_GAP):
            self.active = False
        if stamp is not None:
            self.last = stamp
        return self.active or (t == "session_meta" and self.metas > 1)


class _History:
    """One history (a segment): its items, and the responses among them."""

    def __init__(self, items: list[dict[str, Any]] | None = None) -> None:
        self.items: list[dict[str, Any]] = items or []
        self.usage_at: dict[int, Mapping[str, Any]] = {}
        self.calls: set[int] = set()
        """Where this rollout's own responses start (replayed ones are no call)."""
        self.own = False
        """Whether any line of this history is the rollout's own (not replayed)."""
        self.summary: str | None = None
        """The summary of the ``compacted`` line this history restarts from."""
        self.open: int | None = None
        """Where the latest response starts."""
        self.open_own = False
        self.open_usage: Mapping[str, Any] | None = None
        self.open_calls: set[str] = set()
        self.open_reasoning: list[dict[str, Any]] = []
        self.early = False
        """Whether the latest response's count came before its items (its calls'
        outputs then come between its calls)."""
        self.ended = True
        """Whether the next model item starts a new response."""

    def start(self, at: int, own: bool, usage: Mapping[str, Any] | None) -> None:
        self.open, self.open_own, self.ended, self.early = at, own, False, usage is not None
        self.open_usage, self.open_calls, self.open_reasoning = usage, set(), []
        if own:
            self.calls.add(at)
            if usage is not None:
                self.usage_at[at] = usage

    def model(self, item: dict[str, Any]) -> None:
        ref = item.get("call_id")
        if isinstance(ref, str):
            self.open_calls.add(ref)
        if item.get("type") == "reasoning":
            self.open_reasoning.append(item)
            self.note_reasoning()

    def note_reasoning(self) -> None:
        """Give the open response's reasoning items the reasoning tokens it reported."""
        details = as_dict(as_dict(self.open_usage).get("output_tokens_details"))
        tokens = as_int(details.get("reasoning_tokens"))
        if tokens is None or tokens < 0:
            return
        for item in self.open_reasoning:
            item[REASONING_TOKENS] = tokens

    def counted(self, usage: Mapping[str, Any], own: bool) -> None:
        """The open response's count came (after its items)."""
        assert self.open is not None
        self.open_usage, self.ended = usage, True
        if own and self.open in self.calls:
            self.usage_at[self.open] = usage
        self.note_reasoning()

    def run(self, name: str, body: dict[str, Any], context_length: int | None) -> Run:
        return Run(
            name,
            NAME,
            body=dict(body, input=self.items),
            usage_at=self.usage_at,
            fmt="openai-responses",
            calls_at=frozenset(self.calls),
            context_length=context_length,
            summary=self.summary,
        )


class _Reader:
    """One pass over a rollout's lines."""

    def __init__(self) -> None:
        self.instructions: str | None = None
        self.replayed_instructions: str | None = None
        self.model: str | None = None
        self.session = ""
        self.context_length: int | None = None
        self.budget: int | None = None
        self.histories = [_History()]
        self.last_total: Any = None
        self.pending: tuple[Mapping[str, Any], bool] | None = None
        """A count that came before its response's items, and whether it was replayed."""
        self.late = {False: False, True: False}
        """Whether the rollout (``False``), and the history it replays (``True``: an
        older version may have written it), write counts after their responses' items."""
        self.replay = _Replay()

    def line(self, label: str, value: dict[str, Any]) -> None:
        t = value.get("type")
        payload = as_dict(value.get("payload"))
        copied = self.replay.step(t, payload, value)
        h = self.histories[-1]
        if t == "session_meta":
            if not copied:
                self.session = self.session or as_str(payload.get("id")) or ""
            base = payload.get("base_instructions")
            text = as_str(as_dict(base).get("text")) or as_str(payload.get("instructions"))
            if text is not None and not copied:
                self.instructions = text
            elif text is not None:
                self.replayed_instructions = self.replayed_instructions or text
        elif t == "turn_context":
            self.model = as_str(payload.get("model")) or self.model
            policy = payload.get("truncation_policy")
            if isinstance(policy, dict):
                self.budget = _budget(policy)
            h.ended = True
        elif t == "response_item":
            kind = need(payload, "type", f"{label}.payload")
            if not isinstance(kind, str) or not _sent(payload):
                return
            self.item(h, _truncated(dict(payload), self.budget), copied)
        elif t == "event_msg":
            kind = payload.get("type")
            if kind == "token_count":
                self.count(h, as_dict(payload.get("info")), copied)
            elif kind == "task_started":
                window = as_int(payload.get("model_context_window"))
                self.context_length = window or self.context_length
            elif kind == "thread_rolled_back":
                kept = _rolled_back(h.items, as_int(payload.get("num_turns")) or 0)
                if len(kept) < len(h.items):
                    self.restart(kept)
        elif t == "compacted":
            history = payload.get("replacement_history")
            summary = as_str(payload.get("message")) or ""
            if isinstance(history, list):
                self.restart([dict(i) for i in history if isinstance(i, dict)])
            else:
                self.restart(_compacted(h.items, summary))
            self.histories[-1].summary = summary or None
        rollback = t == "event_msg" and payload.get("type") == "thread_rolled_back"
        if not copied and (t in ("response_item", "compacted") or rollback):
            self.histories[-1].own = True

    def item(self, h: _History, item: dict[str, Any], copied: bool) -> None:
        if _is_model(item):
            if h.open is None or h.ended:
                pending, self.pending = self.pending, None
                usage = pending[0] if pending is not None and pending[1] == copied else None
                h.start(len(h.items), not copied, usage)
            h.items.append(item)
            h.model(item)
            return
        ref = item.get("call_id")
        if not (h.early and isinstance(ref, str) and ref in h.open_calls):
            h.ended = True  # input to the next response
        h.items.append(item)

    def count(self, h: _History, info: Mapping[str, Any], copied: bool) -> None:
        total = info.get("total_token_usage")
        usage = _usage(as_dict(info.get("last_token_usage")))
        if usage is None or total == self.last_total:
            return
        self.last_total = total
        # a replayed count is the parent's call, counted in its own file: it only gives
        # the replayed response its reasoning tokens
        uncounted = h.open is not None and h.open_usage is None and h.open_own != copied
        if uncounted:  # written after its response's items
            self.late[copied] = True
            h.counted(usage, own=not copied)
        elif not self.late[copied]:  # written before its response's items
            self.pending = (usage, copied)
            h.ended = True

    def restart(self, items: list[dict[str, Any]]) -> None:
        self.histories.append(_History(items))
        self.pending = None

    def runs(self) -> list[Run]:
        instructions = self.instructions
        if instructions is None:
            instructions = self.replayed_instructions
        kept = [h for h in self.histories if h.items and h.own]
        if not kept and self.histories[-1].items:
            kept = [self.histories[-1]]  # only replayed history (a fork with no turn yet)
        body: dict[str, Any] = {}
        if self.model:
            body["model"] = self.model
        if instructions is not None:
            body["instructions"] = instructions
        runs = []
        for n, h in enumerate(kept, 1):
            name = self.session or "session"
            if len(kept) > 1:
                name = f"{name} segment {n}"
            run = h.run(name, body, self.context_length)
            run.current = n == len(kept)
            runs.append(run)
        return runs


def read(entries: Sequence[Any], labels: Sequence[str]) -> list[Run]:
    """One run per history (a ``compacted`` line or a rollback starts the next); each
    response of the rollout's own is a call, with the count that belongs to it;
    replayed lines are context, never calls."""
    reader = _Reader()
    for label, value in zip(labels, entries, strict=True):
        if isinstance(value, dict):
            reader.line(label, value)
    return reader.runs()
