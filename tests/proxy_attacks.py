"""Replay the known attacks on ``ctxwin proxy`` and check each outcome: ``make fuzz-proxy``.

Starts a stand-in upstream (a raw HTTP/1.1 server on 127.0.0.1 that records every
request head it receives, byte for byte) and ``ctxwin proxy`` itself as a process (as
it is run), then sends each attack of :data:`ATTACKS` on a fresh connection, written as
raw bytes so no client library normalises it, and checks:

* the status the proxy answers (and the provider's error shape, where the route has one);
* whether anything reached the upstream (a refused request must reach nothing);
* the refusals counted in ``/metrics`` (``ctxwin_proxy_refused_total{reason}``), reason
  by reason;
* the proxy's log: one line per request, none forged, no traceback, no token.

:data:`CLI_ATTACKS` are command lines that must be refused before anything listens.

Adding a case: append an :class:`Attack` (or a :class:`CliAttack`). ``requires`` names a
``ctxwin proxy`` flag the case depends on: the case is skipped, and said so, when
``ctxwin proxy --help`` does not list it. ``send`` may be a function that writes to the
socket at its own pace (a client that dribbles its head), and ``within`` bounds the
seconds until the answer (or until the proxy closes the connection). Each proxy set-up of
:data:`PROXIES` is started once.

``python -m tests.proxy_attacks`` prints one line per case and exits 1 if any failed.
Everything runs on 127.0.0.1; each connection and loop is bounded.
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

import orjson

PROXY_CMD = [sys.executable, "-m", "ctxwin", "proxy"]
TOKEN = "fuzz-token-1f6e0c4b9d2a"
"""The token of the ``token`` proxy; it must never appear upstream or in the log."""

PROXIES: dict[str, tuple[list[str], dict[str, str]]] = {
    "default": (["--context-length", "100000"], {}),
    "token": (["--context-length", "100000"], {"CTXWIN_PROXY_TOKEN": TOKEN}),
}
"""Proxy set-ups by name: extra command-line flags and environment."""

TIMEOUT = 10.0
"""Seconds any one socket operation may take."""

CHAT = orjson.dumps(
    {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Say hi."},
        ],
    }
)


@dataclass(frozen=True)
class Attack:
    """One request sent to a proxy and what must come of it."""

    name: str
    request: bytes | Callable[[socket.socket, str], None]
    """The raw request (``{authority}``: the proxy's ``127.0.0.1:port``), or a function
    that writes it given the socket and that authority."""
    status: int
    forwarded: bool = False
    """Whether the upstream may receive it (False: it must receive nothing)."""
    reason: str | None = None
    """The ``ctxwin_proxy_refused_total`` reason it must be counted under."""
    shape: str | None = None
    """The provider error shape of the answer: ``openai``, ``anthropic``, ``gemini``."""
    proxy: str = "default"
    check: Callable[[Outcome], str | None] | None = None
    """A further check: a failure message, or None."""
    requires: str | None = None
    """A ``ctxwin proxy`` flag the case needs (skipped when the proxy lacks it)."""
    within: float = TIMEOUT
    """Seconds until the answer, or until the proxy closes the connection."""
    logged: bool = True
    """Whether the proxy logs a line for it (it does not for a served /healthz or /metrics)."""


@dataclass(frozen=True)
class CliAttack:
    """A ``ctxwin proxy`` command line that must exit at once with ``code``, saying ``needle``."""

    name: str
    args: tuple[str, ...]
    code: int
    needle: str


@dataclass
class Outcome:
    """What came of one attack."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    upstream: list[bytes] = field(default_factory=list)
    """The request heads the upstream received meanwhile."""
    seconds: float = 0.0


@dataclass
class Result:
    name: str
    ok: bool
    detail: str


def _head(method_target: str, *headers: str, body: bytes = b"") -> bytes:
    lines = [f"{method_target} HTTP/1.1", "Host: {authority}", *headers, "Connection: close"]
    if body:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _raw(*lines: str, body: bytes = b"") -> bytes:
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _upstream_lacks(name: str) -> Callable[[Outcome], str | None]:
    def check(outcome: Outcome) -> str | None:
        for head in outcome.upstream:
            if re.search(rb"(?im)^" + re.escape(name.encode()) + rb":", head):
                return f"the upstream received {name}"
        return None if outcome.upstream else "nothing reached the upstream"

    return check


def _response_lacks(name: str, kept: str) -> Callable[[Outcome], str | None]:
    def check(outcome: Outcome) -> str | None:
        if name.lower() in outcome.headers:
            return f"the client received {name}"
        if kept.lower() not in outcome.headers:
            return f"the client did not receive {kept} (the check would be empty)"
        return None

    return check


ATTACKS: list[Attack] = [
    # the control: a plain request is forwarded, so "nothing reached the upstream" means something
    Attack("plain request is forwarded", _head("GET /v1/models"), 200, forwarded=True),
    Attack(
        "fitted request is forwarded",
        _head("POST /v1/chat/completions", "Content-Type: application/json", body=CHAT),
        200,
        forwarded=True,
    ),
    # who may use it: Host, Origin (DNS rebinding, a cross-site text/plain POST)
    Attack(
        "foreign Host and Origin, text/plain POST",
        _raw(
            "POST /v1/chat/completions HTTP/1.1",
            "Host: rebind.attacker.example:8787",
            "Origin: http://rebind.attacker.example:8787",
            "Content-Type: text/plain",
            f"Content-Length: {len(CHAT)}",
            "Connection: close",
            body=CHAT,
        ),
        421,
        reason="host",
        shape="openai",
    ),
    Attack(
        "foreign Host on the Anthropic route",
        _raw(
            "POST /v1/messages HTTP/1.1",
            "Host: attacker.example",
            "Content-Length: 2",
            "Connection: close",
            body=b"{}",
        ),
        421,
        reason="host",
        shape="anthropic",
    ),
    Attack(
        "no Host",
        _raw("GET /v1/models HTTP/1.0"),
        421,
        reason="host",
    ),
    Attack(
        "two Hosts",
        _raw("GET /v1/models HTTP/1.1", "Host: {authority}", "Host: {authority}"),
        400,
        reason="bad_request",  # aiohttp's parser refuses a repeated Host itself
    ),
    Attack(
        "foreign Origin, own Host, text/plain POST",
        _head(
            "POST /v1/chat/completions",
            "Origin: https://evil.example",
            "Content-Type: text/plain",
            body=CHAT,
        ),
        403,
        reason="origin",
        shape="openai",
    ),
    Attack(
        "Origin: null",
        _head("POST /v1/chat/completions", "Origin: null", body=CHAT),
        403,
        reason="origin",
        shape="openai",
    ),
    Attack(
        "own Origin is accepted",
        _head("GET /v1/models", "Origin: http://{authority}"),
        200,
        forwarded=True,
    ),
    # the request target
    Attack(
        "absolute-form to the metadata service",
        _head("GET http://169.254.169.254/latest/meta-data/"),
        400,
        reason="target",
    ),
    Attack(
        "absolute-form naming the proxy itself",
        _head("GET http://{authority}/v1/models"),
        400,
        reason="target",
    ),
    Attack(
        "CONNECT",
        _raw("CONNECT internal.example:22 HTTP/1.1", "Host: {authority}", "Connection: close"),
        400,
        reason="target",
    ),
    Attack("asterisk-form", _head("OPTIONS *"), 400, reason="target"),
    Attack("network-path //host", _head("GET //evil.example/v1/models"), 400, reason="target"),
    Attack(
        "'..' raw (prefix escape)",
        _head("GET /tenant-a/v1/../../tenant-b/v1/models"),
        400,
        reason="dot_segment",
    ),
    Attack("'.' raw", _head("GET /v1/./models"), 400, reason="dot_segment"),
    Attack(
        "'..' as %2e%2e / %2E%2E",
        _head("GET /tenant-a/v1/%2e%2e/%2E%2E/tenant-b/v1/models"),
        400,
        reason="dot_segment",
    ),
    Attack("'..%2f'", _head("GET /v1/..%2f..%2fadmin"), 400, reason="dot_segment"),
    Attack("'%2e%2e%2f'", _head("GET /v1/%2e%2e%2fadmin"), 400, reason="dot_segment"),
    Attack("'..' encoded twice", _head("GET /v1/%252e%252e/admin"), 400, reason="dot_segment"),
    Attack("'..' with backslashes", _head("GET /v1\\..\\admin"), 400, reason="dot_segment"),
    Attack("'..;' (path parameter)", _head("GET /v1/..;/admin"), 400, reason="dot_segment"),
    Attack(
        "'..' on a fitted route",
        _head("POST /v1/../v1/chat/completions", body=CHAT),
        400,
        reason="dot_segment",
        shape="openai",
    ),
    # smaller
    Attack(
        "Content-Length: ² (not ASCII digits)",
        _raw(
            "POST /v1/chat/completions HTTP/1.1",
            "Host: {authority}",
            "Content-Length: \u00b2",
            body=b"{}",
        ),
        400,
        reason="bad_request",
    ),
    Attack(
        "%0A and %0D in the path (log forging)",
        _head("GET /v1/models%0Actxwin%20proxy:%20GET%20/forged%20200%0D%0A"),
        200,
        forwarded=True,
    ),
    Attack(
        "request header named in Connection",
        _raw(
            "GET /v1/models HTTP/1.1",
            "Host: {authority}",
            "Connection: close, X-Secret-Hop",
            "X-Secret-Hop: 1",
        ),
        200,
        forwarded=True,
        check=_upstream_lacks("X-Secret-Hop"),
    ),
    Attack(
        "response header named in Connection",
        _head("GET /v1/models"),
        200,
        forwarded=True,
        check=_response_lacks("X-Upstream-Hop", kept="X-Upstream-Kept"),
    ),
    # the token
    Attack(
        "no token",
        _head("POST /v1/chat/completions", body=CHAT),
        401,
        reason="token",
        shape="openai",
        proxy="token",
    ),
    Attack(
        "wrong token",
        _head("GET /v1/models", f"x-ctxwin-token: {TOKEN[:-1]}x"),
        401,
        reason="token",
        proxy="token",
    ),
    Attack(
        "token twice",
        _head("GET /v1/models", f"x-ctxwin-token: {TOKEN}", f"x-ctxwin-token: {TOKEN}"),
        401,
        reason="token",
        proxy="token",
    ),
    Attack("/metrics without the token", _head("GET /metrics"), 401, reason="token", proxy="token"),
    Attack("/healthz needs no token", _head("GET /healthz"), 200, proxy="token", logged=False),
    Attack(
        "the right token; it is not forwarded",
        _head("GET /v1/models", f"X-Ctxwin-Token: {TOKEN}"),
        200,
        forwarded=True,
        proxy="token",
        check=_upstream_lacks("x-ctxwin-token"),
    ),
    Attack(
        "right token, foreign Host",
        _raw(
            "GET /v1/models HTTP/1.1",
            "Host: evil.example",
            f"x-ctxwin-token: {TOKEN}",
            "Connection: close",
        ),
        421,
        reason="host",
        proxy="token",
    ),
]
"""The attacks (see the module doc for how to add one)."""

CLI_ATTACKS: list[CliAttack] = [
    CliAttack("--host 0.0.0.0 without --allow-remote", ("--host", "0.0.0.0"), 2, "--allow-remote"),
    CliAttack("--host :: without --allow-remote", ("--host", "::"), 2, "--allow-remote"),
]


# -- the stand-in upstream ------------------------------------------------------------------


UPSTREAM_SCRIPTS: dict[str, Callable[[socket.socket], None]] = {}
"""How the stand-in answers a path that starts with a key (after the proxy's prefix, none
here): the function writes what it likes to the connection, which is then closed. For
cases where the upstream misbehaves (closes mid-body, stalls after its headers): add the
script here and an :class:`Attack` whose target starts with its key."""


class StandIn:
    """A raw HTTP/1.1 upstream on 127.0.0.1: records each request head, answers 200 with
    a small JSON body and a header named in its ``Connection`` header (or runs the
    :data:`UPSTREAM_SCRIPTS` entry its path starts with)."""

    ANSWER = _raw(
        "HTTP/1.1 200 OK",
        "Content-Type: application/json",
        "Connection: keep-alive, X-Upstream-Hop",
        "X-Upstream-Hop: 1",
        "X-Upstream-Kept: 1",
        "Content-Length: 30",
        body=b'{"object":"list","data":[{}]}\n',
    )

    def __init__(self) -> None:
        self.heads: list[bytes] = []
        self.lock = threading.Lock()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.stopping = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopping:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(30)
        buf = b""
        with conn:
            for _ in range(1000):  # requests on one kept-alive connection
                while b"\r\n\r\n" not in buf:
                    try:
                        data = conn.recv(65536)
                    except OSError:
                        return
                    if not data or len(buf) > 1 << 20:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                with self.lock:
                    self.heads.append(head)
                match = re.search(rb"(?im)^content-length:\s*([0-9]+)\s*$", head)
                need = int(match.group(1)) if match else 0
                while len(buf) < need:
                    try:
                        data = conn.recv(65536)
                    except OSError:
                        return
                    if not data:
                        return
                    buf += data
                buf = buf[need:]
                target = head.split(b" ", 2)[1].decode("latin-1") if b" " in head else ""
                script = next(
                    (f for k, f in UPSTREAM_SCRIPTS.items() if target.startswith(k)), None
                )
                try:
                    if script is not None:
                        script(conn)
                        return
                    conn.sendall(self.ANSWER)
                except OSError:
                    return

    def received(self) -> list[bytes]:
        with self.lock:
            return list(self.heads)

    def close(self) -> None:
        self.stopping = True
        self.sock.close()


# -- the proxy, as a process -------------------------------------------------------------


class ProxyProcess:
    """``ctxwin proxy`` started as a process on 127.0.0.1, any free port."""

    def __init__(self, upstream: str, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [*PROXY_CMD, "--upstream", upstream, "--host", "127.0.0.1", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **env},
        )
        assert self.proc.stderr is not None
        self.log: list[bytes] = []
        line = self.proc.stderr.readline()
        match = re.search(rb"listening on http://127\.0\.0\.1:([0-9]+)", line)
        if match is None:
            self.proc.kill()
            raise RuntimeError(f"the proxy did not start: {line!r}")
        self.port = int(match.group(1))
        self.authority = f"127.0.0.1:{self.port}"
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)

    def stop(self) -> tuple[int, bytes]:
        """Stop it (Ctrl-C); its exit code and standard output."""
        self.proc.send_signal(signal.SIGINT)
        try:
            out, _ = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        self._reader.join(timeout=5)
        return self.proc.returncode, out


def send(port: int, request: bytes, within: float = TIMEOUT) -> tuple[bytes, float]:
    """Send ``request`` on a new connection; everything read until the proxy closes it
    (or ``within`` seconds pass), and the seconds that took."""
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        sock.sendall(request)
        return _read_all(sock, start, within), time.perf_counter() - start


def _read_all(sock: socket.socket, start: float, within: float) -> bytes:
    out = b""
    while (left := within - (time.perf_counter() - start)) > 0:
        sock.settimeout(left)
        try:
            data = sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            break
        if not data:
            break
        out += data
    return out


def parse(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    status = int(parts[1]) if len(parts) > 1 and parts[1].isascii() and parts[1].isdigit() else 0
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body


def shape_of(body: bytes) -> str | None:
    """The provider error shape of ``body``, or None."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("error"), dict):
        return None
    error = data["error"]
    if data.get("type") == "error" and {"type", "message"} <= error.keys():
        return "anthropic"
    if {"code", "message", "status"} <= error.keys():
        return "gemini"
    if {"message", "type", "param", "code"} <= error.keys():
        return "openai"
    return None


def judge(attack: Attack, outcome: Outcome) -> str | None:
    """Why ``outcome`` is not what ``attack`` must give, or None."""
    if outcome.status != attack.status:
        return f"status {outcome.status}, expected {attack.status}"
    if outcome.seconds > attack.within:
        return f"answered after {outcome.seconds:.1f} s, over {attack.within} s"
    if not attack.forwarded and outcome.upstream:
        line = outcome.upstream[0].partition(b"\r\n")[0]
        return f"forwarded: the upstream received {line!r}"
    if attack.forwarded and not outcome.upstream:
        return "expected to be forwarded, but nothing reached the upstream"
    if attack.shape is not None and shape_of(outcome.body) != attack.shape:
        return f"the error is not in the {attack.shape} shape: {outcome.body[:200]!r}"
    if attack.check is not None:
        return attack.check(outcome)
    return None


def metrics(port: int, headers: tuple[str, ...] = ()) -> Counter[str]:
    """``ctxwin_proxy_refused_total`` by reason, read from ``/metrics``."""
    raw, _ = send(
        port, _head("GET /metrics", *headers).replace(b"{authority}", f"127.0.0.1:{port}".encode())
    )
    status, _, body = parse(raw)
    if status != 200:
        raise RuntimeError(f"/metrics answered {status}")
    found: Counter[str] = Counter()
    for match in re.finditer(rb'ctxwin_proxy_refused_total\{reason="([a-z_]+)"\} ([0-9]+)', body):
        found[match.group(1).decode()] = int(match.group(2))
    return found


_LOG_LINE = re.compile(
    rb"^ctxwin proxy: (\S+ \S+ [0-9]+ \S+ [0-9.]+ms|- - [0-9]+ refused:bad_request \(.*\))$"
)
"""A per-request log line (and the start-up lines, checked apart)."""


def check_log(name: str, log: list[bytes], expected: int) -> list[Result]:
    """One well-formed line per request, nothing forged, no traceback, no token."""
    text = b"".join(log)
    results = [
        Result(f"{name}: no traceback in the log", b"Traceback" not in text, ""),
        Result(f"{name}: the token is not in the log", TOKEN.encode() not in text, ""),
    ]
    lines = [line.rstrip(b"\n") for line in log if not line.startswith(b"ctxwin: proxy stopped")]
    bad = [line for line in lines if not _LOG_LINE.match(line)]
    forged = [
        line
        for line in lines
        if b"/forged" in line and not line.startswith(b"ctxwin proxy: GET /v1/models%0A")
    ]
    results.append(Result(f"{name}: every log line is one request", not bad, repr(bad[:3])))
    results.append(Result(f"{name}: no forged log line", not forged, repr(forged[:3])))
    results.append(
        Result(
            f"{name}: one log line per request",
            len(lines) == expected,
            f"{len(lines)} lines for {expected} requests",
        )
    )
    return results


def proxy_flags() -> str:
    """``ctxwin proxy --help``, to skip the cases whose flag it lacks."""
    out = subprocess.run(
        [*PROXY_CMD, "--help"],
        capture_output=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
    )
    return out.stdout.decode("utf-8", "replace")


def run_cli_attack(attack: CliAttack, wait: float = 10.0) -> Result:
    """Run the command line; a proxy that starts listening is stopped at once (a failure)."""
    proc = subprocess.Popen(
        [*PROXY_CMD, "--upstream", "http://127.0.0.1:9", "--port", "0", *attack.args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.stderr is not None
    err = b""
    deadline = time.monotonic() + wait
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stderr, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if selector.select(timeout=0.1):
                line = proc.stderr.readline()
                err += line
                if not line or b"listening on" in line:
                    break
            elif proc.poll() is not None:
                break
    code: int | None = None
    if b"listening on" not in err:
        with suppress(subprocess.TimeoutExpired):
            code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    if code is None:
        proc.kill()
        proc.wait()
        return Result(attack.name, False, f"it started: {err.decode('utf-8', 'replace')[:200]}")
    err += proc.stderr.read()
    text = err.decode("utf-8", "replace")
    lines = [line for line in text.splitlines() if line.strip()]
    ok = code == attack.code and len(lines) == 1 and attack.needle in lines[0]
    return Result(attack.name, ok, f"exit {code}: {text.strip()[:200]}")


@contextmanager
def _proxies(upstream: StandIn, names: set[str]) -> Iterator[dict[str, ProxyProcess]]:
    started: dict[str, ProxyProcess] = {}
    try:
        for name in sorted(names):
            args, env = PROXIES[name]
            started[name] = ProxyProcess(upstream.url, args, env)
        yield started
    finally:
        for proxy in started.values():
            if proxy.proc.poll() is None:
                proxy.proc.kill()
                proxy.proc.wait()


def run(
    attacks: list[Attack] = ATTACKS, cli_attacks: list[CliAttack] = CLI_ATTACKS
) -> list[Result]:
    """Run every case; one :class:`Result` per case and per after-check."""
    results: list[Result] = []
    flags = proxy_flags()
    runnable = []
    for attack in attacks:
        if attack.requires is not None and attack.requires not in flags:
            results.append(
                Result(attack.name, True, f"skipped: the proxy has no {attack.requires}")
            )
        else:
            runnable.append(attack)
    upstream = StandIn()
    try:
        with _proxies(upstream, {a.proxy for a in runnable}) as proxies:
            expected: dict[str, Counter[str]] = {name: Counter() for name in proxies}
            sent = Counter[str]()
            for attack in runnable:
                proxy = proxies[attack.proxy]
                before = len(upstream.received())
                outcome = Outcome()
                start = time.perf_counter()
                with socket.create_connection(("127.0.0.1", proxy.port), timeout=TIMEOUT) as sock:
                    if callable(attack.request):
                        attack.request(sock, proxy.authority)
                    else:
                        sock.sendall(
                            attack.request.replace(b"{authority}", proxy.authority.encode())
                        )
                    raw = _read_all(sock, start, attack.within + 1)
                outcome.seconds = time.perf_counter() - start
                outcome.status, outcome.headers, outcome.body = parse(raw)
                time.sleep(0.05)  # anything forwarded has arrived by now: the answer came after it
                outcome.upstream = upstream.received()[before:]
                failure = judge(attack, outcome)
                results.append(Result(attack.name, failure is None, failure or f"{outcome.status}"))
                sent[attack.proxy] += attack.logged
                if attack.reason is not None:
                    expected[attack.proxy][attack.reason] += 1
            for name, proxy in proxies.items():
                auth = (
                    (f"x-ctxwin-token: {TOKEN}",)
                    if PROXIES[name][1].get("CTXWIN_PROXY_TOKEN")
                    else ()
                )
                counted = metrics(proxy.port, auth)
                results.append(
                    Result(
                        f"{name}: refusals counted in /metrics by reason",
                        counted == expected[name],
                        f"counted {dict(counted)}, expected {dict(expected[name])}",
                    )
                )
            heads = b"".join(upstream.received())
            results.append(
                Result("the token never reached the upstream", TOKEN.encode() not in heads, "")
            )
            for name, proxy in proxies.items():
                code, out = proxy.stop()
                results.append(
                    Result(
                        f"{name}: stops with exit 0, nothing on stdout",
                        code == 0 and out == b"",
                        f"exit {code}",
                    )
                )
                # the start-up lines are not requests
                log = [
                    line
                    for line in proxy.log
                    if not line.startswith((b"ctxwin: proxy listening", b"ctxwin: warning"))
                ]
                results += check_log(name, log, sent[name])
    finally:
        upstream.close()
    results += [run_cli_attack(a) for a in cli_attacks]
    return results


def main() -> int:
    results = run()
    width = max(len(r.name) for r in results)
    for r in results:
        print(f"{'ok  ' if r.ok else 'FAIL'}  {r.name:<{width}}  {r.detail}")
    failed = [r for r in results if not r.ok]
    print(f"{len(results) - len(failed)} of {len(results)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
