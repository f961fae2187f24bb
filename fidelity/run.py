"""Estimator fidelity: estimate ÷ real tokens, per stress class, transcript and provider call.

    python -m fidelity.run [--corpus DIR] [--out fidelity/results.md] [--estimator NAME ...]

*Real* tokens of a body, for a tokenizer: the tokens of every string the
adapter counts (message contents, tool names, arguments and call ids, the
serialized ``tools`` block) + 3 per message + the request-level framing the
estimators add (:func:`ctxwin.tokens.provider_framing`: 3 for the reply
priming, and a provider's hidden tool prompt when the body has tools) —
applied alike to all four encodings. A stress sample is
one user message holding the generated text. *Estimate*: the estimator's raw
count × its default calibration seed (what ``ctxwin estimate`` reports with
default settings). Provider rows divide the estimate of the exact body sent,
read by its own adapter, by the prompt tokens the provider reported (cache
included), reported apart for the fit part of the calls, from which the figures set
from provider calls are derived (:mod:`fidelity.provider`), and the held-out part,
which is only measured (:func:`fidelity.corpus.split`).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxwin.fitting.pruning import total_cost
from ctxwin.formats import get_adapter
from ctxwin.tokens.base import Estimator, calibrated
from ctxwin.tokens.bpe import TOKENIZERS, TokenizerEstimator, auto_estimator
from ctxwin.tokens.registry import default_calibration, get_estimator
from fidelity import corpus, stress

ADVERSARIAL = (1, 40, 2000)
"""Seed, cases per class and largest size of the adversarial summary."""


def adversarial_section(names: Sequence[str]) -> list[str]:
    """Lowest estimate ÷ largest real count on the fit and held-out halves of the
    generated classes (:mod:`fidelity.adversarial`), per estimator."""
    from fidelity import adversarial

    seed, per_class, size = ADVERSARIAL
    lines = [
        "## Adversarial classes",
        "",
        f"`python -m fidelity.adversarial` (seed {seed}, {per_class} cases per class up to "
        f"{size:,} characters; {len(adversarial.CLASSES)} generated classes: byte classes "
        "and their mixtures, scripts, symbols, emoji sequences, code, data formats, "
        "encodings; `make fidelity` writes every class to `fidelity/adversarial.md`). "
        "Estimate ÷ largest count of the "
        "four tokenizers; the `bound` estimator's prices were chosen on the fit half only "
        "(`python -m fidelity.bound`).",
        "",
        "| estimator | lowest, fit half | lowest, held-out half | cases under 1.0 "
        "| classes with a median over 2.0 |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, per in adversarial.ratios(seed, per_class, size, tuple(names)).items():
        fit_low, held_low = adversarial.lowest(per)
        n = sum(map(len, per.values()))
        under = sum(r < 1 for v in per.values() for r in v)
        wide = sum(statistics.median(v) > 2 for v in per.values())
        lines.append(
            f"| `{name}` | {fit_low:.3f} | {held_low:.3f} | {under:,} of {n:,} "
            f"| {wide} of {len(per)} |"
        )
    return [*lines, ""]


SHORT = {"o200k_base": "o200k", "cl100k_base": "cl100k", "llama3": "Llama 3", "qwen3": "Qwen 3"}


class RealCount(TokenizerEstimator):
    """The harness's definition of real tokens (see the module docstring)."""

    def __init__(self, encoding: str) -> None:
        super().__init__(encoding, per_message=3, per_tool_call=0)


def count(body: Any, est: Estimator, fmt: str = "auto") -> int:
    """Raw tokens of ``body``, read by the adapter for ``fmt`` (detected by default)."""
    view = get_adapter(body, fmt).read(body, est)
    return est.raw(total_cost(view))


def estimate(body: Any, est: Estimator, fmt: str = "auto", model: str | None = None) -> int:
    return calibrated(count(body, est, fmt), default_calibration(est.name, model))


def _r(x: float) -> str:
    return f"{x:.2f}"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


@dataclass
class Summary:
    under: int = 0
    checked: int = 0

    def see(self, ratio: float) -> None:
        self.checked += 1
        if ratio < 1:
            self.under += 1


def stress_section(ests: Sequence[Estimator], reals: Sequence[RealCount]) -> list[str]:
    lines = ["## Stress classes", ""]
    lines.append(
        "Worst (lowest) estimate ÷ real over 5 seeded samples per class (20,000 characters "
        "and 4 random shorter sizes); below 1.00 is an under-count."
    )
    lines.append("")
    header = ["class"]
    for est in ests:
        header += [f"{est.name} ÷ {SHORT[r.encoding]}" for r in reals]
    rows = []
    summaries = {e.name: Summary() for e in ests}
    largest: dict[str, dict[str, float]] = {e.name: {} for e in ests}
    for label, texts in stress.samples().items():
        row = [label]
        tops = [max(count(_msg(t), real) for real in reals) for t in texts]
        for est in ests:
            for real in reals:
                worst = min(estimate(_msg(t), est) / count(_msg(t), real) for t in texts)
                summaries[est.name].see(worst)
                row.append(_r(worst))
            ratios = [estimate(_msg(t), est) / top for t, top in zip(texts, tops, strict=True)]
            largest[est.name][label] = statistics.median(ratios)
        rows.append(row)
    lines += _table(header, rows)
    lines.append("")
    for name, s in summaries.items():
        lines.append(f"- `{name}`: {s.under} under-counts in {s.checked} class × tokenizer cells.")
    for name, per in largest.items():
        top = max(per, key=per.__getitem__)
        wide = ", ".join(f"{k} {v:.2f}" for k, v in per.items() if v > 2) or "none"
        lines.append(
            f"- `{name}` ÷ the largest of the four, median over a class's samples: highest "
            f"{per[top]:.2f} ({top}); classes over 2.0: {wide}."
        )
    lines.append("")
    return lines


def _msg(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def transcript_section(
    root: Path, ests: Sequence[Estimator], reals: Sequence[RealCount]
) -> tuple[list[str], list[str]]:
    by_source: dict[str, list[tuple[str, dict[str, list[float]]]]] = {}
    detail = ["## Every transcript", ""]
    header = ["source", "transcript", "o200k tokens"]
    for est in ests:
        header += [f"{est.name} ÷ {SHORT[r.encoding]}" for r in reals]
    rows = []
    largest: list[float] = []
    for t in corpus.transcripts(root):
        real = {r.encoding: count(t.body, r) for r in reals}
        largest.append(max(real.values()) / real["o200k_base"])
        ratios: dict[str, list[float]] = {}
        row = [t.source, t.name, f"{real['o200k_base']:,}"]
        for est in ests:
            e = estimate(t.body, est)
            ratios[est.name] = [e / real[r.encoding] for r in reals]
            row += [_r(x) for x in ratios[est.name]]
        rows.append(row)
        by_source.setdefault(t.source, []).append((t.name, ratios))
    detail += _table(header, rows)
    detail.append("")
    lines = ["## Real transcripts", ""]
    lines.append("Estimate ÷ real per transcript: median (min–max) over each source's transcripts.")
    lines.append("")
    header = ["source", "n"]
    for est in ests:
        header += [f"{est.name} ÷ {SHORT[r.encoding]}" for r in reals]
    rows = []
    groups = [*by_source.items(), ("all", [x for v in by_source.values() for x in v])]
    for source, items in groups:
        row = [source, str(len(items))]
        for est in ests:
            for i in range(len(reals)):
                xs = [r[est.name][i] for _, r in items]
                row.append(f"{statistics.median(xs):.2f} ({min(xs):.2f}–{max(xs):.2f})")
        rows.append(row)
    lines += _table(header, rows)
    lines.append("")
    everything = groups[-1][1]
    for est in ests:
        under = sum(1 for _, r in everything for x in r[est.name] if x < 1)
        med = statistics.median(r[est.name][0] for _, r in everything)
        lines.append(
            f"- `{est.name}`: median over-count vs o200k_base {100 * (med - 1):.1f} %; "
            f"{under} under-counts in {len(everything) * len(reals)} transcript × tokenizer pairs."
        )
    if largest:
        lines.append(
            "- the largest of the four real counts ÷ o200k_base: median "
            f"{statistics.median(largest):.3f} (no estimate that bounds all four can be lower)."
        )
    lines.append("")
    return lines, detail


PARTS = ("fit", "held out")
"""The two parts of the provider calls (:func:`fidelity.corpus.split`)."""


def _part(part: str) -> str:
    """``fit part``, ``held-out part``: a part named in a sentence."""
    return part.replace(" ", "-") + " part"


def _median_range(xs: Sequence[float]) -> str:
    if not xs:
        return "—"
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}–{max(xs):.2f})"


def provider_section(root: Path, ests: Sequence[Estimator]) -> tuple[list[str], list[str]]:
    detail = ["## Every provider-reported call", ""]
    header = ["source", "call", "part", "format", "model", "reported"]
    header += [f"{e.name} ÷ reported" for e in ests]
    rows = []
    groups: dict[tuple[str, str], list[list[float]]] = {}
    exact = [TokenizerEstimator(name) for name in TOKENIZERS]
    growth: dict[tuple[str, str], float] = {}
    auto_calls = dict.fromkeys(PARTS, 0)
    auto_under = dict.fromkeys(PARTS, 0)
    auto_exact = 0
    usages = list(corpus.usages(root))
    held = corpus.held_out(usages)
    for u in usages:
        part = PARTS[corpus.is_held_out(u, held)]
        family = corpus.family(u.model)
        largest = max(count(u.body, e, u.fmt) for e in exact)
        growth[family, part] = max(growth.get((family, part), 0.0), u.reported / largest)
        auto = auto_estimator(u.model, ests[0])
        if auto.name.startswith("tokenizer:"):
            auto_exact += 1
        auto_calls[part] += 1
        auto_under[part] += estimate(u.body, auto, u.fmt, u.model) < u.reported
        ratios = [estimate(u.body, e, u.fmt, u.model) / u.reported for e in ests]
        rows.append([u.source, u.name, part, u.fmt, u.model, f"{u.reported:,}", *map(_r, ratios)])
        groups.setdefault((f"{u.source}: {family} ({u.fmt})", part), []).append(ratios)
    detail += _table(header, rows)
    detail.append("")
    lines = ["## Provider-reported prompt tokens", ""]
    lines.append(
        "Estimate of the exact request body ÷ the prompt tokens its provider reported: "
        "median (min–max) per source and part. The calls are split by run into a fit part "
        "and a held-out part (per model family, runs ranked by the SHA-256 of their name, "
        "every second one held out; a family with one run split so by call, a weaker check "
        "as its calls share one conversation): the figures set "
        "from provider calls (the calibration seeds, OpenAI's framing headers, the "
        "tool-search allowance) are derived from the fit part only (`python -m "
        "fidelity.provider` → `fidelity/provider.md`); the held-out part is measured "
        "here and was not used to set them."
    )
    lines.append("")
    head = ["source", "part", "calls"] + [f"{e.name} ÷ reported" for e in ests]
    srows = []
    for (key, part), items in sorted(groups.items()):
        srows.append(
            [key, part, str(len(items))]
            + [_median_range([r[i] for r in items]) for i in range(len(ests))]
        )
    every = {p: [r for (_, q), v in groups.items() if q == p for r in v] for p in PARTS}
    for part in PARTS:
        srows.append(
            ["all", part, str(len(every[part]))]
            + [_median_range([r[i] for r in every[part]]) for i in range(len(ests))]
        )
    lines += _table(head, srows)
    lines.append("")
    for i, e in enumerate(ests):
        lines.append(
            f"- `{e.name}`: "
            + "; ".join(
                f"{_part(part)} {sum(1 for r in every[part] if r[i] < 1)} under-counts in "
                f"{len(every[part])} calls, median "
                f"{statistics.median(r[i] for r in every[part]):.2f}"
                for part in PARTS
                if every[part]
            )
            + "."
        )
    families = sorted({f for f, _ in growth})
    lines.append(
        "- reported ÷ the largest of the four exact counts of the body (with the estimators' "
        "framing), worst call per model, fit part / held-out part: "
        + ", ".join(
            f"{f} " + " / ".join(f"{growth[f, p]:.3f}" if (f, p) in growth else "—" for p in PARTS)
            for f in families
        )
        + " (a seed at least this large keeps an estimate that bounds the four above "
        "that model's calls: `ctxwin.tokens.BOUND_MODEL_CALIBRATION`, from the fit part)."
    )
    lines.append(
        f"- `--tokenizer auto` (exact for the {auto_exact} calls whose model's tokenizer is "
        f"shipped, `{ests[0].name}` for the others): "
        + "; ".join(
            f"{_part(part)} {auto_under[part]} under-counts in {auto_calls[part]} calls"
            for part in PARTS
        )
        + "."
    )
    lines.append("")
    return lines, detail


def main(argv: list[str] | None = None) -> int:
    parser = corpus.parser("python -m fidelity.run", __doc__, "results.md")
    args = parser.parse_args(argv)
    ests = [get_estimator(n) for n in (args.estimator or ["content", "bound", "seed"])]
    reals = [RealCount(name) for name in TOKENIZERS]
    root = args.corpus or corpus.corpus_dir()
    out = ["# Estimator fidelity", ""]
    out.append(
        "Generated by `make fidelity` (`python -m fidelity.run`). Estimates use each "
        "estimator's default calibration seed ("
        + ", ".join(f"`{e.name}` × {default_calibration(e.name):g}" for e in ests)
        + ")."
    )
    out.append("")
    out += stress_section(ests, reals)
    out += adversarial_section([e.name for e in ests if e.name in ("content", "bound")])
    details: list[str] = []
    if root is None:
        out.append("Corpus not found (set CTXWIN_CORPUS or place it at ../shared/corpus).")
    else:
        lines, detail = transcript_section(root, ests, reals)
        out += lines
        details += detail
        lines, detail = provider_section(root, ests)
        out += lines
        details += detail
    return corpus.publish("\n".join(out), args.out, "\n".join(details) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
