"""Every example of every page under docs/integrations/ runs, against the stand-in provider."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.provider_standin import Standin, serve

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs" / "integrations").glob("*.md"))
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def test_every_integration_has_a_page() -> None:
    modules = {p.stem for p in (ROOT / "ctxwin" / "integrations").glob("[!_]*.py")}
    pages = {p.stem for p in PAGES}
    assert modules <= pages


EXAMPLES = [
    (page, k, block)
    for page in PAGES
    for k, block in enumerate(BLOCK.findall(page.read_text("utf-8")) or [""])
]


@pytest.mark.parametrize(
    ("page", "k", "block"), EXAMPLES, ids=[f"{p.stem}#{k}" for p, k, _ in EXAMPLES]
)
def test_the_example_runs(page: Path, k: int, block: str, tmp_path: Path) -> None:
    assert block, f"{page.name} has no python example"
    script = tmp_path / "example.py"
    script.write_text(block, "utf-8")
    # a framework's agent loop ends when the model stops calling tools
    standin = Standin(window=1_000_000, final_after=3)
    with serve(standin) as url:
        env = {
            **os.environ,
            "OPENAI_BASE_URL": f"{url}/v1",
            "OPENAI_API_KEY": "test",
            "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_API_KEY": "test",
            "PYTHONPATH": str(ROOT),
        }
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "step 0: sent" in done.stdout
    assert len(standin.bodies) >= 2 and standin.refused == 0
