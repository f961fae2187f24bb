"""The figures README.md and docs/*.md quote, and the code that writes each of them.

A figure ctxwin produces (a token count, a ratio, a median, a cost, a table of them) sits
in a marked region of a page::

    <!-- figures:NAME -->...<!-- /figures -->

and :data:`GENERATORS` holds, under NAME, the function that writes what goes between the
marks, by running ctxwin (its library, or the command as the page shows it). A region
whose opening mark ends its line holds whole lines (a table, a fenced block); otherwise it
sits inside a sentence. Whole files written the same way (reports of ``fidelity/``) are
in :data:`FILES`.

A default of the code a page states (a seed, a framing header's tokens, a size) is not a
measured figure, but it is checked the same way: a region named ``code.MODULE.NAME`` (a
dotted path; a key of a dict, or of a tuple of pairs, or a dataclass field's default may
follow) holds the value of that
constant (:func:`constant`), an int with thousands separators, a float as Python writes
it (``2.0``, ``1.45``).

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


def constant(path: str) -> str:
    """The value a ``code.`` region names (``code.ctxwin.tokens.framing.OPENAI_TOOLS_PREAMBLE``,
    ``code.ctxwin.tokens.seeds.BOUND_MODEL_CALIBRATION.claude``), written as a page shows
    it."""
    import dataclasses
    import importlib

    parts = path.split(".")
    for k in range(len(parts), 0, -1):
        try:
            value: Any = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for part in parts[k:]:
            if isinstance(value, tuple) and all(isinstance(v, tuple) for v in value):
                value = dict(value)
            elif isinstance(value, type) and dataclasses.is_dataclass(value):
                value = {f.name: f.default for f in dataclasses.fields(value)}  # its defaults
            try:
                value = value[part] if isinstance(value, dict) else getattr(value, part)
            except (KeyError, AttributeError):
                raise LookupError(f"{path}: no {part}") from None
        break
    else:
        raise LookupError(path)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{path} is not a number: {value!r}")
    return f"{value:,}" if isinstance(value, int) else repr(value)


CODE = "code."
"""The prefix of a region that holds a constant of the code (:func:`constant`)."""


def generator(name: str) -> Generator:
    """The generator of region ``name``: registered, or a ``code.`` constant."""
    if name in GENERATORS:
        return GENERATORS[name]
    if name.startswith(CODE):
        return Generator(name, lambda: constant(name[len(CODE) :]), corpus=False)
    raise KeyError(f"no generator for the region figures:{name}")


def available(gen: Generator) -> bool:
    return not gen.corpus or corpus_dir() is not None


def render(name: str, old_body: str) -> str:
    """The body region ``name`` gets, shaped as ``old_body`` (lines or inline)."""
    out = generator(name).make()
    return "\n" + out.strip("\n") + "\n" if old_body.startswith("\n") else out


def fill(text: str) -> str:
    """``text`` with every region whose generator can run written again."""

    def one(m: re.Match[str]) -> str:
        name, body = m.group(1), m.group(2)
        if not available(generator(name)):
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


LOG_SHARES = (0.0, 0.4, 0.45, 0.5)
"""The shares the loop whose tool results are JSON log pages is run at."""


@cache
def log_loop() -> dict[float, tuple[float, float, int]]:
    """Share → (input billed, mean prompt, largest prompt) of the cache loop whose tool
    results are JSON log pages (``tests.test_cache_loop.log_result``)."""
    from ctxwin.fitting.strategy import Strategy
    from tests.test_cache_loop import RESULTS, figures, wrapped

    def run(share: float) -> tuple[float, float, int]:
        standin = wrapped(Strategy(block=share), RESULTS["logs"])
        assert standin.refused == 0, f"block={share}: a context 400"
        return (*figures(standin), max(standin.accepted))

    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(zip(LOG_SHARES, pool.map(run, LOG_SHARES), strict=True))


@figure("block-loop-logs")
def block_loop_logs() -> str:
    """The default share on the log-page loop against just-fit, its neighbours, and its
    largest prompt against the budget."""
    from ctxwin.fitting.strategy import DEFAULT_STRATEGY
    from tests.test_cache_loop import budget

    loop = log_loop()
    just_billed, just_mean, _ = loop[0.0]

    def pair(share: float) -> tuple[str, str]:
        billed, mean, _ = loop[share]
        return f"{billed / just_billed:.3f}", f"{mean / just_mean:.3f}"

    share = DEFAULT_STRATEGY.block
    others = "; ".join("{:g}: {} and {}".format(s, *pair(s)) for s in LOG_SHARES[1:] if s != share)
    billed, sent = pair(share)
    top = loop[share][2]
    return (
        f"{share:g} bills {billed} of just-fit's input and sends {sent} of its mean prompt "
        f"({others}), its largest prompt {top:,} tokens ({100 * top / budget():.0f} %"
    )


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


# --- docs/fidelity.md: what its prose quotes of the reports and of the bound's data -----------


def _table_rows(text: str) -> list[list[str]]:
    """The cells of every table row of ``text`` (header and rule rows left out)."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def _provider_row(figure: str, family: str, estimator: str = "") -> dict[str, str]:
    """A row of fidelity/provider.md's table of figures set from provider calls."""
    text = reports()["fidelity/provider.md"]
    rows = _table_rows(text[text.index("\n## Figures set from provider calls\n") :])
    head = [c.lower() for c in rows[0]]
    for cells in rows[1:]:
        if cells[0] == f"`{figure}`" and cells[2] == family and estimator in ("", cells[1]):
            return dict(zip(head, cells, strict=True))
    raise LookupError(f"{figure} {family}")


def _split() -> tuple[int, int, int, int, int]:
    """(fit calls, held-out calls, in runs held out whole, held out call by call, the
    largest share of one run) of fidelity/provider.md."""
    found = _find(
        reports()["fidelity/provider.md"],
        r"(\d+) calls in the fit part, (\d+) held out \((\d+) in runs held out whole, "
        r"(\d+) held out call by call[^;]*; the largest share from one run (\d+)\)",
    )
    fit, held, whole, by_call, largest = (int(g) for g in found.groups())
    return fit, held, whole, by_call, largest


@figure("provider-parts", corpus=True)
def provider_parts() -> str:
    fit, held, *_ = _split()
    return (
        f"the {fit + held} recorded provider calls are split into a *fit part* ({fit} calls) "
        f"and a *held-out part* ({held} calls)"
    )


def _held_out_under(label: str) -> int:
    """How many held-out calls ``label`` (an estimator, or ``--tokenizer auto``) puts under
    the reported count (fidelity/results.md)."""
    text = reports()["fidelity/results.md"]
    line = _find(text, rf"- {re.escape(label)}[^\n]*held-out part (\d+) under-counts in")
    return int(line.group(1))


@figure("provider-held-out", corpus=True)
def provider_held_out() -> str:
    """What the held-out part checks, and how thin it is (fidelity/provider.md)."""
    text = reports()["fidelity/provider.md"]
    _fit, held, _whole, by_call, largest = _split()
    changed = int(
        _find(text, r"figures where the fit part derives another value than shipped: (\d+)")[1]
    )
    labels = ("`content`", "`bound`", "`seed`", "`--tokenizer auto`")
    under = {label: _held_out_under(label) for label in labels}
    verdict = (
        f"no held-out call is under: 0 of {held} for " + ", ".join(under)
        if not any(under.values())
        else "held-out calls under: "
        + ", ".join(f"{n} of {held} for {label}" for label, n in under.items())
    )
    llama = _provider_row("MODEL_CALIBRATION", "llama-4")
    fit_worst, held_worst = float(llama["fit worst"]), float(llama["held-out worst"])
    seed = float(llama["shipped"])
    relation = (
        "equals"
        if held_worst == fit_worst
        else "is below"
        if held_worst < fit_worst
        else "is above"
    )
    split = text[text.index("\n## The split\n") : text.index("\n## Figures set")]
    singles = []
    for cells in _table_rows(split)[1:]:
        found = re.search(r"\((\d+) of \d+\)", cells[2])
        if found:
            singles.append((cells[0], int(found.group(1))))
    headers = [
        _provider_row(name, family)
        for name, family in (
            ("OPENAI_REASONING_PREAMBLE", "gpt-5.4-mini"),
            ("OPENAI_TOOLS_PREAMBLE", "gpt-4o, gpt-4o-mini"),
        )
    ]
    single_families = {f for f, _ in singles}
    header_note = (
        ", among them every call the OpenAI headers are checked on"
        if all(set(h["family"].split(", ")) <= single_families for h in headers)
        else ""
    )
    search = [_provider_row("TOOL_SEARCH_TOKENS", "claude", e) for e in ("content", "bound")]
    search_part = (
        "the one tool-search call is in the fit part"
        if all(r["fit calls"] == "1" and r["held-out calls"] == "0" for r in search)
        else "tool-search calls: "
        + ", ".join(f"{r['fit calls']} fit, {r['held-out calls']} held out" for r in search[:1])
    )
    came = (
        "every figure came out as shipped (no figure changed)"
        if not changed
        else f"{changed} figures came out other than shipped"
    )
    return (
        f"Derived from the fit part alone, {came}, and {verdict}. The held-out part is "
        f"thin, and the check weaker than the count says: {largest} of its {held} calls are "
        f"one OpenHands run (Llama 4), which shares its system prompt and tools with the fit "
        f"runs (Llama 4's held-out worst for `content`, {held_worst:.3f}, {relation} its fit "
        f"worst, {fit_worst:.3f}, {100 * (seed - fit_worst) / seed:.1f} % under its seed of "
        f"{seed:g}); {by_call} are calls of a family's only run held out call by call ("
        + ", ".join(f"{f} {n}" for f, n in singles)
        + f"), which share a conversation with that family's fit calls{header_note}; the "
        f"agent-sdk logs of a family are successive calls of one conversation; and "
        f"{search_part}."
    )


@figure("adversarial-setup")
def adversarial_setup() -> str:
    found = _find(
        reports()["fidelity/adversarial.md"],
        r"Seed (\d+), (\d+) cases per class up to (\d+) characters",
    )
    seed, per_class, size = (int(g) for g in found.groups())
    return f"seed {seed}, {per_class} cases per class up to {size:,} characters"


@figure("bound-generated-halves")
def bound_generated_halves() -> str:
    under, cases, fit_low, held_low = _adversarial("bound")
    head = (
        "no case of either half of the generated classes is under"
        if under == "0"
        else f"{under} of {cases} generated cases are under"
    )
    return (
        f"{head} (lowest {fit_low} on the half its prices were chosen on, {held_low} on the "
        f"held-out half"
    )


@figure("bound-vocabulary-file")
def bound_vocabulary_file() -> str:
    size = (ROOT / "ctxwin" / "data" / "bound-vocab.bin").stat().st_size
    return f"{size / 1e6:.1f} MB"


@figure("bound-vocabulary-sources")
def bound_vocabulary_sources() -> str:
    """What the bound's vocabulary is built from (the constants of ``fidelity/bound.py``)."""
    from ctxwin.tokens.bound import RUN_SPAN
    from ctxwin.tokens.vocabulary import PREFIX_BYTES
    from fidelity import bound

    prefixes = ", ".join(f"`{p}`" for p in bound.WORD_PREFIXES if p.strip())
    exts = ", ".join(f"`{e}`" for e in bound.MACHINE_TEXTS)
    more = sorted(bound.MORE_OTHER_WORDS.items(), key=lambda kv: -kv[1])
    names = {"ru": "Russian", "uk": "Ukrainian", "bg": "Bulgarian", "mk": "Macedonian"}
    names["ko"] = "Korean"
    return "\n".join(
        [
            f"- the tokens of the four vocabularies that are one such piece and count at most "
            f"{bound.VOCAB_MAX} in all four (non-ASCII ones included: `→`, ` ├`, `✅`);",
            f"- the forms of the {bound.WORDS:,} commonest English words of `wordfreq` "
            f"(lower-case, capitalized, upper-case; alone and after a space, {prefixes});",
            f"- the ASCII pieces of code, documents and paths found on the machine that built "
            f"it in {bound.MACHINE_MIN_FILES} files or more: the `.py` files of Python's "
            f"standard library and installed packages, the files ending in {exts} there and "
            f"under `/usr` (the first {bound.MACHINE_HEAD:,} bytes of each), each also "
            f"JSON-escaped once and twice, and every path under `/usr`; never a gettext "
            f"catalog, a Perl module or anything under `/etc`;",
            f"- every run of one space, tab or punctuation byte up to {RUN_SPAN} long (alone, "
            f"and after a space);",
            f"- *any-prefix* records of words: for the letter runs of all those pieces, the "
            f"forms of the {bound.MORE_WORDS:,} commonest English words and the commonest "
            f"words of {len(bound.OTHER_LANGUAGES)} other `wordfreq` languages that hold a "
            f"non-ASCII letter ({bound.OTHER_WORDS:,} each; "
            + ", ".join(f"{n:,} {names.get(k, k)}" for k, n in more)
            + f"), the most tokens the four give the word alone or after any of the "
            f"{len(PREFIX_BYTES)} ASCII bytes that may open it.",
        ]
    )


def _transcripts_all() -> dict[str, str]:
    """The ``all`` row of fidelity/results.md's transcript table, by column."""
    text = reports()["fidelity/results.md"]
    section = text[text.index("\n## Real transcripts\n") :]
    rows = _table_rows(section[: section.index("\n## ", 5)])
    head = rows[0]
    (row,) = [r for r in rows[1:] if r[0] == "all"]
    return dict(zip(head, row, strict=True))


@figure("transcripts-o200k", corpus=True)
def transcripts_o200k() -> str:
    row = _transcripts_all()
    bound_m = row["bound ÷ o200k"].split()[0]
    content_m = row["content ÷ o200k"].split()[0]
    return f"{bound_m}× on the {row['n']} transcripts (`content` {content_m}×)"


@figure("largest-over-o200k", corpus=True)
def largest_over_o200k() -> str:
    found = _find(
        reports()["fidelity/results.md"],
        r"the largest of the four real counts ÷ o200k_base: median ([\d.]+)",
    )
    return f"a median {found.group(1)}× the o200k count"


def _scripts(section: str = "") -> list[tuple[str, int, float, float, float]]:
    """(class, texts, bound's median, lowest, highest) of fidelity/scripts.md's held-out
    classes, or of its section ``section``."""
    text = reports()["fidelity/scripts.md"]
    if section:
        text = text[text.index(f"\n## {section}\n") + 1 :]
        text = text[: text.index("\n## ")] if "\n## " in text else text
    elif "\n## " in text:
        text = text[: text.index("\n## ")]
    out = []
    for cells in _table_rows(text)[1:]:
        m = _find(cells[2], r"([\d.]+) \(([\d.]+)–([\d.]+)\)")
        name = re.sub(r" \(.*\)$", "", cells[0])
        out.append((name, int(cells[1]), float(m[1]), float(m[2]), float(m[3])))
    return out


SPACED_MEDIAN_TARGET = 2.0
UNSPACED_MEDIAN_TARGET = 2.8
"""The bound's targets on text of spaced scripts and tool output, and of scripts written
without spaces (``tests/test_estimator_bound.py`` holds the Korean and Thai texts to them)."""


@figure("scripts-medians")
def scripts_medians() -> str:
    text = reports()["fidelity/scripts.md"]
    under = int(_find(text, r"- `bound`: (\d+) texts under")[1])
    cells = [f"{name.rstrip(' *')} {med:.2f} ({high:.2f})" for name, _, med, _, high in _scripts()]
    tail = "no text under" if not under else f"{under} texts under"
    return ", ".join(cells) + f"; {tail}"


@figure("scripts-targets")
def scripts_targets() -> str:
    rows = _scripts()
    spaced = [r for r in rows if not r[0].endswith("*")]
    unspaced = [r for r in rows if r[0].endswith("*")]
    top = max(spaced, key=lambda r: r[2])
    utop = max(unspaced, key=lambda r: r[2])
    high = max(spaced, key=lambda r: r[4])
    uhigh = max(unspaced, key=lambda r: r[4])

    def word(ok: bool) -> str:
        return "under" if ok else "over"

    return (
        f"the median of every spaced script and tool-output class is "
        f"{word(top[2] <= SPACED_MEDIAN_TARGET)} {SPACED_MEDIAN_TARGET:.1f} (the highest, "
        f"{top[0]}, {top[2]:.2f}; its highest text, {high[0]}, {high[4]:.2f}), and that of "
        f"the scripts without spaces {word(utop[2] <= UNSPACED_MEDIAN_TARGET)} "
        f"{UNSPACED_MEDIAN_TARGET:.1f} ({utop[0].rstrip(' *')} {utop[2]:.2f}; highest text "
        f"{uhigh[0].rstrip(' *')}, {uhigh[4]:.2f})"
    )


@figure("bound-seeds", corpus=True)
def bound_seeds() -> str:
    rows = [
        (label, _provider_row("BOUND_MODEL_CALIBRATION", family))
        for label, family in (
            ("Claude", "claude"),
            ("DeepSeek", "deepseek"),
            ("Llama 4", "llama-4"),
        )
    ]
    fit = ", ".join(
        f"{label} {float(r['shipped']):g} ({float(r['fit worst']):.3f}×)" for label, r in rows
    )
    held = ", ".join(f"{float(r['held-out worst']):.3f}" for _, r in rows)
    return f"{fit}; held out, {held}"


@figure("nfc-longer")
def nfc_longer() -> str:
    import unicodedata

    n = sum(
        1
        for cp in range(0x110000)
        if not 0xD800 <= cp < 0xE000
        and len(unicodedata.normalize("NFC", chr(cp)).encode()) > len(chr(cp).encode())
    )
    return f"{n} characters are longer in NFC"


@figure("char-caps")
def char_caps_figure() -> str:
    """The characters the four vocabularies cannot split a token a byte
    (``ctxwin/data/char-caps.bin.gz``)."""
    from ctxwin.tokens.vocabulary import char_caps

    caps = char_caps()
    kana = cjk = four = 0
    others: list[int] = []
    for cp in range(0x800, 0x110000):
        if 0xD800 <= cp < 0xE000 or caps[cp] >= len(chr(cp).encode()):
            continue
        if cp >= 0x10000:
            four += 1
        elif 0x3040 <= cp <= 0x30FF:
            kana += 1
        elif 0x4E00 <= cp <= 0x9FFF:
            cjk += 1
        else:
            others.append(cp)
    other3 = len(others)
    return (
        f"leaves {kana + cjk + other3 + four:,} characters that no tokenizer can split a token "
        f"a byte: {kana} code points of the Hiragana and Katakana blocks (U+3040–U+30FF), "
        f"{cjk} CJK ideographs and {len(others)} other three-byte characters "
        f"(U+{others[0]:04X}–U+{others[-1]:04X}) cost 2 tokens instead of 3, {four:,} "
        f"four-byte characters 3 instead of 4"
    )


def _over_two(text: str) -> list[str]:
    """``name median`` of every class of an adversarial.md section whose median is over 2."""
    out = []
    for cells in _table_rows(text)[1:]:
        if len(cells) == 4 and float(cells[2]) > 2.0:
            out.append(f"{cells[0]} at {cells[2]}")
    return out


@figure("bound-over-two", corpus=True)
def bound_over_two() -> str:
    results = reports()["fidelity/results.md"]
    stress = _find(
        results, r"- `bound` ÷ the largest of the four[^\n]*classes over 2\.0: ([^\n]*)\."
    )
    adv = reports()["fidelity/adversarial.md"]
    section = adv[adv.index("## `bound`") :]
    generated = _over_two(section)
    return (
        f"of the stress classes ([fidelity/results.md](../fidelity/results.md), `bound` ÷ the "
        f"largest of the four, median over a class's samples) these are over 2.0: "
        f"{stress.group(1)}; of the generated classes "
        f"([fidelity/adversarial.md](../fidelity/adversarial.md)) {len(generated)} "
        f"{'has' if len(generated) == 1 else 'have'} a median over 2.0"
        + (f": {', '.join(generated)}" if generated else "")
    )


@figure("bound-word-texts")
def bound_word_texts() -> str:
    from fidelity import bound

    n = (len(bound.WORD_ALPHABETS) + 1) * 2 * bound.WORD_COUNT  # and capitalized; two leads
    low, high = bound.WORD_LENGTHS
    return (
        f"{n:,} short random words ({low}–{high} letters over every union of its letter "
        f"groups, upper and mixed case, capitalized, with and without a space)"
    )


@figure("bound-held-out-words")
def bound_held_out_words() -> str:
    """The random words ``python -m fidelity.bound --words`` draws apart from the program's
    (too slow for the tests to run whole), and the share ``tests/test_estimator_bound.py``
    holds to no under-count."""
    from fidelity import bound

    total = sum(count for _, _, count, _, _ in bound.HELD_OUT_WORDS)
    label, first, count, _, _ = bound.HELD_OUT_WORDS[0]
    return (
        f"{total:,} random words drawn apart from them (lower-case, 1–20 and 21–40 letters, "
        f"after a space, at English letter frequencies), `python -m fidelity.bound --words` "
        f"prints how many are under; `tests/test_estimator_bound.py` holds the first "
        f"{count:,} (seeds {first:,}–{first + count - 1:,}, {label.split(' (')[0]}) to none"
    )


@figure("scripts-languages")
def scripts_languages() -> str:
    from fidelity import scripts

    return f"{len(scripts.LANGUAGES)} languages"


@figure("bound-target-value")
def bound_target_value() -> str:
    return f"{BOUND_TARGET:.2f}"


@figure("fit-margins")
def fit_margins() -> str:
    """The margins ``python -m fidelity.fit`` fits the content weights to (its default on
    stress samples; the transcript margin the shipped weights were fitted with)."""
    from fidelity.fit import STRESS_MARGIN

    return f"{STRESS_MARGIN:.2f} × the largest of the four counts on stress samples"


def _calls(source_test: str) -> list[list[str]]:
    """fidelity/results.md's per-call rows whose call names start with ``source_test``."""
    text = reports()["fidelity/results.md"]
    return [r for r in _table_rows(text) if len(r) == 9 and r[1].startswith(source_test)]


@figure("content-transcript-lowest", corpus=True)
def content_transcript_lowest() -> str:
    row = _transcripts_all()
    lows = [float(_find(v, r"\(([\d.]+)–")[1]) for k, v in row.items() if k.startswith("content ÷")]
    return f"lowest transcript ratio {min(lows):.2f}"


@figure("tool-search-call", corpus=True)
def tool_search_call() -> str:
    from ctxwin.formats.anthropic import TOOL_SEARCH_TOKENS

    ((*_, reported, content, _bound, _seed),) = _calls(
        "test_anthropic_count_tokens_with_tool_search_replay"
    )
    need = {
        e: _provider_row("TOOL_SEARCH_TOKENS", "claude", e)["fit worst"]
        for e in ("content", "bound")
    }
    return (
        f"a second tool-use system prompt ({TOOL_SEARCH_TOKENS} tokens) — an assumption chosen "
        f"to err high: on the one recorded `count_tokens` answer for such a body ({reported} "
        f"tokens) the estimate is {content}×. That call is in the fit part; it needs "
        f"{need['content']} of the {TOOL_SEARCH_TOKENS} tokens at `content`'s seed, "
        f"{need['bound']} at `bound`'s"
    )


@figure("gemini-call-sizes", corpus=True)
def gemini_call_sizes() -> str:
    sizes = [
        r[5]
        for r in _table_rows(reports()["fidelity/results.md"])
        if len(r) == 9 and r[3] == "gemini"
    ]
    return " and ".join(sizes) + " tokens"


@figure("seed-stall")
def seed_stall() -> str:
    from ctxwin.tokens.registry import default_calibration

    seed = default_calibration("seed")
    return f"2 ÷ {seed:g} ≈ {2 / seed:.2f} from the {seed:g} seed"


def _bench_rows(path: str) -> dict[str, dict[tuple[str, str], list[str]]]:
    """Section heading → (window, command) → cells of a bench/*.md table."""
    out: dict[str, dict[tuple[str, str], list[str]]] = {}
    section = ""
    for line in (ROOT / path).read_text("utf-8").splitlines():
        if line.startswith("## "):
            section = line[3:]
        elif line.startswith("| ") and section:
            cells = [c.strip() for c in line.strip("|").split("|")]
            out.setdefault(section, {})[(cells[0], cells[1])] = cells
    return out


def _bench_date(path: str) -> str:
    return _find((ROOT / path).read_text("utf-8"), r"- date: ([^\n]+)").group(1)


@figure("bench-estimate-bound-content")
def bench_estimate_bound_content() -> str:
    """What ``bench/estimators.md`` measured of ``estimate`` with each estimator (timings:
    quoted from the file as it is, not measured again)."""
    path = "bench/estimators.md"
    parts = []
    for section, rows in _bench_rows(path).items():
        (cells,) = [c for (_, command), c in rows.items() if command == "estimate"]
        parts.append(
            f"{section.split(' (')[0]}: {cells[2]} s with `bound`, {cells[3]} s with "
            f"`content` ({cells[4]})"
        )
    return f"`estimate` whole-process, {'; '.join(parts)} (`{path}`, run of {_bench_date(path)})"


@figure("provider-seed-step")
def provider_seed_step() -> str:
    from fidelity.provider import STEP

    return f"{1 / STEP:.2f}"


# --- docs/how-it-works.md: the budget's rules, the model table, the estimators' weights -------


def _model_row(name: str) -> dict[str, Any]:
    data = orjson.loads((ROOT / "ctxwin" / "data" / "models.json").read_bytes())
    (row,) = [r for r in data["models"] if r["name"] == name]
    out: dict[str, Any] = row
    return out


@figure("fallback-prune")
def fallback_prune() -> str:
    """What ``prune`` drops of examples/agent-run.json at the fallback window."""
    import tempfile

    from ctxwin.fitting.budget import FALLBACK_CONTEXT_LENGTH
    from tests.docs_support import run_ctxwin

    with tempfile.TemporaryDirectory() as tmp:
        out, report = Path(tmp) / "out.json", Path(tmp) / "report.json"
        done = run_ctxwin(
            "prune",
            "examples/agent-run.json",
            str(out),
            "-c",
            str(FALLBACK_CONTEXT_LENGTH),
            "--report",
            str(report),
        )
        if done.returncode:
            raise RuntimeError(done.stderr)
        rep = orjson.loads(report.read_bytes())
    turns = rep["dropped_turns"] + rep["kept_turns"]
    return (
        f"at `-c {FALLBACK_CONTEXT_LENGTH}`, `prune examples/agent-run.json` drops "
        f"{rep['dropped_turns']} of its {turns} turns"
    )


@figure("price-tiers")
def price_tiers() -> str:
    parts = []
    for name, label in (("gemini-2.5-pro", "Gemini 2.5 Pro"), ("gpt-5.4", "GPT-5.4")):
        parts.append(f"{label} above {_model_row(name)['price']['above']['tokens']:,}")
    return ", ".join(parts)


@figure("gpt5-input-cap")
def gpt5_input_cap() -> str:
    row = _model_row("gpt-5")
    return (
        f"OpenAI's GPT-5 models take at most {row['max_input_tokens']:,} input tokens of their "
        f"{row['context_length']:,} window"
    )


@figure("sonnet-cap")
def sonnet_cap() -> str:
    row = _model_row("claude-sonnet-4-5")
    return f"{row['max_output_tokens']:,} of {row['context_length']:,}"


@figure("reserve-floor")
def reserve_floor() -> str:
    from ctxwin.fitting.budget import RESERVE_FLOOR, RESERVE_PERCENT

    return f"`max({RESERVE_FLOOR}, ⌈{RESERVE_PERCENT} % of context⌉)`"


@figure("half-window-cap")
def half_window_cap() -> str:
    """A table cap as large as the window reserves half of it (gpt-4's, ``estimate``)."""
    row = _model_row("gpt-4")
    rep = _estimate_json("gpt-4")
    return (
        f"gpt-4's cap of {row['max_output_tokens']:,} tokens in its "
        f"{row['context_length']:,}-token window reserves {rep['reserve']:,}"
    )


@figure("bound-vocabulary-brief")
def bound_vocabulary_brief() -> str:
    from fidelity import bound

    return (
        f"forms of the {bound.WORDS:,} commonest English words and of "
        f"{len(bound.OTHER_LANGUAGES)} other languages' commonest words"
    )


@figure("reasoning-header-calls", corpus=True)
def reasoning_header_calls() -> str:
    row = _provider_row("OPENAI_REASONING_PREAMBLE", "gpt-5.4-mini")
    calls = int(row["fit calls"]) + int(row["held-out calls"])
    return (
        f"the {calls} recorded gpt-5.4-mini calls needed up to {row['fit worst']} tokens over an "
        f"exact o200k count without it"
    )


@figure("content-weights")
def content_weights() -> str:
    """The content estimator's price of each byte class (``ctxwin/tokens/content.py``)."""
    from ctxwin.tokens.content import _BYTE, _STEP, EXTRA_STEPS, SCALE

    def extra(cls: str) -> float:
        return EXTRA_STEPS[cls] * _STEP / SCALE

    def char(lead: str, n: int) -> float:
        return (n * _BYTE + (EXTRA_STEPS[lead] + (n - 1) * EXTRA_STEPS["cont"]) * _STEP) / SCALE

    non_ascii = sorted(extra(c) for c in ("cont", "lead2", "lead3", "lead4"))
    return (
        f"{_BYTE / SCALE:.3f} token a byte, plus {extra('upper'):.3f} for an upper-case letter, "
        f"{extra('digit'):.3f} for a digit, {extra('punct'):.3f} for punctuation, control "
        f"characters, tabs and line breaks, and {non_ascii[0]:.3f}–{non_ascii[-1]:.3f} for the "
        f"bytes of non-ASCII characters (a 2-byte character costs {char('lead2', 2):.2f} "
        f"tokens, a CJK character {char('lead3', 3):.2f}, an emoji {char('lead4', 4):.2f})"
    )


@figure("content-sum")
def content_sum() -> str:
    from ctxwin.tokens.content import _STEP, _SUM_SPAN, SCALE

    return (
        f"in steps of {_STEP / SCALE:.4f} token and deletes the bytes that cost nothing extra "
        f"(lower-case letters, space); the low 16 bits of `zlib.adler32` of the result are one "
        f"plus the sum of its bytes, exact for up to {_SUM_SPAN:,} bytes, and longer strings are "
        f"summed {_SUM_SPAN:,} bytes at a time"
    )


@figure("seed-formula")
def seed_formula() -> str:
    import inspect

    from ctxwin.tokens.base import SEED_CALIBRATION
    from ctxwin.tokens.seed import SeedEstimator

    d = {k: p.default for k, p in inspect.signature(SeedEstimator).parameters.items()}
    return (
        f"prose (message text, function names) ÷ {d['prose_bytes_per_token']:g}, of dense text "
        f"(tool arguments, tool results, call ids, the serialized `tools` block) ÷ "
        f"{d['dense_bytes_per_token']:g}, plus {d['per_message']} tokens per message and "
        f"{d['per_tool_call']} per tool call, with calibration seed {SEED_CALIBRATION:g}"
    )


@figure("cheap-newline")
def cheap_newline() -> str:
    from ctxwin.tokens.tiered import CHEAP_BYTE_CENTS

    return f"{CHEAP_BYTE_CENTS[ord(chr(10))] / 100:.2f} tokens"


@figure("bench-bound-over-content")
def bench_bound_over_content() -> str:
    """``estimate`` of the 100k bench transcript with each estimator (bench/estimators.md)."""
    path = "bench/estimators.md"
    rows = next(r for s, r in _bench_rows(path).items() if s.startswith("100k"))
    (cells,) = [c for (_, command), c in rows.items() if command == "estimate"]
    return (
        f"{cells[4]} the time of `content` (`estimate` of 100k bench messages: {cells[2]} s "
        f"against {cells[3]} s, `{path}`, run of {_bench_date(path)})"
    )


# --- docs/sessions.md: the Codex reader's rules and what its samples show --------------------


@figure("codex-truncation")
def codex_truncation() -> str:
    """The example of a Codex tool output's cut (``ctxwin/sessions/codex.py``)."""
    from ctxwin.sessions.codex import BYTES_PER_TOKEN, TRUNCATION_HEADROOM

    limit = 10_000
    tokens = round(limit * TRUNCATION_HEADROOM)
    return (
        f'the turn\'s `truncation_policy` × {TRUNCATION_HEADROOM:g} (`{{"mode": "tokens", '
        f'"limit": {limit}}}`: {tokens:,} of Codex\'s {BYTES_PER_TOKEN}-byte tokens, '
        f"{tokens * BYTES_PER_TOKEN:,} bytes)"
    )


@figure("codex-resent-reasoning", corpus=True)
def codex_resent_reasoning() -> str:
    """Between two calls of one Codex turn whose first response reasoned: the most the
    reported count grew beyond the reasoning tokens, the other items' o200k tokens and 9 an
    item (``tests.test_sessions_codex.step_excesses``; needs the ``bpe`` extra)."""
    from tests.test_sessions_codex import step_excesses

    excess = step_excesses()
    return (
        f"never by more than {max(excess)} tokens over that on the {len(excess)} steps "
        "whose response reasoned"
    )


@figure("codex-ciphertext", corpus=True)
def codex_ciphertext() -> str:
    """The encrypted reasoning of the unredacted Codex samples priced as text (the default
    estimator), ÷ the reasoning tokens its response reported."""
    from ctxwin.runs import read_runs
    from fidelity.adversarial import estimate_tokens

    root = corpus_dir()
    assert root is not None
    ratios = []
    for path in sorted((root / "agent_tools" / "codex").iterdir()):
        if path.name.startswith(REDACTED):
            continue
        for run in read_runs(path.read_bytes(), path=str(path)):
            for item in run.body.get("input") or []:
                tokens = item.get("ctxwin_reasoning_tokens") if isinstance(item, dict) else None
                if item.get("type") == "reasoning" and tokens and item.get("encrypted_content"):
                    ratios.append(estimate_tokens(item["encrypted_content"], "bound") / tokens)
    return (
        f"{min(ratios):.1f}–{max(ratios):.0f} times the reasoning tokens it carries (median "
        f"{statistics.median(ratios):.1f}, over the {len(ratios)} items of the unredacted "
        f"samples whose response reasoned)"
    )


@figure("opus-4-6-window")
def opus_4_6_window() -> str:
    return f"{_model_row('claude-opus-4-6')['context_length']:,}"


@figure("codex-window-example")
def codex_window_example() -> str:
    from ctxwin.fitting.windows import CODEX_WINDOW_PERCENT

    window = _model_row("gpt-5")["max_input_tokens"]
    return f"{window * CODEX_WINDOW_PERCENT // 100:,} of GPT-5.x's {window:,}"


def _auto_compact(tool: str, model: str, window: int, source: str) -> int:
    from ctxwin.fitting.budget import resolve_spec
    from ctxwin.fitting.windows import auto_compact

    spec = resolve_spec(model, context_length=window, context_length_source=source)  # type: ignore[arg-type]
    found = auto_compact(tool, spec)
    assert found is not None
    return found.tokens


@figure("codex-compact-example")
def codex_compact_example() -> str:
    from ctxwin.fitting.windows import CODEX_WINDOW_PERCENT

    named = _model_row("gpt-5")["max_input_tokens"] * CODEX_WINDOW_PERCENT // 100
    return (
        f"{_auto_compact('codex', 'gpt-5', named, 'session'):,} for a rollout that names {named:,}"
    )


@figure("claude-code-compact")
def claude_code_compact() -> str:
    from ctxwin.fitting.windows import (
        CLAUDE_CODE_BUFFER,
        CLAUDE_CODE_SUMMARY_OUTPUT,
        CLAUDE_CODE_WINDOW,
    )
    from ctxwin.tokens.models import LONG_CONTEXT_WINDOW

    cells = [
        f"{_auto_compact('claude-code', 'claude-opus-4-6', w, 'tool'):,} of {w:,}"
        for w in (CLAUDE_CODE_WINDOW, LONG_CONTEXT_WINDOW)
    ]
    return (
        f"`window − min(output cap, {CLAUDE_CODE_SUMMARY_OUTPUT:,}) − {CLAUDE_CODE_BUFFER:,}`: "
        + ", ".join(cells)
    )


# --- docs/tokenizers.md: the seeds and the calls they were set on ---------------------------


@figure("reasoning-header-split", corpus=True)
def reasoning_header_split() -> str:
    from ctxwin.tokens.framing import OPENAI_REASONING_PREAMBLE

    row = _provider_row("OPENAI_REASONING_PREAMBLE", "gpt-5.4-mini")
    fit, held = int(row["fit calls"]), int(row["held-out calls"])
    beyond = int(row["held-out beyond"])
    return (
        f"{OPENAI_REASONING_PREAMBLE}-token header of OpenAI's reasoning models (GPT-5 and 5.x, "
        f"o1, o3, o4-mini), without which the {fit + held} recorded gpt-5.4-mini calls were "
        f"reported up to {row['fit worst']} tokens above the exact count (the {fit} of the fit "
        f"part set it; the {held} held out, {beyond} beyond it, are calls of the same run, "
        f"split call by call, so they share a conversation with those that set it)"
    )


@figure("auto-provider", corpus=True)
def auto_provider() -> str:
    fit, held, *_ = _split()
    text = reports()["fidelity/results.md"]
    found = _find(
        text,
        r"- `--tokenizer auto`[^\n]*fit part (\d+) under-counts in \d+ calls; held-out part "
        r"(\d+) under-counts",
    )
    return (
        f"{found.group(1)} under of the {fit} fit calls, {found.group(2)} of the {held} held "
        f"out: a thin check, as [fidelity.md](fidelity.md#which-figures-were-set-from-which-calls) "
        f"says"
    )


@figure("content-claude-seed", corpus=True)
def content_claude_seed() -> str:
    from fidelity.provider import STEP

    row = _provider_row("MODEL_CALIBRATION", "claude")
    return (
        f"reported up to {float(row['fit worst']):.3f}× the uncalibrated estimate on the fit "
        f"part of the recorded provider calls, rounded up to {1 / STEP:.2f}; the held-out part "
        f"({row['held-out calls']} calls, never used to set it) reached "
        f"{float(row['held-out worst']):.3f}×"
    )


def _claude_fit_worst(figure_name: str) -> float:
    """Claude's fit worst, to the three decimals the page shows it with (so the page's
    products of it are what it shows times the growth)."""
    return round(float(_provider_row(figure_name, "claude")["fit worst"]), 3)


@figure("claude-next-documented", corpus=True)
def claude_next_documented() -> str:
    from ctxwin.tokens.seeds import CLAUDE_TOKENIZER_GROWTH

    worst = _claude_fit_worst("MODEL_CALIBRATION")
    return f"{worst:.3f} × {CLAUDE_TOKENIZER_GROWTH:g} = {worst * CLAUDE_TOKENIZER_GROWTH:.2f}"


@figure("claude-next-measured", corpus=True)
def claude_next_measured() -> str:
    from ctxwin.tokens.seeds import CLAUDE_GROWTH_MEASURED

    worst = _claude_fit_worst("MODEL_CALIBRATION")
    return f"{worst:.3f} × {CLAUDE_GROWTH_MEASURED:g} = {worst * CLAUDE_GROWTH_MEASURED:.2f}"


@figure("bound-seeds-tokenizers", corpus=True)
def bound_seeds_tokenizers() -> str:
    rows = {
        family: _provider_row("BOUND_MODEL_CALIBRATION", family)
        for family in ("claude", "deepseek", "llama-4")
    }
    c, d, m = rows["claude"], rows["deepseek"], rows["llama-4"]

    def seed(r: dict[str, str]) -> str:
        return f"{float(r['shipped']):g}"

    held = ", ".join(f"{float(r['held-out worst']):.3f}×" for r in rows.values())
    return (
        f"**{seed(c)}** for Claude generation 1 (Claude Sonnet 4.5 reported "
        f"{float(c['fit worst']):.3f}×), {seed(d)} for DeepSeek ({float(d['fit worst']):.3f}×), "
        f"{seed(m)} for Llama 4 ({float(m['fit worst']):.3f}×); the held-out calls reached "
        f"{held}"
    )


@figure("claude-next-bound", corpus=True)
def claude_next_bound() -> str:
    from ctxwin.tokens.seeds import CLAUDE_GROWTH_MEASURED

    worst = _claude_fit_worst("BOUND_MODEL_CALIBRATION")
    return f"{worst:.3f} × {CLAUDE_GROWTH_MEASURED:g} = {worst * CLAUDE_GROWTH_MEASURED:.2f}"


# --- README.md ------------------------------------------------------------------------------


@figure("python-requires")
def python_requires() -> str:
    import tomllib

    spec = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    floor: str = spec["requires-python"]
    return "Python " + floor.replace(">=", "≥ ")


@figure("cache-loop-setup")
def cache_loop_setup() -> str:
    """The loop ``tests/test_cache_loop.py`` runs (and :func:`block_loop` measures)."""
    from tests.test_cache_loop import CALLS, WINDOW

    return f"a {CALLS}-call Chat loop at a {WINDOW:,}-token window"


@figure("readme-held-out-words")
def readme_held_out_words() -> str:
    from fidelity import bound

    _, first, count, (low, high), _ = bound.HELD_OUT_WORDS[0]
    return (
        f"0 of {count:,} random words of {low}–{high} letters its prices never saw "
        f"(`tests/test_estimator_bound.py`, seeds {first}–{first + count - 1:,})"
    )


# --- docs/formats.md: what media costs (ctxwin/formats/media.py) ----------------------------


@figure("media-table")
def media_table() -> str:
    from ctxwin.formats import media as m

    return "\n".join(
        [
            "| provider | image | PDF | audio / video |",
            "|---|---|---|---|",
            f"| OpenAI (Chat, Responses) | `detail: low` {m.OPENAI_LOW_DETAIL}; else scale to fit "
            f"2048², shortest side to 768, {m.OPENAI_BASE} + {m.OPENAI_PER_TILE} per 512-px "
            f"tile; unknown size {m.OPENAI_UNKNOWN_IMAGE} (8 tiles, the rule's maximum) | per "
            f"page {m.PDF_PAGE_TEXT} text + {m.OPENAI_UNKNOWN_IMAGE} image "
            f"| {m.AUDIO_PER_SECOND} tokens/s |",
            f"| Anthropic | ⌈w·h / {m.ANTHROPIC_PIXELS_PER_TOKEN}⌉ after scaling the long edge "
            f"to {m.ANTHROPIC_MAX_EDGE} px, at most {m.ANTHROPIC_IMAGE_CAP}; unknown size "
            f"{m.ANTHROPIC_IMAGE_CAP} | per page {m.PDF_PAGE_TEXT} text + "
            f"{m.ANTHROPIC_IMAGE_CAP} image | — |",
            f"| Gemini | {m.GEMINI_TILE} per {m.GEMINI_TILE_EDGE}-px tile (one tile up to "
            f"{m.GEMINI_SMALL_EDGE}²), at least {m.GEMINI_IMAGE_FLOOR} (Gemini 3 default "
            f"resolution); unknown size {m.GEMINI_UNKNOWN_IMAGE} (a 2048² image) "
            f"| {m.GEMINI_PDF_PAGE} per page | audio {m.AUDIO_PER_SECOND} tokens/s, video "
            f"{m.GEMINI_VIDEO_PER_SECOND} tokens/s |",
        ]
    )


@figure("media-unknown")
def media_unknown() -> str:
    from ctxwin.formats import media as m

    return (
        f"a PDF with no findable page objects counts one page per {m.PDF_BYTES_PER_PAGE // 1000} "
        f"kB; audio of unknown encoding plays at {m.UNKNOWN_AUDIO_BYTES_PER_SECOND * 8 // 1000} "
        f"kbit/s, video at {m.UNKNOWN_VIDEO_BYTES_PER_SECOND * 8 // 1000} kbit/s; media known "
        f"only by URL or file id count as the unknown-size image, {m.UNKNOWN_DOC_PAGES} PDF "
        f"pages, or {m.UNKNOWN_CLIP_SECONDS} s of audio/video; an inline payload of no media "
        f"type counts as dense text at {m.OTHER_BYTES_PER_TOKEN} bytes per token"
    )


# --- docs/cluster.md: the cluster's defaults and bench/cluster.md ----------------------------


@figure("cluster-chunks")
def cluster_chunks() -> str:
    import inspect

    from ctxwin.runs.checking import chunks

    return f"about {inspect.signature(chunks).parameters['target'].default} per worker thread"


@figure("cluster-retries")
def cluster_retries() -> str:
    import inspect

    from ctxwin.cluster import check_paths_on_dask

    return f"up to {inspect.signature(check_paths_on_dask).parameters['retries'].default} times"


@figure("cluster-connect")
def cluster_connect() -> str:
    from ctxwin.cluster import CONNECT_TIMEOUT

    return f"{CONNECT_TIMEOUT:g} s"


CLUSTER_BENCH = "bench/cluster.md"


@figure("cluster-throughput")
def cluster_throughput() -> str:
    """The run bench/cluster.md records: its set-up and its table (timings: quoted from the
    file as it is)."""
    text = (ROOT / CLUSTER_BENCH).read_text("utf-8")
    date = _find(text, r"- date: ([\d-]+)")[1]
    load = _find(text, r"before / after: ([\d.]+) / ([\d.]+)")
    setup = _find(text, r"- input: ([^\n]+)")[1]
    rows = _table_rows(text[text.index("## Engines") : text.index("## Control")])[1:]
    lines = [
        f"Measured with `python bench/cluster.py --repeat 5` (best of 5) on the 2-core "
        f"development machine on {date}, shared at the time (load average {load[1]} before, "
        f"{load[2]} after), on {setup} ([{CLUSTER_BENCH}](../{CLUSTER_BENCH})):",
        "",
        "| engine | best | median | files/s | MB/s |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [f"| {e} | {b} s | {m} s | {f} | {mb} |" for e, b, m, f, mb in rows]
    return "\n".join(lines)


@figure("cluster-reading")
def cluster_reading() -> str:
    text = (ROOT / CLUSTER_BENCH).read_text("utf-8")
    control = [float(r[1]) for r in _table_rows(text[text.index("## Control") :])[1:]]
    engines = text[text.index("## Engines") : text.index("## Control")]
    best = {r[0]: float(r[1]) for r in _table_rows(engines)[1:]}
    one, two = best["Dask, 1 worker"], best["Dask, 2 workers"]
    extra = 100 * (one / best["local `-j 1`"] - 1)
    return (
        f"a pure-CPU loop took {control[0]:.2f} s in one process and {control[1]:.2f} s split "
        f"over two (×{control[0] / control[1]:.2f}), so the machine had no second core to give "
        f"during the run, and the local pool gains nothing from `-j 2`. Two Dask workers were "
        f"×{one / two:.2f} faster than one all the same (more processes get a larger share of "
        f"a busy machine), not a measure of scaling. One worker costs about {extra:.0f}% more "
        f"than the local serial check here"
    )


# --- docs/integrations/*.md: the end-to-end loops' sizes and the hooks' defaults --------------


def _source_constant(module: str, name: str) -> int:
    """The integer ``name`` is set to at the top of ``tests/MODULE.py``, read from its source
    (importing the integration tests would import every framework), following one
    ``from tests.X import NAME``."""
    import ast

    tree = ast.parse((ROOT / "tests" / f"{module}.py").read_text("utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, int)
            return value
        if (
            isinstance(node, ast.ImportFrom)
            and node.module is not None
            and node.module.startswith("tests.")
            and any(a.name == name for a in node.names)
        ):
            return _source_constant(node.module.removeprefix("tests."), name)
    raise LookupError(f"tests/{module}.py: {name}")


def _loop(module: str, steps: str, words: str) -> Callable[[], str]:
    def make() -> str:
        n = _source_constant(module, steps)
        window = _source_constant(module, "WINDOW")
        return words.format(n=n, window=f"{window:,}")

    return make


for _name, (_module, _steps, _words) in {
    "loop-agents": ("test_integrations_agents", "STEPS", "a {n}-tool-call run (window {window})"),
    "loop-litellm": (
        "test_integrations_litellm",
        "TURNS",
        "a {n}-step agent loop (window {window})",
    ),
    "loop-langchain": (
        "test_integrations_langchain",
        "TURNS",
        "a {n}-step tool loop (window {window} tokens)",
    ),
    "loop-pydantic-ai": (
        "test_integrations_pydantic_ai",
        "TURNS",
        "a {n}-step tool loop (window {window} tokens)",
    ),
    "loop-openai": ("test_integrations_openai", "TURNS", "a {n}-step agent loop (window {window})"),
    "loop-anthropic": (
        "test_integrations_anthropic",
        "TURNS",
        "a {n}-step agent loop (window {window})",
    ),
}.items():
    figure(_name)(_loop(_module, _steps, _words))


def _keyword_default(path: str, name: str) -> int:
    """The integer default of the keyword argument ``name`` of the ``__init__`` in the
    module at ``path``, read from its source (importing it would import its framework)."""
    import ast

    tree = ast.parse((ROOT / path).read_text("utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            for arg, default in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True):
                if (
                    arg.arg == name
                    and isinstance(default, ast.Constant)
                    and isinstance(default.value, int)
                ):
                    return default.value
    raise LookupError(f"{path}: {name}=")


@figure("hook-conversations")
def hook_conversations() -> str:
    return f"{_keyword_default('ctxwin/integrations/agents.py', 'conversations'):,}"


@figure("litellm-conversations")
def litellm_conversations() -> str:
    return f"{_keyword_default('ctxwin/integrations/litellm.py', 'conversations'):,}"


@figure("gpt-4o-output-cap")
def gpt_4o_output_cap() -> str:
    return f"{_model_row('gpt-4o')['max_output_tokens']:,}"


# --- docs/observability.md: what seeing a fit costs (bench/telemetry-results.md) -------------

TELEMETRY_BENCH = "bench/telemetry-results.md"
TELEMETRY_MODES = (
    "no `opentelemetry` installed",
    "`opentelemetry-api`, no SDK (no exporter)",
    "SDK, in-memory exporter",
    "no SDK, INFO records to a handler",
)
"""The modes of the bench file's table, in its order, as the page names them."""


def _telemetry() -> tuple[str, list[list[str]]]:
    text = (ROOT / TELEMETRY_BENCH).read_text("utf-8")
    return text, _table_rows(text)[1:]


@figure("telemetry-setup")
def telemetry_setup() -> str:
    text, _ = _telemetry()
    calls = _find(text, r"([\d,]+) calls per loop, ~([\d,]+)-byte results, a ([\d,]+)-token window")
    return (
        f"a {calls[1]}-call agent loop (≈{calls[2]}-byte tool results, a {calls[3]}-token "
        f"window it outgrows)"
    )


@figure("telemetry-cost")
def telemetry_cost() -> str:
    """The run bench/telemetry-results.md records (timings: quoted from the file)."""
    text, rows = _telemetry()
    load = _find(text, r"load average ([\d.]+) before, ([\d.]+) after")
    runs = _find(text, r"per mode (\d+) runs of (\d+) loops of (\d+) fits")
    fits = int(runs[1]) * int(runs[2]) * int(runs[3])
    lines = [
        f"Measured on a shared 2-core machine (load average {load[1]} before the run, "
        f"{load[2]} after; other work ran on it), per fit, medians over {fits:,} fits "
        f"(`{TELEMETRY_BENCH}`):",
        "",
        "| mode | fit alone (µs) | with it (µs) | added per fit | added to a fit that changed "
        "the request |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, (_, alone, with_it, added, _middle, changed) in zip(
        TELEMETRY_MODES, rows, strict=True
    ):
        cells = [label, alone, with_it, added.replace("-", "−"), changed.replace("-", "−")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


@figure("telemetry-reading")
def telemetry_reading() -> str:
    def minus(s: str) -> str:
        return s.replace("-", "−")

    text, rows = _telemetry()
    (_, _, _, api_added, api_middle, _) = rows[1]
    (_, alone, with_it, _, _, _) = rows[2]
    (_, _, _, _, _, info_changed) = rows[3]
    share = _find(api_added, r"\(\+([\d.]+) %\)")[1]
    low, high = _find(api_middle, r"([+-]?[\d.]+) to ([+-]?[\d.]+) %").groups()
    changed = _find(text, r"\((\d+) fits of each loop drop turns\)")[1]
    calls = _find(text, r"([\d,]+) calls per loop")[1]
    info = _find(info_changed, r"\+([\d.]+) µs")[1]
    return (
        f"With no exporter configured, seeing a fit adds about {float(share):.0f} % of the "
        f"fit's own time; single fits vary more than that on a shared machine (the middle "
        f"half of the per-fit differences spans about {minus(f'{float(low):+.0f}')} % to "
        f"{float(high):+.0f} %). A recorded span costs about "
        f"{float(with_it) - float(alone):.0f} µs with the SDK's synchronous processor; an "
        f"INFO record, built and formatted, about {float(info):.0f} µs, and only for the fits "
        f"that change the request ({changed} of the loop's {calls})"
    )


# --- docs/robustness.md: what the commands print for each exit code -------------------------


def _printed(command: str, *, stdin: str = "") -> tuple[int, str]:
    """(exit code, what ``ctxwin ARGS`` writes to stderr, or to stdout when that is empty)
    of a command line of the page, run from the repository's root in a temporary folder
    for the files it writes."""
    import shlex
    import shutil
    import subprocess
    import sys
    import tempfile

    from tests.docs_support import _env

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(ROOT / "examples", Path(tmp) / "examples")
        done = subprocess.run(
            [sys.executable, "-m", "ctxwin", *shlex.split(command)],
            input=stdin,
            capture_output=True,
            text=True,
            env=_env(),
            cwd=tmp,
            timeout=120,
            check=False,
        )
    return done.returncode, (done.stderr or done.stdout).strip()


def _exit_example(command: str, code: int, *, stdin: str = "", find: str = "") -> str:
    got, text = _printed(command, stdin=stdin)
    if got != code:
        raise RuntimeError(f"ctxwin {command} exited {got}, not {code}: {text}")
    if find:
        text = _find(text, find).group(0)
    return f"`{text}`"


@figure("exit-0")
def exit_0() -> str:
    return _exit_example("prune examples/agent-run.json fit.json -c 2000 --max-tokens 0", 0)


@figure("exit-1")
def exit_1() -> str:
    return _exit_example("estimate -", 1, stdin="{\n")


@figure("exit-2")
def exit_2() -> str:
    return _exit_example(
        "estimate examples/agent-run.json --no-such-flag",
        2,
        find=r"ctxwin: usage error: No such option: \S+",
    )


@figure("exit-3")
def exit_3() -> str:
    return _exit_example(
        "prune examples/agent-run.json fit.json -c 400 --max-tokens 100",
        3,
        find=r"ctxwin: context truncated: .*? budget of [\d,]+",
    )


@figure("exit-4")
def exit_4() -> str:
    return _exit_example(
        "check examples/agent-run.json -c 16000 --jsonl", 4, find=r'"status":"needs_pruning"'
    )


@figure("no-budget-line")
def no_budget_line() -> str:
    return _exit_example("prune examples/agent-run.json fit.json -c 1000", 3)


@figure("scripts-not-held-out")
def scripts_not_held_out() -> str:
    ((_, _, med, low, high),) = _scripts("Not held out")
    return f"median {med:.2f}, lowest {low:.2f}, highest {high:.2f}"


@figure("calibration-exact")
def calibration_exact() -> str:
    """The seed of an exact count (``--tokenizer``)."""
    from ctxwin.tokens.registry import default_calibration

    return f"calibration {default_calibration('tokenizer:o200k_base'):.1f}"


@figure("calibration-plain")
def calibration_plain() -> str:
    """The seed of ``bound`` and ``content`` for a model family with none of its own."""
    from ctxwin.tokens.registry import default_calibration

    seeds = {default_calibration(e, "gpt-4o") for e in ("bound", "content")}
    (seed,) = seeds
    return f"{seed:.1f}"


@figure("calibration-exact-value")
def calibration_exact_value() -> str:
    return calibration_exact().removeprefix("calibration ")


@figure("seed-stall-short")
def seed_stall_short() -> str:
    from ctxwin.tokens.registry import default_calibration

    seed = default_calibration("seed")
    return f"2 ÷ {seed:g} = {2 / seed:.2f}"


@figure("litellm-window")
def litellm_window() -> str:
    return f"window {_source_constant('test_integrations_litellm', 'WINDOW'):,}"


# --- what is not a figure -------------------------------------------------------------------

FIGURE = re.compile(r"(?<![\w.-])\d[\d,]*\.\d+×?|\b\d{2,}[\d,]*\b")
"""A number a page may quote as a figure: one with a decimal point, or of two digits or more."""

HTTP = "an HTTP status"

NOT_FIGURES: dict[str, tuple[tuple[str, str], ...]] = {
    "README.md": (
        ("a raw 400", HTTP),
        ("tcp://HOST:8786", "Dask's default port"),
    ),
    "docs/fidelity.md": (
        ("SHA-256", "a hash's name"),
        ("--transcript-margin 1.0", "the command line the shipped weights were fitted with"),
        ("1.00 × on transcripts", "that command line's margin"),
        ("converges to 2.0", "the example's own arithmetic (2×)"),
    ),
    "docs/how-it-works.md": (
        ("gpt-4o-2024-08-06", "a model name"),
        ("claude-sonnet-4-5-20250929-v1:0", "a model name"),
        ("`-c 50000`", "the example's input"),
        ("answers 400", HTTP),
        ("Sonnet 3.7 and Haiku 4.5", "model names"),
        ("Claude Opus 4.7", "a model name"),
        ("rounded up to 4/100 token", "the cheap tier's step (its constant is quoted beside)"),
    ),
    "docs/sessions.md": (
        ("`line 12.message.content", "an error message's example path"),
        ("0.36–0.42", "Codex versions"),
        ("0.104–0.125", "Codex versions"),
        ("0.140–0.142", "Codex versions"),
        ("Opus 4.6 and Sonnet 4.6", "model names"),
        ("÷ 100", "a percentage's arithmetic"),
        ("openai/codex#19319 and #19306", "issue numbers"),
        ("anthropics/claude-code#31806", "an issue number"),
        ("sirmalloc/ccstatusline#319", "an issue number"),
        ("bman654/clodex#180", "an issue number"),
    ),
    "docs/tokenizers.md": (
        ("Llama 3, 3.1, 3.2, 3.3", "model versions"),
        ("Qwen 2.5", "a model version"),
        ("Claude Opus 4.6, Sonnet 4.6 and Haiku 4.5", "model names"),
        ("Claude Opus 4.7", "a model name"),
        ("Opus 4.8", "a model name"),
        ("Sonnet 4/4.5 and Haiku 4.5", "model names"),
        ("roughly 1× to 1.35×", "Anthropic's words, quoted"),
        ("up to ~35% more", "Anthropic's words, quoted"),
        ("1.45× on English prose", "a published measurement, quoted"),
    ),
    "docs/formats.md": (("1,500–3,000 text tokens", "Anthropic's words, quoted"),),
    "docs/cluster.md": (
        ("8786", "Dask's default port"),
        ('block=0.5"])', "an example's input: the policies of --compare"),
    ),
    "docs/observability.md": (("runs 30 calls", "a test's loop size"),),
    "docs/robustness.md": (
        ("-c 2000", "the example's input"),
        ("-c 400 --max-tokens 100", "the example's input"),
        ("-c 16000", "the example's input"),
        ("-c 1000", "the example's input"),
        ("254 levels", "orjson's limit"),
        ("3.13", "an orjson version"),
        ("243 to 253", "orjson's defect"),
        ("a 400", HTTP),
        ("128 and 256 KiB", "the test's sizes"),
        ("RFC 8259", "a standard's number"),
        ("64 bits", "the integer width"),
        ("1.2e+29", "an example float"),
        ("messages[12]", "an error message's example path"),
        ("200 MB", "the slow test's size"),
        ("head -c 10", "the example's input"),
        ("10,000", "the fuzz runs' sizes (Makefile)"),
        ("runs 500", "the test runs' size"),
        ("127.0.0.1", "the loopback address"),
    ),
    "docs/integrations/agents.md": (
        ("127.0.0.1", "the loopback address"),
        ("own 400", HTTP),
    ),
    "docs/integrations/anthropic.md": (
        ("127.0.0.1", "the loopback address"),
        ("no 400", HTTP),
        ("own 400", HTTP),
    ),
    "docs/integrations/langchain.md": (
        ("127.0.0.1", "the loopback address"),
        ("no 400", HTTP),
        ("own 400", HTTP),
    ),
    "docs/integrations/litellm.md": (
        ("127.0.0.1", "the loopback address"),
        ("status 400", HTTP),
        ("with a 400", HTTP),
        ("own 400", HTTP),
        ("answered 400", HTTP),
        ("proxy 1.110.2", "a LiteLLM version"),
        ("a 14-step agent loop of the `openai` SDK", "a check made by hand"),
    ),
    "docs/integrations/openai.md": (
        ("127.0.0.1", "the loopback address"),
        ("no 400", HTTP),
        ("own 400", HTTP),
    ),
    "docs/integrations/pydantic_ai.md": (
        ("127.0.0.1", "the loopback address"),
        ("`ModelHTTPError` 400", HTTP),
        ("own 400", HTTP),
    ),
    "docs/library.md": (),
}
"""The pages every figure of which is a region, and each number their prose holds outside
one that is not a figure (a name, a version, an example's input, a protocol's constant, a
quotation), with why. ``tests/test_figures.py`` fails on any other number there."""


def prose(text: str) -> str:
    """``text`` without its regions and fenced blocks, its whitespace made single spaces."""
    text = REGION.sub(" ", text)
    text = re.sub(r"^```.*?^```", " ", text, flags=re.MULTILINE | re.DOTALL)
    return " ".join(text.split())


def unmarked(page: str) -> list[str]:
    """The numbers of ``page``'s prose outside regions that :data:`NOT_FIGURES` does not
    explain, each with the words around it."""
    text = prose((ROOT / page).read_text("utf-8"))
    for phrase, _why in NOT_FIGURES[page]:
        if phrase not in text:
            return [f"{phrase!r} is no longer on the page: remove it from NOT_FIGURES"]
        text = text.replace(phrase, " ")
    return [text[max(0, m.start() - 30) : m.end() + 10] for m in FIGURE.finditer(text)]


@figure("scripts-stretches")
def scripts_stretches() -> str:
    from fidelity.scripts import SIZE

    rows = _scripts("Every stretch")
    cells = [
        f"{name} median {med:.2f}, highest {high:.2f} ({texts} texts)"
        for name, texts, med, _, high in rows
    ]
    names = " and ".join(name for name, *_ in rows)
    return (
        f"On every text of about {SIZE:,} characters the {names} catalogs hold, one after the "
        f"other: " + "; ".join(cells)
    )
