"""Who may use the proxy and what it forwards (:mod:`ctxwin.proxy.guard`): the checks alone,
then over raw sockets through a proxy in front of a stand-in upstream, then the command."""

from __future__ import annotations

import logging
import socket
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st
from multidict import CIMultiDict

from ctxwin.proxy.fitting import ProxyConfig
from ctxwin.proxy.guard import (
    TOKEN_HEADER,
    Guard,
    connection_named,
    is_loopback,
    loggable,
    split_host,
    target_refusal,
)
from ctxwin.proxy.server import Proxy
from tests import proxy_attacks
from tests.conftest import Cli
from tests.hostile_util import WIDE, assert_one_line_error
from tests.proxy_support import proxied

LOCAL = ("127.0.0.1", 8787)


def heads(**headers: str | list[str]) -> CIMultiDict[str]:
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        for v in value if isinstance(value, list) else [value]:
            out.add(name.replace("_", "-"), v)
    return out


# -- the request target --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "target", "reason"),
    [
        ("CONNECT", "internal.example:22", "target"),
        ("GET", "http://169.254.169.254/latest/meta-data/", "target"),
        ("GET", "https://api.openai.com/v1/models", "target"),
        ("OPTIONS", "*", "target"),
        ("GET", "//evil.example/v1/models", "target"),
        ("GET", "", "target"),
        ("GET", "/tenant-a/v1/../../tenant-b/v1/models", "dot_segment"),
        ("GET", "/v1/./models", "dot_segment"),
        ("GET", "/v1/..", "dot_segment"),
        ("GET", "/..", "dot_segment"),
        ("GET", "/v1/%2e%2e/x", "dot_segment"),
        ("GET", "/v1/%2E%2E/x", "dot_segment"),
        ("GET", "/v1/.%2e/x", "dot_segment"),
        ("GET", "/v1/%2e/x", "dot_segment"),
        ("GET", "/v1/..%2fx", "dot_segment"),
        ("GET", "/v1/..%2Fx", "dot_segment"),
        ("GET", "/v1/%2e%2e%2fx", "dot_segment"),
        ("GET", "/v1/%252e%252e/x", "dot_segment"),
        ("GET", "/v1/%25252e%25252e/x", "dot_segment"),
        ("GET", "/v1/%2525252e/x", "dot_segment"),  # encoded more times than looked through
        ("GET", "/v1\\..\\x", "dot_segment"),
        ("GET", "/v1/..%5cx", "dot_segment"),
        ("GET", "/v1/..;/x", "dot_segment"),
        ("GET", "/v1/..;a=b/x", "dot_segment"),
        ("POST", "/v1/../v1/chat/completions?x=1", "dot_segment"),
    ],
)
def test_targets_that_are_refused(method: str, target: str, reason: str) -> None:
    refusal = target_refusal(method, target)
    assert refusal is not None and refusal.status == 400 and refusal.reason == reason


@pytest.mark.parametrize(
    "target",
    [
        "/v1/chat/completions",
        "/v1/chat/completions?api-version=2024-02-01&x=../..",  # the query is not a path
        "/openai/deployments/gpt-4o/chat/completions",
        "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse",
        "/v1/files/file-abc.jsonl",
        "/v1/...",  # three dots are a name
        "/v1/..a/.b/a..",
        "/v1/100%25",
        "/v1/a%20b",
        "/",
        "/healthz",
    ],
)
def test_origin_form_targets_pass(target: str) -> None:
    assert target_refusal("GET", target) is None
    assert target_refusal("POST", target) is None


_SEGMENT = st.text(
    alphabet=st.characters(codec="ascii", categories=("L", "N"))
    | st.sampled_from("-_~:@!$&'()*+,=."),
    min_size=1,
    max_size=12,
).filter(lambda s: s.strip(".") != "")


def _spell(dots: str, how: int) -> str:
    """``dots`` spelled raw, percent-encoded, mixed-case encoded, or encoded twice."""
    return [
        dots,
        quote(dots, safe="").replace(".", "%2e"),
        dots.replace(".", "%2E"),
        dots.replace(".", "%252e"),
    ][how]


@given(
    st.lists(_SEGMENT, min_size=0, max_size=6),
    st.integers(0, 6),
    st.sampled_from([".", ".."]),
    st.integers(0, 3),
    st.sampled_from(["/", "%2f", "%2F", "\\", "%5c"]),
)
def test_a_dot_segment_anywhere_in_any_spelling_is_refused(
    segments: list[str], at: int, dots: str, how: int, slash: str
) -> None:
    safe = "/" + "/".join(quote(s, safe="") for s in segments)
    assert target_refusal("GET", safe) is None
    at = min(at, len(segments))
    head = "/" + "".join(quote(s, safe="") + "/" for s in segments[:at])
    # the dot segment, then the rest joined by a slash raw, encoded or backslashed
    target = head + slash.join([_spell(dots, how), *(quote(s, safe="") for s in segments[at:])])
    refusal = target_refusal("GET", target)
    assert refusal is not None and refusal.reason == "dot_segment", target


def test_a_long_target_is_decoded_a_bounded_number_of_times() -> None:
    # at most four decoding passes, whatever the nesting: "%%%...%." is a name, not "."
    assert target_refusal("GET", "/" + "%25" * 2700 + "2e") is None
    assert target_refusal("GET", "/" + "%25" * 2700 + "2e/%2e") is not None


# -- Host, Origin, token ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("127.0.0.1:8787", ("127.0.0.1", 8787)),
        ("LOCALHOST:8787", ("localhost", 8787)),
        ("localhost.:8787", ("localhost", 8787)),
        ("[::1]:8787", ("::1", 8787)),
        ("[::ffff:127.0.0.1]:8787", ("127.0.0.1", 8787)),
        ("example.com", ("example.com", None)),
        ("::1", None),
        ("[::1", None),
        ("[::1]x", None),
        ("a:b", None),
        ("a:\u00b2", None),
        ("a:123456", None),
        ("user@host:1", None),
        ("", None),
    ],
)
def test_host_values(value: str, parsed: tuple[str, int | None] | None) -> None:
    assert split_host(value) == parsed


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1:8787", True),
        ("localhost:8787", True),
        ("[::1]:8787", True),
        ("127.0.0.1:8788", False),  # another port
        ("127.0.0.1", False),  # port 80
        ("attacker.example:8787", False),  # DNS rebinding keeps the attacker's name
        ("10.0.0.1:8787", False),
        ("", False),
        ("127.0.0.1:8787, evil", False),
    ],
)
def test_host_check_on_loopback(host: str, allowed: bool) -> None:
    refusal = Guard().check("GET", "/v1/models", heads(Host=host), LOCAL)
    assert (refusal is None) is allowed
    if not allowed:
        assert refusal is not None and (refusal.status, refusal.reason) == (421, "host")


def test_no_host_or_two_hosts_are_refused() -> None:
    guard = Guard()
    assert guard.check("GET", "/", heads(), LOCAL) is not None
    assert guard.check("GET", "/", heads(Host=["127.0.0.1:8787"] * 2), LOCAL) is not None


def test_allow_host_entries_with_and_without_port() -> None:
    guard = Guard(allow_hosts=["proxy.internal", "gateway.example:443"])
    ok = [("proxy.internal", 1), ("PROXY.internal.", 8787), ("gateway.example", 443)]
    for name, port in ok:
        assert guard.check("GET", "/", heads(Host=f"{name}:{port}"), LOCAL) is None
    assert guard.check("GET", "/", heads(Host="gateway.example:444"), LOCAL) is not None
    assert guard.check("GET", "/", heads(Host="gateway.example"), LOCAL) is not None


def test_a_remote_listener_accepts_the_address_connected_to_not_loopback_names() -> None:
    guard = Guard("0.0.0.0", 8787)
    local = ("192.0.2.7", 8787)
    assert guard.check("GET", "/", heads(Host="192.0.2.7:8787"), local) is None
    assert guard.check("GET", "/", heads(Host="localhost:8787"), local) is not None
    # a client on the machine itself connects to 127.0.0.1: its loopback names are fine
    assert guard.check("GET", "/", heads(Host="localhost:8787"), LOCAL) is None
    named = Guard("proxy.lan", 8787)
    assert named.check("GET", "/", heads(Host="proxy.lan:8787"), local) is None


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("http://127.0.0.1:8787", True),
        ("http://localhost:3000", True),  # a page on this machine, any port
        ("https://app.example", True),  # named by --allow-host
        ("https://evil.example", False),
        ("null", False),
        ("file://", False),
        ("http://127.0.0.1:8787/path", False),
        ("chrome-extension://abc", False),
    ],
)
def test_origin_check(origin: str, allowed: bool) -> None:
    guard = Guard(allow_hosts=["app.example"])
    refusal = guard.check(
        "POST", "/v1/chat/completions", heads(Host="127.0.0.1:8787", Origin=origin), LOCAL
    )
    assert (refusal is None) is allowed
    if not allowed:
        assert refusal is not None and (refusal.status, refusal.reason) == (403, "origin")


def test_token_check() -> None:
    guard = Guard(token="s3cret-token")
    host = "127.0.0.1:8787"
    for headers in (
        heads(Host=host),
        heads(Host=host, **{TOKEN_HEADER: "s3cret-toke"}),
        heads(Host=host, **{TOKEN_HEADER: ["s3cret-token", "s3cret-token"]}),
        heads(Host=host, Authorization="Bearer s3cret-token"),
    ):
        refusal = guard.check("GET", "/v1/models", headers, LOCAL)
        assert refusal is not None and (refusal.status, refusal.reason) == (401, "token")
        assert "s3cret" not in refusal.message
    good = heads(Host=host, **{"X-Ctxwin-Token": "s3cret-token"})
    assert guard.check("GET", "/v1/models", good, LOCAL) is None
    assert guard.check("GET", "/metrics", heads(Host=host), LOCAL) is not None
    assert guard.check("GET", "/healthz", heads(Host=host), LOCAL) is None
    assert guard.check("POST", "/healthz", heads(Host=host), LOCAL) is not None
    # the Host is checked first: a foreign page learns nothing about the token
    assert guard.check("GET", "/", heads(Host="evil:8787"), LOCAL).reason == "host"  # type: ignore[union-attr]


def test_loopback_hosts() -> None:
    for host in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LOCALHOST."):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "", "192.0.2.1", "10.0.0.1", "::ffff:10.0.0.1"):
        assert not is_loopback(host), host


def test_a_non_loopback_config_needs_allow_remote() -> None:
    with pytest.raises(ValueError, match="allow_remote"):
        Proxy(ProxyConfig(upstream="http://127.0.0.1:9", host="0.0.0.0"))
    Proxy(ProxyConfig(upstream="http://127.0.0.1:9", host="0.0.0.0", allow_remote=True))


def test_the_token_is_not_in_the_config_repr() -> None:
    config = ProxyConfig(upstream="http://127.0.0.1:9", token="s3cret-token")
    assert "s3cret" not in repr(config)


# -- headers and the log ------------------------------------------------------------------


def test_connection_named_headers() -> None:
    assert connection_named(["keep-alive, X-Secret", " close ,,x-other"]) == {
        "keep-alive",
        "x-secret",
        "close",
        "x-other",
    }
    assert connection_named([]) == frozenset()


@given(st.text())
def test_a_logged_path_is_one_printable_line(text: str) -> None:
    out = loggable(text)
    assert out.isascii() and out.isprintable()
    assert out.encode().decode("unicode_escape") == text or not text.isascii()


# -- over HTTP, with raw sockets ----------------------------------------------------------


def raw(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    request = request.replace(b"{authority}", f"127.0.0.1:{port}".encode())
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        out = proxy_attacks._read_all(sock, __import__("time").perf_counter(), 10)
    return proxy_attacks.parse(out)


def refused_counts(proxy: Proxy) -> dict[str, int]:
    return dict(proxy.metrics.refused)


def req(line: str, *headers: str, body: bytes = b"", host: str = "{authority}") -> bytes:
    """A raw request: ``line``, its Host, ``headers``, ``Connection: close``, ``body``."""
    sized = [f"Content-Length: {len(body)}"] if body else []
    lines = [f"{line} HTTP/1.1", f"Host: {host}", *headers, *sized, "Connection: close"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


GEMINI = "POST /v1beta/models/g:generateContent"


@pytest.mark.parametrize(
    ("request_", "status", "reason", "shape"),
    [
        (req("GET http://169.254.169.254/latest/meta-data/"), 400, "target", "openai"),
        (req("CONNECT internal.example:22"), 400, "target", "openai"),
        (req("GET /tenant-a/v1/../../tenant-b/v1/models"), 400, "dot_segment", "openai"),
        (req("GET /v1/..%2fadmin"), 400, "dot_segment", "openai"),
        (req("POST /v1/messages", body=b"{}", host="evil.example"), 421, "host", "anthropic"),
        (req(GEMINI, "Origin: https://evil.example", body=b"{}"), 403, "origin", "gemini"),
        (
            req("POST /v1/chat/completions", "Content-Length: \u00b2").replace(
                b"\xb2", b"\xc2\xb2"
            ),
            400,
            "bad_request",
            None,
        ),
    ],
)
def test_refused_over_http_in_the_provider_shape_counted_and_not_forwarded(
    request_: bytes, status: int, reason: str, shape: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    with proxied() as (served, proxy, fake):
        with caplog.at_level(logging.INFO):
            got, _, body = raw(served.port, request_)
        assert got == status
        assert fake.received == []
        assert refused_counts(proxy) == {reason: 1}
        if shape is not None:
            assert proxy_attacks.shape_of(body) == shape
        metrics = proxy.metrics.render().decode()
        assert f'ctxwin_proxy_refused_total{{reason="{reason}"}} 1' in metrics
    assert "Traceback" not in caplog.text
    lines = [r.getMessage() for r in caplog.records if r.name == "ctxwin.proxy"]
    assert len(lines) == 1 and f"refused:{reason}" in lines[0], lines


def test_the_token_over_http_and_it_is_never_forwarded() -> None:
    token = "tok-3f9a1c"
    with proxied(token=token) as (served, _, fake):
        assert raw(served.port, req("GET /v1/models"))[0] == 401
        assert raw(served.port, req("GET /metrics"))[0] == 401
        assert raw(served.port, req("GET /healthz"))[0] == 200
        assert fake.received == []
        status, _, _ = raw(served.port, req("GET /v1/models", f"X-Ctxwin-Token: {token}"))
        assert status == 200
        assert len(fake.received) == 1
        forwarded = fake.received[0].headers
        assert not any(k.lower() == TOKEN_HEADER or token in v for k, v in forwarded.items())


def test_headers_named_in_connection_are_not_forwarded_either_way() -> None:
    stand_in = proxy_attacks.StandIn()
    try:
        proxy = Proxy(ProxyConfig(upstream=stand_in.url))
        from tests.proxy_support import serve_proxy

        with serve_proxy(proxy) as served:
            status, headers, _ = raw(
                served.port,
                b"GET /v1/models HTTP/1.1\r\nHost: {authority}\r\nConnection: close, X-Hop\r\n"
                b"X-Hop: 1\r\nX-End-To-End: 1\r\n\r\n",
            )
    finally:
        stand_in.close()
    assert status == 200
    head = stand_in.received()[-1].lower()
    assert b"x-end-to-end: 1" in head and b"x-hop" not in head
    assert "x-upstream-kept" in headers and "x-upstream-hop" not in headers


def test_a_gzip_body_whose_encoding_is_named_in_connection_is_still_forwarded() -> None:
    import gzip

    body = gzip.compress(b'{"a": 1}')
    request = (
        b"POST /v1/files HTTP/1.1\r\nHost: {authority}\r\nConnection: close, Content-Encoding\r\n"
        b"Content-Encoding: gzip\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    with proxied() as (served, _, fake):
        status, _, _ = raw(served.port, request)
    assert status == 200
    assert fake.received[-1].body == b'{"a": 1}'
    assert "Content-Encoding" not in fake.received[-1].headers


def test_a_newline_in_the_path_cannot_forge_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    forged = "/v1/models%0Actxwin%20proxy:%20GET%20/forged%20200%0D"
    with proxied() as (served, _, _), caplog.at_level(logging.INFO, logger="ctxwin.proxy"):
        raw(served.port, req(f"GET {forged}"))
        # raw bytes a terminal would act on, if the parser lets them through
        raw(served.port, req("GET /v1/\x1b[2J\x7f\u00e9\\x"))
    lines = [r.getMessage() for r in caplog.records if r.name == "ctxwin.proxy"]
    assert len(lines) == 2
    assert lines[0].startswith(f"GET {forged} ")
    for line in lines:
        assert line.isascii() and line.isprintable(), line
    assert "\\x1b" in lines[1] or "refused:bad_request" in lines[1], lines[1]


def test_the_attack_script_passes() -> None:
    """``make fuzz-proxy``: every attack against the proxy run as a command."""
    results = proxy_attacks.run()
    failed = [(r.name, r.detail) for r in results if not r.ok]
    assert not failed
    assert len(results) > len(proxy_attacks.ATTACKS)


# -- the command --------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1"])
def test_a_remote_host_without_allow_remote_is_a_usage_error(cli: Cli, host: str) -> None:
    result = cli.process("proxy", "--upstream", "http://127.0.0.1:9", "--host", host, env=WIDE)
    assert_one_line_error(result, 2, "--allow-remote")
    assert b"not a loopback address" in result.stderr


@pytest.mark.parametrize(
    ("args", "env", "needle"),
    [
        (["--allow-host", "a b"], {}, "--allow-host"),
        (["--allow-host", "x:99999999"], {}, "--allow-host"),
        (["--token", "two words "], {}, "--token"),
        (["--token", "caf\u00e9"], {}, "--token"),
    ],
)
def test_bad_access_flags_are_usage_errors(
    cli: Cli, args: list[str], env: dict[str, str], needle: str
) -> None:
    result = cli.process("proxy", "--upstream", "http://127.0.0.1:9", *args, env={**WIDE, **env})
    assert_one_line_error(result, 2, needle)


def test_allow_remote_token_and_hosts_reach_the_config(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxwin.proxy import server

    seen: list[ProxyConfig] = []

    def run(config: ProxyConfig, ready: Any = None) -> None:
        seen.append(config)
        if ready is not None:
            ready("http://0.0.0.0:8787")

    monkeypatch.setattr(server, "run", run)
    monkeypatch.setenv("CTXWIN_PROXY_TOKEN", "from-the-env-1234")
    result = cli(
        "proxy",
        "--upstream",
        "http://127.0.0.1:9",
        "--host",
        "0.0.0.0",
        "--allow-remote",
        "--allow-host",
        "proxy.lan",
        "--allow-host",
        "gw.example:443",
    )
    assert result.exit_code == 0, result.stderr
    assert seen[0].allow_remote and seen[0].token == "from-the-env-1234"
    assert seen[0].allow_hosts == ("proxy.lan", "gw.example:443")
    assert "from-the-env" not in result.stderr and "warning" not in result.stderr
    monkeypatch.delenv("CTXWIN_PROXY_TOKEN")
    result = cli("proxy", "--upstream", "http://127.0.0.1:9", "--host", "0.0.0.0", "--allow-remote")
    assert result.exit_code == 0
    assert seen[1].token is None
    assert "warning: no --token" in result.stderr
