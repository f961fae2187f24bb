"""Google Gemini generateContent: detection, reading, pairing by id or name, pruning, errors."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from ctxwin import core
from ctxwin.errors import InputError
from ctxwin.formats import media
from ctxwin.formats.gemini import Gemini
from ctxwin.view import ASSISTANT, USER
from tests.conftest import Cli
from tests.formats_support import FIXTURES, cassette_bodies, check_report, fixture, squeeze
from tests.samples import b64, jpeg, wav

ADAPTER = Gemini()


def test_fixture_pairs_by_name_order_and_by_id() -> None:
    view = core.load(fixture("gemini_agent.json")).view
    assert view.format == "gemini"
    assert [i.role for i in view.items] == [USER, ASSISTANT, USER, ASSISTANT, USER, ASSISTANT, USER]
    assert view.items[1].calls == ("get_weather#1.1", "get_transit_hours#1.2")
    assert view.items[2].answers == ("get_weather#1.1", "get_transit_hours#1.2")
    assert view.items[5].calls == ("fc-7",) and view.items[6].answers == ("fc-7",)
    assert view.max_tokens == 2048
    assert ADAPTER.problems(view, range(7)) == []


def test_same_name_calls_pair_in_order() -> None:
    call = {"functionCall": {"name": "f", "args": {}}}
    reply = {"functionResponse": {"name": "f", "response": {}}}
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [call, call]},
            {"role": "user", "parts": [reply, reply]},
        ]
    }
    view = core.load(body).view
    assert view.items[2].answers == view.items[1].calls == ("f#1.0", "f#1.1")


def test_inline_image_priced_by_tiles() -> None:
    view = core.load(fixture("gemini_agent.json")).view
    assert media.gemini_image_tokens((1600, 1200)) == 3 * 2 * 258
    assert view.items[0].cost[0] >= 3 * 2 * 258
    audio = {"inlineData": {"mimeType": "audio/wav", "data": b64(wav(10.0, 2000))}}
    body = {"contents": [{"role": "user", "parts": [audio]}]}
    assert core.load(body).view.items[0].cost[0] >= 10 * 32


def test_prune_and_untouched_fit(cli: Cli) -> None:
    body = fixture("gemini_agent.json")
    out, p = squeeze(body)
    assert p.result.pruned
    kept = out["contents"]
    assert kept[0] is body["contents"][0] and kept[-1] is body["contents"][-1]
    assert ADAPTER.problems(core.load(out).view, range(len(kept))) == []
    raw = (FIXTURES / "gemini_agent.json").read_bytes()
    result = cli("prune", str(FIXTURES / "gemini_agent.json"), "-", "-c", "100000", "-q")
    assert result.exit_code == 0 and result.stdout_bytes == raw


def test_cli_report(cli: Cli) -> None:
    result = cli("estimate", str(FIXTURES / "gemini_agent.json"), "--json", "-q")
    assert result.exit_code == 0, result.stderr
    report = check_report(result.stdout, "gemini")
    assert report["reserve"] == 2048


@pytest.mark.corpus
def test_corpus_bodies() -> None:
    seen = 0
    for label, body in cassette_bodies("generativelanguage.googleapis.com"):
        t = core.load(body)
        assert t.format == "gemini", label
        assert ADAPTER.problems(t.view, range(len(t.view.items))) == [], label
        seen += 1
    assert seen >= 2


@pytest.mark.parametrize(
    ("mutate", "where"),
    [
        (
            lambda b: b["contents"][2]["parts"][0]["functionResponse"].pop("name"),
            "contents[2].parts[0].functionResponse.name",
        ),
        (lambda b: b["contents"][1].__setitem__("role", "assistant"), "contents[1].role"),
        (
            lambda b: b["contents"][0]["parts"][1]["inlineData"].pop("data"),
            "contents[0].parts[1].inlineData.data",
        ),
        (lambda b: b["contents"][3].pop("parts"), "contents[3].parts"),
        (
            lambda b: b["generationConfig"].__setitem__("maxOutputTokens", "many"),
            "generationConfig.maxOutputTokens",
        ),
        (
            lambda b: b["contents"][0]["parts"].append({"functionCall": {"name": "x"}}),
            "contents[0].parts[2].functionCall",
        ),
    ],
)
def test_wrong_shapes_name_the_field(mutate: Any, where: str, tmp_path: Any, cli: Cli) -> None:
    body = copy.deepcopy(fixture("gemini_agent.json"))
    mutate(body)
    with pytest.raises(InputError) as info:
        core.load(body)
    assert info.value.where == where
    path = tmp_path / "bad.json"
    path.write_bytes(orjson.dumps(body))
    result = cli("estimate", str(path))
    assert result.exit_code == 1 and where in result.stderr


def test_five_megabyte_image() -> None:
    image = jpeg(4032, 3024, app_segments=2, pad=5 * 1024 * 1024)
    body = {
        "contents": [
            {
                "role": "user",
                "parts": [{"inlineData": {"mimeType": "image/jpeg", "data": b64(image)}}],
            }
        ]
    }
    p = core.plan(core.load(body), context_length=1_000_000)
    cost = media.gemini_image_tokens((4032, 3024))
    assert cost == 6 * 4 * 258
    assert cost <= p.result.estimated_tokens <= (cost + 50) * 1.15
