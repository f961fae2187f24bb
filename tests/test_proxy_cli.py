"""``ctxwin proxy`` as a command: serves until Ctrl-C, refuses bad flags, needs its extra."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx2 as httpx
import orjson

from tests.conftest import Cli
from tests.proxy_support import FakeUpstream, serve_fake
from tests.test_proxy_fitting import agent_body

CTXWIN = [sys.executable, "-m", "ctxwin"]
SECRET = "sk-cli-secret"


def test_serves_fits_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    fake = FakeUpstream()
    with serve_fake(fake) as upstream:
        proc = subprocess.Popen(
            [*CTXWIN, "proxy", "--upstream", upstream.url, "--port", "0", "-c", "8000"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stderr is not None
            line = proc.stderr.readline()
            assert "listening on http://127.0.0.1:" in line, line
            url = line.split("listening on ", 1)[1].split(",", 1)[0]
            assert httpx.get(url + "/healthz").json() == {"status": "ok"}
            r = httpx.post(
                url + "/v1/chat/completions",
                content=orjson.dumps(agent_body(30, max_tokens=500)),
                headers={"Authorization": f"Bearer {SECRET}"},
            )
            assert r.status_code == 200
            assert r.headers["x-ctxwin-action"] == "pruned"
            assert fake.received[-1].headers["Authorization"] == f"Bearer {SECRET}"
        finally:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert out == ""
    assert "POST /v1/chat/completions 200 pruned" in err
    assert SECRET not in err
    assert "Traceback" not in err


def test_without_the_extra_one_line_and_exit_1(tmp_path: Path, cli: Cli) -> None:
    # aiohttp made unimportable, as in an install without ctxwin[proxy]
    (tmp_path / "aiohttp").mkdir()
    (tmp_path / "aiohttp" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'aiohttp'\", name='aiohttp')\n"
    )
    result = cli.process(
        "proxy", "--upstream", "http://127.0.0.1:9", env={"PYTHONPATH": str(tmp_path)}
    )
    assert result.returncode == 1
    assert result.stdout == b""
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1
    assert "pip install 'ctxwin[proxy]'" in lines[0]


def test_bad_flags_are_usage_errors(cli: Cli) -> None:
    for args in (
        ["--upstream", "ftp://example"],
        ["--upstream", "http://127.0.0.1:9", "--strategy", "drop-everything"],
        ["--upstream", "http://127.0.0.1:9", "--calibration", "nan"],
        ["--upstream", "http://127.0.0.1:9", "--block", "1.5"],
    ):
        result = cli.process("proxy", *args)
        assert result.returncode == 2, (args, result.stderr)
        assert len(result.stderr.splitlines()) == 1
    missing = cli.process("proxy")
    assert missing.returncode == 2
    assert b"--upstream" in missing.stderr


def test_the_proxy_takes_block(cli: Cli) -> None:
    """``--block SHARE`` sets the proxy's cut as it does prune's (0: just fit)."""
    help_text = cli.process("proxy", "--help").stdout.decode()
    assert "--block" in help_text
    from ctxwin.cli.commands import build_settings

    assert build_settings(block=0.0).strategy.block == 0.0


def test_a_port_in_use_is_one_line_and_exit_1(cli: Cli) -> None:
    with serve_fake(FakeUpstream()) as taken:
        result = cli.process("proxy", "--upstream", taken.url, "--port", str(taken.port))
    assert result.returncode == 1
    assert result.stderr.count(b"\n") == 1
    assert b"cannot listen on 127.0.0.1" in result.stderr


def test_quiet_logs_nothing_per_request() -> None:
    with serve_fake(FakeUpstream()) as upstream:
        env = {**os.environ}
        proc = subprocess.Popen(
            [*CTXWIN, "proxy", "--upstream", upstream.url, "--port", "0", "-q"],
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            assert proc.stderr is not None
            url = proc.stderr.readline().split("listening on ", 1)[1].split(",", 1)[0]
            httpx.get(url + "/v1/models")
            time.sleep(0.1)
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=20)
    assert "GET /v1/models" not in err
