"""README.md and docs/*.md say what the code does: links, commands, --help, exit codes, code."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ctxwin import ExitCode
from ctxwin.tokens.base import Kind
from ctxwin.tokens.content import ContentEstimator
from tests.docs_support import (
    CLI_PAGE,
    ROOT,
    all_help,
    commands,
    fenced_blocks,
    help_text,
    options,
    pages,
    render_cli_page,
)

README = ROOT / "README.md"
README_MAX_LINES = 200
SHELL_BLOCKS = ("console", "sh", "shell", "bash")
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _text(page: Path) -> str:
    """The page as it renders: without the marks of its figure regions (their bodies are
    checked by ``tests/test_figures.py``)."""
    return _MARK.sub("", page.read_text(encoding="utf-8"))


_MARK = re.compile(r"<!-- (?:figures:[\w.-]+|/figures) -->")


def _prose(text: str) -> str:
    """``text`` without its fenced blocks (a link or heading in a code block is not one)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#{1,6} (.+)$", _prose(_text(page)), re.MULTILINE)
    return {slug(h) for h in headings}


def test_readme_is_short() -> None:
    lines = _text(README).count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move reference to docs/"


@pytest.mark.parametrize("page", pages(), ids=_page_id)
def test_relative_links_resolve(page: Path) -> None:
    links = _LINK.findall(_prose(_text(page)))
    broken = []
    for link in links:
        if re.match(r"[a-z]+:", link):
            continue  # http:, https:, mailto:
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{link}: no heading with that anchor")
    assert not broken, broken


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {
        (README.parent / link.partition("#")[0]).resolve()
        for link in _LINK.findall(_prose(_text(README)))
    }
    missing = [p.name for p in pages()[1:] if p.resolve() not in linked]
    assert not missing, f"docs pages the README does not link to: {missing}"


def shell_commands(text: str) -> list[list[str]]:
    """The argument lists of every ``ctxwin ...`` call in the shell blocks of ``text``."""
    calls = []
    for lang, body in fenced_blocks(text):
        if lang not in SHELL_BLOCKS:
            continue
        for line in body.replace("\\\n", " ").splitlines():
            line = line.removeprefix("$ ")
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            lexer.commenters = "#"
            tokens = list(lexer)
            for i, token in enumerate(tokens):
                if token != "ctxwin":
                    continue
                args = []
                for arg in tokens[i + 1 :]:
                    if arg and set(arg) <= set("|&;<>()"):
                        break
                    args.append(arg)
                calls.append(args)
    return calls


@pytest.mark.parametrize("page", pages(), ids=_page_id)
def test_shown_commands_and_flags_exist(page: Path) -> None:
    known = commands()
    bad = []
    for args in shell_commands(_text(page)):
        globals_ = options(help_text())
        flags = [a for a in args if a.startswith("-") and a != "-"]
        positional = [a for a in args if not a.startswith("-") or a == "-"]
        command = positional[0] if positional else ""
        if command not in known:
            bad.append(f"ctxwin {' '.join(args)}: no command {command!r}")
            continue
        valid = options(help_text(command)) | globals_
        bad += [
            f"ctxwin {' '.join(args)}: {command} has no option {f.split('=')[0]}"
            for f in flags
            if f.split("=")[0] not in valid
        ]
    assert not bad, bad


def test_the_command_checker_sees_commands_and_bad_flags() -> None:
    shown = "```console\n$ cat a.json | ctxwin prune - - -m gpt-4o > b.json  # note\n```\n"
    assert shell_commands(shown) == [["prune", "-", "-", "-m", "gpt-4o"]]
    assert "-m" in options(help_text("prune"))
    assert "--no-such-flag" not in options(help_text("prune"))
    assert len([c for p in pages() for c in shell_commands(_text(p))]) >= 10


def test_cli_page_is_the_real_help() -> None:
    assert CLI_PAGE.read_text(encoding="utf-8") == render_cli_page(), (
        "docs/cli.md differs from the commands' --help: run `make docs`"
    )


def test_every_command_is_documented() -> None:
    help_pages = all_help()
    assert set(commands()) == set(help_pages) - {""}
    assert {"estimate", "prune", "check", "replay", "calibrate", "lint", "models"} <= set(
        help_pages
    )


def _exit_table(text: str) -> dict[int, str]:
    section = text[text.index("## Exit codes") :]
    section = section[: section.find("\n## ", 1) if "\n## " in section[1:] else None]
    return {int(c): rest for c, rest in re.findall(r"^\| (\d+) \| (.*)$", section, re.MULTILINE)}


def _words(code: ExitCode) -> str:
    return {"OK": "ok"}.get(code.name, code.name.lower().replace("_", " "))


@pytest.mark.parametrize("page", [README, ROOT / "docs" / "robustness.md"], ids=_page_id)
def test_exit_code_table_matches_the_constants(page: Path) -> None:
    table = _exit_table(_text(page))
    assert set(table) == {int(c) for c in ExitCode}
    for code in ExitCode:
        assert table[code].startswith(_words(code)), (code, table[code])


def test_top_level_help_names_every_exit_code() -> None:
    flat = " ".join(help_text().split())
    for code in ExitCode:
        assert f"{int(code)} {_words(code)}" in flat, code


def _examples() -> list[tuple[int, str, str]]:
    table = _exit_table(_text(ROOT / "docs" / "robustness.md"))
    rows = []
    for code, rest in table.items():
        found = re.search(r"`([^`]+)` → `([^`]+)`", rest.replace("\\|", "|"))
        assert found, f"exit {code}: no `command` → `output` example"
        rows.append((code, found.group(1), found.group(2)))
    return rows


@pytest.mark.parametrize(("code", "command", "shown"), _examples())
def test_exit_code_examples_do_what_they_show(
    code: int, command: str, shown: str, tmp_path: Path
) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    result = subprocess.run(
        ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == code, result.stderr
    assert shown in result.stdout + result.stderr


def _table_keys(section: str) -> list[str]:
    keys = []
    for cell in re.findall(r"^\| (`[^|]+`) \|", section, re.MULTILINE):
        keys += re.findall(r"`([a-z_]+)`", cell)
    return keys


def test_json_report_keys_are_documented_in_order() -> None:
    text = _text(ROOT / "docs" / "json-report.md")
    stable, extras = text.split("Extras", 1)
    result = subprocess.run(
        [sys.executable, "-m", "ctxwin", "estimate", "examples/agent-run.json", "--json"],
        cwd=ROOT,
        capture_output=True,
        timeout=60,
        check=True,
    )
    report = json.loads(result.stdout)
    documented = _table_keys(stable) + _table_keys(extras.split("\n## ", 1)[0])
    assert documented == list(report)


def _python_blocks() -> list[tuple[str, str]]:
    return [
        (f"{_page_id(page)}#{i}", body)
        for page in pages()
        for i, (lang, body) in enumerate(fenced_blocks(_text(page)))
        if lang in ("python", "py")
    ]


@pytest.mark.parametrize(("where", "code"), _python_blocks(), ids=[w for w, _ in _python_blocks()])
def test_python_blocks_run(where: str, code: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"{where}:\n{result.stderr}"


def _cost(text: str) -> float:
    estimator = ContentEstimator()
    cost = [0] * estimator.width
    estimator.add_text(cost, text, Kind.PROSE)
    return cost[1] / 10_000


def _figure(text: str, pattern: str) -> float:
    found = re.search(pattern, " ".join(text.split()))
    assert found, pattern
    return float(found.group(1))


def test_content_estimator_figures_are_the_weights() -> None:
    text = _text(ROOT / "docs" / "how-it-works.md")
    byte = _cost("a")
    assert _figure(text, r"costs every UTF-8 byte by its class: (\d\.\d+) token a byte") == (
        pytest.approx(byte, abs=6e-4)
    )
    extras = {
        r"plus (\d\.\d+) for an upper-case letter": _cost("A") - byte,
        r"(\d\.\d+) for a digit": _cost("0") - byte,
        r"(\d\.\d+) for punctuation": _cost("!") - byte,
    }
    for pattern, value in extras.items():
        assert _figure(text, pattern) == pytest.approx(value, abs=6e-4), pattern
    chars = {
        r"2-byte character costs (\d\.\d+) tokens": "é",
        r"a CJK character (\d\.\d+)": "中",
        r"an emoji (\d\.\d+)": "😀",
    }
    for pattern, char in chars.items():
        assert _figure(text, pattern) == pytest.approx(_cost(char), abs=6e-3), pattern
    per = ContentEstimator()
    assert f"{per.per_message} tokens per message, {per.per_tool_call} per tool call" in text


def test_known_gap_figures_are_the_measured_ones() -> None:
    measured = _text(ROOT / "fidelity" / "adversarial.md")
    under = re.search(r"cases under 1\.0: ([\d,]+ of [\d,]+)", measured)
    lowest = re.findall(r"half: (\d\.\d+)", measured.split("\n|", 1)[0])
    assert under and lowest
    for page in (README, ROOT / "docs" / "fidelity.md"):
        flat = " ".join(_text(page).split())
        assert f"{under.group(1)} cases under" in flat, page.name
        assert f"lowest ratio {min(lowest)}" in flat, page.name


def test_the_no_budget_example_does_what_it_shows(tmp_path: Path) -> None:
    """robustness.md quotes the line of `prune -c 1000` on the 56 KB example: exit 3 and no
    OUT (the gate script there would otherwise send the body whole)."""
    text = " ".join(_text(ROOT / "docs" / "robustness.md").split())
    found = re.search(
        r"`(ctxwin prune [^`]+ -c 1000)` exits 3, writes no `fit.json`, "
        r"and prints `([^`]+)`",
        text,
    )
    assert found, "robustness.md: the no-budget example"
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    result = subprocess.run(
        ["bash", "-c", found.group(1)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 3
    assert not (tmp_path / "fit.json").exists() and result.stdout == ""
    assert result.stderr.strip() == found.group(2)


HARNESS_SECTIONS = {
    "results.md": ("Stress classes", "Real transcripts", "Provider-reported prompt tokens"),
    "provider.md": ("The split", "Figures set from provider calls"),
}
"""Sections of docs/fidelity.md that are a harness report's own (fidelity/results.md by
``python -m fidelity.run``, fidelity/provider.md by ``python -m fidelity.provider``;
both written by ``make fidelity``): copied whole, never typed in."""


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n") + 1
    end = text.find("\n## ", start + 1)
    return text[start : end + 1 if end != -1 else len(text)]


def test_the_fidelity_page_shows_the_harness_tables_as_written() -> None:
    root = Path(__file__).resolve().parent.parent
    page = (root / "docs" / "fidelity.md").read_text("utf-8")
    page = re.sub(r"<!-- /?figures(:[\w.-]+)? -->\n", "", page)  # the sections are regions
    for report, headings in HARNESS_SECTIONS.items():
        written = (root / "fidelity" / report).read_text("utf-8")
        for heading in headings:
            assert _section(page, heading) == _section(written, heading), (report, heading)


def _bound_medians(report: str) -> dict[str, str]:
    """Group → the bound's median in a harness report's table (the first figure of the
    ``bound ÷ largest`` column: fidelity/sessions.md, fidelity/scripts.md)."""
    out: dict[str, str] = {}
    for line in report.splitlines():
        cells = [c.strip().strip("*") for c in line.strip("|").split("|")]
        if len(cells) >= 3 and (found := re.match(r"(\d\.\d+) \(", cells[2])):
            out.setdefault(cells[0], found.group(1))
    return out


def test_the_bound_figures_are_the_measured_ones() -> None:
    """The bound's medians ÷ the largest of four that README.md and docs/fidelity.md quote
    are those ``python -m fidelity.sessions`` and ``python -m fidelity.scripts`` wrote (a
    script's figure may follow the one before it: ``Russian 2.35 → 1.68``)."""
    sessions = _bound_medians(_text(ROOT / "fidelity" / "sessions.md"))
    scripts = _bound_medians(_text(ROOT / "fidelity" / "scripts.md"))
    page = " ".join(_text(ROOT / "docs" / "fidelity.md").split())
    readme = " ".join(_text(README).split())
    coding, recorded = sessions["coding-agent sessions"], sessions["recorded transcripts"]
    assert f"**{coding}** on the 19 coding-agent session files" in page
    assert f"**{recorded}** on the 252 recorded transcripts" in page
    tools = {"Claude Code": "claude-code", "Codex": "codex", "Gemini CLI": "gemini-cli"}
    tools |= {"mini-swe-agent": "mini-swe-agent", "OpenHands": "openhands-events"}
    for label, group in tools.items():
        assert f"{label} {sessions[group]}" in page, label
    for label in ("Russian", "Ukrainian", "Bulgarian", "Korean", "Chinese", "Japanese", "Thai"):
        figure = next(v for k, v in scripts.items() if k.startswith(label))
        assert re.search(rf"{label} (\d\.\d+ → )?{re.escape(figure)}\b", page), label
    assert f"{float(recorded):.2f}× the largest of the four counts on recorded" in readme
    assert f"{float(coding):.2f}× on coding-agent sessions" in readme
