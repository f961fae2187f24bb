"""Derive the figures that are set from provider calls, from the fit part of the calls only.

    python -m fidelity.provider [--corpus DIR] [--out fidelity/provider.md]

The recorded provider calls (:func:`fidelity.corpus.usages`) are split into a fit part
and a held-out part by run, or by call in a family of one run
(:func:`fidelity.corpus.split`). Every figure below is
derived here from the fit part alone; the held-out part is measured against the figure
shipped, never used to choose it.

* The calibration seeds of ``content`` (:data:`ctxwin.tokens.MODEL_CALIBRATION`): per
  model family of the table (a model no row names is its own family, seed 1.0), the
  largest reported ÷ ``content``'s uncalibrated estimate of the same body, rounded up
  to 0.05; 1.0 (no row) when that is 1.0 or less.
* The calibration seeds of ``bound`` (:data:`ctxwin.tokens.BOUND_MODEL_CALIBRATION`):
  the same with the largest of the four exact counts of the body (with the estimators'
  framing) in place of the estimate. The bound is never below the largest of the four,
  so the seed covers it whatever its prices; it needs the ``bpe`` extra.
* :data:`ctxwin.tokens.CLAUDE_NEXT_SEED`: the larger of the two Claude generation-1
  ratios times the largest growth measured for the generation-2 tokenizer
  (:data:`ctxwin.tokens.seeds.CLAUDE_GROWTH_MEASURED`), rounded up to 0.05.
* :data:`ctxwin.tokens.OPENAI_REASONING_PREAMBLE`: the most tokens a call to one of
  OpenAI's reasoning models reported over the exact count of its body in the model's
  own encoding with the rest of the framing (tools header included), 0 at least.
  :data:`ctxwin.tokens.OPENAI_TOOLS_PREAMBLE` is measured the same way on the other
  OpenAI calls with tools; where none needs a token it is not bound by the calls and
  is kept (the reasoning calls, which all have tools, bind only its sum with the
  reasoning header).
* The tool-search allowance (:data:`ctxwin.formats.anthropic.TOOL_SEARCH_TOKENS`): at
  least Anthropic's documented tool-use prompt, more if a call holding a
  ``tool_reference`` block needs more, at ``content``'s or ``bound``'s seed.

Each row gives the fit part's worst value, the figure derived from it, the figure
shipped, and the held-out part's worst value (an under-count where it is beyond the
shipped figure). :func:`read_figures` reads the written table back (tests compare the
shipped constants with it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxwin.formats.anthropic import TOOL_SEARCH_TOKENS
from ctxwin.tokens.base import Estimator
from ctxwin.tokens.bpe import TOKENIZERS, TokenizerEstimator, exact_encoding
from ctxwin.tokens.framing import (
    ANTHROPIC_TOOL_PROMPT,
    OPENAI_REASONING_PREAMBLE,
    OPENAI_TOOLS_PREAMBLE,
    reasoning_model,
)
from ctxwin.tokens.models import match
from ctxwin.tokens.registry import default_calibration, get_estimator
from ctxwin.tokens.seeds import (
    BOUND_MODEL_CALIBRATION,
    CLAUDE_GROWTH_MEASURED,
    CLAUDE_NEXT_SEED,
    MODEL_CALIBRATION,
)
from fidelity import corpus
from fidelity.run import count

STEP = 20
"""Seeds are rounded up to 1/STEP (0.05)."""

SEED_TABLES: dict[str, tuple[str, tuple[tuple[str, float], ...]]] = {
    "content": ("MODEL_CALIBRATION", MODEL_CALIBRATION),
    "bound": ("BOUND_MODEL_CALIBRATION", BOUND_MODEL_CALIBRATION),
}
"""The estimators whose seed depends on the model (their
:meth:`~ctxwin.tokens.base.Estimator.seed`), and the table it comes from."""

HEADER = (
    "figure",
    "estimator",
    "family",
    "fit calls",
    "fit worst",
    "from the fit part",
    "shipped",
    "held-out calls",
    "held-out worst",
    "held-out beyond",
)


@dataclass(frozen=True, slots=True)
class Figure:
    """One figure: its fit part's worst value, what that derives, what is shipped."""

    figure: str
    estimator: str
    family: str
    fit_calls: int
    fit_worst: float | None
    derived: float | None
    """``None`` where the fit part does not bind the figure (it is kept as shipped)."""
    shipped: float
    held_calls: int
    held_worst: float | None
    held_beyond: int
    """Held-out calls whose value is beyond the shipped figure (under-counted by it)."""

    def row(self) -> list[str]:
        return [
            f"`{self.figure}`",
            self.estimator,
            self.family,
            str(self.fit_calls),
            _num(self.fit_worst),
            _num(self.derived),
            _num(self.shipped),
            str(self.held_calls),
            _num(self.held_worst),
            str(self.held_beyond),
        ]


def _num(x: float | None) -> str:
    """An int as it is, a ratio to 4 places with the zeros after the 2nd dropped."""
    if x is None:
        return "—"
    if isinstance(x, int):
        return str(x)
    text = f"{x:.4f}"
    return text[:-2] + text[-2:].rstrip("0")


def round_up(x: float) -> float:
    """``x`` rounded up to 1/:data:`STEP` (0.05); exact multiples stay."""
    return math.ceil(round(x * STEP, 9)) / STEP


def seed_family(model: str, table: tuple[tuple[str, float], ...]) -> str:
    """The row of ``table`` naming ``model`` (``claude``), else the model's own family."""
    found = match(model, dict(table))
    return found[0] if found is not None else corpus.family(model)


def _worst(values: Iterable[float]) -> float | None:
    got = list(values)
    return max(got) if got else None


def _largest_of_four(u: corpus.Usage, exact: Sequence[Estimator]) -> int:
    return max(count(u.body, e, u.fmt) for e in exact)


def seed_figures(
    name: str, fit: Sequence[corpus.Usage], held: Sequence[corpus.Usage]
) -> list[Figure]:
    """The seeds of estimator ``name`` per family, from ``fit``; ``held`` measured."""
    label, table = SEED_TABLES[name]
    exact: list[Estimator] = [TokenizerEstimator(e) for e in TOKENIZERS]
    est = get_estimator(name)

    def ratio(u: corpus.Usage) -> float:
        below = _largest_of_four(u, exact) if name == "bound" else count(u.body, est, u.fmt)
        return u.reported / below

    families = sorted({seed_family(u.model, table) for u in [*fit, *held]})
    out = []
    for fam in families:
        f = [ratio(u) for u in fit if seed_family(u.model, table) == fam]
        h = [(ratio(u), u.model) for u in held if seed_family(u.model, table) == fam]
        models = [u.model for u in [*fit, *held] if seed_family(u.model, table) == fam]
        worst = _worst(f)
        derived = 1.0 if worst is None or worst <= 1.0 else round_up(worst)
        shipped = default_calibration(name, models[0])
        out.append(
            Figure(
                label,
                name,
                fam,
                len(f),
                worst,
                derived,
                shipped,
                len(h),
                _worst(r for r, _ in h),
                sum(r > default_calibration(name, m) for r, m in h),
            )
        )
    return out


def next_claude_seed(seeds: Sequence[Figure]) -> Figure:
    """:data:`CLAUDE_NEXT_SEED` from the generation-1 Claude rows of ``seeds``."""
    claude = [f for f in seeds if f.family == "claude" and f.fit_worst is not None]
    worst = max(f.fit_worst for f in claude if f.fit_worst is not None)
    return Figure(
        "CLAUDE_NEXT_SEED",
        "content, bound",
        "claude (generation 2)",
        max(f.fit_calls for f in claude),
        round(worst * CLAUDE_GROWTH_MEASURED, 4),
        round_up(worst * CLAUDE_GROWTH_MEASURED),
        CLAUDE_NEXT_SEED,
        0,
        None,
        0,
    )


def _exact_over(u: corpus.Usage, without: int) -> int:
    """Tokens ``u``'s provider reported over the exact count of its body in the model's
    encoding with the framing but ``without`` tokens of it."""
    enc = exact_encoding(u.model)
    assert enc is not None
    return u.reported - (count(u.body, TokenizerEstimator(enc), u.fmt) - without)


def framing_figures(fit: Sequence[corpus.Usage], held: Sequence[corpus.Usage]) -> list[Figure]:
    """OpenAI's reasoning header (derived) and tools header (reported, kept)."""

    def openai(us: Sequence[corpus.Usage], reasoning: bool) -> list[corpus.Usage]:
        return [
            u
            for u in us
            if u.fmt.startswith("openai")
            and exact_encoding(u.model) is not None
            and reasoning_model(u.model) == reasoning
            and (reasoning or bool(u.body.get("tools")))
        ]

    out = []
    r_fit, r_held = openai(fit, True), openai(held, True)
    need = _worst(_exact_over(u, OPENAI_REASONING_PREAMBLE) for u in r_fit)
    held_need = [_exact_over(u, OPENAI_REASONING_PREAMBLE) for u in r_held]
    out.append(
        Figure(
            "OPENAI_REASONING_PREAMBLE",
            "exact",
            ", ".join(sorted({corpus.family(u.model) for u in [*r_fit, *r_held]})),
            len(r_fit),
            need,
            max(0, need or 0),
            OPENAI_REASONING_PREAMBLE,
            len(r_held),
            _worst(held_need),
            sum(n > OPENAI_REASONING_PREAMBLE for n in held_need),
        )
    )
    t_fit, t_held = openai(fit, False), openai(held, False)
    tools_need = _worst(_exact_over(u, OPENAI_TOOLS_PREAMBLE) for u in t_fit)
    held_need = [_exact_over(u, OPENAI_TOOLS_PREAMBLE) for u in t_held]
    out.append(
        Figure(
            "OPENAI_TOOLS_PREAMBLE",
            "exact",
            ", ".join(sorted({corpus.family(u.model) for u in [*t_fit, *t_held]})),
            len(t_fit),
            tools_need,
            None if tools_need is None or tools_need <= 0 else tools_need,
            OPENAI_TOOLS_PREAMBLE,
            len(t_held),
            _worst(held_need),
            sum(n > OPENAI_TOOLS_PREAMBLE for n in held_need),
        )
    )
    return out


def _has_tool_reference(node: Any) -> bool:
    if isinstance(node, dict):
        if node.get("type") == "tool_reference":
            return True
        return any(_has_tool_reference(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_tool_reference(v) for v in node)
    return False


def tool_search_figures(fit: Sequence[corpus.Usage], held: Sequence[corpus.Usage]) -> list[Figure]:
    """The tool-search allowance per estimator: the tokens a call holding a
    ``tool_reference`` needs beyond the rest of its estimate, at the estimator's seed."""
    out = []
    for name in SEED_TABLES:
        est = get_estimator(name)

        def need(u: corpus.Usage, est: Estimator = est, name: str = name) -> float:
            rest = count(u.body, est, u.fmt) - TOOL_SEARCH_TOKENS
            return math.ceil(u.reported / default_calibration(name, u.model) - rest)

        f = [need(u) for u in fit if u.fmt == "anthropic" and _has_tool_reference(u.body)]
        h = [need(u) for u in held if u.fmt == "anthropic" and _has_tool_reference(u.body)]
        worst = _worst(f)
        out.append(
            Figure(
                "TOOL_SEARCH_TOKENS",
                name,
                "claude",
                len(f),
                worst,
                max(ANTHROPIC_TOOL_PROMPT, worst or 0),
                TOOL_SEARCH_TOKENS,
                len(h),
                _worst(h),
                sum(n > TOOL_SEARCH_TOKENS for n in h),
            )
        )
    return out


def figures(usages: Iterable[corpus.Usage]) -> list[Figure]:
    """Every figure set from provider calls, derived from the fit part of ``usages``."""
    fit, held = corpus.split(usages)
    seeds = [f for name in SEED_TABLES for f in seed_figures(name, fit, held)]
    return [
        *seeds,
        next_claude_seed(seeds),
        *framing_figures(fit, held),
        *tool_search_figures(fit, held),
    ]


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(r) + " |" for r in rows]


def split_section(usages: Sequence[corpus.Usage]) -> list[str]:
    held = corpus.held_out(usages)
    runs: dict[tuple[str, str], list[int]] = {}  # (family, run) -> [fit calls, held-out calls]
    for u in usages:
        runs.setdefault((corpus.family(u.model), u.run), [0, 0])[corpus.is_held_out(u, held)] += 1

    def names(fam: str, out: bool) -> str:
        got = [
            f"`{run}` ({n[out]}{'' if not n[not out] else f' of {sum(n)}'})"
            for (f, run), n in sorted(runs.items())
            if f == fam and n[out]
        ]
        return ", ".join(got) or "—"

    families = sorted({f for f, _ in runs})
    lines = [
        "## The split",
        "",
        "Runs of each model family (calls in brackets): an OpenHands run, an agent-sdk log "
        "file, a cassette file. Within a family the runs are ranked by the SHA-256 of their "
        "name; the 1st, 3rd, … are the fit part, the 2nd, 4th, … the held-out part "
        "(`fidelity.corpus.split`). A family with one run is split by call the same way "
        "(*k of n*: k of the run's n calls): its held-out calls share a conversation, system "
        "prompt and tools with its fit calls, so they check less than a held-out run.",
        "",
    ]
    lines += _table(
        ["family", "fit part", "held-out part"],
        ([f, names(f, False), names(f, True)] for f in families),
    )
    held_n = sum(n[1] for n in runs.values())
    whole = corpus.held_out_runs(usages)
    by_run = sum(n[1] for k, n in runs.items() if k in whole)
    biggest = max((n[1] for n in runs.values()), default=0)
    lines += [
        "",
        f"- {len(usages) - held_n} calls in the fit part, {held_n} held out ({by_run} in "
        f"runs held out whole, {held_n - by_run} held out call by call from a family's only "
        f"run; the largest share from one run {biggest}); "
        f"{sum(1 for f in families if any(k[0] == f and n[1] for k, n in runs.items()))} of "
        f"{len(families)} families have a held-out part.",
        "",
    ]
    return lines


def figures_section(found: Sequence[Figure]) -> list[str]:
    lines = [
        "## Figures set from provider calls",
        "",
        "Per figure, the fit part's worst value (the largest reported ÷ estimate for a "
        "seed, the most tokens a call needs for a framing figure), the figure it derives "
        "(the module docstring's rules), the figure shipped, and the held-out part's worst "
        "value with the number of held-out calls beyond the shipped figure (each one an "
        "under-count). — : no call of that part; under *from the fit part*, no call of the "
        "fit part binds the figure, which is kept as shipped.",
        "",
    ]
    lines += _table(HEADER, (f.row() for f in found))
    changed = [f for f in found if f.derived is not None and f.derived != f.shipped]
    beyond = sum(f.held_beyond for f in found)
    lines += [
        "",
        f"- figures where the fit part derives another value than shipped: {len(changed)}"
        + (": " + ", ".join(f"{f.figure} {f.family}" for f in changed) if changed else "")
        + f"; held-out calls beyond a shipped figure: {beyond}.",
        "",
    ]
    return lines


def read_figures(path: Path) -> list[dict[str, str]]:
    """The rows of the figures table of a written report, by :data:`HEADER`."""
    text = path.read_text("utf-8")
    start = text.index("\n## Figures set from provider calls\n")
    rows = []
    for line in text[start:].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == len(HEADER) and cells[0].startswith("`"):
            rows.append(dict(zip(HEADER, [cells[0].strip("`"), *cells[1:]], strict=True)))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = corpus.parser("python -m fidelity.provider", __doc__, "provider.md", estimator=False)
    args = parser.parse_args(argv)
    root = args.corpus or corpus.corpus_dir()
    if root is None:
        raise SystemExit("corpus not found (set CTXWIN_CORPUS or place it at ../shared/corpus)")
    usages = list(corpus.usages(root))
    out = [
        "# Figures set from provider calls",
        "",
        "Generated by `make fidelity` (`python -m fidelity.provider`): each figure below is "
        "derived from the fit part of the recorded provider calls only; the held-out part "
        "is only measured against it. Accuracy on both parts: "
        "[results.md](results.md#provider-reported-prompt-tokens).",
        "",
    ]
    out += split_section(usages)
    out += figures_section(figures(usages))
    return corpus.publish("\n".join(out), args.out)


if __name__ == "__main__":
    raise SystemExit(main())
