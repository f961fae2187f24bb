"""Who may use the proxy, and which requests it forwards at all: checks made on the
request head, before the body is read. Pure (no aiohttp): :mod:`ctxwin.proxy.server`
calls :meth:`Guard.check` first thing for every request.

In order, a request is refused (and nothing is forwarded) when:

1. its target is not origin-form — ``CONNECT`` (authority-form), an absolute URL
   (``GET http://169.254.169.254/...``), ``*``, or a path starting with ``//`` (read as a
   host by many gateways): 400 ``target``; or its path has a ``.`` or ``..`` segment,
   raw or percent-encoded (``%2e``, ``..%2f``, ``%252e``...), split at ``/`` or ``\\``,
   with ``;`` parameters ignored: 400 ``dot_segment``;
2. its ``Host`` is not the proxy's own — the address the client connected to, with the
   port it connected to (``localhost``, ``127.0.0.1`` and ``[::1]`` when that address is
   loopback; the ``--host`` name) — nor an ``--allow-host`` entry: 421 ``host``. A page
   that rebinds its DNS name to 127.0.0.1 still sends its own name in ``Host``;
3. it carries an ``Origin`` (browsers send it; SDKs do not) whose host is not one of the
   proxy's own names nor an ``--allow-host`` name (any port): 403 ``origin``. This stops a
   page on another site from posting a ``text/plain`` body through the proxy;
4. a token is set and the request's :data:`TOKEN_HEADER` does not match it (compared in
   constant time): 401 ``token``. ``GET /healthz`` needs no token; ``/metrics`` does.

The token header is never forwarded upstream, never logged, never echoed.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote

if TYPE_CHECKING:
    from multidict import MultiMapping

    from ctxwin.proxy.fitting import ProxyConfig

TOKEN_HEADER = "x-ctxwin-token"
"""The request header that carries the proxy's token (not the provider's credentials,
which stay in ``Authorization`` / ``x-api-key`` and are forwarded)."""

REFUSAL_REASONS = ("target", "dot_segment", "host", "origin", "token", "bad_request")
"""The ``reason`` labels of ``ctxwin_proxy_refused_total`` (``bad_request``: a head the
HTTP parser itself refuses, e.g. ``Content-Length: ²``)."""

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})

_REMEMBERED = 256
"""Distinct Host values whose parse is kept (a bound: later ones are parsed each time)."""

_DECODE_ROUNDS = 3
"""Percent-decoding rounds looked through for dot segments (``%25252e`` is refused)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request is answered by the proxy itself and not forwarded."""

    status: int
    reason: str
    """The metrics label (one of :data:`REFUSAL_REASONS`)."""
    code: str
    """The machine-readable code of the error body."""
    message: str


def _refusal(status: int, reason: str, code: str, message: str) -> Refusal:
    return Refusal(status, reason, code, f"ctxwin proxy: {message}; not forwarded")


CONNECT = _refusal(400, "target", "invalid_request_target", "CONNECT is not proxied")
NOT_ORIGIN_FORM = _refusal(
    400,
    "target",
    "invalid_request_target",
    "the request target must be a path starting with a single '/' (origin-form)",
)
DOT_SEGMENT = _refusal(
    400,
    "dot_segment",
    "invalid_request_target",
    "the request path has a '.' or '..' segment (raw or percent-encoded)",
)
FOREIGN_HOST = _refusal(
    421,
    "host",
    "misdirected_request",
    "the Host header does not name this proxy (start it with --allow-host NAME to accept it)",
)
FOREIGN_ORIGIN = _refusal(
    403,
    "origin",
    "forbidden_origin",
    "the Origin header names another site (start the proxy with --allow-host NAME to accept it)",
)
BAD_TOKEN = _refusal(401, "token", "invalid_proxy_token", f"missing or wrong {TOKEN_HEADER} header")


# -- the request target ------------------------------------------------------------------


def _has_dot_segment(path: str) -> bool:
    for segment in path.replace("\\", "/").split("/"):
        if segment.partition(";")[0] in (".", ".."):
            return True
    return False


def target_refusal(method: str, target: str) -> Refusal | None:
    """Why ``method target`` (the raw request line's target) is refused, or ``None``.

    Linear in the target's length: at most :data:`_DECODE_ROUNDS` + 1 passes."""
    if method == "CONNECT":
        return CONNECT
    if not target.startswith("/") or target.startswith("//"):
        return NOT_ORIGIN_FORM
    path = target.partition("?")[0].partition("#")[0]
    if "." not in path and "%" not in path:
        return None  # no dot, raw or encoded: the common case
    for _ in range(_DECODE_ROUNDS):
        if _has_dot_segment(path):
            return DOT_SEGMENT
        if "%" not in path:
            return None
        decoded = unquote(path, errors="surrogateescape")
        if decoded == path:
            return None
        path = decoded
    if _has_dot_segment(path) or unquote(path, errors="surrogateescape") != path:
        return DOT_SEGMENT  # a dot segment, or percent-encoded more times than any client does
    return None


# -- Host and Origin -----------------------------------------------------------------------


def _name(text: str) -> str:
    """A host name or address in one spelling: lower case, no trailing dot, no brackets,
    an IPv4-mapped IPv6 address as IPv4, an IPv6 address compressed."""
    name = text.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    name = name.removesuffix(".")
    try:
        address = ipaddress.ip_address(name.partition("%")[0])
    except ValueError:
        return name
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address)


def split_host(value: str) -> tuple[str, int | None] | None:
    """``(name, port)`` of a ``Host`` value (``name``, ``name:port``, ``[v6]``,
    ``[v6]:port``); ``None`` if malformed."""
    value = value.strip()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[1:end], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port_text: str | None = rest[1:] if rest else None
    elif value.count(":") == 1:
        name, _, port_text = value.partition(":")
    elif ":" in value:
        return None  # a bare IPv6 address is not a Host value
    else:
        name, port_text = value, None
    if not name or any(c in name for c in "/@?#\\ \t"):
        return None
    port: int | None = None
    if port_text is not None:
        if not (port_text.isascii() and port_text.isdigit()) or len(port_text) > 5:
            return None
        port = int(port_text)
    return _name(name), port


def parse_allowed_host(entry: str) -> tuple[str, int | None]:
    """An ``--allow-host`` entry: ``NAME`` (any port) or ``NAME:PORT``; ValueError if bad."""
    parsed = split_host(entry)
    if parsed is None:
        raise ValueError(f"expected NAME or NAME:PORT, got {entry!r}")
    return parsed


def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` reaches this machine only: a loopback address,
    ``localhost``, or a name whose every address is loopback (resolved here)."""
    name = _name(host)
    if not name:
        return False  # "": every interface
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return False
    return bool(infos) and all(is_loopback(str(info[4][0])) for info in infos)


class Guard:
    """The checks of the module doc for one proxy's configuration."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        allow_hosts: Iterable[str] = (),
        token: str | None = None,
    ) -> None:
        self.host = _name(host)
        self.port = port
        self.any_port: set[str] = set()
        self.pairs: set[tuple[str, int]] = set()
        for entry in allow_hosts:
            name, allowed_port = parse_allowed_host(entry)
            if allowed_port is None:
                self.any_port.add(name)
            else:
                self.pairs.add((name, allowed_port))
        self.origin_names = self.any_port | {name for name, _ in self.pairs}
        self._token = None if token is None else hashlib.sha256(token.encode()).digest()
        self._own: dict[str, frozenset[str]] = {}
        self._hosts: dict[str, tuple[str, int | None] | None] = {}

    @classmethod
    def for_config(cls, config: ProxyConfig) -> Guard:
        """The guard of ``config``; ValueError for a host that is not loopback unless
        ``allow_remote``, or a malformed ``allow_hosts`` entry."""
        if not config.allow_remote and not is_loopback(config.host):
            raise ValueError(
                f"{config.host!r} is not a loopback address: anyone who can reach it could "
                "use the proxy (allow_remote=True listens there anyway)"
            )
        return cls(config.host, config.port, config.allow_hosts, config.token)

    def own_names(self, local_host: str) -> frozenset[str]:
        """The names a request that reached ``local_host`` may use for the proxy."""
        names = self._own.get(local_host)
        if names is None:
            name = _name(local_host)
            found = {name}
            if self.host not in ("", "0.0.0.0", "::"):
                found.add(self.host)
            if is_loopback(name) or name == "localhost":
                found |= LOOPBACK_NAMES
            names = frozenset(found)
            if len(self._own) < 64:  # one per local address
                self._own[local_host] = names
        return names

    def check(
        self,
        method: str,
        target: str,
        headers: MultiMapping[str],
        local: tuple[str, int] | None = None,
    ) -> Refusal | None:
        """The refusal for this request head, or ``None`` to serve it. ``local`` is the
        (address, port) the client connected to (default: the configured host and port)."""
        refusal = target_refusal(method, target)
        if refusal is not None:
            return refusal
        local_host, local_port = local if local is not None else (self.host, self.port)
        own = self.own_names(local_host)
        hosts = headers.getall("Host", [])
        parsed = self._split_host(hosts[0]) if len(hosts) == 1 else None
        if parsed is None:
            return FOREIGN_HOST
        name, port = parsed
        if not (
            name in self.any_port
            or (port is not None and (name, port) in self.pairs)
            or (name in own and (80 if port is None else port) == local_port)
        ):
            return FOREIGN_HOST
        origins = headers.getall("Origin", [])
        if origins and not all(self._origin_allowed(o, own) for o in origins):
            return FOREIGN_ORIGIN
        if self._token is not None and not (
            method == "GET" and target.partition("?")[0] == "/healthz"
        ):
            given = headers.getall(TOKEN_HEADER, [])
            if len(given) != 1:
                return BAD_TOKEN
            digest = hashlib.sha256(given[0].encode("utf-8", "surrogateescape")).digest()
            if not hmac.compare_digest(digest, self._token):
                return BAD_TOKEN
        return None

    def _split_host(self, value: str) -> tuple[str, int | None] | None:
        """:func:`split_host`, remembered for the first :data:`_REMEMBERED` values (clients
        send the same few)."""
        try:
            return self._hosts[value]
        except KeyError:
            parsed = split_host(value)
            if len(self._hosts) < _REMEMBERED:
                self._hosts[value] = parsed
            return parsed

    def _origin_allowed(self, origin: str, own: frozenset[str]) -> bool:
        scheme, sep, rest = origin.strip().partition("://")
        if not sep or scheme.lower() not in ("http", "https") or "/" in rest:
            return False  # "null" (a sandboxed or file: page) and anything odd
        parsed = split_host(rest)
        return parsed is not None and (parsed[0] in own or parsed[0] in self.origin_names)


# -- headers and logs ----------------------------------------------------------------------


def connection_named(values: Iterable[str]) -> frozenset[str]:
    """The header names (lower case) listed in ``Connection`` header ``values``: hop-by-hop
    for this connection only, so never forwarded (RFC 9110, 7.6.1)."""
    names: set[str] = set()
    for value in values:
        names.update(t.strip().lower() for t in value.split(","))
    names.discard("")
    return frozenset(names)


def loggable(text: str) -> str:
    """``text`` safe for one log line: every character outside printable ASCII, and the
    backslash, escaped (``\\n``, ``\\x7f``, ``\\u00e9``), so no request can forge a line."""
    if text.isascii() and text.isprintable() and "\\" not in text:
        return text
    return text.encode("unicode_escape", "backslashreplace").decode("ascii")
