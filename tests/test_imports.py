"""Every module of ctxwin imports on its own, no two modules import each other, and each
layer imports only from the layers below it (docs/how-it-works.md, "Where the code lives").

The first check imports each module in an interpreter where no other ctxwin
module has been imported (a fresh subprocess, all modules in turn); the second
reads every import of every file and looks for a cycle. Imports inside functions
(how the command line stays lean) are edges too: deferring an import hides a cycle
from the interpreter, not from the design. Imports under ``if TYPE_CHECKING:`` are not
edges: they never run.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import ctxwin

PACKAGE = Path(ctxwin.__file__).parent

OPTIONAL = ("ctxwin.integrations", "ctxwin.proxy", "ctxwin.telemetry.otel")
"""Layers that need an optional extra: they import on their own only where it is installed."""


LAYERS = (
    ("ctxwin.errors", "ctxwin.codec", "ctxwin.view", "ctxwin.words", "ctxwin.extras"),
    ("ctxwin.cluster",),  # the Dask engine: generic over its work, needs only the leaves
    ("ctxwin.cost",),
    ("ctxwin.tokens",),
    ("ctxwin.formats",),
    ("ctxwin.fitting",),
    ("ctxwin.telemetry",),  # what a send's fit tells an operator: log records, spans
    ("ctxwin.settings", "ctxwin.core", "ctxwin.breakdown", "ctxwin.manager", "ctxwin.recorded"),
    ("ctxwin.sessions",),  # the session readers: they build ctxwin.recorded's Run
    ("ctxwin.runs",),  # detection (sessions first, then request-body shapes), replay, check
    ("ctxwin.integrations", "ctxwin.proxy"),
    ("ctxwin.cli",),
)
"""ctxwin's layers, lowest first; the package ``ctxwin`` itself (the public names) is above all."""


def module_names() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__main__":
            continue
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def test_there_are_modules_to_check() -> None:
    names = module_names()
    assert "ctxwin.cli.app" in names and "ctxwin.tokens.bound" in names and len(names) > 20


def test_every_module_imports_on_its_own_in_a_fresh_interpreter() -> None:
    script = (
        "import importlib, sys\n"
        "failed = []\n"
        "for name in sys.argv[1:]:\n"
        "    for loaded in [m for m in sys.modules if m == 'ctxwin' or m.startswith('ctxwin.')]:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError as exc:\n"
        f"        if not name.startswith({OPTIONAL!r}) or 'ctxwin' in str(exc):\n"
        "            failed.append(f'{name}: {type(exc).__name__}: {exc}')\n"
        "    except Exception as exc:\n"
        "        failed.append(f'{name}: {type(exc).__name__}: {exc}')\n"
        "print('\\n'.join(failed))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, *module_names()], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(path: Path, name: str) -> set[str]:
    """The ctxwin modules ``path`` imports anywhere (module level or inside a function),
    except under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if _type_checking(node):
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        todo.extend(ast.iter_child_nodes(node))
    return {m for m in found if m == "ctxwin" or m.startswith("ctxwin.")}


def test_imports_inside_functions_are_found() -> None:
    found = _imports(PACKAGE / "__init__.py", "ctxwin")
    assert "ctxwin.manager" in found  # imported inside __getattr__ only


def test_no_import_cycle() -> None:
    names = set(module_names())
    graph: dict[str, set[str]] = {}
    for name in names:
        rel = Path(*name.split("."))
        path = PACKAGE.parent / rel / "__init__.py"
        if not path.exists():
            path = PACKAGE.parent / rel.with_suffix(".py")
        graph[name] = {m for m in _imports(path, name) if m in names and m != name}
    # Importing ctxwin.a.b first imports the package ctxwin.a: that edge is implied, not a cycle.
    for name, deps in graph.items():
        graph[name] = {d for d in deps if not name.startswith(d + ".")}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append([*stack[stack.index(dep) :], dep])
            elif dep not in state:
                visit(dep, [*stack, dep])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []


def _layer(name: str) -> int:
    for rank, layer in enumerate(LAYERS):
        if any(name == top or name.startswith(top + ".") for top in layer):
            return rank
    return len(LAYERS)  # the package ctxwin, and ctxwin.__main__


def test_every_module_is_in_a_layer() -> None:
    assert [n for n in module_names() if n != "ctxwin" and _layer(n) == len(LAYERS)] == []


def test_no_layer_imports_from_a_layer_above_it() -> None:
    names = set(module_names())
    upward = []
    for name in sorted(names):
        rel = Path(*name.split("."))
        path = PACKAGE.parent / rel / "__init__.py"
        if not path.exists():
            path = PACKAGE.parent / rel.with_suffix(".py")
        for dep in _imports(path, name):
            if dep in names and dep != "ctxwin" and _layer(dep) > _layer(name):
                upward.append(f"{name} -> {dep}")
    assert upward == []


def _package_imports(package: str) -> dict[str, set[str]]:
    """Each module of ``package`` (``ctxwin.sessions``) and the ctxwin modules it imports,
    inside functions included."""
    out = {}
    for name in module_names():
        if name == package or name.startswith(package + "."):
            rel = Path(*name.split("."))
            path = PACKAGE.parent / rel / "__init__.py"
            if not path.exists():
                path = PACKAGE.parent / rel.with_suffix(".py")
            out[name] = _imports(path, name)
    return out


def _into(found: set[str], package: str) -> set[str]:
    return {m for m in found if m == package or m.startswith(package + ".")}


def test_sessions_never_import_runs() -> None:
    """One direction between the two packages: ``ctxwin.runs`` (detection, replay, check)
    imports the session readers; no module of ``ctxwin.sessions`` imports ``ctxwin.runs``
    or one of its modules, at module level or inside a function. Both build the one run
    record, ``ctxwin.recorded``, which imports neither."""
    sessions = _package_imports("ctxwin.sessions")
    assert "ctxwin.sessions.claude_code" in sessions and len(sessions) >= 7
    assert {name: _into(deps, "ctxwin.runs") for name, deps in sessions.items()} == {
        name: set() for name in sessions
    }
    runs = _package_imports("ctxwin.runs")
    assert any(_into(deps, "ctxwin.sessions") for deps in runs.values())  # the one direction
    recorded = _imports(PACKAGE / "recorded.py", "ctxwin.recorded")
    assert _into(recorded, "ctxwin.runs") | _into(recorded, "ctxwin.sessions") == set()


def test_a_function_level_import_of_runs_would_be_found(tmp_path: Path) -> None:
    source = tmp_path / "reader.py"
    source.write_text(
        "def read():\n    from ctxwin.runs.simulate import replay_run\n    return replay_run\n",
        encoding="utf-8",
    )
    found = _imports(source, "ctxwin.sessions.reader")
    assert _into(found, "ctxwin.runs") == {
        "ctxwin.runs.simulate",
        "ctxwin.runs.simulate.replay_run",
    }
