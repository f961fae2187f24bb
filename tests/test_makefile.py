"""Each make target installs what it needs and no more (read from ``make -n`` on a fresh venv)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _plan(target: str, venv: Path) -> str:
    """The commands ``make target`` would run where ``venv`` does not exist yet."""
    out = subprocess.run(
        ["make", "-n", "-C", str(ROOT), target, f"VENV={venv}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


def test_demo_installs_the_runtime_only(tmp_path: Path) -> None:
    plan = _plan("demo", tmp_path / "venv")
    assert "pip install --quiet -e ." in plan and "ctxwin estimate" in plan
    assert "--group" not in plan


@pytest.mark.parametrize(
    ("target", "groups"),
    [("test", {"test"}), ("lint", {"test", "lint"}), ("venv", {"test", "lint"})],
)
def test_each_target_adds_its_groups(tmp_path: Path, target: str, groups: set[str]) -> None:
    plan = _plan(target, tmp_path / "venv")
    assert "pip install --quiet -e ." in plan
    installed = {
        line.split("--group ")[1].split()[0] for line in plan.splitlines() if "--group" in line
    }
    assert installed == groups
