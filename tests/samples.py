"""Media payloads built byte by byte for tests: real headers, any size."""

from __future__ import annotations

import base64
import struct
import zlib


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def data_uri(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{b64(data)}"


def png(width: int, height: int, pad: int = 0) -> bytes:
    """A PNG signature and IHDR chunk (then ``pad`` filler bytes)."""
    ihdr = struct.pack(">II5B", width, height, 8, 2, 0, 0, 0)
    crc = zlib.crc32(b"IHDR" + ihdr).to_bytes(4, "big")
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + crc + b"\0" * pad


def jpeg(width: int, height: int, app_segments: int = 0, pad: int = 0) -> bytes:
    """SOI, ``app_segments`` 64 kB APP segments (as EXIF data), then a SOF0 frame header."""
    app = (b"\xff\xe1" + struct.pack(">H", 65_000) + b"E" * 64_998) * app_segments
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x22\x00" * 3
    return b"\xff\xd8" + app + sof + b"\0" * pad + b"\xff\xd9"


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\xf7\x00\x00"


def webp(width: int, height: int) -> bytes:
    """An extended (VP8X) WebP header."""
    body = b"VP8X" + struct.pack("<I", 10) + b"\0\0\0\0"
    body += (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body


def wav(seconds: float, sample_rate: int = 16_000) -> bytes:
    """A mono 16-bit PCM WAV of silence."""
    byte_rate = sample_rate * 2
    data = b"\0" * int(seconds * byte_rate)
    fmt = struct.pack("<HHIIHH", 1, 1, sample_rate, byte_rate, 2, 16)
    chunks = b"fmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WAVE" + chunks


def pdf(pages: int, compressed: bool = False) -> bytes:
    """A PDF with ``pages`` page objects, plain or inside a compressed object stream."""
    objects = b"".join(b"<< /Type /Page /Parent 1 0 R >>\n" for _ in range(pages))
    head = b"%%PDF-1.7\n1 0 obj << /Type /Pages /Count %d >> endobj\n" % pages
    if compressed:
        stream = zlib.compress(objects)
        body = b"2 0 obj << /Type /ObjStm /N %d /Filter /FlateDecode /Length %d >>\nstream\n" % (
            pages,
            len(stream),
        )
        return head + body + stream + b"\nendstream\nendobj\n%%EOF\n"
    return head + objects + b"%%EOF\n"
