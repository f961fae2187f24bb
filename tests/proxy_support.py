"""A fake provider upstream on 127.0.0.1 and servers run in background threads.

The fake speaks just enough of each provider's API for the proxy tests and the
real SDKs: every generation call answers with one tool call (so an agent loop
keeps going), counts the prompt as ``ratio`` × ctxwin's raw estimate of the body
it received (a model whose tokenizer counts more than ctxwin's estimator), and
refuses a prompt over its ``window`` with the provider's context-overflow
error, as a real provider does. It records what it received and the exact
bytes it sent, so tests can compare them with what came through the proxy.
"""

from __future__ import annotations

import asyncio
import math
import socket
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
from aiohttp import web

from ctxwin.core import load
from ctxwin.fitting.pruning import total_cost
from ctxwin.proxy.fitting import ProxyConfig
from ctxwin.proxy.routes import ANTHROPIC, GEMINI, error_body, route_for
from ctxwin.proxy.server import Proxy, bind, start
from ctxwin.settings import Settings

_JSON = "application/json"


@dataclass
class Received:
    method: str
    path_qs: str
    headers: dict[str, str]
    body: bytes


@dataclass
class FakeUpstream:
    """A provider stand-in (see the module doc)."""

    window: int = 1_000_000
    ratio: float = 1.0
    delay: float = 0.0
    """Seconds to wait before answering a generation call."""
    received: list[Received] = field(default_factory=list)
    sent: list[bytes | bytearray] = field(default_factory=list)
    cancelled: threading.Event = field(default_factory=threading.Event)
    chunk_pause: float = 0.0
    """Seconds between SSE events (a slow stream)."""
    endless: bool = False
    """Stream events until the client goes away (at most 20 s)."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra headers on every non-streamed answer."""

    def tokens(self, fmt: str, body: Any) -> int:
        t = load(body, fmt)
        return math.ceil(self.ratio * t.estimator.raw(total_cost(t.view)))

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        self.received.append(Received(request.method, request.path_qs, dict(request.headers), raw))
        route = route_for(request.method, request.path)
        if route is None:
            data = orjson.dumps({"object": "list", "data": [{"id": "fake-model"}]})
            self.sent.append(data)
            return web.Response(body=data, content_type=_JSON, headers=self.headers)
        if self.delay:
            await asyncio.sleep(self.delay)
        body = orjson.loads(raw)
        tokens = self.tokens(route.fmt, body)
        n = len(self.received)
        reserve = body.get("max_tokens") or body.get("max_output_tokens") or 0
        if tokens + reserve > self.window:
            message = f"prompt is {tokens} tokens, over the window of {self.window}"
            data = error_body(route.flavor, 400, message, "context_length_exceeded")
            self.sent.append(data)
            return web.Response(status=400, body=data, content_type="application/json")
        if route.flavor == ANTHROPIC:
            usage = {"input_tokens": tokens, "output_tokens": 5}
            reply: dict[str, Any] = {
                "id": f"msg_{n}",
                "type": "message",
                "role": "assistant",
                "model": body.get("model", "fake"),
                "content": [
                    {"type": "tool_use", "id": f"toolu_{n}", "name": "read", "input": {"n": n}}
                ],
                "stop_reason": "tool_use",
                "stop_sequence": None,
                "usage": usage,
            }
            events: list[tuple[str | None, Any]] = [
                ("message_start", {"type": "message_start", "message": reply | {"content": []}}),
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": reply["content"][0],
                    },
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                        "usage": {"output_tokens": 5},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ]
        elif route.flavor == GEMINI:
            reply = {
                "candidates": [
                    {
                        "content": {
                            "role": "model",
                            "parts": [{"functionCall": {"name": "read", "args": {"n": n}}}],
                        },
                        "finishReason": "STOP",
                    }
                ],
                "usageMetadata": {"promptTokenCount": tokens, "candidatesTokenCount": 5},
            }
            events = [(None, reply)]
        elif route.name == "responses":
            reply = {
                "id": f"resp_{n}",
                "object": "response",
                "status": "completed",
                "output": [
                    {
                        "type": "function_call",
                        "id": f"fc_{n}",
                        "call_id": f"call_{n}",
                        "name": "read",
                        "arguments": orjson.dumps({"n": n}).decode(),
                    }
                ],
                "usage": {"input_tokens": tokens, "output_tokens": 5, "total_tokens": tokens + 5},
            }
            events = [(None, {"type": "response.completed", "response": reply})]
        else:
            usage = {"prompt_tokens": tokens, "completion_tokens": 5, "total_tokens": tokens + 5}
            call = {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": "read", "arguments": orjson.dumps({"n": n}).decode()},
            }
            reply = {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "created": 1700000000,
                "model": body.get("model", "fake"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                        "finish_reason": "tool_calls",
                    }
                ],
                "usage": usage,
            }
            chunk = {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion.chunk",
                "created": 1700000000,
                "model": body.get("model", "fake"),
            }
            delta = {"role": "assistant", "content": None, "tool_calls": [call | {"index": 0}]}
            events = [
                (None, chunk | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
                (
                    None,
                    chunk | {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
                ),
            ]
            options = body.get("stream_options") or {}
            if options.get("include_usage"):
                events.append((None, chunk | {"choices": [], "usage": usage}))
        streaming = body.get("stream") or request.path.endswith(":streamGenerateContent")
        if not streaming:
            data = orjson.dumps(reply)
            self.sent.append(data)
            return web.Response(body=data, content_type=_JSON, headers=self.headers)
        return await self._stream(request, events, route.flavor)

    async def _stream(
        self, request: web.Request, events: list[tuple[str | None, Any]], flavor: str
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        sent = bytearray()
        self.sent.append(sent)  # filled as it goes: the client may finish before this handler

        async def emit(data: bytes) -> None:
            sent.extend(data)
            await response.write(data)

        try:
            for name, event in events:
                head = f"event: {name}\n".encode() if name else b""
                await emit(head + b"data: " + orjson.dumps(event) + b"\n\n")
                if self.chunk_pause:
                    await asyncio.sleep(self.chunk_pause)
            if self.endless:
                for i in range(400):
                    await emit(b": still working %d\n\n" % i)
                    await asyncio.sleep(0.05)
            if flavor not in (ANTHROPIC, GEMINI):
                await emit(b"data: [DONE]\n\n")
            await response.write_eof()
        except (asyncio.CancelledError, ConnectionResetError):
            self.cancelled.set()
            raise
        return response


class Stoppable(Protocol):
    async def cleanup(self) -> None: ...


class Served:
    """An aiohttp application served on 127.0.0.1 from a background thread."""

    def __init__(self, make: Callable[[socket.socket], Coroutine[Any, Any, Stoppable]]) -> None:
        self._make = make
        self._loop = asyncio.new_event_loop()
        self._sock = bind("127.0.0.1", 0)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._runner: Stoppable | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> Served:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._make(self._sock), self._loop)
        self._runner = future.result(timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._runner is not None:
            future = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop)
            future.result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


def serve_fake(fake: FakeUpstream) -> Served:
    async def make(sock: socket.socket) -> web.AppRunner:
        runner = web.AppRunner(fake.app(), access_log=None, handler_cancellation=True)
        await runner.setup()
        await web.SockSite(runner, sock).start()
        return runner

    return Served(make)


def serve_proxy(proxy: Proxy) -> Served:
    return Served(lambda sock: start(proxy, sock))


def config_for(upstream: str, **options: Any) -> ProxyConfig:
    """A proxy config: the options that are :class:`Settings` fields go into its settings."""
    fields = set(Settings._fields)
    settings = Settings(**{k: v for k, v in options.items() if k in fields})
    rest = {k: v for k, v in options.items() if k not in fields}
    return ProxyConfig(upstream=upstream, settings=settings, **rest)


@contextmanager
def proxied(
    fake: FakeUpstream | None = None, **config: Any
) -> Iterator[tuple[Served, Proxy, FakeUpstream]]:
    """A fake upstream and a proxy in front of it: ``(proxy server, proxy, fake)``."""
    fake = fake if fake is not None else FakeUpstream()
    with serve_fake(fake) as upstream:
        proxy = Proxy(config_for(upstream.url, **config))
        with serve_proxy(proxy) as served:
            yield served, proxy, fake
