"""Media costs: sizes read from payload headers, and each provider's documented examples."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwin.formats import media
from tests.samples import b64, gif, jpeg, pdf, png, wav, webp


@pytest.mark.parametrize(
    ("data", "size"),
    [
        (png(1920, 1080), (1920, 1080)),
        (jpeg(4032, 3024), (4032, 3024)),
        (jpeg(800, 600, app_segments=20), (800, 600)),  # SOF beyond 1 MB of metadata
        (gif(64, 48), (64, 48)),
        (webp(3000, 1), (3000, 1)),
    ],
)
def test_image_size_from_header(data: bytes, size: tuple[int, int]) -> None:
    found = media.sniff(b64(data), None)
    assert found.kind == "image" and found.size == size


def test_openai_documented_examples() -> None:
    # "Images and vision", calculating costs
    assert media.openai_image_tokens((1024, 1024), "high") == 765
    assert media.openai_image_tokens((2048, 4096), "high") == 1105
    assert media.openai_image_tokens((4096, 8192), "low") == 85
    worst = max(
        media.openai_image_tokens((w, h))
        for w in range(256, 6000, 97)
        for h in range(256, 6000, 89)
    )
    assert worst <= media.OPENAI_UNKNOWN_IMAGE


def test_anthropic_documented_examples() -> None:
    # "Vision": approximate tokens for images that need no resizing
    assert media.anthropic_image_tokens((200, 200)) == 54
    assert media.anthropic_image_tokens((1000, 1000)) == 1334
    assert media.anthropic_image_tokens((1092, 1092)) == 1590
    assert media.anthropic_image_tokens((8000, 8000)) == media.ANTHROPIC_IMAGE_CAP


def test_gemini_tiles() -> None:
    assert media.gemini_image_tokens((384, 384)) == media.GEMINI_IMAGE_FLOOR
    assert media.gemini_image_tokens((3840, 2160)) == 5 * 3 * 258
    assert media.gemini_cost(media.Media("audio", seconds=60.0)) == 1920
    assert media.gemini_cost(media.Media("video", seconds=10.0)) == 2630


def test_pdf_pages_plain_compressed_and_fallback() -> None:
    assert media.pdf_pages(pdf(12)) == 12
    assert media.pdf_pages(pdf(5, compressed=True)) == 5
    opaque = b"%PDF-1.7\n" + b"\x00" * 120_000
    assert media.pdf_pages(opaque) == 3  # one page per 50 kB, rounded up


def test_audio_duration() -> None:
    assert media.sniff(b64(wav(4.0, 8000)), "audio/wav").seconds == pytest.approx(4.0)
    frame = b"\xff\xfb\x90\x00"  # MPEG-1 layer III, 128 kbit/s
    mp3 = b"ID3\x04\x00\x00\x00\x00\x00\x0a" + b"\x00" * 10 + frame + b"\x00" * 15_996
    found = media.sniff(b64(mp3), "audio/mpeg")
    assert found.seconds == pytest.approx(len(mp3) / 16_000)
    unknown = media.sniff(b64(b"OggS" + b"\x00" * 3996), "audio/ogg")
    assert unknown.seconds == pytest.approx(4000 / media.UNKNOWN_AUDIO_BYTES_PER_SECOND)


def test_data_uri() -> None:
    assert media.parse_data_uri("data:image/PNG;base64,AAAA") == ("image/png", "AAAA")
    assert media.parse_data_uri("https://example.com/x.png") is None
    assert media.parse_data_uri("data:text/plain,hello") is None


def test_base64_bytes_never_count_as_text() -> None:
    big = media.sniff(b64(png(1000, 1000, pad=4 * 1024 * 1024)), "image/png")
    assert big.nbytes is not None and big.nbytes > 4 * 1024 * 1024
    assert media.openai_cost(big) == media.openai_image_tokens((1000, 1000))
    assert media.anthropic_cost(big) == 1334


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=300),
    st.sampled_from(
        [
            b"",
            b"\x89PNG\r\n\x1a\n",
            b"\xff\xd8",
            b"GIF89a",
            b"RIFF\0\0\0\0WEBPVP8L",
            b"%PDF",
            b"ID3",
        ]
    ),
    st.sampled_from(
        [None, "image/png", "application/pdf", "audio/mpeg", "video/mp4", "text/plain"]
    ),
    st.booleans(),
)
def test_sniff_never_fails(tail: bytes, magic: bytes, media_type: str | None, garble: bool) -> None:
    text = b64(magic + tail)
    if garble:
        text = text[: len(text) // 2] + "!*" + text[len(text) // 2 :]
    found = media.sniff(text, media_type)
    for cost in (media.openai_cost(found), media.anthropic_cost(found), media.gemini_cost(found)):
        assert cost >= 0
