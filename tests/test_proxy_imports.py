"""Every proxy module imports on its own in a fresh interpreter; the pure ones without aiohttp."""

from __future__ import annotations

import subprocess
import sys

import pytest

PURE = [
    "ctxwin.proxy",
    "ctxwin.proxy.routes",
    "ctxwin.proxy.fitting",
    "ctxwin.proxy.usage",
    "ctxwin.proxy.metrics",
    "ctxwin.proxy.guard",
]


@pytest.mark.parametrize(
    "module", [*PURE, "ctxwin.proxy.server", "ctxwin.proxy.upstream", "ctxwin.proxy.connections"]
)
def test_imports_alone(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        f"pure = {module in PURE!r}\n"
        "assert not (pure and 'aiohttp' in sys.modules), 'a pure module imported aiohttp'\n"
        "assert 'typer' not in sys.modules and 'rich' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_core_does_not_import_the_proxy() -> None:
    code = (
        "import sys, ctxwin, ctxwin.core, ctxwin.manager; assert 'ctxwin.proxy' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
