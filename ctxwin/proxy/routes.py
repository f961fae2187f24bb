"""Which requests the proxy fits, and the providers' own error shapes.

A request is fitted when it is a ``POST`` to one of the providers' generation
endpoints, matched on the end of the path so any prefix (``/v1``, ``/openai/v1``,
an Azure deployment path) works:

* ``.../chat/completions`` — OpenAI Chat Completions (and every compatible server);
* ``.../responses`` — OpenAI Responses;
* ``.../messages`` — Anthropic Messages;
* ``.../models/{model}:generateContent`` and ``:streamGenerateContent`` — Gemini
  (the model name is in the path, not the body).

Everything else (``GET /v1/models``, ``/v1/messages/count_tokens``, uploads...)
passes through untouched. Errors the proxy answers itself are written in the
shape the client's SDK expects for the route, so it raises its usual exception.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

OPENAI = "openai"
ANTHROPIC = "anthropic"
GEMINI = "gemini"


@dataclass(frozen=True, slots=True)
class Route:
    """A fitted endpoint: the wire format of its body and whose error shape it uses."""

    name: str
    """Short label for metrics: ``chat``, ``responses``, ``messages``, ``gemini``."""
    fmt: str
    """The ctxwin format the body is read as (no detection: the route decides)."""
    flavor: str
    """Error shape: :data:`OPENAI`, :data:`ANTHROPIC` or :data:`GEMINI`."""
    model: str | None = None
    """The model named in the path (Gemini), else ``None``."""


CHAT = Route("chat", "openai-chat", OPENAI)
RESPONSES = Route("responses", "openai-responses", OPENAI)
MESSAGES = Route("messages", "anthropic", ANTHROPIC)

_GEMINI_VERBS = (":generateContent", ":streamGenerateContent")


def route_for(method: str, path: str) -> Route | None:
    """The route fitted for ``method`` and ``path`` (no query string), or ``None``."""
    if method != "POST":
        return None
    path = path.rstrip("/")
    if path.endswith("/chat/completions"):
        return CHAT
    if path.endswith("/responses"):
        return RESPONSES
    if path.endswith("/messages"):
        return MESSAGES
    for verb in _GEMINI_VERBS:
        if path.endswith(verb):
            name = path[: -len(verb)].rpartition("/")[2]
            return Route("gemini", "gemini", GEMINI, name or None)
    return None


def flavor_for(path: str) -> str:
    """The error shape for a path the proxy does not fit (an upstream fault on a pass-through)."""
    if "/messages" in path:
        return ANTHROPIC
    if ":" in path.rpartition("/")[2] or "/v1beta" in path:
        return GEMINI
    return OPENAI


_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    408: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    421: "invalid_request_error",
    413: "request_too_large",
    502: "api_error",
    504: "api_error",
}
_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    408: "DEADLINE_EXCEEDED",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    421: "FAILED_PRECONDITION",
    413: "INVALID_ARGUMENT",
    502: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    408: "invalid_request_error",
    413: "invalid_request_error",
    421: "invalid_request_error",
}


def error_body(flavor: str, status: int, message: str, code: str) -> bytes:
    """A provider-shaped JSON error: what that provider's SDK parses into its exception.

    ``code`` is a short machine-readable reason (``context_length_exceeded``,
    ``invalid_json``, ``upstream_unreachable``...): OpenAI's ``code`` field;
    Anthropic and Gemini have no such field, so the message carries it.
    """
    body: dict[str, Any]
    if flavor == ANTHROPIC:
        body = {
            "type": "error",
            "error": {"type": _ANTHROPIC_TYPES.get(status, "api_error"), "message": message},
        }
    elif flavor == GEMINI:
        body = {
            "error": {
                "code": status,
                "message": message,
                "status": _GEMINI_STATUS.get(status, "INTERNAL"),
            }
        }
    else:
        body = {
            "error": {
                "message": message,
                "type": _OPENAI_TYPES.get(status, "server_error"),
                "param": None,
                "code": code,
            }
        }
    return orjson.dumps(body)
