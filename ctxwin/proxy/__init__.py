"""``ctxwin proxy``: context-window management for any agent, through its base URL.

A local HTTP proxy in front of a provider's API. Point an agent's
``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL`` (or Gemini base URL) at it; every
generation request is fitted to the model's window with ctxwin's turn-atomic
pruning before it is forwarded, and responses come back byte for byte.

Needs the optional extra: ``pip install 'ctxwin[proxy]'`` (aiohttp). The pure
parts — routes and error shapes (:mod:`~ctxwin.proxy.routes`), the fitting
decision and calibration memory (:mod:`~ctxwin.proxy.fitting`), usage reading
(:mod:`~ctxwin.proxy.usage`), metrics (:mod:`~ctxwin.proxy.metrics`) and who may
use the proxy (:mod:`~ctxwin.proxy.guard`) — do not import aiohttp;
:mod:`~ctxwin.proxy.server` does.

Library use::

    import asyncio
    from ctxwin.proxy import ProxyConfig, serve

    asyncio.run(serve(ProxyConfig(upstream="https://api.openai.com")))
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxwin.extras import install_hint
from ctxwin.proxy.fitting import Fitted, Fitter, ProxyConfig

if TYPE_CHECKING:
    from ctxwin.proxy.server import Proxy, serve

EXTRA_HINT = install_hint("proxy")
"""How to install what the server needs."""


def __getattr__(name: str) -> Any:
    # The server imports aiohttp: only on first use, so the pure parts work without it.
    if name in ("Proxy", "serve"):
        from ctxwin.proxy import server

        return getattr(server, name)
    raise AttributeError(f"module 'ctxwin.proxy' has no attribute {name!r}")


__all__ = ["EXTRA_HINT", "Fitted", "Fitter", "Proxy", "ProxyConfig", "serve"]
