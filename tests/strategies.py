"""Hypothesis strategies for Chat Completions agent transcripts."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.builders import Message

TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)


@st.composite
def transcripts(draw: st.DrawFn, max_steps: int = 24) -> list[Message]:
    """A valid agent transcript: head, then turns with parallel calls, results that may
    arrive after the next assistant message (interleaved), and user messages between turns."""
    messages: list[Message] = []
    for _ in range(draw(st.integers(0, 2))):
        messages.append({"role": draw(st.sampled_from(["system", "developer"])), "content": "s"})
    if draw(st.booleans()) or draw(st.booleans()):
        messages.append({"role": "user", "content": draw(TEXT)})
    pending: list[str] = []
    answered: list[str] = []
    counter = 0
    for _ in range(draw(st.integers(0, max_steps))):
        choice = draw(st.integers(0, 9))
        if choice <= 4:  # an assistant message, with 0-3 parallel calls
            calls = []
            for _ in range(draw(st.integers(0, 3))):
                reusable = [c for c in answered if c not in calls and c not in pending]
                if reusable and draw(st.integers(0, 9)) == 0:
                    # providers accept an id reused after its call was answered
                    calls.append(draw(st.sampled_from(reusable)))
                    continue
                counter += 1
                calls.append(f"call_{counter}")
            msg: dict[str, Any] = {
                "role": "assistant",
                "content": draw(st.none() | TEXT),
            }
            if calls:
                msg["tool_calls"] = [
                    {
                        "id": c,
                        "type": "function",
                        "function": {"name": "f", "arguments": draw(TEXT)},
                    }
                    for c in calls
                ]
            messages.append(msg)
            pending.extend(calls)
        elif choice <= 8 and pending:  # a result for some pending call
            call_id = pending.pop(draw(st.integers(0, len(pending) - 1)))
            answered.append(call_id)
            size = draw(st.sampled_from([0, 10, 200, 2000, 6000]))
            messages.append({"role": "tool", "tool_call_id": call_id, "content": "x" * size})
        else:
            messages.append({"role": "user", "content": draw(TEXT)})
    for call_id in pending:
        messages.append({"role": "tool", "tool_call_id": call_id, "content": "done"})
    return messages
