"""Prompt-token counts read out of provider responses, plain JSON or SSE streams.

The proxy forwards every response byte for byte; these readers only look at
copies of the bytes, and only at the parts that can hold usage:

* a JSON response (or a Gemini stream sent as one JSON array): the top-level
  ``usage`` or ``usageMetadata``;
* an SSE stream: each ``data:`` line that mentions usage — OpenAI's final
  chunk (``stream_options.include_usage``), Anthropic's ``message_start``
  (``message.usage``), Responses' ``response.completed`` (``response.usage``),
  every Gemini chunk's ``usageMetadata``.

The count is :func:`ctxwin.fitting.calibration.prompt_tokens_from_usage` of the usage
found; with several, the largest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from ctxwin.fitting.calibration import prompt_tokens_from_usage, usage_in

_MARKERS = (b'"usage', b'"usageMetadata"')
_NESTED = ("message", "response")
MAX_BUFFER = 1 << 20
"""A JSON response larger than this is not kept for its usage (it is still forwarded)."""
MAX_LINE = 1 << 20
"""An SSE line longer than this is skipped unread."""


def _usage_in(obj: Any) -> Mapping[str, Any] | None:
    usage = usage_in(obj)
    if usage is not None or not isinstance(obj, dict):
        return usage
    for key in _NESTED:
        inner = obj.get(key)
        if isinstance(inner, dict):
            usage = inner.get("usage")
            if isinstance(usage, dict):
                return usage
    return None


def prompt_tokens_in(obj: Any) -> int | None:
    """Prompt tokens reported in a parsed response object (or a list of them), or ``None``."""
    if isinstance(obj, list):
        found = [n for n in map(prompt_tokens_in, obj) if n is not None]
        return max(found) if found else None
    usage = _usage_in(obj)
    return prompt_tokens_from_usage(usage) if usage is not None else None


def prompt_tokens_of_json(data: bytes) -> int | None:
    """Prompt tokens in a whole JSON response body, or ``None`` (unreadable, or none there)."""
    if not any(marker in data for marker in _MARKERS):
        return None
    try:
        return prompt_tokens_in(orjson.loads(data))
    except orjson.JSONDecodeError:
        return None


class UsageReader:
    """Reads prompt tokens from a response as its chunks go by (a copy; never changes them).

    ``sse`` selects line-wise reading of ``data:`` events; otherwise the body
    is kept (up to :data:`MAX_BUFFER`) and read whole at :meth:`result`.
    """

    __slots__ = ("_best", "_overflow", "_pending", "sse")

    def __init__(self, sse: bool) -> None:
        self.sse = sse
        self._pending = bytearray()
        self._best: int | None = None
        self._overflow = False

    def feed(self, chunk: bytes) -> None:
        if self._overflow:
            return
        if not self.sse:
            self._pending += chunk
            if len(self._pending) > MAX_BUFFER:
                self._overflow = True
                self._pending.clear()
            return
        if b"\n" not in chunk:
            self._pending += chunk
            if len(self._pending) > MAX_LINE:  # one huge line: skip it to its end
                self._pending.clear()
            return
        data = bytes(self._pending) + chunk if self._pending else chunk
        cut = data.rfind(b"\n") + 1
        self._pending = bytearray(data[cut:])
        if any(marker in data for marker in _MARKERS):
            for line in data[:cut].splitlines():
                self._line(line)

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:") or not any(marker in line for marker in _MARKERS):
            return
        try:
            obj = orjson.loads(line[5:])
        except orjson.JSONDecodeError:
            return
        self._take(prompt_tokens_in(obj))

    def _take(self, tokens: int | None) -> None:
        if tokens is not None and (self._best is None or tokens > self._best):
            self._best = tokens

    def result(self) -> int | None:
        """The largest prompt-token count seen, or ``None``."""
        if self.sse:
            if self._pending:
                self._line(bytes(self._pending))
                self._pending.clear()
        elif not self._overflow and self._pending:
            self._take(prompt_tokens_of_json(bytes(self._pending)))
            self._pending.clear()
        return self._best
