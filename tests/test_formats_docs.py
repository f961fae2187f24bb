"""Every wire format is documented: docs/formats.md, --format help, the unknown-shape error."""

from __future__ import annotations

from pathlib import Path

from ctxwin import formats
from tests.conftest import Cli

PAGE = (Path(__file__).resolve().parents[1] / "docs" / "formats.md").read_text(encoding="utf-8")


def test_every_format_in_docs_and_help(cli: Cli) -> None:
    help_text = cli("estimate", "--help").stdout
    flat = " ".join(help_text.replace("│", " ").split())
    assert "## Formats" in PAGE and "## Media costs" in PAGE
    for name in formats.names():
        assert f"| `{name}` |" in PAGE
        assert name in flat


def test_forcing_a_format_that_does_not_fit_names_the_field(cli: Cli) -> None:
    result = cli("estimate", "-", "--format", "gemini", input=b'{"messages": []}')
    assert result.exit_code == 1
    assert "contents" in result.stderr
