"""OpenAI Chat Completions: content parts, media, developer role, legacy functions."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from ctxwin import core
from ctxwin.errors import InputError, PairingError
from ctxwin.formats import media
from ctxwin.tokens.seed import SeedEstimator
from ctxwin.view import ASSISTANT, SYSTEM, TOOL, USER
from tests.conftest import Cli
from tests.formats_support import FIXTURES, cassette_bodies, check_report, fixture, squeeze
from tests.samples import b64, data_uri, gif, jpeg, pdf, png, wav, webp

NAME = "openai-chat"


def test_legacy_functions_pair_by_order_and_name() -> None:
    view = core.load(fixture("chat_legacy_functions.json")).view
    assert view.format == NAME
    assert [i.role for i in view.items] == [
        SYSTEM,
        USER,
        ASSISTANT,
        TOOL,
        ASSISTANT,
        TOOL,
        ASSISTANT,
        USER,
        ASSISTANT,
        TOOL,
    ]
    assert view.items[2].calls == ("describe_image#2",) and view.items[3].answers == (
        "describe_image#2",
    )
    assert view.items[4].calls == ("transcribe#4",) and view.items[5].answers == ("transcribe#4",)


def test_function_message_without_a_call_is_an_orphan() -> None:
    body = copy.deepcopy(fixture("chat_legacy_functions.json"))
    body["messages"][5]["name"] = "other"
    with pytest.raises(PairingError) as info:
        core.plan(core.load(body), context_length=9000, max_tokens=0)
    assert info.value.where == "messages[5]"


def test_media_parts_priced_not_by_bytes() -> None:
    view = core.load(fixture("chat_legacy_functions.json"), estimator=SeedEstimator()).view
    image = media.openai_image_tokens((1024, 1024))
    assert image == 85 + 170 * 4
    audio = 2 * media.AUDIO_PER_SECOND
    assert view.items[1].cost[0] >= image + audio
    assert view.items[1].cost[1] < 100  # only the prompt text is text
    assert view.items[7].cost[0] >= 2 * (media.PDF_PAGE_TEXT + media.OPENAI_UNKNOWN_IMAGE)


@pytest.mark.parametrize(
    ("data", "size"),
    [
        (png(640, 480), (640, 480)),
        (jpeg(300, 200, app_segments=1), (300, 200)),
        (gif(20, 10), (20, 10)),
        (webp(1000, 700), (1000, 700)),
    ],
)
def test_image_size_read_from_data_uri(data: bytes, size: tuple[int, int]) -> None:
    part = {"type": "image_url", "image_url": {"url": data_uri("image/x", data)}}
    body = {"messages": [{"role": "user", "content": [part]}]}
    seed = SeedEstimator()
    assert core.load(body, estimator=seed).view.items[0].cost[0] == 8 + media.openai_image_tokens(
        size
    )
    low = {"type": "image_url", "image_url": {"url": data_uri("image/x", data), "detail": "low"}}
    body = {"messages": [{"role": "user", "content": [low]}]}
    assert core.load(body, estimator=seed).view.items[0].cost[0] == 8 + 85


def test_remote_image_and_file_ids_use_conservative_constants() -> None:
    parts = [
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
        {"type": "file", "file": {"file_id": "file-123"}},
    ]
    view = core.load(
        {"messages": [{"role": "user", "content": parts}]}, estimator=SeedEstimator()
    ).view
    expected = media.OPENAI_UNKNOWN_IMAGE + media.UNKNOWN_DOC_PAGES * (
        media.PDF_PAGE_TEXT + media.OPENAI_UNKNOWN_IMAGE
    )
    assert view.items[0].cost[0] == 8 + expected


def test_prune_legacy_and_untouched_fit(cli: Cli) -> None:
    body = fixture("chat_legacy_functions.json")
    out, p = squeeze(body)
    assert p.result.pruned
    assert out["messages"][:2] == body["messages"][:2]
    assert out["messages"][-2:] == body["messages"][-2:]
    assert list(out) == list(body)
    raw = (FIXTURES / "chat_legacy_functions.json").read_bytes()
    result = cli("prune", str(FIXTURES / "chat_legacy_functions.json"), "-", "-c", "100000", "-q")
    assert result.exit_code == 0 and result.stdout_bytes == raw


def test_cli_report(cli: Cli) -> None:
    result = cli("estimate", str(FIXTURES / "chat_legacy_functions.json"), "--json", "-q")
    assert result.exit_code == 0, result.stderr
    check_report(result.stdout, NAME)


@pytest.mark.corpus
def test_corpus_bodies() -> None:
    seen = 0
    for label, body in cassette_bodies("api.openai.com/v1/chat"):
        t = core.load(body)
        assert t.format == NAME, label
        if len(t.view.items) >= 3:
            out, _ = squeeze(body)
            assert all(any(m is n for n in body["messages"]) for m in out["messages"]), label
        seen += 1
    assert seen >= 10


@pytest.mark.parametrize(
    ("mutate", "where"),
    [
        (lambda b: b["messages"][3].pop("name"), "messages[3].name"),
        (lambda b: b["messages"][2]["function_call"].pop("name"), "messages[2].function_call.name"),
        (
            lambda b: b["messages"][1]["content"][1]["image_url"].pop("url"),
            "messages[1].content[1].image_url.url",
        ),
        (
            lambda b: b["messages"][1]["content"][2]["input_audio"].__setitem__("data", 5),
            "messages[1].content[2].input_audio.data",
        ),
        (
            lambda b: b["messages"][7]["content"][1].__setitem__("file", "x"),
            "messages[7].content[1].file",
        ),
        (lambda b: b.__setitem__("functions", {}), "functions"),
    ],
)
def test_wrong_shapes_name_the_field(mutate: Any, where: str, tmp_path: Any, cli: Cli) -> None:
    body = copy.deepcopy(fixture("chat_legacy_functions.json"))
    mutate(body)
    with pytest.raises(InputError) as info:
        core.load(body)
    assert info.value.where == where
    path = tmp_path / "bad.json"
    path.write_bytes(orjson.dumps(body))
    result = cli("estimate", str(path))
    assert result.exit_code == 1 and where in result.stderr


def test_unknown_shape_names_every_expected_format(tmp_path: Any, cli: Cli) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(b'{"prompt": "hi"}')
    result = cli("estimate", str(path))
    assert result.exit_code == 1
    for needle in ("Anthropic", "Responses", "Gemini", "Chat Completions"):
        assert needle in result.stderr
    assert result.stdout == ""


def test_five_megabyte_image_and_pdf() -> None:
    image = data_uri("image/jpeg", jpeg(1920, 1080, app_segments=1, pad=5 * 1024 * 1024))
    doc = data_uri("application/pdf", pdf(5, compressed=True) + b"\0" * (1024 * 1024))
    body = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": image}},
                    {"type": "file", "file": {"filename": "r.pdf", "file_data": doc}},
                ],
            },
        ]
    }
    p = core.plan(core.load(body), context_length=1_000_000)
    cost = media.openai_image_tokens((1920, 1080)) + 5 * (
        media.PDF_PAGE_TEXT + media.OPENAI_UNKNOWN_IMAGE
    )
    assert cost <= p.result.estimated_tokens <= (cost + 50) * 1.15


def test_audio_duration_from_wav_header() -> None:
    audio = {"data": b64(wav(30.0, 8000)), "format": "wav"}
    part = {"type": "input_audio", "input_audio": audio}
    view = core.load(
        {"messages": [{"role": "user", "content": [part]}]}, estimator=SeedEstimator()
    ).view
    assert view.items[0].cost[0] == 8 + 30 * media.AUDIO_PER_SECOND


def test_documents_known_only_by_reference_are_flagged(tmp_path: Any, cli: Cli) -> None:
    parts = [{"type": "text", "text": "read these"}] + [
        {"type": "file", "file": {"file_id": f"file-{k}"}} for k in range(4)
    ]
    body = {"messages": [{"role": "user", "content": parts}]}
    notes = core.load(body).view.notes
    assert len(notes) == 1
    assert "4 document(s)" in notes[0] and "messages[0].content[1]" in notes[0]
    assert "and 1 more" in notes[0]
    path = tmp_path / "refs.json"
    path.write_bytes(orjson.dumps(body))
    result = cli("estimate", str(path), "-c", "1000000")
    assert result.exit_code == 0
    assert "known only by URL or file id" in result.stderr
