"""Shared test set-up, and the one command-line fixture for the whole suite.

``cli(*args, input=None, terminal_width=None)`` runs ctxwin in this process through the
Typer app and returns click's ``Result`` (``exit_code``, ``stdout``, ``stdout_bytes``,
``stderr``, ``output``); an exception ctxwin does not turn into an exit code propagates
to the test.
``cli.process(*args, stdin=None, timeout=60, cwd=None, env=None)`` runs ``python -m ctxwin``
in a subprocess — the console entry point, so estimate and prune take the Typer-free fast
path — and returns the ``CompletedProcess[bytes]``; ``stdin`` is bytes or a file
descriptor, ``env`` adds to the environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

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

    def __call__(
        self, *args: str, input: bytes | str | None = None, terminal_width: int | None = None
    ) -> Result:
        from typer.testing import CliRunner

        from ctxwin.cli.app import app

        return CliRunner().invoke(
            app, list(args), input=input, catch_exceptions=False, terminal_width=terminal_width
        )

    def process(
        self,
        *args: str,
        stdin: bytes | int | None = None,
        timeout: float = 60,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        feed: dict[str, Any] = {"stdin": stdin} if isinstance(stdin, int) else {"input": stdin}
        return subprocess.run(
            [sys.executable, "-m", "ctxwin", *args],
            capture_output=True,
            timeout=timeout,
            cwd=cwd,
            env=None if env is None else {**os.environ, **env},
            check=False,
            **feed,
        )


@pytest.fixture(scope="session")
def cli() -> Cli:
    """The command line (stateless, so one for the session: Hypothesis tests can use it)."""
    return Cli()
