"""What the docs tests read: the Markdown pages, their fenced blocks and the real `--help`.

``python -m tests.docs_support`` (``make docs``) rewrites docs/cli.md from the commands'
``--help`` and every figure of README.md and docs/ (:mod:`tests.figures`);
``tests/test_docs.py`` and ``tests/test_figures.py`` fail while a page differs from them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI_PAGE = ROOT / "docs" / "cli.md"
HELP_COLUMNS = "100"

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def pages() -> list[Path]:
    """README.md and every page under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """``(language, body)`` of every fenced code block."""
    return [(m.group(1), m.group(2)) for m in _FENCE.finditer(text)]


def _env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("FORCE_COLOR", "PY_COLORS", "GITHUB_ACTIONS", "TERMINAL_WIDTH")
    }
    env.update(COLUMNS=HELP_COLUMNS, NO_COLOR="1", TERM="dumb", _TYPER_FORCE_DISABLE_TERMINAL="1")
    return env


def run_ctxwin(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m ctxwin ARGS`` in a fresh interpreter, as a plain 100-column pipe."""
    return subprocess.run(
        [sys.executable, "-m", "ctxwin", *args],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=120,
        check=False,
    )


def clean(text: str) -> str:
    """``text`` without colour codes and trailing spaces, ending in one newline."""
    lines = [line.rstrip() for line in _ANSI.sub("", text).splitlines()]
    return "\n".join(lines).strip("\n") + "\n"


@cache
def help_text(*command: str) -> str:
    """The real ``ctxwin COMMAND --help``, without colour or trailing spaces."""
    result = run_ctxwin(*command, "--help")
    if result.returncode != 0:
        raise RuntimeError(f"ctxwin {' '.join(command)} --help exited {result.returncode}")
    return clean(result.stdout)


def commands() -> list[str]:
    """The command names listed by ``ctxwin --help``, in its order."""
    text = help_text()
    box = text[text.index("Commands") :]
    return re.findall(r"^│ ([a-z][a-z-]*)\s", box, re.MULTILINE)


def all_help() -> dict[str, str]:
    """``--help`` of ctxwin and of each command (keyed by the command, "" for ctxwin)."""
    names = ["", *commands()]
    with ThreadPoolExecutor(max_workers=4) as pool:
        texts = list(pool.map(lambda n: help_text(*([n] if n else [])), names))
    return dict(zip(names, texts, strict=True))


def options(text: str) -> set[str]:
    """Every ``--long`` and ``-s`` option a ``--help`` text lists."""
    return set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", text))


def render_cli_page() -> str:
    """docs/cli.md as the current ``--help`` texts make it."""
    parts = [
        "# Command reference",
        "",
        "Back to the [README](../README.md).",
        "",
        "Generated from the commands' `--help` (100 columns) by `make docs`;",
        "`tests/test_docs.py` fails when this page and the real `--help` differ.",
    ]
    for name, text in all_help().items():
        title = f"ctxwin {name}" if name else "ctxwin"
        parts += ["", f"## `{title}`", "", "```text", text.rstrip("\n"), "```"]
    return "\n".join(parts) + "\n"


def main() -> None:
    from fidelity import compare
    from tests import figures

    CLI_PAGE.write_text(render_cli_page(), encoding="utf-8")
    print(f"wrote {CLI_PAGE.relative_to(ROOT)}")
    compare_runs = compare.runs()
    for path, data in compare_runs.items():  # the runs fidelity.compare replays
        (ROOT / path).write_bytes(data)
    for path in figures.write_all():
        print(f"rewrote figures in {path}")
    skipped = [
        g.name
        for g in [*figures.GENERATORS.values(), *figures.FILES.values()]
        if not figures.available(g)
    ]
    if skipped:
        print(f"left as they are (no corpus): {', '.join(skipped)}")


if __name__ == "__main__":
    main()
