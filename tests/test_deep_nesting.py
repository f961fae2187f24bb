"""Bodies nested as deep as JSON allows (1024 levels, orjson's limit when reading) are
read, fitted and written; deeper ones are bad input. Never a traceback, never an
internal error, never a crash: the CLI exits 0 or 1 with one line, the proxy's
fitting forwards the body (fitted or unread) or raises ``InputError``, which the
server answers with a 400.

orjson writes at most 254 levels, and orjson 3.13 corrupts its heap writing arrays
nested 243 to 253 deep: ``codec.dumps`` hands it nothing deeper than
``codec.ORJSON_DEPTH``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import orjson
import pytest

from ctxwin import codec
from ctxwin.errors import InputError
from ctxwin.proxy import routes
from ctxwin.proxy.fitting import ACTIONS, PRUNED, Fitter, ProxyConfig
from ctxwin.settings import Settings
from tests.conftest import Cli
from tests.hostile_util import WIDE, assert_one_line_error


def arrays(depth: int) -> str:
    """``depth`` arrays, one in another, around a ``0``."""
    return "[" * depth + "0" + "]" * depth


def objects(depth: int) -> str:
    return '{"a":' * depth + "0" + "}" * depth


# (name, route, body text with {v} where a deep value goes, levels above {v})
PLACES: list[tuple[str, routes.Route, str, int]] = [
    (
        "chat: system content part",
        routes.CHAT,
        '{"model":"gpt-4o","messages":[{"role":"system","content":[{"type":"text","text":"s",'
        '"x":{v}}]},{"role":"user","content":"hi"}]}',
        5,
    ),
    (
        "chat: system message field",
        routes.CHAT,
        '{"model":"gpt-4o","messages":[{"role":"system","content":"s","x":{v}},'
        '{"role":"user","content":"hi"}]}',
        3,
    ),
    (
        "chat: tool parameters",
        routes.CHAT,
        '{"model":"gpt-4o","tools":[{"type":"function","function":{"name":"f",'
        '"parameters":{v}}}],"messages":[{"role":"user","content":"hi"}]}',
        4,
    ),
    (
        "chat: top-level field",
        routes.CHAT,
        '{"model":"gpt-4o","metadata":{v},"messages":[{"role":"user","content":"hi"}]}',
        1,
    ),
    (
        "anthropic: system block",
        routes.MESSAGES,
        '{"model":"claude-sonnet-4-5","max_tokens":10,"system":[{"type":"text","text":"s",'
        '"x":{v}}],"messages":[{"role":"user","content":"hi"}]}',
        3,
    ),
    (
        "anthropic: tool input",
        routes.MESSAGES,
        '{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"a"},'
        '{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{v}}]},'
        '{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]}]}',
        5,
    ),
    (
        "anthropic: tool result block",
        routes.MESSAGES,
        '{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"a"},'
        '{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},'
        '{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":'
        '[{"type":"text","text":"r","x":{v}}]}]}]}',
        8,
    ),
    (
        "responses: instructions",
        routes.RESPONSES,
        '{"model":"gpt-4o","instructions":{v},"input":"hi"}',
        1,
    ),
    (
        "gemini: system instruction and function response",
        routes.Route("gemini", "gemini", routes.GEMINI, "gemini-2.0-flash"),
        '{"systemInstruction":{"parts":[{"text":"s","y":{v}}]},"contents":['
        '{"role":"user","parts":[{"text":"a"}]},'
        '{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]},'
        '{"role":"user","parts":[{"functionResponse":{"name":"f","response":{v}}}]}]}',
        6,
    ),
]

DEEPEST = codec.MAX_DEPTH
"""The deepest a body is read: orjson refuses more."""


def _body(template: str, value: str) -> bytes:
    return template.replace("{v}", value).encode()


def _fitter() -> Fitter:
    return Fitter(
        ProxyConfig(upstream="http://127.0.0.1:9", settings=Settings(context_length=16_000))
    )


@pytest.mark.parametrize("shape", [arrays, objects], ids=["arrays", "objects"])
@pytest.mark.parametrize("depth", [300, "deepest"])
@pytest.mark.parametrize(("name", "route", "template", "above"), PLACES, ids=[p[0] for p in PLACES])
def test_deep_bodies_are_fitted_or_refused_in_one_line(
    name: str,
    route: routes.Route,
    template: str,
    above: int,
    depth: int | str,
    shape: Callable[[int], str],
    cli: Cli,
) -> None:
    levels = DEEPEST - above if depth == "deepest" else int(depth)
    data = _body(template, shape(levels))
    orjson.loads(data)  # as deep as JSON is read
    fitted = _fitter().fit(route, data)
    assert fitted.action in ACTIONS
    assert fitted.body in (data, b"") or orjson.loads(fitted.body)
    fmt = route.fmt
    for command in (["estimate", "-"], ["prune", "-", "-"]):
        run = cli(*command, "-c", "16000", "--format", fmt, input=data)
        assert run.exit_code in (0, 1), run.stderr
        assert "internal error" not in run.stderr
        if run.exit_code:
            assert_one_line_error(run, 1, "error")


@pytest.mark.parametrize("shape", [arrays, objects], ids=["arrays", "objects"])
def test_deeper_than_json_allows_is_bad_input(shape: Callable[[int], str], cli: Cli) -> None:
    template = PLACES[0][2]
    data = _body(template, shape(DEEPEST))  # 5 levels over the limit
    with pytest.raises(InputError, match="nested deeper than 1024"):
        _fitter().fit(routes.CHAT, data)  # the server answers 400 (invalid_json)
    run = cli("prune", "-", "-", "-c", "16000", input=data)
    assert_one_line_error(run, 1, "nested deeper than 1024 levels")
    assert run.stdout == ""


def test_a_deep_value_is_kept_as_it_was_when_its_turn_is_kept(cli: Cli) -> None:
    """Pruning drops the old turn and writes the kept ones, a value 1000 levels deep
    among them, through the standard library: the same value comes back."""
    deep = arrays(1000 - 4)
    data = (
        '{"model":"gpt-4o","messages":[{"role":"system","content":"s"},'
        '{"role":"user","content":"task"},{"role":"assistant","content":"ok"},'
        '{"role":"user","content":"' + "old " * 40_000 + '"},{"role":"assistant","content":"ok"},'
        '{"role":"user","content":"newest","x":' + deep + "}]}"
    ).encode()
    fitted = _fitter().fit(routes.CHAT, data)
    assert fitted.action == PRUNED
    sent = orjson.loads(fitted.body)
    assert len(sent["messages"]) == 4
    assert codec.dumps(sent["messages"][-1]["x"]) == deep.encode()
    run = cli("prune", "-", "-", "-c", "16000", "-q", input=data)
    assert run.exit_code == 0, run.stderr
    assert run.stdout_bytes == fitted.body  # (== on the parsed values would recurse)


def test_arrays_orjson_would_corrupt_are_written_by_the_standard_library() -> None:
    """300 arrays 243 deep abort orjson 3.13 (``realloc(): invalid next size``), so
    this runs in a child process: it must exit 0 with the standard library's bytes."""
    code = (
        "import json, orjson; from ctxwin import codec\n"
        "text = '[' + ','.join(['[' * 243 + '0' + ']' * 243] * 300) + ']'\n"
        "assert codec.dumps(orjson.loads(text)) == text.encode()\n"
        "assert codec.dumps({'a': orjson.loads(text)}, indent=True) == "
        "json.dumps({'a': json.loads(text)}, indent=2).encode()\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert run.returncode == 0, run.stderr.decode()


@pytest.mark.parametrize(("depth", "deeper"), [(0, False), (199, False), (200, False), (201, True)])
def test_deeper_than_counts_containers(depth: int, deeper: bool) -> None:
    value = json.loads(arrays(depth))  # depth levels of lists around a 0
    assert codec.deeper_than(value, 200) is deeper
    assert codec.deeper_than({"a": [1, {"b": value}]}, 203) is deeper


def test_deep_input_through_the_console_script_is_one_line(cli: Cli) -> None:
    data = _body(PLACES[4][2], arrays(DEEPEST))
    run = cli.process("estimate", "-", "-c", "16000", stdin=data, env=WIDE)
    assert_one_line_error(run, 1, "nested deeper than 1024 levels")
