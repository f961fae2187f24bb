"""``ctxwin replay``, without the command-line framework.

:func:`replay` takes the keyword arguments the Typer command
(:func:`ctxwin.cli.runs.replay`) and the Typer-free command line
(:mod:`ctxwin.cli.fastargs`) both pass, and returns the exit code, so a plain
``ctxwin replay RUN --json`` never imports Typer or Click. The work happens in
:mod:`ctxwin.runs.replaying` (on the engine ``--engine`` names) and
:mod:`ctxwin.runs.simulate`; rich is imported only when tables are shown.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ctxwin.cli.funnel import say
from ctxwin.cli.streams import STDIO, read_input, write_stdout
from ctxwin.cli.verdicts import HEADLINE, LABEL, STYLE
from ctxwin.core import NO_BUDGET, TRUNCATED
from ctxwin.errors import NO_PROMPT_FITS, ExitCode, InputError, UsageError
from ctxwin.words import plural

if TYPE_CHECKING:
    from rich.console import Console

    from ctxwin.fitting.rows import ReplayReport
    from ctxwin.runs.policies import Policy
    from ctxwin.runs.replaying import Replayed


COMPARE_COLUMNS = {
    "policy": "policy",
    "calls": "calls",
    "pruned_calls": "pruned",
    "mean_tokens_sent": "mean sent",
    "min_tokens_sent": "least sent",
    "cached_tokens": "cache read",
    "cache_write_tokens": "cache write",
    "input_cost": "input USD",
}
"""The columns of ``replay --compare``'s table (report keys), with their labels."""

TABLE_COLUMNS = {
    "policy": "policy",
    "calls": "calls",
    "overflow_calls": "over",
    "mean_tokens_sent": "mean\nsent",
    "cached_tokens": "cache\nread",
    "cache_write_tokens": "cache\nwrite",
    "input_cost": "input\nUSD",
    "total_cost": "total\nUSD",
}
"""The columns of ``replay --compare``'s table on a terminal (report keys), with their
labels: token counts in thousands (k) or millions (M), so that it fits 80 columns."""

COMPARE_WIDTH = 80
"""The width ``replay --compare`` lays its table out in when printing to a pipe."""


def stdout_is_tty() -> bool:
    return sys.stdout.isatty()


def num(value: Any) -> str:
    """A table cell: ``—`` for nothing, three decimals for a float, else with separators."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3f}"
    return f"{value:,}"


def replay(
    *,
    run_files: list[str],
    select: str | None = None,
    run_format: str = "auto",
    json_: bool = False,
    max_input_bytes: int,
    quiet: bool = False,
    compare: list[str] | None = None,
    recommend: bool = False,
    min_context: float = 0.75,
    jobs: int = 0,
    engine: str = "local",
    scheduler: str | None = None,
    **flags: Any,
) -> int:
    """Replay the runs in ``run_files`` (``flags``: the model, budget, estimation and
    strategy flags, :func:`ctxwin.cli.commands.build_settings`); with ``compare``, once
    per cutting policy (:func:`ctxwin.runs.policies.policies`), side by side; the exit code.
    The files are read and replayed on ``engine`` (:func:`ctxwin.runs.replaying.replay_files`)."""
    from ctxwin.cli.commands import build_settings, check_engine, check_run_format, retain
    from ctxwin.runs.checking import find_files
    from ctxwin.runs.replaying import replay_files

    settings = build_settings(**flags)
    check_run_format(run_format)
    engine = check_engine(engine, scheduler, jobs, quiet=quiet)
    chosen = None
    named = None
    if recommend and not compare:
        raise UsageError("--recommend needs --compare POLICY,... (the policies to search)")
    if compare:
        from ctxwin.runs.policies import candidates, policies

        named = policies(compare)
        chosen = candidates(named) if recommend else named
    files = [STDIO] if STDIO in run_files else []
    found = find_files([p for p in run_files if p != STDIO])
    if found.missing:
        raise InputError(f"{found.missing[0]}: no such file, folder or match")
    if found.unreadable:
        raise InputError(": ".join(found.unreadable[0]))
    files += found.files
    if not files:
        raise InputError("no recorded runs: the folders hold no .json, .jsonl or .traj files")
    given = {STDIO: read_input(STDIO, max_input_bytes)} if STDIO in files else None
    replayed = replay_files(
        files,
        settings,
        chosen=chosen,
        engine=engine,
        scheduler=scheduler,
        jobs=jobs,
        max_bytes=max_input_bytes,
        run_format=run_format,
        select=select,
        given=given,
    )
    retain(replayed)
    for done in replayed.files:
        if not quiet:
            for warning in done.warnings:
                say(f"warning: {done.path}: {warning}")
        if done.error is not None:
            hint = " (raise it with --max-input-bytes, 0 for no limit)" if done.over_limit else ""
            raise InputError(done.error + hint)
    run_file = replayed.label
    if select is not None and not replayed.runs:
        raise InputError(f"--run: no run in {run_file} is named like {select!r}")
    if chosen is not None and named is not None:
        return _compare(
            replayed,
            chosen,
            named,
            json_=json_,
            quiet=quiet,
            recommend=recommend,
            min_context=min_context,
        )
    reports = replayed.reports()
    errors = [_said(name, why, run_file) for name, why in replayed.errors()]
    if errors and not reports:
        raise InputError(errors[0])
    if not quiet:
        for error in errors:
            say(f"warning: skipped {error}")
    if not any(rep["calls"] for rep in reports):
        raise InputError(f"{run_file}: no provider calls (no model messages) to replay")
    if json_:
        import orjson

        payload = {"runs": reports}
        write_stdout(orjson.dumps(payload, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
    else:
        from rich.console import Console

        console = Console()
        chart = stdout_is_tty()
        for rep in reports:
            render_replay(rep, console, chart=chart)
    truncated = [rep for rep in reports if rep["first_truncated"] is not None]
    invalid = [rep for rep in reports if rep["invalid_calls"]]
    if not quiet:
        for rep in invalid:
            first = next(r for r in rep["rows"] if r["status"] == "invalid")
            say(f"warning: {rep['run'] or run_file} call {first['call']}: {first['error']}")
        for rep in reports:
            for words in rep.get("warnings", ()):
                say(f"warning: {rep['run'] or run_file}: {words}")
            if rep.get("zero_reports"):
                from ctxwin.fitting.calibration import zero_report_words

                say(f"warning: {rep['run'] or run_file}: {zero_report_words(rep['zero_reports'])}")
    if truncated:
        if not quiet:
            for rep in truncated:
                row = rep["rows"][(rep["first_truncated"] or 1) - 1]
                what = HEADLINE[NO_BUDGET if row["status"] == NO_BUDGET else TRUNCATED]
                say(
                    f"{what}: {rep['run'] or run_file} would stop at call "
                    f"{rep['first_truncated']} of {rep['calls']}"
                    + (
                        f" (a budget of {row['budget']:,} tokens: {NO_PROMPT_FITS})"
                        if row["status"] == NO_BUDGET
                        else ""
                    )
                )
        return int(ExitCode.CONTEXT_TRUNCATED)
    if invalid and len(invalid) == len(reports):
        return int(ExitCode.BAD_INPUT)
    return 0


def _compare(
    replayed: Replayed,
    chosen: Sequence[Policy],
    named: Sequence[Policy],
    *,
    json_: bool,
    quiet: bool,
    recommend: bool = False,
    min_context: float = 0.75,
) -> int:
    """``replay --compare``: the runs replayed once per policy (``chosen``: the ``named``
    ones, or with ``recommend`` as-logged and each one's grid); the exit code."""
    from ctxwin.runs.policies import compare_row
    from ctxwin.runs.policies import recommend as pick

    rows = []
    first: list[Mapping[str, Any]] = []
    invalid = False
    for i, policy in enumerate(chosen):
        reports = replayed.reports(i)
        if not first and not quiet:
            for run, why in replayed.errors(i):
                said = _said(run, why, replayed.label)
                say(f"warning: skipped {said}" if run else f"warning: {said}")
        elif not quiet and (policy in named or not recommend):
            # a run this policy cannot replay, though the first could: its row lacks it
            known = {run for run, _ in replayed.errors(0)}
            for run, why in replayed.errors(i):
                if run not in known:
                    said = _said(run, why, replayed.label)
                    say(f"warning: {policy.label}: skipped {said}")
        if not reports and replayed.errors(i):
            if i == 0 or policy in named:
                raise InputError(_said(*replayed.errors(i)[0], replayed.label))
            continue
        if not any(rep["calls"] for rep in reports):
            raise InputError(f"{replayed.label}: no provider calls (no model messages) to replay")
        first = first or reports
        rows.append((policy, compare_row(policy.label, reports)))
        invalid = invalid or all(rep["invalid_calls"] for rep in reports)
    shown = [row for policy, row in rows if policy in named or not recommend]
    if recommend:
        logged = [row for policy, row in rows if policy.family == "as-logged"]
        shown = logged + [r for r in shown if r["policy"] != "as-logged"]
    recommendation = None
    if recommend:
        windows = [rep["context_length"] for rep in first if rep.get("context_length")]
        recommendation = pick(
            [row for _, row in rows],
            [policy for policy, _ in rows],
            min_context,
            windows[0] if windows else None,
        )
    prices = _prices(first)
    if json_:
        import orjson

        payload: dict[str, Any] = {"policies": shown, "prices": prices}
        if recommend:
            payload["recommendation"] = recommendation
            payload["tried"] = len(rows)
        write_stdout(orjson.dumps(payload, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
    else:
        from rich.console import Console

        console = Console()
        if not console.is_terminal and console.width < COMPARE_WIDTH:
            console = Console(width=COMPARE_WIDTH)  # a pipe: the whole table, unwrapped
        render_compare(shown, prices, console)
        if recommend:
            render_recommendation(recommendation, len(rows), min_context, console)
    stopped = [r for r in shown if r["stop"] is not None]
    if stopped:
        if not quiet:
            for r in stopped:
                stop = r["stop"]
                run = f" of {stop['run']}" if stop["run"] else ""
                say(
                    f"{HEADLINE[TRUNCATED]}: {r['policy']} would stop the run at call "
                    f"{stop['call']}{run}: {stop['why']}"
                )
        return int(ExitCode.CONTEXT_TRUNCATED)
    if invalid:
        return int(ExitCode.BAD_INPUT)
    return 0


def render_recommendation(
    rec: Mapping[str, Any] | None, tried: int, min_context: float, console: Console
) -> None:
    """``--recommend``'s pick: the policy, its cost and saving, and what sets it."""
    import orjson
    from rich.text import Text

    if rec is None:
        console.print(
            Text(
                f"No policy of the {tried:,} tried sends every call within the window and "
                f"keeps {min_context:.0%} of as-logged's mean context."
            )
        )
        return
    saving = rec["saving"]
    words = f"Recommended: {rec['policy']}, total ${rec['total_cost']:.4f}"
    if saving is not None:
        words += f" (${saving:.4f} less than as-logged)"
    console.print(Text(f"{words}; {tried:,} policies tried."))
    for where, setting in rec["config"].items():
        shown = setting if isinstance(setting, str) else orjson.dumps(setting).decode()
        console.print(Text(f"  {where}: {shown}"), soft_wrap=True)


def _prices(reports: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The models the runs used, each with its prices, their source and its caching rules."""
    out: dict[str | None, dict[str, Any]] = {}
    for rep in reports:
        out.setdefault(
            rep["model"],
            {
                "model": rep["model"],
                "price": rep["price"],
                "price_source": rep["price_source"],
                "cache_rules": rep["cache_rules"],
                "cache_marks": rep["cache_marks"],
            },
        )
    return list(out.values())


def price_words(p: Mapping[str, Any]) -> str:
    """Where a model's prices come from, or that none is known."""
    model = p["model"] or "(no model named)"
    price = p["price"]
    if price is None:
        return f"{model}: no price known (costs not shown)"
    source = {"table": "the model table", "spec": "--model-spec"}.get(
        p["price_source"] or "", "the model table"
    )
    words = ", ".join(
        f"{k.replace('_', ' ')} {v:g}"
        for k, v in price.items()
        if k in ("input", "cache_read", "cache_write", "cache_write_1h")
    )
    rules = p["cache_rules"]
    cache = "no caching rules known" if not rules else f"cache {rules.get('kind')}"
    marks = p.get("cache_marks")
    return f"{model}: USD per million tokens from {source}: {words}; {cache}" + (
        f" (marks: {marks})" if marks else ""
    )


def _cell(key: str, value: Any) -> str:
    if key == "policy":
        return str(value)
    if value is None:
        return "—"
    if key.endswith("_cost"):
        return f"{value:.4f}" if value < 100 else f"{value:,.2f}"
    if key.endswith("_tokens") or key == "mean_tokens_sent":
        return short(value)
    return num(value)


def short(tokens: int) -> str:
    """A token count in a few characters: ``812``, ``81.2k``, ``4.19M``."""
    if tokens < 1000:
        return str(tokens)
    if tokens < 1_000_000:
        return f"{tokens / 1000:.1f}k" if tokens < 100_000 else f"{tokens // 1000}k"
    return f"{tokens / 1_000_000:.2f}M" if tokens < 100_000_000 else f"{tokens // 1_000_000}M"


def render_compare(
    rows: Sequence[Mapping[str, Any]], prices: Sequence[Mapping[str, Any]], console: Console
) -> None:
    """``replay --compare`` for people: one row per policy (names whole, folded when
    long), the calls a policy would stop at, then where the prices come from."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(
        title=Text("context policies"), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False
    )
    for key, label in TABLE_COLUMNS.items():
        if key == "policy":
            longest = max((len(r["policy"]) for r in rows), default=6)
            table.add_column(label, justify="left", overflow="fold", min_width=min(longest, 18))
        else:
            table.add_column(label, justify="right", no_wrap=True)
    for r in rows:
        table.add_row(*(_cell(key, r[key]) for key in TABLE_COLUMNS))
    console.print(table)
    for r in rows:
        stop = r.get("stop")
        if stop:
            run = f" of {stop['run']}" if stop["run"] else ""
            console.print(Text(f"{r['policy']}: stops at call {stop['call']}{run}: {stop['why']}"))
    for p in prices:
        console.print(Text(price_words(p)))


def render_replay(rep: ReplayReport, console: Console, *, chart: bool) -> None:
    """One run's calls as a table (and, when ``chart``, as bars), then its summary line."""
    from rich.table import Table
    from rich.text import Text

    title = rep["run"] or "run"
    rows = rep["rows"]
    table = Table(title=Text(f"{title} ({rep['shape']})"), title_justify="left")
    for col in ("call", "msgs", "reported", "estimate", "budget", "calib", "dropped", "status"):
        table.add_column(col, justify="left" if col == "status" else "right")
    for r in rows:
        status = r["status"]
        table.add_row(
            str(r["call"]),
            num(r.get("messages")),
            num(r.get("reported_tokens")),
            num(r.get("estimated_tokens")),
            num(r.get("budget")),
            num(r.get("calibration")),
            num(r.get("dropped_turns")),
            Text(LABEL[status], style=STYLE[status]),
        )
    console.print(table)
    if chart:
        render_chart(rows, console)
    model = rep["model"] or "(no model named)"
    window = num(rep["context_length"])
    parts = [
        f"{plural(rep['calls'], 'call')} ({rep['calls_with_usage']:,} with usage), {model}, "
        f"window {window}"
    ]
    parts.append(
        f"first pruned at call {rep['first_pruned']}" if rep["first_pruned"] else "never pruned"
    )
    if rep["first_truncated"]:
        parts.append(f"truncated at call {rep['first_truncated']}: the run would stop there")
    if rep["under_estimates"]:
        parts.append(f"{plural(rep['under_estimates'], 'estimate')} under the reported count")
    if rep.get("unlogged_calls"):
        parts.append(
            f"{plural(rep['unlogged_calls'], 'call')} reported more than the file shows "
            "(unlogged_tokens)"
        )
    if (peak_use := rep["peak_context_use"]) is not None:
        peak = 100 * peak_use
        parts.append(f"peak {peak:.1f}% of the window at call {rep['peak_call']}")
    parts.append(f"calibration {rep['final_calibration']:.3f} at the end")
    if rep.get("learn_overhead"):
        parts.append(f"overhead {rep['final_overhead']:,} tokens learned from usage")
    console.print(Text("; ".join(parts)))
    costs = cost_words(rep)
    if costs:
        console.print(Text(costs))
    console.print()


def cost_words(rep: ReplayReport) -> str:
    """The run's prompts in tokens and money: sent, read from and written to the cache
    (predicted, and as logged), and the input cost, with where the prices come from
    (``""`` for a report without them)."""
    if "tokens_sent" not in rep:
        return ""
    parts = [f"sent {rep['tokens_sent']:,} prompt tokens"]
    if rep["cached_tokens"] is None:
        parts.append("cache: no caching rules known for the model")
    else:
        parts.append(
            f"cache read {rep['cached_tokens']:,}, written {rep['cache_write_tokens']:,}"
            f"{_for_an_hour(rep.get('cache_write_1h_tokens'))} (predicted)"
        )
    if rep["reported_cached_tokens"] is not None:
        logged = f"logged: read {rep['reported_cached_tokens']:,}"
        if rep["reported_cache_write_tokens"] is not None:
            logged += f", written {rep['reported_cache_write_tokens']:,}"
            logged += _for_an_hour(rep.get("reported_cache_write_1h_tokens"))
        parts.append(logged)
    breaks = rep.get("reported_cache_breaks")
    if breaks:
        served = rep.get("served_by")
        parts.append(
            f"the log shows {plural(breaks, 'call')} reading "
            f"{rep.get('reported_cache_break_tokens') or 0:,} tokens less than the call "
            "before had cached: the provider answered them from caches without that "
            "prefix, which no rule predicts" + (f" (served by {served})" if served else "")
        )
    uncached = rep.get("reported_uncached_calls")
    if uncached:
        parts.append(
            f"the log shows {plural(uncached, 'marked call')} long enough to cache reading "
            "and writing nothing: the requests reached the provider without their marks "
            "(caching turned off, or a gateway that drops cache_control)"
        )
    cost = rep["input_cost"]
    if cost is not None:
        money = f"input cost ${cost:.4f}"
        if rep["reported_input_cost"] is not None:
            money += f" (${rep['reported_input_cost']:.4f} at the logged counts)"
        parts.append(money)
    parts.append(
        price_words(
            {
                "model": rep["model"],
                "price": rep["price"],
                "price_source": rep["price_source"],
                "cache_rules": rep["cache_rules"],
                "cache_marks": rep["cache_marks"],
            }
        )
    )
    return "; ".join(parts)


def _for_an_hour(tokens: int | None) -> str:
    """How many of the writes were for an hour (``""`` for none)."""
    return f" ({tokens:,} of them for an hour)" if tokens else ""


def render_chart(rows: Sequence[Mapping[str, Any]], console: Console) -> None:
    """Horizontal bars: estimate per call (``·``: reported count) against the budget (``│``)."""
    from rich.text import Text

    data = [r for r in rows if "estimated_tokens" in r]
    if not data:
        return
    width = max(20, min(console.width - 16, 100))
    top = max(
        max(r["estimated_tokens"], r.get("reported_tokens") or 0, r["budget"], 1) for r in data
    )
    scale = width / top
    console.print(Text("tokens per call: █ estimate, · reported, │ budget", style="dim"))
    for r in data:
        est = round(r["estimated_tokens"] * scale)
        budget_at = min(width - 1, round(r["budget"] * scale)) if r["budget"] > 0 else -1
        reported = r.get("reported_tokens")
        rep_at = min(width - 1, round(reported * scale)) if reported else -1
        style = STYLE[r["status"]]
        cells: list[tuple[str, str]] = []
        for x in range(width):
            if x == budget_at:
                cells.append(("│", "bold"))
            elif x == rep_at:
                cells.append(("·", "bold cyan"))
            elif x < est:
                cells.append(("█", style))
            else:
                cells.append((" ", ""))
        line = Text(f"{r['call']:>4} ")
        run_text, run_style = "", ""
        for ch, st in cells:  # one span per run of equal style
            if st != run_style and run_text:
                line.append(run_text, style=run_style)
                run_text = ""
            run_text += ch
            run_style = st
        line.append(run_text, style=run_style)
        line.append(f" {r['estimated_tokens']:,}")
        console.print(line, overflow="crop", no_wrap=True)


def _said(name: str, why: str, label: str) -> str:
    """Why run ``name`` (of the inputs ``label`` names) could not be replayed, as a line says
    it: JSON Lines no reader recognises names its file and the flag that names a reader."""
    from ctxwin.cli.commands import cli_error

    worded = cli_error(why, name or label)
    if worded != why:
        return worded
    return f"{name}: {why}" if name else why
