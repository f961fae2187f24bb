"""Anthropic Messages: detection, reading, pruning, errors."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxwin import core
from ctxwin.errors import InputError, PairingError
from ctxwin.formats import get_adapter, media
from ctxwin.formats.anthropic import Anthropic
from ctxwin.tokens.seed import SeedEstimator
from ctxwin.view import ASSISTANT, USER
from tests.conftest import Cli
from tests.formats_support import (
    FIXTURES,
    cassette_bodies,
    check_report,
    fixture,
    squeeze,
)
from tests.samples import b64, pdf, png

ADAPTER = Anthropic()


def test_fixture_reads_roles_calls_and_answers() -> None:
    view = core.load(fixture("anthropic_agent.json")).view
    assert view.format == "anthropic"
    assert [i.role for i in view.items] == [USER, ASSISTANT, USER, ASSISTANT, USER, ASSISTANT, USER]
    assert view.items[1].calls == ("toolu_01", "toolu_02")
    assert view.items[2].answers == ("toolu_01", "toolu_02")
    assert view.items[4].answers == ("toolu_03",)
    # the server tool pairs inside its own message: no cross-message ids
    assert view.items[5].calls == () and view.items[5].answers == ()
    assert view.max_tokens == 8192
    assert view.model == "claude-sonnet-4-5"


def test_media_priced_by_provider_rule_not_bytes() -> None:
    view = core.load(fixture("anthropic_agent.json"), estimator=SeedEstimator()).view
    pages = 3
    assert view.items[0].cost[0] >= pages * (media.PDF_PAGE_TEXT + media.ANTHROPIC_IMAGE_CAP)
    image = media.anthropic_image_tokens((800, 600))
    assert image == 640  # ceil(800 * 600 / 750)
    assert view.items[4].cost[0] >= image
    # no base64 byte of the image or PDF reaches the text slots
    assert view.items[4].cost[1] + view.items[4].cost[2] < 200


def test_system_and_tools_count_in_base() -> None:
    body = fixture("anthropic_agent.json")
    base = core.load(body).view.base
    body2 = {k: v for k, v in body.items() if k not in ("system", "tools")}
    assert sum(base) > sum(core.load(body2, "anthropic").view.base)


def _tool_search_body(result: list[Any]) -> dict[str, Any]:
    pair = {"type": "string", "description": "x" * 400}
    schema = {"type": "object", "properties": {"pair": pair}}
    return {
        "tools": [{"name": "rate", "description": "Exchange rates.", "input_schema": schema}],
        "messages": [
            {"role": "user", "content": "USD to EUR?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "s1", "name": "search", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "s1", "content": result}],
            },
        ],
    }


def test_tool_reference_costs_the_tool_definition_and_the_search_prompt() -> None:
    from ctxwin.formats.anthropic import TOOL_SEARCH_TOKENS

    est = SeedEstimator()
    text = Anthropic().read(_tool_search_body([{"type": "text", "text": "rate"}]), est)
    ref = Anthropic().read(
        _tool_search_body([{"type": "tool_reference", "tool_name": "rate"}]), est
    )
    assert ref.base[0] == text.base[0] + TOOL_SEARCH_TOKENS
    # The result holds the referenced tool's whole definition (its 400-byte schema).
    assert ref.items[2].cost[2] > text.items[2].cost[2] + 400
    missing = Anthropic().read(
        _tool_search_body([{"type": "tool_reference", "tool_name": "other"}]), est
    )
    assert missing.base[0] == ref.base[0]
    assert missing.items[2].cost[2] < ref.items[2].cost[2]


@pytest.mark.corpus
def test_corpus_bodies_detect_estimate_and_prune() -> None:
    seen = 0
    for label, body in cassette_bodies("api.anthropic.com"):
        t = core.load(body)
        assert t.format == "anthropic", label
        assert len(t.view.items) == len(body["messages"])
        if len(t.view.items) >= 3:
            out, _ = squeeze(body)
            kept = out["messages"]
            assert ADAPTER.problems(core.load(out).view, range(len(kept))) == [], label
            assert all(any(m is n for n in body["messages"]) for m in kept)
            assert [k for k in out if k != "messages"] == [k for k in body if k != "messages"]
        seen += 1
    assert seen >= 10


def _copy() -> dict[str, Any]:
    body: dict[str, Any] = copy.deepcopy(fixture("anthropic_agent.json"))
    return body


def test_prune_drops_whole_turns_and_keeps_rules() -> None:
    body = fixture("anthropic_agent.json")
    out, p = squeeze(body)
    assert p.result.pruned
    kept = out["messages"]
    assert kept[0] is body["messages"][0]
    assert kept[-1] is body["messages"][-1]
    assert kept[1]["role"] == "assistant"
    assert ADAPTER.problems(core.load(out).view, range(len(kept))) == []
    assert list(out) == list(body)


def test_fitting_body_comes_back_untouched(cli: Cli) -> None:
    raw = (FIXTURES / "anthropic_agent.json").read_bytes()
    body = orjson.loads(raw)
    out, _ = core.prune(body, context_length=200_000)
    assert out is body
    result = cli("prune", str(FIXTURES / "anthropic_agent.json"), "-", "-c", "200000", "-q")
    assert result.exit_code == 0, result.stderr
    assert result.stdout_bytes == raw


def test_cli_estimate_and_prune_report(cli: Cli) -> None:
    path = str(FIXTURES / "anthropic_agent.json")
    result = cli("estimate", path, "--json", "-q")
    assert result.exit_code == 0, result.stderr
    report = check_report(result.stdout, "anthropic")
    assert report["reserve"] == 8192
    forced = cli("estimate", path, "--json", "-q", "--format", "anthropic")
    assert forced.stdout == result.stdout
    squeezed = cli(
        "prune", path, "-", "-c", "18000", "--max-tokens", "0", "-q", "--estimator", "seed"
    )
    assert squeezed.exit_code == 0, squeezed.stderr
    out = orjson.loads(squeezed.stdout)
    assert len(out["messages"]) < len(fixture("anthropic_agent.json")["messages"])


def test_detection_signals() -> None:
    plain = {"messages": [{"role": "user", "content": "hi"}]}
    assert get_adapter(plain).name == "openai-chat"
    assert get_adapter({**plain, "system": "be brief"}).name == "anthropic"
    tools = [{"name": "t", "input_schema": {"type": "object"}}]
    assert get_adapter({**plain, "tools": tools}).name == "anthropic"
    blocks = {"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}
    assert get_adapter(blocks).name == "anthropic"
    chat_tools = [{"type": "function", "function": {"name": "t"}}]
    assert get_adapter({**plain, "tools": chat_tools}).name == "openai-chat"


@pytest.mark.parametrize(
    ("mutate", "where"),
    [
        (
            lambda b: b["messages"][2]["content"][1].pop("tool_use_id"),
            "messages[2].content[1].tool_use_id",
        ),
        (lambda b: b["messages"][1]["content"][1].pop("id"), "messages[1].content[1].id"),
        (lambda b: b["messages"][1]["content"][2].pop("input"), "messages[1].content[2].input"),
        (lambda b: b["messages"][3].__setitem__("role", "tool"), "messages[3].role"),
        (
            lambda b: b["messages"][0]["content"][1]["source"].__setitem__("type", "x"),
            "messages[0].content[1].source.type",
        ),
        (
            lambda b: b["messages"][2]["content"][0].__setitem__("is_error", "no"),
            "messages[2].content[0].is_error",
        ),
        (
            lambda b: b["messages"][4]["content"].append({"text": "?"}),
            "messages[4].content[2].type",
        ),
        (lambda b: b.__setitem__("system", 3), "system"),
    ],
)
def test_wrong_shapes_name_the_field(mutate: Any, where: str, tmp_path: Any, cli: Cli) -> None:
    body = _copy()
    mutate(body)
    with pytest.raises(InputError) as info:
        core.load(body, "anthropic")
    assert info.value.where == where
    path = tmp_path / "bad.json"
    path.write_bytes(orjson.dumps(body))
    result = cli("estimate", str(path), "--format", "anthropic")
    assert result.exit_code == 1
    assert where in result.stderr
    assert result.stdout == ""


def test_result_not_right_after_its_call_is_refused() -> None:
    body = _copy()
    msgs = body["messages"]
    # move the text-only tail so a user message separates tool_use and its result
    msgs.insert(2, {"role": "user", "content": "wait"})
    with pytest.raises(PairingError) as info:
        core.plan(core.load(body), context_length=17_000, max_tokens=0)
    assert info.value.where == "messages[1]"
    assert "no result in the next message" in str(info.value)
    problems = ADAPTER.problems(core.load(body).view, range(len(msgs)))
    assert {p.rule for p in problems} == {"call-answered-next", "result-follows-call"}
    assert {p.where for p in problems if p.rule == "result-follows-call"} == {"messages[3]"}
    # the same body fits a large window: it is passed through untouched
    out, _ = core.prune(body, context_length=200_000)
    assert out is body


def test_five_megabyte_image_is_priced_as_an_image() -> None:
    image = png(4000, 3000, pad=5 * 1024 * 1024)
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": b64(image)},
                    },
                    {"type": "text", "text": "What is this?"},
                ],
            }
        ],
    }
    p = core.plan(core.load(body, estimator=SeedEstimator()), context_length=200_000)
    assert len(b64(image)) > 5 * 1024 * 1024
    # 1600 (image cap) + a few tokens of text and framing, times calibration
    assert p.result.estimated_tokens <= (media.ANTHROPIC_IMAGE_CAP + 100) * 1.15
    assert p.result.estimated_tokens >= media.ANTHROPIC_IMAGE_CAP


def test_pdf_pages_counted() -> None:
    for pages in (1, 4):
        doc = {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": b64(pdf(pages))},
        }
        body = {"system": "s", "messages": [{"role": "user", "content": [doc]}]}
        assert core.load(body).view.items[0].cost[0] >= pages * 4600


def test_document_by_url_is_flagged_and_counted_conservatively() -> None:
    doc = {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}}
    body = {"system": "s", "messages": [{"role": "user", "content": [doc]}]}
    view = core.load(body).view
    assert view.items[0].cost[0] >= media.UNKNOWN_DOC_PAGES * 4600
    assert view.notes and "messages[0].content[0]" in view.notes[0]


def test_chat_body_with_shared_keys_stays_chat() -> None:
    body = {
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}],
        "top_k": 20,
    }
    assert get_adapter(body).name == "openai-chat"


def test_a_null_tool_calls_field_does_not_make_an_anthropic_body_chat() -> None:
    """Found by the fuzzer: with ``"tool_calls": null`` on one assistant message the body
    was read as Chat (its PDF costed as text); prune dropped that message and the output,
    read as Anthropic again, was far over the budget it claimed to fit."""
    body = orjson.loads((Path(__file__).parent / "fixtures" / "anthropic_agent.json").read_bytes())
    body["messages"][1]["tool_calls"] = None
    transcript = core.load(body)
    assert transcript.format == "anthropic"
    plan = core.plan(transcript, context_length=5736, max_tokens=0)
    out = plan.output()
    assert core.load(out).format == "anthropic"
    again = core.plan(core.load(out), context_length=5736, max_tokens=0)
    assert again.result.estimated_tokens <= plan.result.budget or plan.result.overflow_at_floor
