"""The bound on natural text of every script and on the symbols of tool output, from text
its prices and vocabulary never saw: estimate ÷ the largest of the four exact counts.

    python -m fidelity.scripts [--out fidelity/scripts.md] [--estimator NAME ...]

*Scripts*: the translated messages of the gettext catalogs installed on this machine
(``/usr/share/locale/LANG/LC_MESSAGES/*.mo``: coreutils, apt, glib, gtk, dpkg, ... —
program messages a tool prints, written by translators), one class per language, cut into
texts of about :data:`SIZE` characters; *Cyrillic in code*: Python lines of the standard
library with their comments and strings replaced by Russian messages. *Tool output*: a
``tree`` listing and an ``ls -l``-free file list of the standard library's folders, ``cat
-n`` output (``     1→``, as Claude Code shows a file) of its modules, check-mark and
bullet lists, arrows, emoji. The vocabulary (``python -m fidelity.bound --vocab``) takes
words from ``wordfreq`` and pieces from the four tokenizers' vocabularies and from code and
paths, never from these texts; the price solver never sees them either.

Scripts written without spaces between words (Chinese, Japanese, Thai) are marked: a
word of theirs is never a piece alone, so only per-character caps price them.
"""

from __future__ import annotations

import gettext
import random
import statistics
import sysconfig
from collections.abc import Callable, Iterator
from pathlib import Path

from fidelity import adversarial, corpus

LOCALE = Path("/usr/share/locale")
SIZE = 2000
TEXTS = 12
"""Texts per class."""

LANGUAGES = {
    "Russian (Cyrillic)": "ru",
    "Ukrainian (Cyrillic)": "uk",
    "Bulgarian (Cyrillic)": "bg",
    "Greek": "el",
    "Arabic": "ar",
    "Persian (Arabic script)": "fa",
    "Hebrew": "he",
    "Hindi (Devanagari)": "hi",
    "Bengali": "bn",
    "Korean": "ko",
    "Vietnamese": "vi",
    "Turkish": "tr",
    "Polish": "pl",
    "German": "de",
    "Chinese": "zh_CN",
    "Japanese": "ja",
    "Thai": "th",
}
"""Class → locale folder."""

UNSPACED = ("Chinese", "Japanese", "Thai")
"""Classes of scripts written without spaces between words."""


def messages(lang: str) -> list[str]:
    """Every translated message of the language's catalogs, in a fixed order."""
    out: list[str] = []
    folder = LOCALE / lang / "LC_MESSAGES"
    for path in sorted(folder.glob("*.mo")) if folder.is_dir() else []:
        try:
            with path.open("rb") as f:
                catalog = gettext.GNUTranslations(f)._catalog  # type: ignore[attr-defined]
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        out += [str(v) for k, v in sorted(catalog.items(), key=str) if k and str(v).strip()]
    return out


def _chunks(items: list[str], sep: str) -> list[str]:
    """:data:`TEXTS` texts of about :data:`SIZE` characters, spread over ``items``."""
    if not items:
        return []
    step = max(1, len(items) // TEXTS)
    out = []
    for start in range(0, len(items), step):
        text = ""
        i = start
        while len(text) < SIZE and i < len(items):
            text += items[i] + sep
            i += 1
        out.append(text)
        if len(out) == TEXTS:
            break
    return out


def _stdlib() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _modules() -> list[Path]:
    return sorted(_stdlib().glob("*.py"))[:: max(1, len(list(_stdlib().glob("*.py"))) // 40)]


def cyrillic_code() -> list[str]:
    """Standard-library lines, each comment and string literal replaced by a Russian
    message."""
    rng = random.Random("fidelity.scripts:cyrillic-code")
    ru = messages("ru")
    lines = [
        line
        for path in _modules()
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
    ]
    out: list[str] = []
    for line in lines:
        if ru and ("#" in line or '"' in line):
            head = line.split("#")[0].split('"')[0]
            msg = rng.choice(ru).splitlines()[0][:80] if ru else ""
            line = f'{head}"{msg}"' if '"' in line else f"{head}# {msg}"
        out.append(line)
    return _chunks(out, "\n")


def tree_output() -> list[str]:
    """``tree`` of the standard library's folders (box drawing and names)."""
    lines: list[str] = []

    def walk(folder: Path, prefix: str) -> None:
        entries = sorted(p for p in folder.iterdir() if p.name != "__pycache__")
        for i, p in enumerate(entries):
            last = i == len(entries) - 1
            lines.append(f"{prefix}{'└── ' if last else '├── '}{p.name}")
            if p.is_dir() and len(lines) < 30_000:
                walk(p, prefix + ("    " if last else "│   "))

    walk(_stdlib(), "")
    return _chunks(lines, "\n")


def cat_n() -> list[str]:
    """Modules of the standard library as Claude Code's Read shows them (``     1→``)."""
    lines = [
        f"{n:6d}→{line}"
        for path in _modules()
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
    ]
    return _chunks(lines, "\n")


def symbol_lists() -> list[str]:
    """Status lists of agents and test runners: check marks, crosses, bullets, arrows,
    emoji, with module names of the standard library."""
    rng = random.Random("fidelity.scripts:symbols")
    marks = ["✅", "❌", "✓", "✗", "•", "◦", "▸", "→", "⇒", "⚠️", "🚀", "📁", "📄", "🔧", "★", "…"]
    names = [p.stem for p in _stdlib().glob("*.py")]
    states = ["passed", "failed", "→ done", "updated", "— skipped"]
    items = [f"{rng.choice(marks)} {rng.choice(names)} {rng.choice(states)}" for _ in range(3000)]
    return _chunks(items, "\n")


def box_tables() -> list[str]:
    """Tables drawn with box characters (``┌─┬─┐``, ``│ x │``), as CLIs print them."""
    rng = random.Random("fidelity.scripts:box")
    names = [p.stem for p in _stdlib().glob("*.py")]
    out: list[str] = []
    for _ in range(TEXTS):
        widths = [rng.randint(6, 24) for _ in range(rng.randint(2, 5))]
        rows = ["┌" + "┬".join("─" * w for w in widths) + "┐"]
        while sum(map(len, rows)) < SIZE:
            rows.append("│" + "│".join(rng.choice(names)[:w].ljust(w) for w in widths) + "│")
            rows.append("├" + "┼".join("─" * w for w in widths) + "┤")
        rows.append("└" + "┴".join("─" * w for w in widths) + "┘")
        out.append("\n".join(rows))
    return out


def classes() -> dict[str, list[str]]:
    """Class → its texts."""
    out: dict[str, list[str]] = {
        label: _chunks(messages(lang), "\n") for label, lang in LANGUAGES.items()
    }
    out["Cyrillic in code"] = cyrillic_code()
    extra: dict[str, Callable[[], list[str]]] = {
        "tree output (box drawing)": tree_output,
        "cat -n output (→ markers)": cat_n,
        "check marks, bullets, arrows, emoji": symbol_lists,
        "box-drawn tables": box_tables,
    }
    out.update({k: f() for k, f in extra.items()})
    return {k: v for k, v in out.items() if v}


def ratios(names: tuple[str, ...]) -> Iterator[tuple[str, dict[str, list[float]]]]:
    """(class, estimator → estimate ÷ largest of the four, per text)."""
    encs = adversarial.encoders()
    for label, texts in classes().items():
        per: dict[str, list[float]] = {n: [] for n in names}
        for text in texts:
            real = adversarial.worst_real(text, encs)
            for n in names:
                per[n].append(adversarial.estimate_tokens(text, n) / real)
        yield label, per


def report(names: tuple[str, ...]) -> list[str]:
    lines = [
        "# Scripts and tool output: estimate ÷ the largest of four",
        "",
        "Generated by `python -m fidelity.scripts`. Raw estimate of each text alone ÷ the "
        f"largest of its four exact counts; {TEXTS} texts of about {SIZE:,} characters per "
        "class (fewer where the catalogs hold less); median (lowest–highest). Classes "
        "marked * are written without spaces between words.",
        "",
        "| class | texts | " + " | ".join(f"{n} ÷ largest" for n in names) + " |",
        "|---|---:|" + "---:|" * len(names),
    ]
    worst: dict[str, tuple[float, str]] = {}
    under = dict.fromkeys(names, 0)
    for label, per in ratios(names):
        star = " *" if label.startswith(UNSPACED) else ""
        cells = []
        for n in names:
            xs = per[n]
            med = statistics.median(xs)
            cells.append(f"{med:.2f} ({min(xs):.2f}–{max(xs):.2f})")
            under[n] += sum(x < 1 for x in xs)
            if not star and med > worst.get(n, (0.0, ""))[0]:
                worst[n] = (med, label)
        lines.append(f"| {label}{star} | {len(per[names[0]])} | " + " | ".join(cells) + " |")
    lines.append("")
    for n in names:
        med, label = worst.get(n, (0.0, "—"))
        lines.append(
            f"- `{n}`: {under[n]} texts under the largest of the four; highest median of a "
            f"spaced script or tool-output class {med:.2f} ({label})."
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = corpus.parser("python -m fidelity.scripts", __doc__, "scripts.md", corpus=False)
    a = p.parse_args(argv)
    names = tuple(a.estimator or ["bound", "content"])
    return corpus.publish("\n".join(report(names)), a.out)


if __name__ == "__main__":
    raise SystemExit(main())
