"""An optional part of ctxwin imported without its extra's package says what to install."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ctxwin.extras import MissingExtra, install_hint, needs_extra

# (module, the feature its message names, extra in pyproject.toml, a package it needs):
# every module of the proxy names the proxy, whichever of them is imported first
NEEDS = [
    ("ctxwin.integrations.langchain", "ctxwin.integrations.langchain", "langchain", "langchain"),
    ("ctxwin.integrations.langchain", "ctxwin.integrations.langchain", "langchain", "langgraph"),
    ("ctxwin.integrations.litellm", "ctxwin.integrations.litellm", "litellm", "litellm"),
    ("ctxwin.integrations.agents", "ctxwin.integrations.agents", "agents", "agents"),
    (
        "ctxwin.integrations.pydantic_ai",
        "ctxwin.integrations.pydantic_ai",
        "pydantic-ai",
        "pydantic_ai",
    ),
    ("ctxwin.proxy.server", "ctxwin.proxy", "proxy", "aiohttp"),
    ("ctxwin.proxy.connections", "ctxwin.proxy", "proxy", "aiohttp"),
    ("ctxwin.proxy.upstream", "ctxwin.proxy", "proxy", "yarl"),
    # spans; ctxwin.telemetry itself imports it only when a fit may be traced, and traces
    # nothing without it
    ("ctxwin.telemetry.otel", "ctxwin.telemetry.otel", "otel", "opentelemetry"),
]


def _import_without(module: str, hidden: str) -> subprocess.CompletedProcess[str]:
    """Import ``module`` in a fresh interpreter where ``hidden`` cannot be imported."""
    code = (
        "import sys\n"
        f"sys.modules[{hidden!r}] = None\n"
        "try:\n"
        f"    import {module}\n"
        "except ModuleNotFoundError as exc:\n"
        "    print(type(exc).__name__, exc.name, exc, sep='|')\n"
        "else:\n"
        "    print('imported')\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)


@pytest.mark.parametrize(("module", "feature", "extra", "hidden"), NEEDS)
def test_a_missing_package_names_the_extra(
    module: str, feature: str, extra: str, hidden: str
) -> None:
    out = _import_without(module, hidden).stdout.strip()
    kind, name, message = out.split("|", 2)
    assert kind == "MissingExtra" and name.split(".")[0] == hidden
    assert message.startswith(f"{feature} needs the optional extra: ")
    assert f"pip install 'ctxwin[{extra}]'" in message and hidden in message


@pytest.mark.parametrize(("module", "hidden"), [("openai", "openai"), ("anthropic", "anthropic")])
def test_the_sdk_wrappers_import_without_their_sdk(module: str, hidden: str) -> None:
    # wrap() works on the client it is given: the module never imports the SDK itself
    assert _import_without(f"ctxwin.integrations.{module}", hidden).stdout.strip() == "imported"


def test_every_extra_named_exists() -> None:
    import tomllib
    from pathlib import Path

    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    assert {extra for _, _, extra, _ in NEEDS} | {"bpe", "dask"} <= set(extras)


def test_needs_extra_keeps_other_errors_and_the_cause() -> None:
    with pytest.raises(MissingExtra) as caught, needs_extra("a feature", "x"):
        import ctxwin_no_such_module  # type: ignore[import-not-found]  # noqa: F401
    assert isinstance(caught.value, ModuleNotFoundError)
    assert caught.value.name == "ctxwin_no_such_module" and caught.value.extra == "x"
    assert str(caught.value).startswith(f"a feature needs the optional extra: {install_hint('x')}")
    assert isinstance(caught.value.__cause__, ModuleNotFoundError)
    with pytest.raises(ValueError), needs_extra("a feature", "x"):
        raise ValueError("not an import")
