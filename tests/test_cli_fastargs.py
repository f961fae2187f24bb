"""The Typer-free reading of plain command lines agrees with the Typer app."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer.main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxwin.cli import commands, options
from ctxwin.cli import fastargs as _fastargs
from ctxwin.cli import replay as replay_module
from ctxwin.cli.app import app
from ctxwin.cli.flags import LEFT_TO_TYPER
from tests.conftest import Cli

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "agent-run.json"


def click_command(name: str) -> Any:
    """The Click command Typer builds (Typer bundles its own Click: duck-typed here)."""
    return typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]


def kind_of(param: Any) -> tuple[str, float | None]:
    t = param.type
    names = {cls.__name__ for cls in type(t).__mro__}
    if param.is_flag:
        return "flag", None
    if "IntRange" in names:
        assert not t.clamp and t.max is None and not t.min_open
        return "int", t.min
    if "FloatRange" in names:
        assert not t.clamp and t.max is None and not t.min_open
        return "float", t.min
    if "Path" in names or "TyperPath" in names:
        assert t.file_okay and not t.dir_okay and not t.exists and t.readable
        assert not (t.writable or t.resolve_path or t.allow_dash)
        return "path", None
    assert "StringParamType" in names, names
    return "str", None


@pytest.mark.parametrize("command", sorted(_fastargs.OPTIONS))
def test_tables_mirror_the_typer_declarations(command: str) -> None:
    left = LEFT_TO_TYPER.get(command, ())
    params = [p for p in click_command(command).params if p.name not in left]
    arguments = tuple(p.name for p in params if p.param_type_name == "argument")
    assert arguments == _fastargs.ARGUMENTS[command]
    options: dict[str, _fastargs.Spec] = {}
    for p in params:
        if p.param_type_name == "option":
            assert not p.secondary_opts and not p.multiple and p.envvar is None
            assert p.name is not None
            kind, minimum = kind_of(p)
            for opt in p.opts:
                options[opt] = (p.name, kind, minimum)
    assert options == _fastargs.OPTIONS[command]
    assert {p.name: p.default for p in params} == _fastargs.DEFAULTS[command]


def test_root_options_other_than_debug_are_left_to_typer() -> None:
    group = typer.main.get_command(app)
    names = {opt for p in group.params for opt in p.opts}
    assert names == {"--debug", "--version"}
    assert _fastargs.parse(["--version"]) is None


@pytest.mark.parametrize(
    "argv",
    [
        ["prune", "in.json", "out.json", "-c", "4000", "--max-tokens", "0"],
        ["estimate", "-", "--json", "-m", "gpt-4o"],
        ["--debug", "prune", "--context-length=128000", "in.json", "-q"],
        ["estimate"],
        ["replay", "run.jsonl", "--json", "-c", "32000"],
        ["replay", "a.json", "b.json", "folder", "--run", "abc", "-q"],
        ["--debug", "replay", "-", "--strategy=clear-results"],
    ],
)
def test_plain_command_lines_are_read(argv: list[str]) -> None:
    assert _fastargs.parse(argv) is not None


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--help"],
        ["prune", "--help"],
        ["estimate", "-h"],
        ["models"],
        ["check", "runs/"],
        ["prune", "a", "b", "c"],
        ["prune", "-c", "4000", "-c", "5000"],
        ["prune", "-c", "0"],
        ["prune", "-c", "many"],
        ["prune", "--calibration", "nan"],
        ["prune", "--model", "-x"],
        ["prune", "-c"],
        ["prune", "--quiet=yes"],
        ["prune", "-c4000"],
        ["prune", "--", "in.json"],
        ["estimate", "--report", "r.json"],
        ["prune", "--model-spec", "."],
        ["replay"],
        ["replay", "--json"],
        ["replay", "run.json", "--report", "r.json"],
        ["replay", "run.json", "--run"],
        ["check", "run.json"],
    ],
)
def test_anything_else_is_left_to_typer(argv: list[str]) -> None:
    assert _fastargs.parse(argv) is None


_VALUES = st.sampled_from(
    ["4000", "0", "1", "-1", "+7", " 12 ", "1_000", "0x10", "2.5", "1e3", "inf", "nan", "",
     "gpt-4o", "auto", "-", "--json", "x=y", "seed", "in.json", "."]
)  # fmt: skip
_OPTION_NAMES = sorted({name for spec in _fastargs.OPTIONS.values() for name in spec})


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    argv = ["--debug"] * draw(st.integers(0, 2))
    argv.append(draw(st.sampled_from(["estimate", "prune", "replay"])))
    for _ in range(draw(st.integers(0, 6))):
        shape = draw(st.integers(0, 4))
        if shape == 0:
            argv.append(draw(st.sampled_from(["in.json", "out.json", "-", "", "a b"])))
        elif shape == 1:
            argv.append(draw(st.sampled_from([*_OPTION_NAMES, "--help", "--nope", "-z"])))
        elif shape == 2:
            argv += [draw(st.sampled_from(_OPTION_NAMES)), draw(_VALUES)]
        elif shape == 3:
            argv.append(f"{draw(st.sampled_from(_OPTION_NAMES))}={draw(_VALUES)}")
        else:
            argv.append(draw(_VALUES))
    return argv


_GOOD = {
    "int": ["1", "4000", "+7", " 12 ", "1_000", "0"],
    "float": ["0", "1.5", "1e3", " 2 "],
    "str": ["gpt-4o", "auto", "x=y", "", "a b", "openai-chat"],
    "path": ["spec.json", "missing/dir/r.json"],
}


@st.composite
def plain_command_lines(draw: st.DrawFn) -> list[str]:
    """Mostly well-formed lines, so that many are read by the plain path."""
    command = draw(st.sampled_from(["estimate", "prune", "replay"]))
    argv = ["--debug"] * draw(st.integers(0, 1)) + [command]
    options = _fastargs.OPTIONS[command]
    for name in draw(st.lists(st.sampled_from(sorted(options)), max_size=6, unique=True)):
        kind = options[name][1]
        if kind == "flag":
            argv.append(name)
            continue
        value = draw(st.sampled_from(_GOOD[kind]))
        if name.startswith("--") and draw(st.booleans()):
            argv.append(f"{name}={value}")
        else:
            argv += [name, value]
    after_command = argv.index(command) + 1
    for arg in draw(st.lists(st.sampled_from(["in.json", "-", "out.json"]), max_size=2)):
        argv.insert(draw(st.sampled_from([after_command, len(argv)])), arg)
    return argv


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(argv=st.one_of(command_lines(), plain_command_lines()))
def test_every_accepted_command_line_means_what_typer_reads(argv: list[str], cli: Cli) -> None:
    plain = _fastargs.parse(argv)
    if plain is None:
        return
    command, debug, kwargs = plain
    seen: dict[str, Any] = {}

    def capture(**given: Any) -> int:
        seen.update(given)
        seen["debug"] = options.state["debug"]
        return 0

    module, name = (
        (replay_module, "replay") if command == "replay" else (commands, f"{command}_command")
    )
    original = getattr(module, name)
    setattr(module, name, capture)
    try:
        options.state["debug"] = False
        result = cli(*argv)
    finally:
        setattr(module, name, original)
        options.state["debug"] = False
    assert result.exit_code == 0, (argv, result.output)
    assert seen == {**kwargs, "debug": debug}


IMPORTTIME = {"PYTHONPROFILEIMPORTTIME": "1"}
"""``cli.process`` environment: the interpreter lists every import on stderr (-X importtime)."""


def imported(proc: subprocess.CompletedProcess[bytes]) -> set[str]:
    return {
        line.rsplit("|", 1)[1].strip()
        for line in proc.stderr.decode().splitlines()
        if line.startswith("import time:") and "|" in line
    }


def test_a_plain_call_never_imports_the_framework(tmp_path: Path, cli: Cli) -> None:
    out = tmp_path / "out.json"
    proc = cli.process(
        "prune", str(EXAMPLE), str(out), "-c", "12000", "--max-tokens", "0", env=IMPORTTIME
    )
    assert proc.returncode == 0
    assert out.exists()
    modules = imported(proc)
    assert "ctxwin.cli.commands" in modules
    assert not {"typer", "click", "rich"} & {m.split(".")[0] for m in modules}
    proc = cli.process("estimate", str(EXAMPLE), "--json", env=IMPORTTIME)
    assert proc.returncode == 0 and proc.stdout.startswith(b"{")
    assert "typer" not in {m.split(".")[0] for m in imported(proc)}
    proc = cli.process("replay", str(EXAMPLE), "--json", "-c", "12000", env=IMPORTTIME)
    assert proc.returncode == 0 and proc.stdout.startswith(b"{")
    assert "ctxwin.runs.simulate" in imported(proc)
    assert not {"typer", "click", "rich"} & {m.split(".")[0] for m in imported(proc)}


def test_errors_on_the_plain_path_match_the_typer_path(tmp_path: Path, cli: Cli) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"messages": [')
    plain = cli.process("estimate", str(bad))
    typer_run = cli("estimate", str(bad))
    assert plain.returncode == typer_run.exit_code == 1
    assert plain.stderr.decode() == typer_run.stderr
    assert len(plain.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["-c", "3000"], 3),  # truncated: exit 3, and its line on stderr
        (["-c", "200000"], 0),
        (["-c", "200000", "--run", "no-such-run"], 1),
        (["-c", "3000", "--strategy", "nope"], 2),
    ],
)
def test_replay_on_the_plain_path_matches_the_typer_path(
    args: list[str], code: int, cli: Cli
) -> None:
    argv = ["replay", str(EXAMPLE), "--json", *args]
    assert _fastargs.parse(argv) is not None
    plain = cli.process(*argv)
    typer_run = cli(*argv)
    assert plain.returncode == typer_run.exit_code == code
    assert plain.stdout.decode() == typer_run.stdout
    assert plain.stderr.decode() == typer_run.stderr


def test_an_option_left_to_typer_is_read_by_typer() -> None:
    """``replay --compare`` may be repeated: the fast path leaves the command line to Typer."""
    assert _fastargs.parse(["replay", "run.jsonl", "--compare", "just-fit"]) is None
