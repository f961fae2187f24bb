"""Shared test set-up, and the one command-line fixture for the whole suite.

``cli(*args, input=None)`` runs ctxwin in this process through the Typer app and returns
click's ``Result`` (``exit_code``, ``stdout``, ``stderr``, ``output``).
``cli.process(*args, stdin=None, timeout=60)`` runs ``python -m ctxwin`` in a subprocess —
the console entry point, so estimate and prune take the Typer-free fast path — and returns
the ``CompletedProcess[bytes]``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

# Nothing in the tests reaches the internet: LiteLLM loads its bundled model cost map
# instead of fetching one at import, and the OpenAI Agents SDK exports no traces.
# Set here, before any test module imports them (subprocesses inherit it).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

if TYPE_CHECKING:
    from typer.testing import Result


class Cli:
    """Runs the command line: in-process (call) or as a process (:meth:`process`)."""

    def __call__(self, *args: str, input: bytes | str | None = None) -> Result:
        from typer.testing import CliRunner

        from ctxwin.cli.app import app

        return CliRunner().invoke(app, list(args), input=input)

    def process(
        self, *args: str, stdin: bytes | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "ctxwin", *args],
            input=stdin,
            capture_output=True,
            timeout=timeout,
            check=False,
        )


@pytest.fixture
def cli() -> Cli:
    return Cli()
