"""What media cost: images, audio, video and PDFs are never counted as text.

A base64 payload says almost nothing about its token cost: a 1 MB screenshot
is not 400k tokens, it is at most a few thousand. This module reads what a
payload is (its type, and its pixel size, page count or duration when those
are cheap to read from its first bytes) and prices it with each provider's
documented rule. Only a small prefix is decoded for images and audio; PDFs
are decoded whole (their page objects can sit anywhere in the file).

Figures, and where they come from (see also README, "Media costs"):

OpenAI (platform.openai.com/docs/guides/images-vision, "Calculating costs"):
    detail ``low``: 85 tokens. ``high``/``auto``: scale to fit 2048x2048, then
    so the shortest side is at most 768 px; 85 + 170 per 512-px tile. Unknown
    size: the largest that rule can give, 8 tiles (2048x768) = 1445 tokens.
    PDFs (``file`` parts) are read as extracted text plus one image per page:
    counted as 3000 + 1445 tokens per page.
Anthropic (docs.anthropic.com, "Vision" and "PDF support"):
    images: ⌈w x h / 750⌉ after scaling the long edge to ≤ 1568 px, and at most
    1600 tokens (larger images are scaled down to that); unknown size: 1600.
    PDFs: each page is its text (1,500-3,000 tokens per page documented) plus
    an image of the page: 3000 + 1600 = 4600 tokens per page.
Gemini (ai.google.dev/gemini-api/docs/tokens, and "media resolution"):
    images: 258 tokens when both sides are ≤ 384 px, else 258 per 768x768
    tile; Gemini 3 charges up to 1120 per image at its default resolution, so
    an image counts at least 1120. Unknown size: a 2048x2048 image, 9 tiles =
    2322. PDFs: 560 tokens per page (Gemini 3 default). Audio: 32 tokens/s.
    Video: 263 tokens/s.
Audio for other providers: 32 tokens/s (OpenAI publishes no per-second rate
for Chat Completions audio input; Gemini's documented rate is used).

When a size cannot be read the cost is a documented conservative constant:
a PDF whose page objects cannot be found counts one page per 50 kB (at least
one); audio of an unknown encoding plays at 16 kbit/s; video at 100 kbit/s;
a file known only by id or URL counts as :data:`UNKNOWN_DOC_PAGES` pages (an
image as the unknown-size image above, a clip as :data:`UNKNOWN_CLIP_SECONDS`);
an inline payload of no media type counts as dense text, 2 bytes per token.
"""

from __future__ import annotations

import binascii
import math
import re
import zlib
from typing import NamedTuple

# --- provider figures -------------------------------------------------------

OPENAI_LOW_DETAIL = 85
OPENAI_BASE = 85
OPENAI_PER_TILE = 170
OPENAI_UNKNOWN_IMAGE = 1445
"""85 + 170 x 8: the most the tile rule can charge (a 2048x768 image)."""
PDF_PAGE_TEXT = 3000
"""Text tokens per PDF page (upper end of Anthropic's documented 1,500-3,000)."""

ANTHROPIC_MAX_EDGE = 1568
ANTHROPIC_PIXELS_PER_TOKEN = 750
ANTHROPIC_IMAGE_CAP = 1600

GEMINI_TILE = 258
GEMINI_SMALL_EDGE = 384
GEMINI_TILE_EDGE = 768
GEMINI_IMAGE_FLOOR = 1120
"""Gemini 3 default (high) media resolution for an image."""
GEMINI_UNKNOWN_IMAGE = 9 * GEMINI_TILE
GEMINI_PDF_PAGE = 560
GEMINI_VIDEO_PER_SECOND = 263
AUDIO_PER_SECOND = 32

UNKNOWN_AUDIO_BYTES_PER_SECOND = 2000
"""16 kbit/s: slower than any common speech encoding, so durations err long."""
UNKNOWN_VIDEO_BYTES_PER_SECOND = 12_500
"""100 kbit/s."""
PDF_BYTES_PER_PAGE = 50_000
"""Fallback when no page object can be found: one page per 50 kB."""
UNKNOWN_DOC_PAGES = 10
"""Pages assumed for a document known only by id or URL."""
UNKNOWN_CLIP_SECONDS = 300
"""Duration assumed for audio or video known only by id or URL."""
OTHER_BYTES_PER_TOKEN = 2
"""An inline payload of no known media type counts as dense text at 2 bytes per token."""

IMAGE_PREFIX_CHARS = 4096
"""Base64 characters decoded to read an image's size (more for JPEG, on demand)."""


class Media(NamedTuple):
    """What a payload is, as far as its first bytes tell.

    A NamedTuple: a dataclass would compile its methods at every start.
    """

    kind: str
    """``image``, ``audio``, ``video``, ``pdf`` or ``other``."""
    size: tuple[int, int] | None = None
    """Pixel width and height of an image."""
    pages: int | None = None
    """Page count of a PDF."""
    seconds: float | None = None
    """Duration of audio or video."""
    nbytes: int | None = None
    """Decoded size, when the payload is inline."""


# --- reading payloads -------------------------------------------------------


def parse_data_uri(uri: str) -> tuple[str, str] | None:
    """``(media_type, base64 data)`` of a ``data:`` URI, or ``None``."""
    if not uri.startswith("data:"):
        return None
    comma = uri.find(",", 5, 5 + 256)
    if comma < 0:
        return None
    meta = uri[5:comma]
    if not meta.endswith(";base64"):
        return None
    return meta[: -len(";base64")].split(";", 1)[0].lower(), uri[comma + 1 :]


def decoded_size(b64: str) -> int:
    """Decoded byte count of base64 text (ignoring padding)."""
    n = len(b64)
    return n * 3 // 4 - (2 if b64.endswith("==") else 1 if b64.endswith("=") else 0)


def _decode(b64: str, chars: int | None = None) -> bytes:
    text = b64 if chars is None or chars >= len(b64) else b64[: chars - chars % 4]
    try:
        return binascii.a2b_base64(text)
    except (binascii.Error, ValueError):
        return b""


def _kind(media_type: str | None) -> str:
    mt = (media_type or "").lower()
    if mt.startswith("image/"):
        return "image"
    if mt.startswith("audio/"):
        return "audio"
    if mt.startswith("video/"):
        return "video"
    if mt == "application/pdf":
        return "pdf"
    return "other"


def sniff(b64: str, media_type: str | None = None, audio_format: str | None = None) -> Media:
    """Read what a base64 payload is; ``media_type`` is the declared MIME type."""
    nbytes = decoded_size(b64)
    kind = _kind(media_type)
    if kind == "other" and audio_format:
        kind = "audio"
    head = _decode(b64, IMAGE_PREFIX_CHARS)
    if kind in ("other", "image"):
        if head.startswith(b"%PDF"):
            kind = "pdf"
        elif _image_type(head):
            kind = "image"
    if kind == "image":
        size = image_size(head)
        if size is None and head.startswith(b"\xff\xd8"):
            size = image_size(_decode(b64, 1 << 20)) or image_size(_decode(b64))
        return Media("image", size=size, nbytes=nbytes)
    if kind == "pdf":
        return Media("pdf", pages=pdf_pages(_decode(b64)), nbytes=nbytes)
    if kind == "audio":
        return Media("audio", seconds=audio_seconds(head, nbytes), nbytes=nbytes)
    if kind == "video":
        return Media("video", seconds=nbytes / UNKNOWN_VIDEO_BYTES_PER_SECOND, nbytes=nbytes)
    return Media("other", nbytes=nbytes)


def _image_type(head: bytes) -> str | None:
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"\xff\xd8"):
        return "jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    return None


_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def image_size(data: bytes) -> tuple[int, int] | None:
    """Width and height of a PNG, JPEG, GIF or WebP from its first bytes."""
    kind = _image_type(data)
    if kind == "png" and len(data) >= 24:
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if kind == "gif" and len(data) >= 10:
        return int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")
    if kind == "webp" and len(data) >= 30:
        chunk = data[12:16]
        if chunk == b"VP8 ":
            w = int.from_bytes(data[26:28], "little") & 0x3FFF
            h = int.from_bytes(data[28:30], "little") & 0x3FFF
            return w, h
        if chunk == b"VP8L":
            b0, b1, b2, b3 = data[21], data[22], data[23], data[24]
            w = 1 + (((b1 & 0x3F) << 8) | b0)
            h = 1 + (((b3 & 0x0F) << 10) | (b2 << 2) | ((b1 & 0xC0) >> 6))
            return w, h
        if chunk == b"VP8X":
            w = 1 + int.from_bytes(data[24:27], "little")
            h = 1 + int.from_bytes(data[27:30], "little")
            return w, h
        return None
    if kind == "jpeg":
        return _jpeg_size(data)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    n = len(data)
    while i + 4 <= n:
        if data[i] != 0xFF:
            i += 1
            continue
        marker = data[i + 1]
        if marker == 0xFF:
            i += 1
            continue
        if marker in (0x01, 0xD8) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        if marker == 0xD9:
            return None
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if marker in _JPEG_SOF:
            if i + 9 > n:
                return None
            h = int.from_bytes(data[i + 5 : i + 7], "big")
            w = int.from_bytes(data[i + 7 : i + 9], "big")
            return w, h
        i += 2 + length
    return None


_PAGE = rb"/Type\s*/Page(?![A-Za-z])"
_OBJSTM = rb"/ObjStm"
_STREAM = rb"stream\r?\n"
# patterns, compiled (and cached by re) on first use: compiling costs every start


def pdf_pages(data: bytes) -> int:
    """Page count of a PDF: its page objects, also inside compressed object streams.

    Falls back to one page per :data:`PDF_BYTES_PER_PAGE` bytes when none is found.
    """
    page = re.compile(_PAGE)
    stream = re.compile(_STREAM)
    pages = len(page.findall(data))
    for m in re.finditer(_OBJSTM, data):
        s = stream.search(data, m.end(), m.end() + 2048)
        if s is None:
            continue
        try:
            inflated = zlib.decompressobj().decompress(data[s.end() :], 1 << 26)
        except zlib.error:
            continue
        pages += len(page.findall(inflated))
    if pages:
        return pages
    return max(1, math.ceil(len(data) / PDF_BYTES_PER_PAGE))


_MP3_V1_L3 = (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320)
_MP3_V2_L3 = (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160)


def audio_seconds(head: bytes, nbytes: int) -> float:
    """Duration of WAV (byte rate) or MP3 (first frame's bit rate); else at 16 kbit/s."""
    rate = 0
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE" and len(head) >= 32:
        rate = int.from_bytes(head[28:32], "little")
        nbytes = max(0, nbytes - 44)  # the canonical header
    else:
        i = 0
        if head[:3] == b"ID3" and len(head) >= 10:
            size = 0
            for b in head[6:10]:
                size = (size << 7) | (b & 0x7F)
            i = 10 + size
        if i + 3 <= len(head) and head[i] == 0xFF and head[i + 1] & 0xE0 == 0xE0:
            version = (head[i + 1] >> 3) & 0x3
            layer = (head[i + 1] >> 1) & 0x3
            index = head[i + 2] >> 4
            if layer == 1 and 0 < index < 15:
                table = _MP3_V1_L3 if version == 3 else _MP3_V2_L3
                rate = table[index] * 1000 // 8
    if rate <= 0:
        rate = UNKNOWN_AUDIO_BYTES_PER_SECOND
    return nbytes / rate


# --- provider costs ---------------------------------------------------------


def openai_image_tokens(size: tuple[int, int] | None, detail: str | None = None) -> int:
    """OpenAI tile rule (GPT-4o class)."""
    if detail == "low":
        return OPENAI_LOW_DETAIL
    if size is None or size[0] <= 0 or size[1] <= 0:
        return OPENAI_UNKNOWN_IMAGE
    w, h = float(size[0]), float(size[1])
    scale = min(1.0, 2048 / max(w, h))
    w, h = w * scale, h * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    tiles = math.ceil(w / 512) * math.ceil(h / 512)
    return OPENAI_BASE + OPENAI_PER_TILE * tiles


def anthropic_image_tokens(size: tuple[int, int] | None) -> int:
    """⌈w x h / 750⌉ after scaling the long edge to ≤ 1568 px, at most 1600."""
    if size is None or size[0] <= 0 or size[1] <= 0:
        return ANTHROPIC_IMAGE_CAP
    w, h = size
    long_edge = max(w, h)
    if long_edge > ANTHROPIC_MAX_EDGE:
        w = math.ceil(w * ANTHROPIC_MAX_EDGE / long_edge)
        h = math.ceil(h * ANTHROPIC_MAX_EDGE / long_edge)
    return min(ANTHROPIC_IMAGE_CAP, math.ceil(w * h / ANTHROPIC_PIXELS_PER_TOKEN))


def gemini_image_tokens(size: tuple[int, int] | None) -> int:
    """258 per 768-px tile (one tile up to 384x384), at least 1120."""
    if size is None or size[0] <= 0 or size[1] <= 0:
        return GEMINI_UNKNOWN_IMAGE
    w, h = size
    if w <= GEMINI_SMALL_EDGE and h <= GEMINI_SMALL_EDGE:
        tiles = 1
    else:
        tiles = math.ceil(w / GEMINI_TILE_EDGE) * math.ceil(h / GEMINI_TILE_EDGE)
    return max(GEMINI_IMAGE_FLOOR, GEMINI_TILE * tiles)


def _seconds(media: Media) -> float:
    if media.seconds is not None:
        return media.seconds
    if media.nbytes is None:
        return UNKNOWN_CLIP_SECONDS
    return media.nbytes / UNKNOWN_AUDIO_BYTES_PER_SECOND


def _other(media: Media) -> int | None:
    if media.kind == "other" and media.nbytes is not None:
        return math.ceil(media.nbytes / OTHER_BYTES_PER_TOKEN)
    return None


def _non_image_cost(media: Media, video_per_second: float, per_page: int) -> int:
    """Tokens for audio, video, documents and other files, given a provider's rates."""
    if media.kind == "audio":
        return math.ceil(_seconds(media) * AUDIO_PER_SECOND)
    if media.kind == "video":
        return math.ceil(_seconds(media) * video_per_second)
    other = _other(media)
    if other is not None:
        return other
    pages = media.pages if media.pages is not None else UNKNOWN_DOC_PAGES
    return pages * per_page


def openai_cost(media: Media, detail: str | None = None) -> int:
    """Tokens an OpenAI model is charged for ``media``."""
    if media.kind == "image":
        return openai_image_tokens(media.size, detail)
    return _non_image_cost(media, AUDIO_PER_SECOND, PDF_PAGE_TEXT + OPENAI_UNKNOWN_IMAGE)


def anthropic_cost(media: Media) -> int:
    """Tokens an Anthropic model is charged for ``media``."""
    if media.kind == "image":
        return anthropic_image_tokens(media.size)
    return _non_image_cost(media, AUDIO_PER_SECOND, PDF_PAGE_TEXT + ANTHROPIC_IMAGE_CAP)


def gemini_cost(media: Media) -> int:
    """Tokens a Gemini model is charged for ``media``."""
    if media.kind == "image":
        return gemini_image_tokens(media.size)
    return _non_image_cost(media, GEMINI_VIDEO_PER_SECOND, GEMINI_PDF_PAGE)


def unknown(kind: str) -> Media:
    """A payload known only by reference (URL or file id)."""
    return Media(kind)
