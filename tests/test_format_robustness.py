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
