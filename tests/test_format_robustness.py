"""Damaged bodies: reading either works or raises InputError naming a field, never crashes."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwin import core, formats
from ctxwin.errors import InputError
from tests.formats_support import fixture

FIXTURES = [
    "anthropic_agent.json",
    "responses_agent.json",
    "gemini_agent.json",
    "chat_legacy_functions.json",
]
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.text(max_size=5),
    st.just([]),
    st.just({}),
    st.just([1, "x"]),
    st.just({"type": "text"}),
    st.just({"role": "user"}),
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``value`` (skipping inside long strings)."""
    found = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            found += paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += paths(v, (*prefix, i))
    return found


@pytest.mark.parametrize("name", FIXTURES)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_damaged_body_reads_or_names_the_field(name: str, data: st.DataObject) -> None:
    body = copy.deepcopy(fixture(name))
    every = paths(body)[1:]
    path = data.draw(st.sampled_from(every))
    junk = data.draw(JUNK)
    parent = body
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = junk
    fmt = data.draw(st.sampled_from(["auto", *formats.names()]))
    try:
        t = core.load(body, fmt)
    except InputError as exc:
        assert str(exc)
        return
    try:
        p = core.plan(t, context_length=data.draw(st.integers(100, 50_000)), max_tokens=0)
        p.output()
    except InputError as exc:
        assert exc.where  # refusals to prune name the message


@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["add", "answer", "take"]),
            st.sampled_from(["f", "g"]),
            st.sampled_from(["a", "b", "c", ""]),
        ),
        max_size=40,
    )
)
def test_pending_calls_answer_as_a_list_would(steps: list[tuple[str, str, str]]) -> None:
    """``Pending`` (O(1) steps) pairs results with calls as the list it replaced did
    (``pop(0)`` for a result by name, ``remove`` for one by id)."""
    from ctxwin.formats._util import Pending

    pending = Pending()
    lists: dict[str, list[str]] = {}
    for step, name, call_id in steps:
        queue = lists.setdefault(name, [])
        if step == "add":
            pending.add(name, call_id)
            queue.append(call_id)
        elif step == "answer":
            assert pending.answer(name, call_id) == (call_id in queue)
            if call_id in queue:
                queue.remove(call_id)
        else:
            assert pending.take(name) == (queue.pop(0) if queue else None)
