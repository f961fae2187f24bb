"""Every wire format is documented: README, --format help, the unknown-shape error."""

from __future__ import annotations

from pathlib import Path

from ctxwin import formats
from tests.formats_support import run

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_every_format_in_readme_and_help() -> None:
    help_text = run("estimate", "--help").stdout
    flat = " ".join(help_text.replace("│", " ").split())
    assert "## Formats" in README and "## Media costs" in README
    for name in formats.names():
        assert f"| `{name}` |" in README
        assert name in flat


def test_forcing_a_format_that_does_not_fit_names_the_field() -> None:
    result = run("estimate", "-", "--format", "gemini", input=b'{"messages": []}')
    assert result.exit_code == 1
    assert "contents" in result.stderr
