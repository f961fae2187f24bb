"""Anthropic ``compaction`` blocks: the API drops every block before the last one, so
ctxwin counts only what follows it and never drops what the provider already ignores."""

from __future__ import annotations

from typing import Any

from ctxwin import core
from ctxwin.fitting.pruning import segment
from tests.conftest import Cli


def _body(turns: int = 0, before: int = 200_000) -> dict[str, Any]:
    messages: list[Any] = [
        {"role": "user", "content": "x" * before},
        {"role": "assistant", "content": "y" * before},
        {"role": "user", "content": "go on"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "z" * before},
                {"type": "compaction", "content": "Summary: the user wants a report."},
                {"type": "text", "text": "Continuing."},
            ],
        },
        {"role": "user", "content": "next"},
    ]
    for t in range(turns):
        messages += [
            {"role": "assistant", "content": [{"type": "text", "text": f"step {t} " * 200}]},
            {"role": "user", "content": f"more {t}"},
        ]
    return {"model": "claude-sonnet-4-5", "max_tokens": 1000, "messages": messages}


def test_only_what_follows_the_compaction_block_is_counted() -> None:
    body = _body()
    t = core.load(body)
    p = core.plan(t, context_length=8000, max_tokens=0)
    assert p.result.fits and p.result.estimated_tokens < 200
    assert any("compaction block at messages[3].content[1]" in n for n in t.view.notes)
    # the same body without the compaction block is far over the window
    plain = _body()
    plain["messages"][3]["content"].pop(1)
    assert core.plan(core.load(plain), context_length=8000, max_tokens=0).result.overflow_at_floor
    # a longer summary costs more: it is what the API reads
    longer = _body()
    longer["messages"][3]["content"][1]["content"] = "Summary. " * 400
    assert core.plan(core.load(longer), context_length=8000).result.estimated_tokens > 500


def test_what_the_provider_ignores_is_never_dropped() -> None:
    body = _body(turns=12)
    t = core.load(body)
    assert segment(t.view.items, t.view.pinned).head_end == 5  # through the compaction message
    p = core.plan(t, context_length=3000, max_tokens=0)
    r = p.result
    assert r.pruned and not r.overflow_at_floor
    assert r.keep[:5] == [0, 1, 2, 3, 4] and r.dropped[0] == 5
    out = p.output()
    assert out["messages"][:5] == body["messages"][:5]
    assert all(a is b for a, b in zip(out["messages"][:5], body["messages"][:5], strict=True))
    again = core.plan(core.load(out), context_length=3000, max_tokens=0).result
    assert again.fits


def test_cli_estimate_no_longer_refuses_a_compacted_body(tmp_path: Any, cli: Cli) -> None:
    import orjson

    path = tmp_path / "in.json"
    path.write_bytes(orjson.dumps(_body()))
    result = cli("estimate", str(path), "--context-length", "8000", "--json")
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.stdout)
    assert report["estimated_tokens"] < 200 and report["fits"]


def test_the_manager_and_replay_count_a_compacted_body_as_a_whole_read_does() -> None:
    from ctxwin import ContextWindowManager
    from ctxwin.recorded import Run
    from ctxwin.runs.simulate import replay_run
    from ctxwin.settings import Settings

    body = _body(turns=12)
    whole = core.plan(core.load(body), context_length=3000, max_tokens=0).result
    manager = ContextWindowManager(context_length=3000, max_tokens=0)
    for _ in range(2):  # the second request reuses the first one's messages
        fitted = manager.evaluate(body)
        assert fitted.result.keep == whole.keep
        assert fitted.result.estimated_tokens == whole.estimated_tokens
    body["messages"].append({"role": "assistant", "content": "done"})
    report = replay_run(Run("", "chat", body=body), Settings(context_length=3000, max_tokens=0))
    # the two calls made before the compaction block existed sent the 200,000-character
    # messages and overflow; every call from the one that holds the block on fits
    # (pruned where it must be)
    statuses = [row["status"] for row in report["rows"]]
    assert statuses[:2] == ["truncated", "truncated"] and "truncated" not in statuses[2:]
    assert report["first_truncated"] == 1 and report["calls"] >= 4


def test_replay_reads_each_call_as_it_was_sent() -> None:
    """The calls made before the compaction block existed sent everything before it, and
    were billed for it: replay counts each call's request as that request reads alone
    (sharing the whole transcript's reading counted those messages as nothing)."""
    from ctxwin.recorded import Run, model_messages
    from ctxwin.runs.simulate import replay_run
    from ctxwin.settings import Settings

    body = _body(turns=2, before=2000)
    body["messages"].append({"role": "assistant", "content": "done"})
    report = replay_run(Run("", "chat", body=body), Settings(context_length=30_000, max_tokens=0))
    t = core.load(body)
    calls = model_messages(t.view)
    assert [r["call"] for r in report["rows"]] == list(range(1, len(calls) + 1))
    for row, i in zip(report["rows"], calls, strict=True):
        alone = core.load({**body, "messages": body["messages"][:i]})
        assert row["raw_tokens"] == alone.raw_tokens(list(range(i)))
    assert report["rows"][0]["raw_tokens"] > 300  # the 2,000-character first message
