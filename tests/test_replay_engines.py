"""``replay`` and ``replay --compare`` on every engine: the same runs, reports, order,
output and exit code from this process, a pool of processes and a real local Dask
cluster (``dask scheduler`` and two ``dask worker`` processes on 127.0.0.1, skipped
without the ``dask`` extra)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxwin.errors import UsageError
from ctxwin.fitting.strategy import DEFAULT_BLOCK
from ctxwin.runs.policies import policies
from ctxwin.runs.replaying import Replayed, replay_files
from ctxwin.settings import Settings
from tests.builders import assistant, system, tool, user
from tests.conftest import Cli
from tests.test_cli_runs import CORPUS, corpus, fitting, needs_pruning, truncating, write

SETTINGS = Settings(context_length=8000, max_tokens=500, estimator="seed")
SMALL = ("--context-length", "8000", "--max-tokens", "500", "--estimator", "seed")
POLICIES = ("just-fit", "block=0.25", "block=0.5")


def has_dask() -> bool:
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


dask = pytest.mark.skipif(not has_dask(), reason="the dask extra (distributed) is absent")


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The address of a local Dask cluster of two one-thread workers."""
    if not has_dask():
        pytest.skip("the dask extra (distributed) is absent")
    from tests.dask_cluster import local_cluster

    with local_cluster(tmp_path_factory.mktemp("dask"), workers=2) as running:
        running.client(workers=2).close()
        yield running.address


def generated(root: Path) -> list[str]:
    """Runs of every kind replay reads, and what it cannot: transcripts that fit, need
    pruning and would be truncated; a JSONL of several; per-call logs in two files (one
    run, joined across the files); a line that is not JSON; a run with no calls."""
    for i in range(7):
        run = (fitting, needs_pruning, truncating)[i % 3]()
        run["messages"] = [*run["messages"], assistant(content="done")]
        write(root / f"d{i % 2}" / f"r{i}.json", run)
    messages = [system(), user("u" * 300)]
    for i in range(3):
        request = {"model": "gpt-4o", "messages": list(messages)}
        pair = {"request": request, "response": {"usage": {"prompt_tokens": 200 * (i + 1)}}}
        write(root / "calls" / f"{i}.json", pair)
        messages += [assistant(f"c{i}"), tool(f"c{i}", "r" * 200)]
    good = orjson.dumps({"messages": [*fitting()["messages"], assistant(content="ok")]})
    (root / "mixed.jsonl").write_bytes(good + b"\n{broken\n" + good + b"\n")
    write(root / "quiet.json", {"messages": [system(), user()]})
    return [str(root)]


def same(a: Replayed, b: Replayed, policies: int = 1) -> None:
    assert [f.path for f in b.files] == [f.path for f in a.files]
    assert b.runs == a.runs  # names, reports and errors, in order
    assert b.label == a.label
    for i in range(policies):
        assert b.reports(i) == a.reports(i) and b.errors(i) == a.errors(i)


def test_generated_runs_are_the_same_on_one_and_two_processes(tmp_path: Path) -> None:
    from ctxwin.runs.checking import find_files

    files = find_files(generated(tmp_path)).files
    one = replay_files(files, SETTINGS, jobs=1)
    two = replay_files(files, SETTINGS, jobs=2)
    same(one, two)
    names = [run.name for run in one.runs]
    # the per-call logs are one run, in the place of the first, named by the folder
    assert names.count(str(tmp_path)) == 1
    files_before = files[: files.index(str(tmp_path / "calls" / "0.json"))]
    at = names.index(str(tmp_path))
    assert {n.split(" ")[0] for n in names[:at]} == set(files_before)
    [joined] = [r for r in one.reports() if r["run"] == str(tmp_path)]
    assert [r["reported_tokens"] for r in joined["rows"]] == [200, 400, 600]
    statuses = {r["first_truncated"] is not None for r in one.reports()}
    assert statuses == {True, False}
    assert one.errors() == [(f"{tmp_path / 'mixed.jsonl'} line 2", one.errors()[0][1])]
    chosen = policies([f"just-fit,block={DEFAULT_BLOCK},block=0.5"])
    compared = replay_files(files, SETTINGS, chosen=chosen, jobs=1)
    same(compared, replay_files(files, SETTINGS, chosen=chosen, jobs=2), policies=3)
    plain = [(r["run"], r["input_cost"], r["first_truncated"]) for r in one.reports()]
    # the default block: the plain replay
    assert [(r["input_cost"], r["first_truncated"]) for r in compared.reports(1)] == [
        (cost, truncated) for _, cost, truncated in plain
    ]
    assert compared.reports(0) != compared.reports(1)


def test_the_command_line_is_the_same_on_one_and_two_processes(tmp_path: Path, cli: Cli) -> None:
    paths = generated(tmp_path)
    for extra in ((), ("--compare", ",".join(POLICIES))):
        one = cli("replay", *paths, *SMALL, "--json", *extra, "-j", "1")
        two = cli("replay", *paths, *SMALL, "--json", *extra, "-j", "2")
        assert one.exit_code == 3, one.output  # a run would be truncated
        assert (two.exit_code, two.stdout, two.stderr) == (one.exit_code, one.stdout, one.stderr)
        assert "skipped" in one.stderr
    # the providers' policies and a recommendation over their grids: the same too
    grid = ("--compare", "as-logged,anthropic-clear,auto-compact", "--recommend")
    one = cli("replay", *paths, *SMALL, "--json", *grid, "-j", "1")
    two = cli("replay", *paths, *SMALL, "--json", *grid, "-j", "2")
    assert one.exit_code in (0, 3), one.output
    assert (two.exit_code, two.stdout) == (one.exit_code, one.stdout)
    assert "recommendation" in orjson.loads(one.stdout)


@dask
def test_generated_runs_are_the_same_on_a_dask_cluster(
    scheduler: str, tmp_path: Path, cli: Cli
) -> None:
    from ctxwin.runs.checking import find_files

    files = find_files(generated(tmp_path)).files
    chosen = policies(["just-fit,block=0.5"])
    local = replay_files(files, SETTINGS, chosen=chosen, jobs=1)
    done: list[int] = []
    remote = replay_files(
        files,
        SETTINGS,
        chosen=chosen,
        engine="dask",
        scheduler=scheduler,
        on_file_done=done.append,
    )
    same(local, remote, policies=2)
    assert remote.engine == "dask" and len(remote.runs) > 8
    assert sum(done) == len(files) and len(done) > 1  # chunk by chunk from the workers
    for extra in ((), ("--compare", ",".join(POLICIES))):
        one = cli("replay", str(tmp_path), *SMALL, "--json", *extra, "-j", "1")
        on_dask = cli(
            "replay", str(tmp_path), *SMALL, "--json", *extra, "--engine", "dask",
            "--scheduler", scheduler,
        )  # fmt: skip
        assert (on_dask.exit_code, on_dask.stdout) == (one.exit_code, one.stdout)
        assert on_dask.stderr == one.stderr


@dask
def test_the_plain_command_line_reaches_the_cluster(scheduler: str, tmp_path: Path) -> None:
    # no Typer: the fast path reads --engine and --scheduler from the same flags table
    paths = generated(tmp_path)
    args = [*paths, *SMALL, "--json", "--compare", "just-fit,block=0.5"]
    local = Cli().process("replay", *args, "-j", "1")
    remote = Cli().process("replay", *args, "--engine", "DASK", "--scheduler", scheduler)
    assert (remote.returncode, remote.stdout) == (local.returncode, local.stdout)
    plain = Cli().process("replay", *paths, *SMALL, "--json", "--engine", "dask",
                          "--scheduler", scheduler)  # fmt: skip
    assert plain.stdout == Cli().process("replay", *paths, *SMALL, "--json").stdout


@corpus
@pytest.mark.corpus
def test_corpus_runs_are_the_same_on_every_local_engine(cli: Cli) -> None:
    from ctxwin.runs.checking import find_files

    files = find_files([str(CORPUS)]).files
    one = replay_files(files, Settings(estimator="seed"), jobs=1)
    two = replay_files(files, Settings(estimator="seed"), jobs=2)
    same(one, two)
    assert len(one.runs) > 20
    for extra in ((), ("--compare", ",".join(POLICIES))):
        a = cli("replay", str(CORPUS), "--json", *extra, "-j", "1")
        b = cli("replay", str(CORPUS), "--json", *extra, "-j", "2")
        assert (b.exit_code, b.stdout, b.stderr) == (a.exit_code, a.stdout, a.stderr)


@corpus
@pytest.mark.corpus
@dask
def test_corpus_runs_are_the_same_on_a_dask_cluster(scheduler: str, cli: Cli) -> None:
    from ctxwin.runs.checking import find_files

    files = find_files([str(CORPUS)]).files
    local = replay_files(files, Settings(estimator="seed"), jobs=1)
    remote = replay_files(files, Settings(estimator="seed"), engine="dask", scheduler=scheduler)
    same(local, remote)
    for extra in ((), ("--compare", ",".join(POLICIES))):
        a = cli("replay", str(CORPUS), "--json", *extra, "-j", "1")
        b = cli("replay", str(CORPUS), "--json", *extra, "--engine", "dask",
                "--scheduler", scheduler)  # fmt: skip
        assert (b.exit_code, b.stdout, b.stderr) == (a.exit_code, a.stdout, a.stderr)
        assert orjson.loads(a.stdout)


def test_fsspec_urls_give_the_runs_of_the_paths(tmp_path: Path) -> None:
    pytest.importorskip("fsspec")
    from ctxwin.runs.checking import find_files

    generated(tmp_path)
    by_path = replay_files(find_files([str(tmp_path)]).files, SETTINGS, jobs=1)
    urls = find_files([f"file://{tmp_path}"]).files
    by_url = replay_files(urls, SETTINGS, jobs=2)  # the worker processes read the URLs
    assert by_url.label == f"file://{tmp_path}" and not any(f.error for f in by_url.files)

    def keyed(replayed: Replayed, prefix: str) -> list[bytes]:
        return sorted(
            orjson.dumps([run.name.removeprefix(prefix), run.results]).replace(prefix.encode(), b"")
            for run in replayed.runs
        )

    assert keyed(by_url, "file://") == keyed(by_path, "")


def test_engine_flags_are_checked_before_any_work(tmp_path: Path, cli: Cli) -> None:
    paths = generated(tmp_path)
    lonely = cli("replay", *paths, "--scheduler", "tcp://127.0.0.1:9")
    assert lonely.exit_code == 2 and "--scheduler needs --engine dask" in lonely.stderr
    other = cli("replay", *paths, "--engine", "spark")
    assert other.exit_code == 2
    assert "--engine: 'spark': choose one of local, dask" in other.stderr
    for result in (lonely, other):
        assert result.stdout == "" and "Traceback" not in result.stderr
    with pytest.raises(UsageError) as usage:
        replay_files(paths, SETTINGS, engine="spark")
    assert usage.value.setting == "engine"


def _without_distributed(*argv: str) -> subprocess.CompletedProcess[str]:
    """``ctxwin ARGV`` in a fresh interpreter where ``distributed`` cannot be imported."""
    code = (
        "import sys\n"
        "sys.modules['distributed'] = None\n"
        f"sys.argv = ['ctxwin', *{list(argv)!r}]\n"
        "from ctxwin.cli.main import run\n"
        "run()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


# the plain command line (no Typer), and one Typer reads (--compare is left to it)
@pytest.mark.parametrize("extra", [(), ("--compare", "just-fit,block=0.5")])
def test_dask_without_the_extra_is_one_line_and_exit_2(tmp_path: Path, extra: Any) -> None:
    paths = generated(tmp_path)
    run = _without_distributed(
        "replay", *paths, *SMALL, *extra, "--engine", "dask", "--scheduler", "tcp://127.0.0.1:9"
    )
    assert run.returncode == 2, run.stderr
    [line] = run.stderr.splitlines()
    assert line.startswith("ctxwin: usage error: --engine: 'dask' needs dask.distributed")
    assert "pip install 'ctxwin[dask]'" in line
    assert run.stdout == ""


def test_docs_describe_replay_on_the_engines(cli: Cli) -> None:
    root = Path(__file__).resolve().parent.parent
    page = (root / "docs" / "cluster.md").read_text("utf-8")
    help_text = cli("replay", "--help", terminal_width=200).stdout
    assert "ctxwin replay" in page and "replay_files" in page
    for flag in ("--engine", "--scheduler", "--jobs"):
        assert flag in help_text
    for flag in ("--engine dask", "--scheduler", "--compare"):
        assert flag in page
