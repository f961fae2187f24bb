"""The importable core: small public face, no CLI framework, typed."""

from __future__ import annotations

import subprocess
import sys
from importlib import resources

import pytest

import ctxwin
from tests.builders import adr_transcript


def test_core_does_not_import_typer_or_rich() -> None:
    code = (
        "import sys, ctxwin, ctxwin.core, ctxwin.fitting.pruning, ctxwin.formats;"
        "ctxwin.prune(ctxwin.parse(sys.stdin.buffer.read()), context_length=4000);"
        "bad = [m for m in ('typer', 'rich', 'click') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    import orjson

    proc = subprocess.run(
        [sys.executable, "-c", code],
        input=orjson.dumps(adr_transcript()),
        capture_output=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_public_names_exist() -> None:
    for name in ctxwin.__all__:
        assert hasattr(ctxwin, name), name


def test_is_typed() -> None:
    assert resources.files("ctxwin").joinpath("py.typed").is_file()


def test_context_truncated_carries_the_result() -> None:
    with pytest.raises(ctxwin.ContextTruncated) as err:
        ctxwin.prune(adr_transcript(), context_length=1100, estimator=ctxwin.SeedEstimator())
    result = err.value.result
    assert result.overflow_at_floor and result.estimated_tokens_after > result.budget
    assert err.value.exit_code == ctxwin.ExitCode.CONTEXT_TRUNCATED


def test_plan_never_raises_for_overflow() -> None:
    t = ctxwin.load(adr_transcript(), estimator=ctxwin.SeedEstimator())
    p = ctxwin.plan(t, context_length=1100)
    assert p.result.overflow_at_floor
    assert p.output() == [adr_transcript()[i] for i in p.result.keep]


def test_exit_codes_are_the_published_numbers() -> None:
    assert [int(c) for c in ctxwin.ExitCode] == [0, 1, 2, 3, 4]
