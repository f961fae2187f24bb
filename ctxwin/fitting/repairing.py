"""``repair``: the minimal provider-valid fix of what ``ctxwin lint`` flags.

What it changes, and nothing else:

* a result that answers no call (``orphan-result``) is removed;
* a second result for the same call (``duplicate-result``) is removed (the first stays);
* a result that sits away from its call is moved where the format wants it:
  Chat and Responses, into the call's turn (after the results already there);
  Anthropic and Gemini, into the user message right after the message that
  made the call (after the results already there, so ``tool_result`` blocks
  stay first), a new user message when the next message is the model's;
* a call with no result before the next turn (``unanswered-call``) gets a
  stub result that says so (:data:`STUB_TEXT`). A call left open at the very
  end is the agent's pending step and stays open, as ``lint`` says.
* a user message left empty by those removals is removed.

A result found *before* its call is moved after it when exactly that call
(the first later call with the id, with no result of its own) can be meant.
Entries that are not edited are the original objects; a transcript with
nothing to fix is returned as it is.

What it will not do (:class:`RepairError`, exit 1 on the command line): a
call id made again while the earlier call awaits its result (which result
answers which would be a guess), a stub for a call whose result has a
format-specific shape (``computer_call``, MCP approvals), and any problem a
result move cannot fix (the first message is the model's, a reasoning item
without its following item). ``reused-call-id`` is left as it is: providers
accept it, and rewriting ids would change what the model saw.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ctxwin.errors import InputError
from ctxwin.formats import AUTO
from ctxwin.formats._util import replace_key
from ctxwin.view import TOOL, USER, View

STUB_TEXT = "[ctxwin repair: no result was recorded for this call]"
"""The content of a stub result."""

LEFT_AS_IS = frozenset({"reused-call-id"})
"""Rules repair leaves alone (providers accept them)."""

CallKey = tuple[int, int]
"""A call: (item index, position among the item's calls)."""
ResultKey = tuple[int, int]
"""A result: (item index, position among the item's answers)."""


class RepairError(InputError):
    """The transcript cannot be repaired without guessing."""


Action = Literal["removed-orphan", "removed-duplicate", "moved", "stubbed", "removed-empty-message"]
"""What a change did."""


@dataclass(frozen=True, slots=True)
class Change:
    """One change :func:`repair` made."""

    action: Action
    index: int
    """The input entry it concerns (the result's, or the stubbed call's)."""
    where: str
    """JSON path in the input: the result (block) removed or moved, or the call stubbed."""
    call_id: str | None
    message: str
    """One line saying what was done and why."""


@dataclass(frozen=True, slots=True)
class Repaired:
    """What :func:`repair` did."""

    format: str
    changes: tuple[Change, ...]
    messages_before: int
    messages_after: int

    @property
    def changed(self) -> bool:
        return bool(self.changes)


def repair(body: Any, fmt: str = AUTO) -> tuple[Any, Repaired]:
    """``body`` with what ``lint`` flags fixed, and the list of changes.

    Raises :class:`~ctxwin.errors.InputError` for a body that is not a
    transcript and :class:`RepairError` (an ``InputError``) when the fix
    would need a guess. ``repair`` of its own output changes nothing.
    """
    from ctxwin.fitting.transcript import load

    transcript = load(body, fmt)
    adapter, view = transcript.adapter, transcript.view
    n = len(view.items)
    if n == 0 or (isinstance(body, dict) and isinstance(body.get(adapter.items_key), str)):
        return body, Repaired(adapter.name, (), n, n)
    family = _FAMILIES.get(adapter.name)
    if family is None:  # pragma: no cover - every format has a family
        raise RepairError(f"repair does not know the {adapter.name} format")
    plan = _plan(view, family.adjacent)
    if not plan.changes:
        out = body
        changes: list[Change] = []
    else:
        entries = body if isinstance(body, list) else body[adapter.items_key]
        new_entries, changes = family.apply(entries, view, plan)
        out = (
            new_entries
            if isinstance(body, list)
            else replace_key(body, adapter.items_key, new_entries)
        )
    after = load(out, adapter.name) if changes else transcript
    left = [p for p in after.problems() if p.rule not in LEFT_AS_IS]
    if left:
        before = {p.rule: p for p in transcript.problems()}
        first = before.get(left[0].rule)
        said = str(first) if first is not None else f"{left[0]} (in the repaired output)"
        raise RepairError(f"cannot repair without guessing: {said}")
    changes.sort(key=_index)  # stable: one entry's changes keep their order
    return out, Repaired(adapter.name, tuple(changes), n, len(after.view.items))


def _index(change: Change) -> int:
    return change.index


@dataclass(slots=True)
class _Plan:
    """What to do, in view terms."""

    removed: dict[ResultKey, Change]
    """Results to remove (orphans, duplicates), with the change that says so."""
    moved: dict[CallKey, ResultKey]
    """Calls whose result is moved next to them."""
    stubbed: list[CallKey]
    """Calls that get a stub result."""

    @property
    def changes(self) -> bool:
        return bool(self.removed or self.moved or self.stubbed)


def _opens_turn(view: View, k: int) -> bool:
    item = view.items[k]
    return item.role != TOOL and not item.joins


def _plan(view: View, adjacent: bool) -> _Plan:
    """Pair every result with a call (as ``ctxwin.fitting.rules`` does) and decide what moves,
    what goes and which calls get a stub."""
    items = view.items
    where = view.where
    open_: dict[str, CallKey] = {}
    latest: dict[str, CallKey] = {}
    result_of: dict[CallKey, ResultKey] = {}
    calls_by_id: dict[str, list[CallKey]] = {}
    early: list[tuple[ResultKey, str]] = []
    removed: dict[ResultKey, Change] = {}
    for i, item in enumerate(items):
        for q, cid in enumerate(item.answers):
            if cid in open_:
                result_of[open_.pop(cid)] = (i, q)
            elif cid in latest:
                first = result_of.get(latest[cid])
                kept = f" (the one in {where(first[0])} stays)" if first is not None else ""
                removed[(i, q)] = Change(
                    "removed-duplicate",
                    i,
                    where(i),
                    cid,
                    f"removed a second result for call id {cid!r}{kept}",
                )
            else:
                early.append(((i, q), cid))
        for j, cid in enumerate(item.calls):
            if cid in open_:
                raise RepairError(
                    f"cannot repair without guessing: {where(i)}: call id {cid!r} is made again "
                    f"while the call in {where(open_[cid][0])} awaits its result, so which "
                    "result answers which is unknown"
                )
            open_[cid] = (i, j)
            latest[cid] = (i, j)
            calls_by_id.setdefault(cid, []).append((i, j))
    moved: dict[CallKey, ResultKey] = {}
    for rk, cid in early:
        for ck in calls_by_id.get(cid, ()):
            if ck[0] > rk[0] and ck not in result_of:
                result_of[ck] = rk
                moved[ck] = rk
                break
        else:
            removed[rk] = (
                Change(
                    "removed-duplicate",
                    rk[0],
                    where(rk[0]),
                    cid,
                    f"removed a result for call id {cid!r} that comes before its call, "
                    "which has a result already",
                )
                if cid in calls_by_id
                else Change(
                    "removed-orphan",
                    rk[0],
                    where(rk[0]),
                    cid,
                    f"removed the result for call id {cid!r}, which no call makes",
                )
            )
    n = len(items)
    # Where each item's turn ends: the next item that opens a turn (or the end).
    turn_end = [n] * n
    end = n
    for k in range(n - 1, -1, -1):
        turn_end[k] = end
        if _opens_turn(view, k):
            end = k
    stubbed: list[CallKey] = []
    for i, item in enumerate(items):
        for j in range(len(item.calls)):
            ck = (i, j)
            found = result_of.get(ck)
            if found is None:
                if (i + 1 < n) if adjacent else (turn_end[i] < n):
                    stubbed.append(ck)
            elif ck not in moved:
                placed = found[0] == i + 1 if adjacent else found[0] < turn_end[i]
                if not placed:
                    moved[ck] = found
    if adjacent and any(ck[0] == n - 1 for ck in moved):
        # The last message gets results after it, so its other calls need them too.
        last = items[n - 1]
        stubbed.extend((n - 1, j) for j in range(len(last.calls)) if (n - 1, j) not in result_of)
    return _Plan(removed, moved, stubbed)


class _Family:
    """How one format's results sit, and how to write a moved or stub result."""

    adjacent = False
    """Results sit in the message right after the call (Anthropic, Gemini), not
    anywhere in the call's turn (Chat, Responses)."""

    def apply(self, entries: list[Any], view: View, plan: _Plan) -> tuple[list[Any], list[Change]]:
        raise NotImplementedError


def _moved_change(view: View, ck: CallKey, rk: ResultKey, at: str, cid: str) -> Change:
    return Change(
        "moved",
        rk[0],
        at,
        cid,
        f"moved the result for call id {cid!r} next to its call in {view.where(ck[0])}",
    )


def _stub_change(view: View, ck: CallKey, cid: str) -> Change:
    return Change(
        "stubbed",
        ck[0],
        view.where(ck[0]),
        cid,
        f"call id {cid!r} had no result: added a stub result saying so",
    )


class _ItemResults(_Family):
    """Chat and Responses: each result is an entry of its own, anywhere in the call's turn."""

    def stub(self, entry: Any, cid: str, where: str) -> Any:
        raise NotImplementedError

    def apply(self, entries: list[Any], view: View, plan: _Plan) -> tuple[list[Any], list[Change]]:
        items = view.items
        n = len(items)
        changes: list[Change] = []
        inserts: dict[int, list[tuple[CallKey, Any]]] = {}
        gone = {rk[0] for rk in plan.removed}
        changes.extend(plan.removed[rk] for rk in sorted(plan.removed))
        for ck, rk in plan.moved.items():
            gone.add(rk[0])
            changes.append(
                _moved_change(view, ck, rk, view.where(rk[0]), items[ck[0]].calls[ck[1]])
            )
        adds = [(ck, entries[rk[0]]) for ck, rk in plan.moved.items()]
        for ck in plan.stubbed:
            cid = items[ck[0]].calls[ck[1]]
            adds.append((ck, self.stub(entries[ck[0]], cid, view.where(ck[0]))))
            changes.append(_stub_change(view, ck, cid))
        for ck, entry in adds:
            at = ck[0] + 1
            while at < n and not _opens_turn(view, at):
                at += 1
            inserts.setdefault(at, []).append((ck, entry))
        out: list[Any] = []
        for k in range(n + 1):
            for _, entry in sorted(inserts.get(k, ()), key=_first):
                out.append(entry)
            if k < n and k not in gone:
                out.append(entries[k])
        return out, changes


def _first(pair: tuple[CallKey, Any]) -> CallKey:
    return pair[0]


class _ChatResults(_ItemResults):
    def stub(self, entry: Any, cid: str, where: str) -> Any:
        for call in entry.get("tool_calls") or ():
            if call.get("id") == cid:
                return {"role": "tool", "tool_call_id": cid, "content": STUB_TEXT}
        return {"role": "function", "name": entry["function_call"]["name"], "content": STUB_TEXT}


_RESPONSES_OUTPUTS = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
}


class _ResponsesResults(_ItemResults):
    def stub(self, entry: Any, cid: str, where: str) -> Any:
        kind = _RESPONSES_OUTPUTS.get(entry.get("type"))
        if kind is None:
            raise RepairError(
                f"cannot repair without guessing: {where}: a {entry.get('type')} item has no "
                "result, and its result has a shape of its own that a stub would have to make up"
            )
        return {"type": kind, "call_id": cid, "output": STUB_TEXT}


class _BlockResults(_Family):
    """Anthropic and Gemini: results are blocks of the user message right after the call."""

    adjacent = True
    content_key = ""

    def blocks(self, entry: Any) -> list[Any]:
        content = entry[self.content_key]
        return content if isinstance(content, list) else []

    def is_result(self, block: Any) -> bool:
        raise NotImplementedError

    def stub(self, entry: Any, j: int, cid: str) -> Any:
        raise NotImplementedError

    def with_blocks(self, entry: Any, blocks: list[Any], added: bool) -> Any:
        return replace_key(entry, self.content_key, blocks)

    def new_message(self, blocks: list[Any]) -> Any:
        return {"role": "user", self.content_key: blocks}

    def result_blocks(self, entry: Any) -> list[int]:
        return [k for k, b in enumerate(self.blocks(entry)) if self.is_result(b)]

    def apply(self, entries: list[Any], view: View, plan: _Plan) -> tuple[list[Any], list[Change]]:
        items = view.items
        n = len(items)
        changes: list[Change] = []
        drop: dict[int, set[int]] = {}  # entry → block indices removed
        for rk in sorted(plan.removed):
            k = self.result_blocks(entries[rk[0]])[rk[1]]
            drop.setdefault(rk[0], set()).add(k)
            change = plan.removed[rk]
            changes.append(
                Change(
                    change.action,
                    rk[0],
                    self.block_path(view, rk[0], k),
                    change.call_id,
                    change.message,
                )
            )
        adds: dict[int, list[tuple[CallKey, Any]]] = {}  # calling entry → blocks to place after it
        for ck, rk in plan.moved.items():
            k = self.result_blocks(entries[rk[0]])[rk[1]]
            drop.setdefault(rk[0], set()).add(k)
            adds.setdefault(ck[0], []).append((ck, self.blocks(entries[rk[0]])[k]))
            cid = items[ck[0]].calls[ck[1]]
            changes.append(_moved_change(view, ck, rk, self.block_path(view, rk[0], k), cid))
        for ck in plan.stubbed:
            cid = items[ck[0]].calls[ck[1]]
            adds.setdefault(ck[0], []).append((ck, self.stub(entries[ck[0]], ck[1], cid)))
            changes.append(_stub_change(view, ck, cid))
        into: dict[int, list[Any]] = {}  # user entry → blocks it receives
        new_after: dict[int, list[Any]] = {}  # calling entry → a new user message after it
        for c, pairs in adds.items():
            blocks = [b for _, b in sorted(pairs, key=_first)]
            if c + 1 < n and items[c + 1].role == USER:
                into[c + 1] = blocks
            else:
                new_after[c] = blocks
        out: list[Any] = []
        for i, entry in enumerate(entries):
            gone = drop.get(i, set())
            extra = into.get(i)
            if gone or extra:
                blocks = [b for k, b in enumerate(self.blocks(entry)) if k not in gone]
                if extra:
                    at = 0
                    for k, b in enumerate(blocks):
                        if self.is_result(b):
                            at = k + 1
                    blocks[at:at] = extra
                if not blocks:
                    changes.append(
                        Change(
                            "removed-empty-message",
                            i,
                            view.where(i),
                            None,
                            "removed the message: it held only results that were removed or moved",
                        )
                    )
                else:
                    out.append(self.with_blocks(entry, blocks, bool(extra)))
            else:
                out.append(entry)
            if i in new_after:
                out.append(self.new_message(new_after[i]))
        return out, changes

    def block_path(self, view: View, i: int, k: int) -> str:
        return f"{view.where(i)}.{self.content_key}[{k}]"


class _AnthropicResults(_BlockResults):
    content_key = "content"

    def is_result(self, block: Any) -> bool:
        return isinstance(block, dict) and block.get("type") == "tool_result"

    def stub(self, entry: Any, j: int, cid: str) -> Any:
        return {"type": "tool_result", "tool_use_id": cid, "content": STUB_TEXT, "is_error": True}

    def with_blocks(self, entry: Any, blocks: list[Any], added: bool) -> Any:
        content = entry["content"]
        if isinstance(content, str):  # a text message that now also holds results
            blocks = blocks + ([{"type": "text", "text": content}] if content else [])
        return replace_key(entry, "content", blocks)


def _gemini_key(part: dict[str, Any], camel: str, snake: str) -> str | None:
    if "text" in part:
        return None
    if part.get(camel) is not None:
        return camel
    if camel not in part and part.get(snake) is not None:
        return snake
    return None


class _GeminiResults(_BlockResults):
    content_key = "parts"

    def is_result(self, block: Any) -> bool:
        return (
            _gemini_key(block, "functionCall", "function_call") is None
            and _gemini_key(block, "functionResponse", "function_response") is not None
        )

    def stub(self, entry: Any, j: int, cid: str) -> Any:
        calls = [
            (p, key)
            for p in entry["parts"]
            if (key := _gemini_key(p, "functionCall", "function_call")) is not None
        ]
        part, key = calls[j]
        call = part[key]
        response: dict[str, Any] = {"name": call["name"], "response": {"error": STUB_TEXT}}
        if call.get("id") is not None:
            response = {"id": call["id"], **response}
        return {"functionResponse" if key == "functionCall" else "function_response": response}


_FAMILIES: dict[str, _Family] = {
    "openai-chat": _ChatResults(),
    "openai-responses": _ResponsesResults(),
    "anthropic": _AnthropicResults(),
    "gemini": _GeminiResults(),
}


__all__ = ["LEFT_AS_IS", "STUB_TEXT", "Change", "RepairError", "Repaired", "repair"]
