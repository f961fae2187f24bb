"""``ctxwin proxy``: serve the fitting proxy (:mod:`ctxwin.proxy`) until interrupted.

The server needs the optional extra ``ctxwin[proxy]`` (aiohttp); it is imported
only when the command runs, and when it is missing the command says how to
install it in one line and exits 1.
"""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer

from ctxwin.cli.flags import CACHING, ESTIMATION
from ctxwin.cli.funnel import say
from ctxwin.cli.options import QuietOpt, with_settings
from ctxwin.errors import ExitCode, UsageError
from ctxwin.settings import DEFAULT, Settings

SERVER_PANEL = "Server"
ACCESS_PANEL = "Access"
TOKEN_ENV = "CTXWIN_PROXY_TOKEN"
DEFAULT_PORT = 8787
MISSING_EXTRA = "error: `ctxwin proxy` needs the optional extra: {hint} ({missing})"


def check_upstream(url: str) -> str:
    """The upstream base URL, checked: ``http(s)://host[:port][/path]``."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--upstream: expected an http:// or https:// URL, got {url!r}")
    if parts.query or parts.fragment:
        raise UsageError(f"--upstream: a base URL has no query or fragment, got {url!r}")
    return url


_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
}


def parse_size(flag: str, text: str) -> int:
    """A size in bytes: a number and an optional unit (B, kB, MB, GB, KiB, MiB, GiB)."""
    number = text.strip().rstrip("bBiIkKmMgG ")
    unit = text.strip()[len(number) :].strip().lower()
    try:
        value = float(number) * _UNITS[unit]
    except (ValueError, KeyError):
        raise UsageError(
            f"{flag}: expected a size such as 512MiB, 2GiB or 300MB, got {text!r}"
        ) from None
    if not 1 <= value < 1 << 62:
        raise UsageError(f"{flag}: expected a size of at least 1 byte, got {text!r}")
    return int(value)


def check_access(host: str, allow_remote: bool, allow_hosts: list[str], token: str | None) -> None:
    """Refuse a non-loopback --host without --allow-remote, a malformed --allow-host, a
    token that cannot travel in a header."""
    from ctxwin.proxy.guard import is_loopback, parse_allowed_host

    if not allow_remote and not is_loopback(host):
        raise UsageError(
            f"--host {host!r}: not a loopback address, so anyone who can reach it could use the "
            "proxy; pass --allow-remote to listen there (and set --token)"
        )
    for entry in allow_hosts:
        try:
            parse_allowed_host(entry)
        except ValueError as exc:
            raise UsageError(f"--allow-host: {exc}") from None
    if token is not None and not (token and token.isascii() and token.isprintable()):
        raise UsageError(f"--token ({TOKEN_ENV}): expected printable ASCII, not empty")
    if token is not None and token != token.strip():
        raise UsageError(f"--token ({TOKEN_ENV}): has leading or trailing spaces")


# The proxy reads the wire format from the route, so it takes no --format; of the
# strategy flags, --strategy and --block; and --cache-mark.
@with_settings(*(key for key in ESTIMATION if key != "fmt"), "strategy", "block", *CACHING)
def proxy(
    upstream: Annotated[
        str,
        typer.Option(
            "--upstream",
            help="Provider base URL requests are forwarded to, e.g. https://api.openai.com "
            "(the request path is appended to it).",
            rich_help_panel=SERVER_PANEL,
        ),
    ],
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Address to listen on (127.0.0.1: this machine only; any address that is "
            "not loopback needs --allow-remote).",
            rich_help_panel=SERVER_PANEL,
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option(
            "--port", min=0, max=65535, help="Port to listen on.", rich_help_panel=SERVER_PANEL
        ),
    ] = DEFAULT_PORT,
    settings: Settings = DEFAULT,
    max_body_bytes: Annotated[
        int,
        typer.Option(
            "--max-body-bytes",
            min=1,
            help="Refuse request bodies larger than this (HTTP 413).",
            rich_help_panel=SERVER_PANEL,
        ),
    ] = 32 << 20,
    conversations: Annotated[
        int,
        typer.Option(
            "--conversations",
            min=1,
            help="Conversations whose learned calibration is remembered (least recent go).",
            rich_help_panel=SERVER_PANEL,
        ),
    ] = 10_000,
    max_memory: Annotated[
        str,
        typer.Option(
            "--max-memory",
            help="Memory the remembered conversations may hold, e.g. 512MiB, 2GiB "
            "(least recent go; a request that alone would hold more is fitted, not remembered).",
            rich_help_panel=SERVER_PANEL,
        ),
    ] = "512MiB",
    connect_timeout: Annotated[
        float,
        typer.Option(
            "--connect-timeout",
            min=0.001,
            help="Seconds to connect to the upstream (then HTTP 502).",
            rich_help_panel=SERVER_PANEL,
        ),
    ] = 10.0,
    read_timeout: Annotated[
        float,
        typer.Option(
            "--read-timeout",
            min=0.001,
            help="Seconds the upstream may stay silent (then HTTP 504, or the stream ends).",
            rich_help_panel=SERVER_PANEL,
        ),
    ] = 600.0,
    head_timeout: Annotated[
        float,
        typer.Option(
            "--head-timeout",
            min=0.001,
            help="Seconds a client has to send a request's head, from its connection's "
            "opening or the request's first byte (then HTTP 408 and the connection closes).",
            rich_help_panel=SERVER_PANEL,
        ),
    ] = 10.0,
    body_timeout: Annotated[
        float,
        typer.Option(
            "--body-timeout",
            min=0.001,
            help="Seconds a client has to send a request's body once its head is in "
            "(then HTTP 408).",
            rich_help_panel=SERVER_PANEL,
        ),
    ] = 60.0,
    idle_timeout: Annotated[
        float,
        typer.Option(
            "--idle-timeout",
            min=0.001,
            help="Seconds a kept-alive client connection may wait for its next request.",
            rich_help_panel=SERVER_PANEL,
        ),
    ] = 60.0,
    max_connections: Annotated[
        int,
        typer.Option(
            "--max-connections",
            min=1,
            help="Client connections open at once; one more is answered HTTP 503 and closed.",
            rich_help_panel=SERVER_PANEL,
        ),
    ] = 512,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help="Listen on a --host that is not loopback (refused otherwise). "
            "Set --token too: without it, anyone who can reach the port can use the proxy.",
            rich_help_panel=ACCESS_PANEL,
        ),
    ] = False,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar=TOKEN_ENV,
            show_envvar=True,
            help="Require this token in every request's x-ctxwin-token header (401 "
            "otherwise; GET /healthz excepted). Prefer the environment variable: a "
            "command line is visible to other users in ps.",
            rich_help_panel=ACCESS_PANEL,
        ),
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            metavar="NAME[:PORT]",
            help="Also accept requests whose Host (or browser Origin) is NAME (any port) or "
            "NAME:PORT; the proxy's own address is always accepted, other Hosts get 421. "
            "Repeatable.",
            rich_help_panel=ACCESS_PANEL,
        ),
    ] = None,
    quiet: QuietOpt = False,
) -> None:
    """Serve an HTTP proxy that fits every request to the model's window, then forwards it.

    Point an agent's base URL at it (OPENAI_BASE_URL=http://127.0.0.1:8787/v1,
    ANTHROPIC_BASE_URL=http://127.0.0.1:8787). POST /v1/chat/completions,
    /v1/responses, /v1/messages and Gemini :generateContent/:streamGenerateContent
    are fitted; everything else passes through. Responses come back byte for byte
    with x-ctxwin-* headers; GET /healthz and /metrics (Prometheus). Needs:
    pip install 'ctxwin\\[proxy]'. Runs until Ctrl-C (exit 0). Listens on loopback
    unless --allow-remote; see docs/proxy.md, "Running it safely".
    """
    allow_hosts = allow_host or []
    check_access(host, allow_remote, allow_hosts, token)
    try:
        from ctxwin.proxy import server
    except ImportError as exc:
        from ctxwin.proxy import EXTRA_HINT

        missing = f"no module {exc.name!r}" if exc.name else exc
        say(MISSING_EXTRA.format(hint=EXTRA_HINT, missing=missing))
        raise typer.Exit(int(ExitCode.BAD_INPUT)) from None
    from ctxwin.proxy import ProxyConfig

    config = ProxyConfig(
        upstream=check_upstream(upstream),
        host=host,
        port=port,
        settings=settings,
        max_body_bytes=max_body_bytes,
        conversations=conversations,
        max_memory=parse_size("--max-memory", max_memory),
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        head_timeout=head_timeout,
        body_timeout=body_timeout,
        idle_timeout=idle_timeout,
        max_connections=max_connections,
        allow_remote=allow_remote,
        allow_hosts=tuple(allow_hosts),
        token=token,
    )
    log = logging.getLogger("ctxwin.proxy")
    # the access lines and the fits' records (ctxwin.telemetry) on stderr; --quiet: none,
    # not even the warnings Python's last-resort handler would print
    handler: logging.Handler = logging.NullHandler()
    if not quiet:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("ctxwin proxy: %(message)s"))
        log.setLevel(logging.INFO)
    log.addHandler(handler)

    def ready(url: str) -> None:
        say(f"proxy listening on {url}, forwarding to {config.upstream} (Ctrl-C stops it)")
        if allow_remote and token is None:
            say(f"warning: no --token ({TOKEN_ENV}): anyone who can reach {url} can use it")

    try:
        server.run(config, ready)
    except OSError as exc:
        say(f"error: cannot listen on {host}:{port}: {exc.strerror or exc}")
        raise typer.Exit(int(ExitCode.BAD_INPUT)) from None
    except KeyboardInterrupt:
        say("proxy stopped")
