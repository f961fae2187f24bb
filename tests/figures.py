"""The figures README.md and docs/*.md quote, and the code that writes each of them.

A figure ctxwin produces (a token count, a ratio, a median, a cost, a table of them) sits
in a marked region of a page::

    <!-- figures:NAME -->...<!-- /figures -->

and :data:`GENERATORS` holds, under NAME, the function that writes what goes between the
marks, by running ctxwin (its library, or the command as the page shows it). A region
whose opening mark ends its line holds whole lines (a table, a fenced block); otherwise it
sits inside a sentence. Whole files written the same way (reports of ``fidelity/``) are
in :data:`FILES`.

``python -m tests.docs_support`` (``make docs``) rewrites every region and file (and
docs/cli.md); ``tests/test_figures.py`` writes each again and fails where the page
differs, exactly. Figures that read the corpus (``../shared/corpus``, or
``$CTXWIN_CORPUS``) are left as they are, and their tests skipped, when it is absent.
Timings are not figures here: they come from ``make bench`` and the benchmarks under
``bench/``, on the machine that ran them.
"""

from __future__ import annotations

import re
import statistics
import textwrap
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import orjson

from fidelity import compare, strategies
from fidelity.corpus import corpus_dir
from fidelity.replays import REDACTED, TOOLS, Replayed, measure, median

ROOT = Path(__file__).resolve().parent.parent
REGION = re.compile(r"<!-- figures:([\w.-]+) -->(.*?)<!-- /figures -->", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Generator:
    name: str
    make: Callable[[], str]
    corpus: bool
    """It reads ``../shared/corpus``."""


GENERATORS: dict[str, Generator] = {}
"""Region name → the function that writes it."""

FILES: dict[str, Generator] = {}
"""Path (from the repository's root) → the function that writes the whole file."""


def figure(name: str, *, corpus: bool = False) -> Callable[[Callable[[], str]], Callable[[], str]]:
    """Register a region's generator under ``name``."""

    def register(make: Callable[[], str]) -> Callable[[], str]:
        GENERATORS[name] = Generator(name, make, corpus)
        return make

    return register


def generated_file(
    path: str, *, corpus: bool = False
) -> Callable[[Callable[[], str]], Callable[[], str]]:
    """Register the generator of the whole file at ``path``."""

    def register(make: Callable[[], str]) -> Callable[[], str]:
        FILES[path] = Generator(path, make, corpus)
        return make

    return register


def pages() -> list[Path]:
    """README.md and every page under docs/ (integrations included)."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def regions(text: str) -> list[tuple[str, str]]:
    """``(name, body)`` of every marked region of ``text``, in order."""
    return [(m.group(1), m.group(2)) for m in REGION.finditer(text)]


def available(gen: Generator) -> bool:
    return not gen.corpus or corpus_dir() is not None


def render(name: str, old_body: str) -> str:
    """The body region ``name`` gets, shaped as ``old_body`` (lines or inline)."""
    out = GENERATORS[name].make()
    return "\n" + out.strip("\n") + "\n" if old_body.startswith("\n") else out


def fill(text: str) -> str:
    """``text`` with every region whose generator can run written again."""

    def one(m: re.Match[str]) -> str:
        name, body = m.group(1), m.group(2)
        if name not in GENERATORS:
            raise KeyError(f"no generator for the region figures:{name}")
        if not available(GENERATORS[name]):
            return m.group(0)
        return f"<!-- figures:{name} -->{render(name, body)}<!-- /figures -->"

    return REGION.sub(one, text)


def write_all() -> list[str]:
    """Rewrite every region of every page and every generated file; what changed."""
    changed = []
    for page in pages():
        text = page.read_text("utf-8")
        new = fill(text)
        if new != text:
            page.write_text(new, "utf-8")
            changed.append(str(page.relative_to(ROOT)))
    for path, gen in FILES.items():
        if not available(gen):
            continue
        target = ROOT / path
        new = gen.make()
        if not target.is_file() or target.read_text("utf-8") != new:
            target.write_text(new, "utf-8")
            changed.append(path)
    return changed


def _num(n: float) -> str:
    return f"{n:,}"


# --- the block cut on the cache loop (tests/test_cache_loop.py) -----------------------------

SHARES = (0.0, 0.25, 0.35, 0.4, 0.45, 0.5)
"""The ``--block`` shares the loop is run at (0 is just-fit)."""

BILLED_AT_MOST = 0.25
SENT_AT_LEAST = 0.80  # the targets tests/test_cache_loop.py holds the default to
"""What the default share must do against just-fit (``tests/test_cache_loop.py``)."""


@cache
def block_loop() -> dict[float, tuple[float, float]]:
    """Share → (input billed in token units, mean prompt tokens) of the 100-call loop
    through ``wrap(client, context_length=6000, strategy=Strategy(block=share))``."""
    from ctxwin.fitting.strategy import Strategy
    from tests.test_cache_loop import figures, wrapped

    def run(share: float) -> tuple[float, float]:
        standin = wrapped(Strategy(block=share))
        assert standin.refused == 0, f"block={share}: a context 400"
        return figures(standin)

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(zip(SHARES, pool.map(run, SHARES), strict=True))


def _against_just_fit(share: float) -> tuple[float, float]:
    loop = block_loop()
    (billed, mean), (just_billed, just_mean) = loop[share], loop[0.0]
    return billed / just_billed, mean / just_mean


@figure("block-loop")
def block_loop_table() -> str:
    from ctxwin.fitting.strategy import DEFAULT_STRATEGY

    lines = [
        "| `--block` | input billed (token units) | ÷ just-fit | mean prompt (tokens) "
        "| ÷ just-fit |",
        "|---|---:|---:|---:|---:|",
    ]
    for share, (billed, mean) in block_loop().items():
        cost, sent = _against_just_fit(share)
        cells = ["0 (just fit)" if not share else f"{share:g}", f"{billed:,.0f}", f"{cost:.3f}"]
        cells += [f"{mean:,.0f}", f"{sent:.3f}"]
        if share == DEFAULT_STRATEGY.block:
            cells = [f"**{c}**" for c in cells]
        lines.append("| " + " | ".join(cells) + " |")
    meets = [
        f"{s:g}"
        for s in SHARES[1:]
        if (r := _against_just_fit(s))[0] <= BILLED_AT_MOST and r[1] >= SENT_AT_LEAST
    ]
    lines += ["", f"Shares that meet both: {', '.join(meets) or 'none'}."]
    return "\n".join(lines)


@figure("block-rule")
def block_rule() -> str:
    from ctxwin.fitting.strategy import DEFAULT_STRATEGY

    cost, sent = _against_just_fit(DEFAULT_STRATEGY.block)
    return f"bills {cost:.3f}× the input and sends {sent:.3f}× the tokens"


# --- replay --compare on the generated loops (fidelity.compare) ------------------------------


@cache
def compared() -> list[dict[str, Any]]:
    """What each of :data:`fidelity.compare.COMMANDS` printed (the runs as written)."""
    for path, data in compare.runs().items():
        if (ROOT / path).read_bytes() != data:
            raise RuntimeError(f"{path} is not what fidelity.compare writes: run make docs")
    return compare.results()


def _compared(k: int) -> Callable[[], str]:
    def make() -> str:
        return compare.section(*compare.COMMANDS[k], compared()[k])

    return make


for _k, _name in enumerate(("compare-chat", "compare-chat-clear", "compare-anthropic")):
    figure(_name)(_compared(_k))
figure("compare-anthropic-mark")(_compared(3))


@generated_file("fidelity/compare.md")
def compare_report() -> str:
    return compare.report(compared())


# --- clearing before dropping on the corpus (fidelity.strategies) ---------------------------


@cache
def strategies_measured() -> tuple[list[strategies.Row], dict[str, float]]:
    root = corpus_dir()
    assert root is not None
    return strategies.measure(root)


@generated_file("fidelity/strategies.md", corpus=True)
def strategies_report() -> str:
    return strategies.report(*strategies_measured())


_BUDGET_WORDS = {"half": "half the run's estimate", "half-droppable": "floor + half of the rest"}


@figure("strategies-corpus", corpus=True)
def strategies_corpus() -> str:
    rows, _ = strategies_measured()
    buckets = ("keeps more", "below floor", "nothing clearable", "clearing too small")
    lines = [
        "| budget | keep-results | " + " | ".join(buckets) + " | keeps fewer | rule breaks |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for budget in strategies.BUDGETS:
        for keep in strategies.KEEPS:
            sel = [r for r in rows if r.budget == budget and r.keep == keep]
            n = {b: sum(1 for r in sel if r.bucket == b) for b in strategies.BUCKETS}
            cells = [f"{n[strategies.BETTER]}/{len(sel)}"]
            cells += [str(n[b]) for b in (strategies.BELOW, strategies.NOTHING, strategies.SMALL)]
            cells += [str(n[strategies.WORSE]), str(sum(r.rule_breaks for r in sel))]
            lines.append(f"| {_BUDGET_WORDS[budget]} | {keep} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


@figure("strategies-corpus-runs", corpus=True)
def strategies_corpus_runs() -> str:
    rows, _ = strategies_measured()
    runs = len({(r.source, r.name) for r in rows})
    by_source: dict[str, int] = {}
    for source, _name in {(r.source, r.name) for r in rows}:
        by_source[source] = by_source.get(source, 0) + 1
    parts = ", ".join(f"{n} {s}" for s, n in sorted(by_source.items(), key=lambda x: -x[1]))
    return f"{runs} runs with two turns or more: {parts}"


# --- agent-tool sessions: prediction ÷ reported (fidelity.replays) --------------------------


@cache
def sessions() -> list[Replayed]:
    root = corpus_dir()
    assert root is not None
    return measure(root / "agent_tools")


def _median(calls: Sequence[Any]) -> str:
    m = median(calls)
    return "—" if m is None else f"{m:.3f}"


def _by_tool(replayed: Sequence[Replayed]) -> dict[str, list[Replayed]]:
    out: dict[str, list[Replayed]] = {}
    for r in replayed:
        out.setdefault(r.tool, []).append(r)
    return out


def sessions_per_sample(replayed: Sequence[Replayed]) -> str:
    """Per run: calls after the first report, how many under, the median (a table)."""
    lines = [
        "| sample | run | calls after the first report | under | median pred ÷ reported |",
        "|---|---|---:|---:|---:|",
    ]
    for r in replayed:
        lines.append(
            f"| {r.tool}/{r.sample[:48]} | {r.run[:24]} | {len(r.calls)} | {len(r.under)} "
            f"| {_median(r.calls)} |"
        )
    return "\n".join(lines)


@figure("sessions-per-sample", corpus=True)
def sessions_per_sample_table() -> str:
    return sessions_per_sample(sessions())


@figure("sessions-by-tool", corpus=True)
def sessions_by_tool() -> str:
    lines = [
        "| agent tool | fitted on: median (predictions) | held out | all its samples |",
        "|---|---:|---:|---:|",
    ]
    for tool, runs in _by_tool(sessions()).items():
        cells = []
        for sel in ([r for r in runs if not r.held_out], [r for r in runs if r.held_out], runs):
            calls = [c for r in sel for c in r.calls]
            cells.append(f"{_median(calls)} ({len(calls)})" if calls else "—")
        lines.append(f"| {TOOLS.get(tool, tool)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


MEDIAN_TARGET = 1.05
"""The median prediction ÷ reported per agent tool that docs/sessions.md aims at."""

UNDER = 0.97
"""A prediction below this share of the reported count is under by more than the safety
share; each such row must be marked ``unlogged_tokens``, with its cause below."""


@figure("sessions-anchored", corpus=True)
def sessions_anchored() -> str:
    lines = [
        "| agent tool | predictions | median | least | under 0.97× unmarked "
        "| marked `unlogged_tokens` |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for tool, runs in _by_tool(sessions()).items():
        calls = [c for r in runs for c in r.calls]
        unmarked = sum(1 for c in calls if c.ratio < UNDER and not c.unlogged)
        lines.append(
            f"| {TOOLS.get(tool, tool)} | {len(calls)} | {_median(calls)} "
            f"| {min(c.ratio for c in calls):.3f} | {unmarked} "
            f"| {sum(1 for c in calls if c.unlogged)} |"
        )
    return "\n".join(lines)


UNLOGGED_CAUSES = {
    "codemie-subagents-agent-a485154": (
        "two files read, whose report grows by 17,100 tokens for 18.8 KB of logged "
        "content (0.9 tokens a byte if that were all it sent): most likely content Claude "
        "Code sends and does not log, not proven"
    ),
    "codemie-subagents-main-e9fb405b-turn2": (
        "two files read and a glob: the report grows by 5,176 tokens for 10.5 KB of "
        "logged JSON; the results are logged as sent (line-numbered), so the rest is most "
        "likely content Claude Code adds to a result and does not log (its reminders), "
        "not proven"
    ),
    "codemie-rollout-2026-05-11T11-26-55": (
        "each is the response that ran a hosted web search (`web_search_call`): the "
        "search results are part of the prompt its usage counts, and the rollout logs "
        "only the query"
    ),
    "localpush-rollout": (
        "the publisher replaced the rollout's free text by placeholders: the logged "
        "growth is a few hundred tokens a call where the counts grow by 3,000–10,000"
    ),
}
"""Why each sample's marked rows are short: a marked sample with no cause here fails the
figure ``sessions-unlogged`` (and its test)."""


def _calls_span(numbers: Sequence[int]) -> str:
    """``2, 9–12, 14``: call numbers with runs joined."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(f"{a}" if a == b else f"{a}–{b}" for a, b in spans)


def _range(ordered: Sequence[str]) -> str:
    """``a–b`` of figures in ascending order, or ``a`` when they are one."""
    return ordered[0] if ordered[0] == ordered[-1] else f"{ordered[0]}–{ordered[-1]}"


@figure("sessions-unlogged", corpus=True)
def sessions_unlogged() -> str:
    items = []
    for r in sessions():
        marked = [c for c in r.calls if c.unlogged]
        if not marked:
            continue
        cause = next((v for k, v in UNLOGGED_CAUSES.items() if r.sample.startswith(k)), None)
        if cause is None:
            raise LookupError(f"no cause written for the marked rows of {r.tool}/{r.sample}")
        calls = "call" + ("s" if len(marked) > 1 else "")
        ratios = _range([f"{c.ratio:.3f}" for c in sorted(marked, key=lambda c: c.ratio)])
        shorts = _range([f"{c.unlogged:,}" for c in sorted(marked, key=lambda c: c.unlogged)])
        items.append(
            f"- {TOOLS.get(r.tool, r.tool)}, `{r.sample[:44]}…` {calls} "
            f"{_calls_span([c.call for c in marked])} ({ratios} of the report, {shorts} "
            f"tokens short): {cause}."
        )
    return "\n".join(items)


@figure("sessions-summary", corpus=True)
def sessions_summary() -> str:
    replayed = sessions()
    calls = [c for r in replayed for c in r.calls]
    plain = [r for r in replayed if not r.redacted]
    under = sum(len(r.under) for r in replayed)
    under_plain = sum(len(r.under) for r in plain)
    worst = []
    for tool, runs in _by_tool(plain).items():
        shorts = [c.short_by for r in runs for c in r.under]
        if shorts:
            worst.append(f"{max(shorts):,} for {TOOLS.get(tool, tool)}")
    margins = [c.safety for r in replayed for c in r.under]
    beyond = [
        f"call {c.call} of `{r.run[:24]}` ({r.tool}/{r.sample}: {c.short_by:,} short, "
        f"margin {c.safety:,})"
        for r in replayed
        for c in r.under
        if c.short_by >= c.safety
    ]
    above = [
        TOOLS.get(tool, tool)
        for tool, runs in _by_tool(replayed).items()
        if (m := median([c for r in runs for c in r.calls])) is not None and m > MEDIAN_TARGET
    ]
    above_files = [
        f"{r.tool}/{r.sample}"
        for r in replayed
        if (m := median(r.calls)) is not None and m > MEDIAN_TARGET
    ]
    text = (
        f"Over all samples: {len(calls)} predictions, median {_median(calls)}; "
        f"{under} under the reported count ({under_plain} without the two redacted "
        f"`{REDACTED}` Codex rollouts). Outside the redacted rollouts a prediction is under "
        f"by at most {', '.join(worst)}, against a safety margin of 3 % of the window "
        f"({min(margins):,}–{max(margins):,}). Under by more than the safety margin: "
        f"{'; '.join(beyond) or 'none'}. Agent tools whose median is above {MEDIAN_TARGET:.2f}: "
        f"{', '.join(above) or 'none'}; samples: {', '.join(above_files) or 'none'}."
    )
    return textwrap.fill(text, 92, break_on_hyphens=False, break_long_words=False)


@figure("readme-anchored-medians", corpus=True)
def readme_anchored_medians() -> str:
    by_tool = _by_tool(sessions())
    parts = []
    for i, tool in enumerate(("claude-code", "codex", "gemini-cli", "mini-swe-agent")):
        calls = [c for r in by_tool[tool] for c in r.calls]
        parts.append(
            f"{_median(calls)} for {TOOLS[tool]} ({len(calls)}{' calls' if i == 0 else ''})"
        )
    return ", ".join(parts)


# --- the readers of agent_tools_next/ and their fixtures -----------------------------------

FIXTURES = ROOT / "tests" / "fixtures" / "sessions"
"""The session readers' fixtures: a folder per reader, every shape its tool writes."""


@cache
def sessions_next() -> list[Replayed]:
    root = corpus_dir()
    assert root is not None
    return measure(root / "agent_tools_next")


@cache
def fixture_sessions() -> list[Replayed]:
    return measure(FIXTURES)


def _lowest(calls: Sequence[Any]) -> str:
    return f"{min(c.ratio for c in calls):.3f}" if calls else "—"


@figure("sessions-next-readers", corpus=True)
def sessions_next_readers() -> str:
    """Per agent tool of ``agent_tools_next/``: its samples' calls, with usage, and the
    predictions after each run's first report (median, lowest, how many under 0.97×)."""
    lines = [
        "| agent tool | samples | runs | calls found | invalid | with usage | predictions "
        "| median pred ÷ reported | lowest | under 0.97× |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for tool, runs in _by_tool(sessions_next()).items():
        calls = [c for r in runs for c in r.calls]
        reported = sum(r.reported for r in runs)
        lines.append(
            f"| {TOOLS.get(tool, tool)} | {len({r.sample for r in runs})} | {len(runs)} "
            f"| {sum(r.found for r in runs):,} | {sum(r.invalid for r in runs)} | {reported:,} "
            f"| {len(calls):,} | {_median(calls)} | {_lowest(calls)} "
            f"| {sum(c.ratio < UNDER for c in calls)} |"
        )
    return "\n".join(lines)


@figure("sessions-reader-fixtures")
def sessions_reader_fixtures() -> str:
    """Per reader: its fixtures under tests/fixtures/sessions, the runs and calls read."""
    lines = [
        "| reader's fixtures | files | runs | calls found | invalid |",
        "|---|---:|---:|---:|---:|",
    ]
    for tool, runs in _by_tool(fixture_sessions()).items():
        files = {(r.tool, r.sample) for r in runs}
        folder = FIXTURES / tool
        shown = len(files) if tool != "cline" else len([d for d in folder.iterdir() if d.is_dir()])
        lines.append(
            f"| {TOOLS.get(tool, tool)} | {shown} | {len(runs)} | {sum(r.found for r in runs)} "
            f"| {sum(r.invalid for r in runs)} |"
        )
    return "\n".join(lines)


@figure("pi-sample-calls", corpus=True)
def pi_sample_calls() -> str:
    """The pi sample's calls: sent again, never sent again, and the predictions under 0.97×."""
    runs = [r for r in sessions_next() if r.tool == "pi"]
    main = [r for r in runs if not r.run.endswith("aborted")]
    aborted = [r for r in runs if r.run.endswith("aborted")]
    under = [f"call {c.call} ({c.ratio:.3f})" for r in main for c in r.calls if c.ratio < UNDER]
    return (
        f"{sum(r.found for r in main):,} sent again (`main`), "
        f"{sum(r.found for r in aborted)} aborted or failed, recorded calls of their own "
        f"(`main aborted`; {sum(r.reported for r in aborted)} of them reported a prompt); "
        f"under 0.97×: {', '.join(under) or 'none'}"
    )


@figure("copilot-shutdown-check", corpus=True)
def copilot_shutdown_check() -> str:
    """The estimate of a Copilot CLI sample's next request against Copilot's own count of
    its context at shutdown (the one sample with a ``session.shutdown``)."""
    from ctxwin.runs import read_runs
    from ctxwin.runs.simulate import current_run, next_plan
    from ctxwin.settings import Settings

    root = corpus_dir()
    assert root is not None
    path = root / "agent_tools_next" / "copilot-cli" / "agentv-events-db325365.jsonl"
    shutdown = next(
        orjson.loads(line)["data"]
        for line in path.read_bytes().splitlines()
        if b'"session.shutdown"' in line
    )
    run = current_run(read_runs(path.read_bytes(), path=str(path)))
    assert run is not None
    estimate = next_plan(run, Settings()).estimated_tokens
    logged = shutdown["systemTokens"] + shutdown["conversationTokens"]
    return (
        f"the estimate of `agentv-events-db325365`'s next request, {estimate:,} tokens, is "
        f"{estimate / logged:.3f}× Copilot's count of its system prompt and conversation at "
        f"shutdown ({logged:,}); Copilot's whole count, {shutdown['currentTokens']:,}, adds "
        f"{shutdown['toolDefinitionsTokens']:,} tokens of tool definitions the file does not log"
    )


@figure("readme-session-medians", corpus=True)
def readme_session_medians() -> str:
    by_tool = _by_tool(sessions())
    parts = [
        f"{_median([c for r in by_tool[t] for c in r.calls])} for {TOOLS[t]}"
        for t in ("claude-code", "codex", "gemini-cli", "openhands-events")
    ]
    return "a median of " + ", ".join(parts[:-1]) + ", " + parts[-1]


# --- recorded runs: the Claude Code sessions' cache, --compare on the longest one ------------

CLAUDE_SESSIONS = (
    "drmaciver-coverage-test-fix",
    "drmaciver-python-to-rust-port",
    "codemie-session-3fe1b6bc",
    "codemie-session-9eda1058",
    "codemie-subagents-agent-a485154",
    "codemie-subagents-main-e9fb405b-turn2",
)
"""The Claude Code sessions of ``agent_tools/claude-code``, in the table's order."""


def _claude(name: str) -> Path:
    root = corpus_dir()
    assert root is not None
    return root / "agent_tools" / "claude-code" / f"{name}.jsonl"


def _replay_json(*args: str) -> dict[str, Any]:
    from tests.docs_support import run_ctxwin

    done = run_ctxwin("replay", *args, "--json")
    if done.returncode not in (0, 3):
        raise RuntimeError(done.stderr)
    out: dict[str, Any] = orjson.loads(done.stdout)
    return out


@cache
def cache_sessions() -> dict[str, dict[str, Any]]:
    """Session → its run's ``replay --context-length 1000000 --json`` report."""

    def one(name: str) -> dict[str, Any]:
        (run,) = _replay_json(str(_claude(name)), "--context-length", "1000000")["runs"]
        out: dict[str, Any] = run
        return out

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(CLAUDE_SESSIONS, pool.map(one, CLAUDE_SESSIONS), strict=True))


def _pct(a: int, b: int) -> str:
    return f"{100 * (a - b) / b:+.1f} %".replace("-", "−")


@figure("recorded-cache", corpus=True)
def recorded_cache() -> str:
    lines = [
        "| session | served by | calls | predicted | logged | | calls reading less | shortfall "
        "| logged + shortfall | |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    total = [0] * 5
    for name, rep in cache_sessions().items():
        predicted, logged = rep["cached_tokens"], rep["reported_cached_tokens"]
        breaks = rep.get("reported_cache_breaks") or 0
        short = rep.get("reported_cache_break_tokens") or 0
        for i, v in enumerate((rep["calls"], predicted, logged, breaks, short)):
            total[i] += v
        lines.append(
            f"| {name} | {rep.get('served_by') or ''} | {rep['calls']} | {predicted:,} "
            f"| {logged:,} | {_pct(predicted, logged)} | {breaks} | {short:,} "
            f"| {logged + short:,} | {_pct(predicted, logged + short)} |"
        )
    calls, predicted, logged, breaks, short = total
    lines.append(
        f"| all six | | {calls} | {predicted:,} | {logged:,} | {_pct(predicted, logged)} "
        f"| {breaks} | {short:,} | {logged + short:,} | {_pct(predicted, logged + short)} |"
    )
    return "\n".join(lines)


@figure("recorded-cache-anthropic", corpus=True)
def recorded_cache_anthropic() -> str:
    reps = [r for r in cache_sessions().values() if r.get("served_by") == "Anthropic"]
    worst = max(
        (abs(r["cached_tokens"] - r["reported_cached_tokens"]) / r["reported_cached_tokens"])
        for r in reps
    )
    together = _pct(
        sum(r["cached_tokens"] for r in reps), sum(r["reported_cached_tokens"] for r in reps)
    )
    return f"within {100 * worst:.1f} % ({together} together)"


def _cost_block(rep: dict[str, Any]) -> str:
    """What ``replay`` prints under a run's table about its prompts' cost, up to the
    prices (``...``), wrapped at 96 columns."""
    from ctxwin.cli.replay import cost_words

    words = cost_words(rep)  # type: ignore[arg-type]
    kept = words[: words.index("; " + rep["model"])] + "; ..."
    return "```\n" + textwrap.fill(kept, 96, break_on_hyphens=False) + "\n```"


@figure("recorded-cost-anthropic", corpus=True)
def recorded_cost_anthropic() -> str:
    return _cost_block(cache_sessions()["drmaciver-python-to-rust-port"])


@figure("recorded-cost-bedrock", corpus=True)
def recorded_cost_bedrock() -> str:
    return _cost_block(cache_sessions()["codemie-subagents-main-e9fb405b-turn2"])


LONGEST = "codemie-session-3fe1b6bc"
COMPARE_FLAGS = (
    "--compare",
    "just-fit,block=0.1,block=0.25,block=0.5",
    "--context-length",
    "150000",
    "--max-tokens",
    "8000",
)


@figure("recorded-compare", corpus=True)
def recorded_compare() -> str:
    from tests.docs_support import clean, run_ctxwin

    done = run_ctxwin("replay", str(_claude(LONGEST)), *COMPARE_FLAGS)
    if done.returncode not in (0, 3):
        raise RuntimeError(done.stderr)
    command = f"$ ctxwin replay {LONGEST}.jsonl {' '.join(COMPARE_FLAGS[:2])} \\\n    "
    command += " ".join(COMPARE_FLAGS[2:])
    return f"```\n{command}\n{clean(done.stdout).rstrip()}\n```"


@figure("recorded-compare-reserve", corpus=True)
def recorded_compare_reserve() -> str:
    policies = "just-fit,block=0.25,block=0.5"
    rep = _replay_json(str(_claude(LONGEST)), "--compare", policies, "--context-length", "150000")
    rows = {r["policy"]: r for r in rep["policies"]}
    cells = [
        f"{p} ${rows[p]['input_cost']:.2f} ({rows[p]['cache_write_tokens']:,} tokens written)"
        for p in policies.split(",")
    ]
    return ", ".join(cells[:-1]) + " and " + cells[-1]


@figure("recorded-compare-pruned", corpus=True)
def recorded_compare_pruned() -> str:
    rep = _replay_json(str(_claude(LONGEST)), *COMPARE_FLAGS)
    (pruned,) = {r["pruned_calls"] for r in rep["policies"]}
    return f"{pruned}"


# --- docs/strategies.md: the providers' and agents' own policies --------------------------

POLICIES = "as-logged,just-fit,block=0.45,anthropic-clear,anthropic-clear-thinking,auto-compact"
"""The policies docs/strategies.md compares on the corpus's longest Claude Code session."""


def _console(*args: str) -> str:
    """``ctxwin ARGS`` as the page shows it, with what it printed (a 100-column pipe)."""
    from tests.docs_support import clean, run_ctxwin

    done = run_ctxwin(*args)
    if done.returncode not in (0, 3):
        raise RuntimeError(done.stderr)
    shown = " ".join(Path(a).name if a.startswith("/") else a for a in args)
    return f"```\n$ ctxwin {shown}\n{clean(done.stdout).rstrip()}\n```"


@figure("policies-compare", corpus=True)
def policies_compare() -> str:
    return _console("replay", str(_claude(LONGEST)), "--compare", POLICIES)


@figure("policies-reads-anthropic", corpus=True)
def policies_reads_anthropic() -> str:
    """How far the requests as sent (``anthropic-clear`` below its trigger: nothing
    cleared) read from the logged reads, on the sessions sent straight to Anthropic."""
    worst = 0.0
    for name in ("drmaciver-coverage-test-fix", "drmaciver-python-to-rust-port"):
        rows = _replay_json(str(_claude(name)), "--compare", "as-logged,anthropic-clear")
        logged, sent = rows["policies"]
        assert sent["mean_tokens_sent"] == logged["mean_tokens_sent"]  # nothing cleared
        off = abs(sent["cached_tokens"] - logged["cached_tokens"]) / logged["cached_tokens"]
        worst = max(worst, off)
    return f"within {100 * worst:.1f} %"


@figure("policies-recommend", corpus=True)
def policies_recommend() -> str:
    rep = _replay_json(str(_claude(LONGEST)), "--compare", POLICIES, "--recommend")
    rec = rep["recommendation"]
    body = orjson.dumps(rec, option=orjson.OPT_INDENT_2).decode()
    command = f"$ ctxwin replay {LONGEST}.jsonl --compare {POLICIES} \\\n    --recommend --json"
    return (
        f"```\n{command}\n```\n\n{rep['tried']} policies tried; `recommendation`:\n\n"
        f"```json\n{body}\n```"
    )


@figure("policies-recommend-words", corpus=True)
def policies_recommend_words() -> str:
    rep = _replay_json(str(_claude(LONGEST)), "--compare", POLICIES, "--recommend")
    rows = {r["policy"]: r for r in rep["policies"]}
    rec = rep["recommendation"]
    logged, same = rows["as-logged"], rows["just-fit"]
    return (
        f"`{rec['policy']}` at ${rec['total_cost']:.2f} against the logged bill's "
        f"${logged['total_cost']:.2f} (${rec['saving']:.2f} less), and against "
        f"${same['total_cost']:.2f} for the same run through one cache with nothing cut "
        f"(`just-fit`: ${same['total_cost'] - rec['total_cost']:.2f} less)"
    )


# --- docs/observability.md: what its examples print --------------------------------------

OBSERVABILITY = ROOT / "docs" / "observability.md"
_PYTHON = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _example_output(k: int, stream: str) -> str:
    """What the ``k``-th python block of docs/observability.md writes to ``stream``, run
    from the repository's root as ``tests/test_docs.py`` runs it, in a ``json`` block."""
    import subprocess
    import sys

    code = _PYTHON.findall(OBSERVABILITY.read_text("utf-8"))[k]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    out = done.stderr if stream == "stderr" else done.stdout
    return "```json\n" + out.strip("\n") + "\n```"


@figure("observability-log-line")
def observability_log_line() -> str:
    return _example_output(0, "stderr")


@figure("observability-span")
def observability_span() -> str:
    return _example_output(1, "stdout")


def unused() -> list[str]:
    """Generators no page has a region for."""
    used = {name for page in pages() for name, _ in regions(page.read_text("utf-8"))}
    return sorted(set(GENERATORS) - used)


# --- replay --compare on recorded runs of the corpus ----------------------------------------

RECORDED_RUNS = (
    ("Claude Code codemie-session-3fe1b6bc", "agent_tools/claude-code/codemie-session-3fe1b6bc*"),
    ("Claude Code drmaciver-python-to-rust-port", "agent_tools/claude-code/drmaciver-python*"),
    ("Codex codemie-rollout 11-26-55", "agent_tools/codex/codemie-rollout-2026-05-11T11-26-55*"),
    ("Codex cpolar-connect", "agent_tools/codex/cpolar-connect-rollout*"),
    ("Gemini CLI repo trajectory", "agent_tools/gemini-cli/gemini-cli-repo-trajectory*"),
    ("mini-swe-agent django-10999", "agent_tools/mini-swe-agent/django__django-10999*"),
    ("mini-swe-agent sympy-23534", "agent_tools/mini-swe-agent/sympy__sympy-23534*"),
    ("OpenHands multi_swe_bench", "openhands/multi_swe_bench_output*"),
)
"""The recorded runs ``replay --compare`` is shown on: (label, the one file under the
corpus this pattern names)."""

RECORDED_SHARES = (0.25, 0.35, 0.4, 0.45, 0.5)
PRICED_AS = "gpt-5"
"""The model a run without a known price or caching rules is priced as (OpenAI's rules)."""


def _recorded_window(path: str, extra: Sequence[str]) -> tuple[int, dict[str, Any]]:
    """The window a run is compared at: a third of its peak estimate (its largest request
    at a window that never prunes), raised by a tenth of the peak until no call is
    truncated under just-fit; and the just-fit replay there."""
    whole = _replay_json(path, "-c", "1000000000", *extra)
    peak = max(r["estimated_tokens"] for run in whole["runs"] for r in run["rows"])
    window = -(-peak // 3)
    while True:
        flags = ("-c", str(window), "--max-tokens", str(window // 10), *extra)
        rep = _replay_json(path, *flags, "--compare", "just-fit")
        (row,) = rep["policies"]
        if not row["truncated_calls"] or window >= peak:
            return window, row
        window += -(-peak // 10)


@cache
def recorded_compare_runs() -> list[tuple[str, int, list[dict[str, Any]]]]:
    """(label, window, the policies' rows) of each of :data:`RECORDED_RUNS`."""
    root = corpus_dir()
    assert root is not None

    def one(item: tuple[str, str]) -> tuple[str, int, list[dict[str, Any]]]:
        label, pattern = item
        (found,) = root.glob(pattern)
        path = str(found)
        probe = _replay_json(path, "-c", "1000000000")
        priced = all(
            run.get("input_cost") is not None and run.get("cached_tokens") is not None
            for run in probe["runs"]
        )
        extra: tuple[str, ...] = () if priced else ("--model", PRICED_AS)
        window, _ = _recorded_window(path, extra)
        policies = ",".join(["just-fit", *(f"block={s:g}" for s in RECORDED_SHARES)])
        flags = ("-c", str(window), "--max-tokens", str(window // 10), *extra)
        rep = _replay_json(path, *flags, "--compare", policies)
        name = label if priced else f"{label} ({PRICED_AS})"
        runs = len(probe["runs"])
        if runs > 1:
            name = f"{label}, {runs} runs" + ("" if priced else f" ({PRICED_AS})")
        return name, window, rep["policies"]

    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(one, RECORDED_RUNS))


@figure("recorded-compare-shares", corpus=True)
def recorded_compare_shares() -> str:
    shares = [f"{s:g}" for s in RECORDED_SHARES]
    lines = [
        "| run | calls (pruned, truncated) | window | just-fit USD | " + " | ".join(shares) + " |",
        "|---|---:|---:|---:|" + "---|" * len(shares),
    ]
    ratios: dict[str, list[tuple[float, float]]] = {s: [] for s in shares}
    for name, window, rows in recorded_compare_runs():
        just = rows[0]
        cells = [
            name,
            f"{just['calls']} ({just['pruned_calls']}, {just['truncated_calls']})",
            f"{window:,}",
            f"{just['input_cost']:.3g}",
        ]
        for share, row in zip(shares, rows[1:], strict=True):
            cost = row["input_cost"] / just["input_cost"]
            sent = row["mean_tokens_sent"] / just["mean_tokens_sent"]
            ratios[share].append((cost, sent))
            cells.append(f"{cost:.2f} / {sent:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    means = ", ".join(
        f"{s} {statistics.fmean(c for c, _ in r):.2f} / {statistics.fmean(m for _, m in r):.2f}"
        for s, r in ratios.items()
    )
    lines += ["", f"Mean of the ratios (input cost / mean sent), per share: {means}."]
    return "\n".join(lines)


# --- the fidelity reports (make fidelity) and what the pages quote of them ------------------

REPORTS: dict[str, tuple[str, bool]] = {
    "fidelity/adversarial.md": ("fidelity.adversarial", False),
    "fidelity/scripts.md": ("fidelity.scripts", False),
    "fidelity/sessions.md": ("fidelity.sessions", True),
    "fidelity/provider.md": ("fidelity.provider", True),
    "fidelity/results.md": ("fidelity.run", True),
}
"""Each report's path and the module that writes it (``python -m MODULE --out PATH``), and
whether it reads the corpus. ``fidelity.strategies`` and ``fidelity.compare`` run in this
process (above)."""


@cache
def reports() -> dict[str, str]:
    """What each report's command writes today, every command started at once (each in its
    own process); those that need the corpus only when it is here."""
    import os
    import subprocess
    import sys
    import tempfile

    root = corpus_dir()
    env = {**os.environ, **({"CTXWIN_CORPUS": str(root)} if root else {})}
    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        started = {}
        for path, (module, corpus) in REPORTS.items():
            if corpus and root is None:
                continue
            target = Path(tmp) / Path(path).name
            started[path] = (
                target,
                subprocess.Popen(
                    [sys.executable, "-m", module, "--out", str(target)],
                    cwd=ROOT,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                ),
            )
        for path, (target, proc) in started.items():
            _, err = proc.communicate(timeout=900)
            if proc.returncode:
                raise RuntimeError(f"{REPORTS[path][0]} exited {proc.returncode}: {err!r}")
            out[path] = target.read_text("utf-8")
    return out


def _report(path: str) -> Callable[[], str]:
    def make() -> str:
        return reports()[path]

    return make


for _path, (_module, _corpus) in REPORTS.items():
    generated_file(_path, corpus=_corpus)(_report(_path))


SECTIONS = {
    "results-stress": ("fidelity/results.md", "Stress classes"),
    "results-transcripts": ("fidelity/results.md", "Real transcripts"),
    "results-provider": ("fidelity/results.md", "Provider-reported prompt tokens"),
    "provider-split-table": ("fidelity/provider.md", "The split"),
    "provider-figures": ("fidelity/provider.md", "Figures set from provider calls"),
}
"""Regions that quote a section of a report whole (what follows its ``## `` heading)."""


def _section(path: str, heading: str) -> Callable[[], str]:
    def make() -> str:
        text = reports()[path]
        start = text.index(f"\n## {heading}\n") + len(heading) + 5
        end = text.find("\n## ", start)
        return text[start : len(text) if end < 0 else end].strip("\n")

    return make


for _name, (_path, _heading) in SECTIONS.items():
    figure(_name, corpus=REPORTS[_path][1])(_section(_path, _heading))


def _find(text: str, pattern: str) -> re.Match[str]:
    found = re.search(pattern, text)
    if found is None:
        raise LookupError(f"the report has no {pattern!r}")
    return found


def _adversarial(estimator: str) -> tuple[str, str, str, str]:
    """(cases under, cases, lowest on the fit half, lowest on the held-out half) of one
    estimator in fidelity/adversarial.md."""
    text = reports()["fidelity/adversarial.md"]
    section = text[text.index(f"## `{estimator}`") :]
    low = _find(section, r"lowest ratio, fit half: ([\d.]+); held-out half: ([\d.]+)")
    under = _find(section, r"cases under 1\.0: ([\d,]+) of ([\d,]+)")
    return under.group(1), under.group(2), low.group(1), low.group(2)


@figure("bound-generated")
def bound_generated() -> str:
    under, cases, fit_low, held_low = _adversarial("bound")
    return (
        f"{under} of {cases} generated cases under (lowest ratio {fit_low} on the classes its "
        f"prices were chosen on, {held_low} on the held-out ones"
    )


@figure("content-generated")
def content_generated() -> str:
    under, cases, fit_low, held_low = _adversarial("content")
    return (
        f"{under} of {cases} cases under the largest count, lowest ratio {min(fit_low, held_low)}"
    )


def _bound_row(group: str) -> tuple[int, str]:
    """(files, the bound's median ÷ the largest of four as written) of a group of
    fidelity/sessions.md."""
    for line in reports()["fidelity/sessions.md"].splitlines():
        cells = [c.strip().strip("*") for c in line.strip("|").split("|")]
        if len(cells) >= 3 and cells[0] == group:
            return int(cells[1]), _find(cells[2], r"(\d\.\d+) \(").group(1)
    raise LookupError(group)


def _bound_median(group: str) -> float:
    """The bound's median ÷ the largest of four of a group of fidelity/sessions.md."""
    return float(_bound_row(group)[1])


CODING_TOOLS = ("claude-code", "codex", "gemini-cli", "mini-swe-agent", "openhands-events")
"""The agent tools whose files make fidelity/sessions.md's coding-agent sessions."""

BOUND_TARGET = 1.10
"""The median the bound aims at on sessions and transcripts (docs/fidelity.md)."""


@figure("bound-session-medians", corpus=True)
def bound_session_medians() -> str:
    files, median = _bound_row("coding-agent sessions")
    tools = ", ".join(f"{TOOLS[t]} {_bound_row(t)[1]}" for t in CODING_TOOLS)
    return f"**{median}** on the {files} coding-agent session files ({tools}"


@figure("bound-recorded-median", corpus=True)
def bound_recorded_median() -> str:
    files, median = _bound_row("recorded transcripts")
    return f"**{median}** on the {files} recorded transcripts"


@figure("bound-target", corpus=True)
def bound_target() -> str:
    groups = ("coding-agent sessions", "recorded transcripts")
    met = [_bound_median(g) <= BOUND_TARGET for g in groups]
    both = (
        "met on both"
        if all(met)
        else "met on "
        + (" and ".join(g for g, ok in zip(groups, met, strict=True) if ok) or "neither")
    )
    under = [TOOLS[t] for t in CODING_TOOLS if _bound_median(t) <= BOUND_TARGET]
    over = [TOOLS[t] for t in CODING_TOOLS if _bound_median(t) > BOUND_TARGET]

    def words(names: list[str]) -> str:
        return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]

    text = f"the target of {BOUND_TARGET:.2f} is {both}"
    if under:
        text += f", and per tool on {words(under)}"
    if over:
        text += f"; {words(over)} sessions stay just over it"
    return text


@figure("bound-medians", corpus=True)
def bound_medians() -> str:
    recorded = _bound_median("recorded transcripts")
    coding = _bound_median("coding-agent sessions")
    return (
        f"at a median {recorded:.2f}× the largest of the four counts on recorded transcripts, "
        f"{coding:.2f}× on coding-agent sessions"
    )


@figure("provider-split", corpus=True)
def provider_split() -> str:
    text = reports()["fidelity/provider.md"]
    split = _find(
        text,
        r"(\d+) calls in the fit part, (\d+) held out \((\d+) in runs held out whole, "
        r"(\d+) held out call by call[^;]*; the largest share from one run (\d+)\); "
        r"(\d+) of (\d+) families",
    )
    fit, held, whole, by_call, largest, families_held, families = split.groups()
    beyond = int(_find(text, r"held-out calls beyond a shipped figure: (\d+)").group(1))
    total = int(fit) + int(held)
    verdict = "are not under-counted either" if not beyond else f"include {beyond} under-counted"
    return (
        f"were set from {fit} of the corpus's {total} provider calls; the {held} held out "
        f"({whole} in whole runs, {by_call} call by call from a family's only run; "
        f"{families_held} of {families} model families have some; {largest} are one run: "
        f"a thin check) {verdict}"
    )


@figure("content-corpus-pairs", corpus=True)
def content_corpus_pairs() -> str:
    text = reports()["fidelity/results.md"]
    found = _find(
        text, r"`content`: median over-count [^;]+; (\d+) under-counts in (\d+) transcript"
    )
    under, pairs = found.group(1), int(found.group(2))
    return f"{under} under in the corpus's {pairs:,} transcript × tokenizer pairs"


# --- calibrate on the session samples; the budget's examples; the bound's vocabulary ---------


@cache
def calibrated_sessions() -> dict[str, Any]:
    """``ctxwin calibrate CORPUS/agent_tools --json``."""
    from tests.docs_support import run_ctxwin

    root = corpus_dir()
    assert root is not None
    done = run_ctxwin("calibrate", str(root / "agent_tools"), "--json")
    if done.returncode:
        raise RuntimeError(done.stderr)
    out: dict[str, Any] = orjson.loads(done.stdout)
    return out


@figure("calibrate-sessions", corpus=True)
def calibrate_sessions() -> str:
    s = calibrated_sessions()["summary"]["sessions"]
    return (
        f"{s['calls']} calls in {s['runs']} runs, median prediction ÷ reported "
        f"{s['median_ratio']:.3f}, waste {s['waste_percent']:.1f} %"
    )


@figure("calibrate-median", corpus=True)
def calibrate_median() -> str:
    return f"median {calibrated_sessions()['summary']['sessions']['median_ratio']:.3f}"


def _hundreds(n: int) -> str:
    return f"{round(n, -2):,}"


@figure("calibrate-overheads", corpus=True)
def calibrate_overheads() -> str:
    """The learned overheads per agent tool and model (rounded to 100 tokens)."""
    by: dict[tuple[str, str], list[int]] = {}
    for run in calibrated_sessions()["by_run"]:
        tool = Path(run["path"]).parent.name
        if tool in ("claude-code", "codex", "gemini-cli"):
            by.setdefault((TOOLS[tool], run["model"] or "no model"), []).append(run["overhead"])
    parts = []
    for tool in ("Claude Code", "Codex", "Gemini CLI"):
        models = sorted((m, v) for (t, m), v in by.items() if t == tool)
        cells = [
            _hundreds(min(v))
            + (f"–{_hundreds(max(v))}" if _hundreds(max(v)) != _hundreds(min(v)) else "")
            + f" ({m})"
            for m, v in models
        ]
        parts.append(f"{tool} {', '.join(cells)}")
    return "; ".join(parts)


def _estimate_json(model: str, *flags: str) -> dict[str, Any]:
    import subprocess
    import sys

    body = orjson.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}]})
    done = subprocess.run(
        [sys.executable, "-m", "ctxwin", "estimate", "-", *flags, "--json"],
        input=body,
        capture_output=True,
        cwd=ROOT,
        check=True,
    )
    out: dict[str, Any] = orjson.loads(done.stdout)
    return out


@figure("budget-scaled")
def budget_scaled() -> str:
    rep = _estimate_json("claude-sonnet-4-5", "-c", "20000")
    assert rep["reserve_source"] == "scaled"
    return (
        f"`-c 20000` on `claude-sonnet-4-5` reserves {rep['reserve']:,} and budgets "
        f"{rep['budget']:,} for the prompt"
    )


@figure("budget-shares")
def budget_shares() -> str:
    shares = []
    for model, label in (("claude-sonnet-4-5", "Claude Sonnet 4.5"), ("gpt-4o", "GPT-4o")):
        rep = _estimate_json(model)
        share = 100 * rep["max_output_tokens"] / rep["context_length"]
        shares.append(f"{share:.3g} % for {label}")
    return ", ".join(shares)


@figure("bound-vocabulary-size")
def bound_vocabulary_size() -> str:
    from ctxwin.tokens.vocabulary import bound_vocabulary

    return f"{sum(1 for _ in bound_vocabulary().records()):,} pieces"


@figure("litellm-anthropic")
def litellm_anthropic() -> str:
    """The LiteLLM loop to an Anthropic model (tests/test_integrations_litellm.py), its
    first request's unseen part learned as a factor, and as an overhead."""
    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # as tests/conftest.py
    from tests.test_integrations_litellm import anthropic_loop

    factor_standin, fit = anthropic_loop(learn_overhead=False)
    (manager,) = fit.managers.values()
    overhead_standin, _ = anthropic_loop(learn_overhead=True)
    return (
        f"factor {manager.calibration:.1f} and prompts held at {max(factor_standin.prompts):,} "
        f"tokens, against {max(overhead_standin.prompts):,} with the overhead"
    )


@figure("claude-first-call", corpus=True)
def claude_first_call() -> str:
    """What the first call of each Claude Code sample reports against what its log shows."""
    firsts = [
        next(r for r in rep["rows"] if r.get("reported_tokens"))
        for rep in cache_sessions().values()
    ]
    low = min(r["reported_tokens"] for r in firsts)
    high = max(r["reported_tokens"] for r in firsts)
    raw = max(r["raw_tokens"] for r in firsts)
    return (
        f"reports {low:,}–{high:,} prompt tokens for a conversation its log prices at "
        f"{raw:,} tokens at most"
    )


# --- what fills the context (ctxwin.breakdown.attribute, estimate --by) -------------------


@figure("session-filling", corpus=True)
def session_filling() -> str:
    """Per Claude Code, Codex and Gemini CLI sample: the estimate of its next request and
    the shares of it that tool results, tool calls and the overhead take, and its largest
    tool (``estimate --by tool --json``)."""
    from ctxwin.breakdown import attribute
    from ctxwin.runs import read_runs
    from ctxwin.runs.simulate import current_run, next_plan
    from ctxwin.settings import Settings

    root = corpus_dir()
    assert root is not None
    lines = [
        "| sample | estimate | tool results | tool calls | overhead | largest tool |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for tool in ("claude-code", "codex", "gemini-cli"):
        for path in sorted((root / "agent_tools" / tool).iterdir()):
            run = current_run(read_runs(path.read_bytes()))
            assert run is not None
            plan = next_plan(run, Settings())
            filled = attribute(plan)
            total = plan.result.estimated_tokens
            kinds = filled["by_kind"]
            name, use = next(iter(filled["by_tool"].items()))
            if name.startswith("["):  # a redacted name
                name = "(redacted)"
            shares = [
                f"{100 * n / total:.0f} %"
                for n in (kinds["tool_results"], kinds["tool_calls"], kinds["overhead"])
            ]
            lines.append(
                f"| {TOOLS[tool]}: {path.name[:36]} | {total:,} | {' | '.join(shares)} "
                f"| {name} ({100 * use['tokens'] / total:.0f} %) |"
            )
    return "\n".join(lines)
