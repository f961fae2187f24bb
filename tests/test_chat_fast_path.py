"""The Chat adapter's fast path reads every message exactly as its checked path does."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwin.formats._util import Pending
from ctxwin.formats.openai_chat import OpenAIChat
from ctxwin.tokens.base import Estimator
from ctxwin.tokens.content import ContentEstimator
from ctxwin.tokens.seed import SeedEstimator
from ctxwin.view import View

TEXT = st.text(max_size=30)
CALL = st.fixed_dictionaries(
    {
        "id": TEXT,
        "type": st.just("function"),
        "function": st.fixed_dictionaries({"name": TEXT, "arguments": TEXT}),
    }
)
MESSAGE = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "developer", "user"]), "content": st.none() | TEXT}
    ),
    st.fixed_dictionaries(
        {"role": st.just("assistant"), "content": st.none() | TEXT},
        optional={"tool_calls": st.none() | st.lists(CALL, max_size=3)},
    ),
    st.fixed_dictionaries(
        {"role": st.just("tool"), "tool_call_id": TEXT}, optional={"content": st.none() | TEXT}
    ),
)


def checked(messages: list[dict[str, Any]], estimator: Estimator) -> list[tuple[Any, ...]]:
    adapter = OpenAIChat()
    view = View(adapter.name, [], [0] * estimator.width)
    return [
        (item.role, item.cost, item.calls, item.answers)
        for i, m in enumerate(messages)
        for item in [adapter._read_message(m, i, view, estimator, Pending(), [])]
    ]


@settings(max_examples=300, deadline=None)
@given(st.lists(MESSAGE, max_size=8), st.sampled_from([SeedEstimator, ContentEstimator]))
def test_fast_path_equals_checked_path(
    messages: list[dict[str, Any]], make: type[SeedEstimator] | type[ContentEstimator]
) -> None:
    view = OpenAIChat().read(messages, make())
    fast = [(i.role, i.cost, i.calls, i.answers) for i in view.items]
    assert fast == checked(messages, make())
