"""A provider stand-in on 127.0.0.1 for the SDK wrapper tests.

It speaks OpenAI Chat Completions (``/v1/chat/completions``), OpenAI Responses
(``/v1/responses``) and Anthropic Messages (``/v1/messages``), each plain and
streamed (server-sent events), well enough for the real ``openai`` and
``anthropic`` packages:

* it counts the prompt with a real BPE tokenizer (``quicktok``'s o200k_base):
  every text, tool call, tool result and tool schema of the body, plus the
  providers' per-message framing (and Anthropic's tool-use system prompt);
* a prompt over its ``window`` (with the request's output cap) gets the
  provider's own overflow answer: OpenAI's 400 ``context_length_exceeded``
  body, Anthropic's 400 ``invalid_request_error`` "prompt is too long";
* every answer reports ``usage`` (in the stream too: OpenAI's final chunk when
  ``stream_options.include_usage`` is set, the Responses ``response.completed``
  event, Anthropic's ``message_start`` and ``message_delta``);
* it caches prompts as OpenAI does: a Chat Completions or Responses prompt reads
  from the cache the longest prefix it shares with an earlier accepted request, from
  :data:`CACHE_MIN` tokens in :data:`CACHE_STEP`-token steps, billed at
  :data:`CACHE_READ` of the input price; the answer reports it
  (``usage.prompt_tokens_details.cached_tokens``, Responses'
  ``input_tokens_details.cached_tokens``) and :attr:`Standin.billed` sums what was billed;
* every answer is one call of the tool ``read_file``, so an agent loop goes on
  until the caller stops it (or the context overflows); with ``final_after=N``
  a Chat Completions or Responses answer (streamed or not) after N accepted requests
  is a final text instead (a framework's agent loop then ends by itself).

It records each request body it accepted or refused.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from typing import Any

import orjson
import quicktok

from ctxwin.fitting.calibration import grow
from ctxwin.tokens.seed import SeedEstimator
from fidelity import compare

ENCODING = quicktok.get_encoding("o200k_base")
COMPLETION_TOKENS = 12
ANTHROPIC_TOOL_PROMPT = 346
"""Tokens Anthropic adds to a request with tools (its documented tool-use system prompt)."""
CACHE_MIN = 1024
CACHE_STEP = 128
"""OpenAI caches prompt prefixes from 1,024 tokens, in steps of 128."""
CACHE_READ = 0.1
"""What a cached prompt token costs, as a share of an uncached one."""
FRAMING = 0xFFFFFFFF
"""The token id the prompt's sequence (:func:`prompt_sequence`) gives to message framing."""


UNDER_COUNTING = SeedEstimator(prose_bytes_per_token=8.0, dense_bytes_per_token=8.0)
"""An estimator that counts fewer tokens than the stand-in's tokenizer: usage must teach it."""
READ_FILE = compare.READ_FILE
"""The tool every answer calls, as a Chat Completions tool (the cache loop's, as
``python -m fidelity.compare`` writes it into its runs)."""
IMAGE_URL = "https://example.com/a.png"
EXAMPLE_VIEW: list[dict[str, Any]] = [
    {"role": "system", "content": "be brief"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": IMAGE_URL}},
        ],
    },
    {
        "role": "assistant",
        "content": "reading",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path":"a.py"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "print(1)"},
]
"""The Chat view a framework integration reads a small history into: a system prompt,
a user message with an image, a tool call and its result (each framework's tests build
that history in its own types)."""


def tokens(text: str) -> int:
    return int(ENCODING.count(text))


def _text(content: Any) -> str:
    """Every string inside ``content`` (text parts, blocks, JSON arguments), joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_text(c) for c in content)
    if isinstance(content, dict):
        return "".join(_text(v) for k, v in content.items() if k not in ("type", "role"))
    return str(content)


def prompt_tokens(path: str, body: dict[str, Any]) -> int:
    """The prompt's tokens as the provider would count them (framing included)."""
    if path.endswith("/messages"):  # Anthropic
        items = body.get("messages", [])
        total = tokens(_text(body.get("system")))
    elif path.endswith("/responses"):
        raw = body.get("input", [])
        items = [{"content": raw}] if isinstance(raw, str) else raw
        total = tokens(_text(body.get("instructions")))
    else:
        items = body.get("messages", [])
        total = 0
    total += 3 + 4 * len(items) + sum(tokens(_text(m)) for m in items)
    if body.get("tools"):
        total += tokens(orjson.dumps(body["tools"]).decode())
        if path.endswith("/messages"):
            total += ANTHROPIC_TOOL_PROMPT  # the tool-use system prompt Anthropic adds
    return total


def prompt_sequence(path: str, body: dict[str, Any]) -> bytes:
    """The token ids of an OpenAI prompt in the order the provider reads them (the tools,
    then each message's framing and text), 4 bytes each: as many as :func:`prompt_tokens`
    counts, so a shared prefix of two sequences is a shared prefix of the prompts."""
    from array import array

    ids = array("I")
    if body.get("tools"):
        ids.extend(ENCODING.encode_ordinary(orjson.dumps(body["tools"]).decode()))
    if path.endswith("/responses"):
        ids.extend(ENCODING.encode_ordinary(_text(body.get("instructions"))))
        raw = body.get("input", [])
        items = [{"content": raw}] if isinstance(raw, str) else raw
    else:
        items = body.get("messages", [])
    ids.extend([FRAMING] * 3)
    for m in items:
        ids.extend([FRAMING] * 4)
        ids.extend(ENCODING.encode_ordinary(_text(m)))
    return ids.tobytes()


def shared_prefix(a: bytes, b: bytes) -> int:
    """How many leading 4-byte token ids ``a`` and ``b`` share."""
    lo, hi = 0, min(len(a), len(b)) // 4
    while lo < hi:  # the longest equal prefix, by halves (each compare at C speed)
        mid = (lo + hi + 1) // 2
        if a[: 4 * mid] == b[: 4 * mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def cached_tokens(shared: int) -> int:
    """The tokens OpenAI reads from its cache for a prompt sharing ``shared`` leading
    tokens with an earlier one: none under :data:`CACHE_MIN`, else whole steps."""
    if shared < CACHE_MIN:
        return 0
    return CACHE_MIN + (shared - CACHE_MIN) // CACHE_STEP * CACHE_STEP


def overflow(path: str, window: int, prompt: int) -> dict[str, Any]:
    """The provider's exact answer to a prompt over the window."""
    if path.endswith("/messages"):
        return {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": f"prompt is too long: {prompt} tokens > {window} maximum",
            },
        }
    if path.endswith("/responses"):
        return {
            "error": {
                "message": "Your input exceeds the context window of this model. "
                "Please adjust your input and try again.",
                "type": "invalid_request_error",
                "param": "input",
                "code": "context_length_exceeded",
            }
        }
    return {
        "error": {
            "message": f"This model's maximum context length is {window} tokens. However, "
            f"your messages resulted in {prompt} tokens. Please reduce the length of the "
            "messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


def _call_id(n: int) -> str:
    return f"call_{n:04d}"


ARGUMENTS = '{"path": "src/module.py"}'


FINAL = "The retry budget is computed in handler_0."


def chat_final(model: str, n: int, prompt: int, cached: int = 0) -> dict[str, Any]:
    """A final answer: text, no tool call."""
    message = {"role": "assistant", "content": FINAL}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return chat_answer(model, n, prompt, cached) | {"choices": [choice]}


def chat_answer(model: str, n: int, prompt: int, cached: int = 0) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": _call_id(n),
                            "type": "function",
                            "function": {"name": "read_file", "arguments": ARGUMENTS},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": _chat_usage(prompt, cached),
    }


def _chat_usage(prompt: int, cached: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": COMPLETION_TOKENS,
        "total_tokens": prompt + COMPLETION_TOKENS,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def chat_chunks(
    model: str, n: int, prompt: int, usage: bool, final: bool = False, cached: int = 0
) -> Iterator[dict[str, Any]]:
    base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": 1, "model": model}
    if final:  # the final answer's text, in two pieces
        texts: list[dict[str, str]] = [
            {"role": "assistant", "content": FINAL[:9]},
            {"content": FINAL[9:]},
        ]
        for text in texts:
            yield base | {"choices": [{"index": 0, "delta": text}]}
        yield base | {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        if usage:
            yield base | {"choices": [], "usage": _chat_usage(prompt, cached)}
        return
    call = {
        "index": 0,
        "id": _call_id(n),
        "type": "function",
        "function": {"name": "read_file", "arguments": ""},
    }
    yield base | {"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}}]}
    for piece in (ARGUMENTS[:10], ARGUMENTS[10:]):
        delta = {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
        yield base | {"choices": [{"index": 0, "delta": delta}]}
    yield base | {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    if usage:
        yield base | {"choices": [], "usage": _chat_usage(prompt, cached)}


def responses_answer(model: str, n: int, prompt: int, cached: int = 0) -> dict[str, Any]:
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": "completed",
        "model": model,
        "output": [
            {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": _call_id(n),
                "name": "read_file",
                "arguments": ARGUMENTS,
                "status": "completed",
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": COMPLETION_TOKENS,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + COMPLETION_TOKENS,
        },
    }


def responses_final(model: str, n: int, prompt: int, cached: int = 0) -> dict[str, Any]:
    """A final Responses answer: one output message, no tool call."""
    text = {"type": "output_text", "text": FINAL, "annotations": []}
    message = {
        "type": "message",
        "id": f"msg_{n}",
        "status": "completed",
        "role": "assistant",
        "content": [text],
    }
    return responses_answer(model, n, prompt, cached) | {"output": [message]}


def responses_events(
    model: str, n: int, prompt: int, final: bool = False, cached: int = 0
) -> Iterator[dict[str, Any]]:
    done = (responses_final if final else responses_answer)(model, n, prompt, cached)
    started = done | {"status": "in_progress", "output": [], "usage": None}
    yield {"type": "response.created", "sequence_number": 0, "response": started}
    item = done["output"][0]
    yield {
        "type": "response.output_item.added",
        "sequence_number": 1,
        "output_index": 0,
        "item": item,
    }
    yield {
        "type": "response.output_item.done",
        "sequence_number": 2,
        "output_index": 0,
        "item": item,
    }
    yield {"type": "response.completed", "sequence_number": 3, "response": done}


def anthropic_answer(model: str, n: int, prompt: int) -> dict[str, Any]:
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [
            {
                "type": "tool_use",
                "id": f"toolu_{n:04d}",
                "name": "read_file",
                "input": {"path": "a"},
            }
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": prompt, "output_tokens": COMPLETION_TOKENS},
    }


def anthropic_events(model: str, n: int, prompt: int) -> Iterator[dict[str, Any]]:
    done = anthropic_answer(model, n, prompt)
    start = done | {
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": prompt, "output_tokens": 1},
    }
    yield {"type": "message_start", "message": start}
    block = done["content"][0] | {"input": {}}
    yield {"type": "content_block_start", "index": 0, "content_block": block}
    delta = {"type": "input_json_delta", "partial_json": '{"path": "a"}'}
    yield {"type": "content_block_delta", "index": 0, "delta": delta}
    yield {"type": "content_block_stop", "index": 0}
    yield {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": None},
        "usage": {"output_tokens": COMPLETION_TOKENS},
    }
    yield {"type": "message_stop"}


@dataclass
class Standin:
    """The server's settings and what it saw."""

    window: int = 4000
    bodies: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[int] = field(default_factory=list)
    """The prompt tokens of every request, accepted or refused."""
    refused: int = 0
    final_after: int | None = None
    """Chat and Responses answers after this many accepted requests are final texts
    (no tool call)."""
    cached: list[int] = field(default_factory=list)
    """The cached prompt tokens of every accepted OpenAI request (0 for Anthropic's)."""
    accepted: list[int] = field(default_factory=list)
    """The prompt tokens of every accepted request."""
    sequences: list[bytes] = field(default_factory=list)
    """The token sequences of the accepted OpenAI prompts (:func:`prompt_sequence`)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def billed(self) -> float:
        """The accepted prompts' input billed, in token units: uncached tokens at 1,
        cached ones at :data:`CACHE_READ`."""
        return sum(p - c + CACHE_READ * c for p, c in zip(self.accepted, self.cached, strict=True))

    def _cache(self, path: str, body: dict[str, Any], prompt: int) -> int:
        """Read the prompt's cached prefix and write its own (held by the lock)."""
        if path.endswith("/messages"):
            self.accepted.append(prompt)
            self.cached.append(0)
            return 0
        seq = prompt_sequence(path, body)
        shared = max((shared_prefix(seq, old) for old in self.sequences), default=0)
        cached = cached_tokens(shared)
        self.sequences.append(seq)
        self.accepted.append(prompt)
        self.cached.append(cached)
        return cached

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, Any, bool]:
        """``(status, payload, stream)``; payload is a dict, or an iterator of events."""
        prompt = prompt_tokens(path, body)
        with self.lock:
            self.bodies.append(body)
            self.prompts.append(prompt)
            n = len(self.bodies)
        reserve = int(body.get("max_tokens") or body.get("max_output_tokens") or 0)
        if prompt + reserve > self.window:
            with self.lock:
                self.refused += 1
            return 400, overflow(path, self.window, prompt), False
        with self.lock:
            cached = self._cache(path, body, prompt)
        model = str(body.get("model", "standin"))
        stream = bool(body.get("stream"))
        if path.endswith("/messages"):
            events = anthropic_events(model, n, prompt)
            return 200, events if stream else anthropic_answer(model, n, prompt), stream
        final = self.final_after is not None and n - self.refused > self.final_after
        if path.endswith("/responses"):
            events = responses_events(model, n, prompt, final, cached)
            answer = (responses_final if final else responses_answer)(model, n, prompt, cached)
            return 200, events if stream else answer, stream
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if stream:
            return 200, chat_chunks(model, n, prompt, usage, final, cached), True
        make = chat_final if final else chat_answer
        return 200, make(model, n, prompt, cached), False


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        size = int(self.headers.get("content-length") or 0)
        body = orjson.loads(self.rfile.read(size))
        path = self.path.split("?")[0]
        status, payload, stream = self.server.standin.answer(path, body)
        if not stream:
            data = orjson.dumps(payload)
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        openai_chat = path.endswith("/chat/completions")
        for event in payload:
            head = b"" if openai_chat else b"event: " + event["type"].encode() + b"\n"
            self.wfile.write(head + b"data: " + orjson.dumps(event) + b"\n\n")
            self.wfile.flush()
        if openai_chat:
            self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, standin: Standin) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.standin = standin


@contextmanager
def serve(standin: Standin) -> Iterator[str]:
    """Run ``standin`` on 127.0.0.1 (a free port) for the block; yields its base URL."""
    server = _Server(standin)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def dropped_some(standin: Standin) -> bool:
    """Whether a fit dropped messages during the run: a Chat request that does not grow
    on the one before it (an agent loop adds a call and its result to each)."""
    sizes = [len(b.get("messages", [])) for b in standin.bodies]
    return any(b <= a for a, b in pairwise(sizes))


def assert_taught(fit: Any, standin: Standin) -> None:
    """``fit`` (a callback or filter with one conversation, seeded at 1.0 with
    :data:`UNDER_COUNTING`) learned from the first request's usage what ``grow`` says."""
    (manager,) = fit.managers.values()
    assert fit.last is not None
    assert manager.calibration == grow(1.0, fit.last.raw_tokens_sent, standin.prompts[0]) > 1.0
