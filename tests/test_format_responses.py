"""OpenAI Responses: detection, reading, pruning, errors."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from ctxwin import core
from ctxwin.errors import InputError, PairingError
from ctxwin.formats import get_adapter, media
from ctxwin.formats.openai_responses import REASONING_TOKENS, OpenAIResponses
from ctxwin.view import ASSISTANT, TOOL, USER
from tests.conftest import Cli
from tests.formats_support import FIXTURES, check_report, fixture, squeeze
from tests.samples import data_uri, png

ADAPTER = OpenAIResponses()
NAME = "openai-responses"


def test_fixture_reads_turns() -> None:
    view = core.load(fixture("responses_agent.json")).view
    assert view.format == NAME
    roles = [i.role for i in view.items]
    assert roles[:6] == [USER, ASSISTANT, ASSISTANT, ASSISTANT, TOOL, TOOL]
    # reasoning opens a turn; the calls of the same response join it
    assert [i.joins for i in view.items[1:4]] == [False, True, True]
    assert view.items[2].calls == ("call_a1",)
    assert view.items[5].answers == ("call_a2",)
    assert view.items[7].calls == ("call_b1",) and view.items[8].answers == ("call_b1",)
    assert view.max_tokens == 4096 and view.model == "gpt-5"


def test_string_input_is_one_user_message() -> None:
    body = {"model": "gpt-5", "input": "hello", "instructions": "be brief"}
    t = core.load(body)
    assert t.format == NAME and [i.role for i in t.view.items] == [USER]
    out, _ = core.prune(body, context_length=100_000)
    assert out is body


def test_prune_keeps_reasoning_with_its_item() -> None:
    body = fixture("responses_agent.json")
    out, p = squeeze(body)
    assert p.result.pruned
    items = out["input"]
    assert items[0] is body["input"][0]
    src = body["input"]
    for j, it in enumerate(items):
        if it.get("type") == "reasoning":
            k = next(n for n, x in enumerate(src) if x is it)
            assert items[j + 1] is src[k + 1]
    assert ADAPTER.problems(core.load(out).view, range(len(items))) == []
    assert list(out) == list(body)


def test_fitting_body_comes_back_untouched(cli: Cli) -> None:
    raw = (FIXTURES / "responses_agent.json").read_bytes()
    result = cli("prune", str(FIXTURES / "responses_agent.json"), "-", "-c", "200000", "-q")
    assert result.exit_code == 0, result.stderr
    assert result.stdout_bytes == raw


def test_cli_report(cli: Cli) -> None:
    path = str(FIXTURES / "responses_agent.json")
    result = cli("estimate", path, "--json", "-q")
    assert result.exit_code == 0, result.stderr
    report = check_report(result.stdout, NAME)
    assert report["reserve"] == 4096
    pruned = cli("prune", path, "-", "-c", "1900", "--max-tokens", "0", "-q", "--estimator", "seed")
    assert pruned.exit_code == 0, pruned.stderr
    assert len(orjson.loads(pruned.stdout)["input"]) < len(fixture("responses_agent.json")["input"])


def test_detection() -> None:
    assert get_adapter({"input": "hi"}).name == NAME
    assert (
        get_adapter(
            [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]
        ).name
        == NAME
    )
    assert get_adapter([{"role": "user", "content": "hi"}]).name == "openai-chat"


def test_reasoning_without_following_item_is_refused() -> None:
    body = copy.deepcopy(fixture("responses_agent.json"))
    del body["input"][10]  # the assistant message that followed reasoning rs_03
    body["input"].insert(10, {"role": "user", "content": "x" * 4000})
    with pytest.raises(PairingError) as info:
        core.plan(core.load(body), context_length=1500, max_tokens=0)
    assert info.value.where == "input[9]"
    assert "reasoning" in str(info.value)


@pytest.mark.parametrize(
    ("mutate", "where"),
    [
        (lambda b: b["input"][4].pop("call_id"), "input[4].call_id"),
        (lambda b: b["input"][2].__setitem__("arguments", {"a": 1}), "input[2].arguments"),
        (lambda b: b["input"][0].__setitem__("role", "robot"), "input[0].role"),
        (lambda b: b["input"][0]["content"].append({"text": "?"}), "input[0].content[2].type"),
        (lambda b: b["input"][1]["summary"].append(3), "input[1].summary[1]"),
        (lambda b: b.__setitem__("input", 7), "input"),
    ],
)
def test_wrong_shapes_name_the_field(mutate: Any, where: str, tmp_path: Any, cli: Cli) -> None:
    body = copy.deepcopy(fixture("responses_agent.json"))
    mutate(body)
    with pytest.raises(InputError) as info:
        core.load(body, NAME)
    assert info.value.where == where
    path = tmp_path / "bad.json"
    path.write_bytes(orjson.dumps(body))
    result = cli("estimate", str(path))
    assert result.exit_code == 1 and where in result.stderr


def test_five_megabyte_image() -> None:
    image = data_uri("image/png", png(3000, 2000, pad=5 * 1024 * 1024))
    body = {
        "model": "gpt-4o",
        "input": [
            {"role": "user", "content": [{"type": "input_image", "image_url": image}]},
        ],
    }
    p = core.plan(core.load(body), context_length=128_000)
    tiles = media.openai_image_tokens((3000, 2000))
    assert tiles == 85 + 170 * 6  # 3000x2000 -> 2048x1365 -> 1152x768: 3 x 2 tiles
    assert tiles <= p.result.estimated_tokens <= (tiles + 50) * 1.15


@pytest.mark.parametrize(("noted", "priced"), [(120, 120), (0, 0), (-5, None), (True, None)])
def test_a_reasoning_item_with_its_reasoning_tokens_costs_them(noted: Any, priced: Any) -> None:
    """A reasoning item that carries its response's reasoning tokens is priced at them,
    not at its ciphertext; a note that is no count (negative, a bool) is ignored."""
    cipher = "gAAAAABp" + "q83vTw9xZk1Lr2+Y" * 200

    def cost(item: dict[str, Any]) -> int:
        t = core.load({"input": [item]}, "openai-responses")
        return t.raw_tokens([0])

    bare = {"type": "reasoning", "summary": [], "encrypted_content": cipher}
    empty = cost(dict(bare, encrypted_content=""))
    as_text = cost(bare) - empty
    assert as_text > 1000
    found = cost(dict(bare, **{REASONING_TOKENS: noted})) - empty
    assert found == (as_text if priced is None else priced)
