"""The bound on natural text of every script and on the symbols of tool output, from text
its prices and vocabulary never saw: estimate ÷ the largest of the four exact counts.

    python -m fidelity.scripts [--out fidelity/scripts.md] [--estimator NAME ...]

*Scripts*: the translated messages of the gettext catalogs installed on this machine
(``/usr/share/locale/LANG/LC_MESSAGES/*.mo``: coreutils, apt, glib, gtk, dpkg, ... —
program messages a tool prints, written by translators), one class per language, cut into
texts of about :data:`SIZE` characters; *Cyrillic in code*: lines of the machine's Perl
modules with their comments and strings replaced by Russian messages. *Tool output*: a
``tree`` listing of ``/etc``, ``cat -n`` output (``     1→``, as Claude Code shows a file)
of Perl modules, check-mark and bullet lists, arrows, emoji and box-drawn tables of the
names of ``/etc``'s files, and ``tree`` and ``cat -n`` output of names and code generated
from random syllables (:func:`generated_tree`, :func:`generated_code`: no file at all).
None of these texts is read by the vocabulary (``python -m
fidelity.bound --vocab``): it takes words from ``wordfreq`` and pieces from the four
tokenizers' vocabularies and from code and paths (:func:`fidelity.bound.machine_sources`:
``.py`` files and :data:`fidelity.bound.MACHINE_TEXTS` files of the Python folders and
``/usr``, the paths under ``/usr``), never a gettext catalog, a Perl module's text
(:func:`held_out`) or anything under ``/etc`` (entries named as one under ``/usr`` are
left out, :func:`_etc_entries`); the price solver never sees them either. Tool output
built from the standard library's files and paths, which the vocabulary does read, is not
held out: the report gives a ``tree`` of it apart (:data:`NOT_HELD_OUT`), as a reference.

Scripts written without spaces between words (Chinese, Japanese, Thai) are marked: a
word of theirs is never a piece alone, so a run of them is priced by its longest
vocabulary parts and a price per cut, or by its characters' caps if that is less
(:func:`ctxwin.tokens.bound._letter_run_parts`)."""

from __future__ import annotations

import functools
import gettext
import os
import random
import statistics
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


PERL = (Path("/usr/share/perl"), Path("/usr/lib/x86_64-linux-gnu/perl"), Path("/usr/share/perl5"))
"""Where Perl's modules are: code whose text the vocabulary never reads (it reads ``.py``
files and :data:`fidelity.bound.MACHINE_TEXTS`, not ``.pm``)."""

ETC = Path("/etc")
"""The configuration folder: neither its files nor its paths are read by the vocabulary
(:func:`fidelity.bound.machine_sources` walks the Python folders and ``/usr``)."""


def held_out(path: Path) -> bool:
    """Whether the vocabulary's :func:`fidelity.bound.machine_sources` leaves the text of
    ``path`` unread: not a ``.py`` file nor a :data:`fidelity.bound.MACHINE_TEXTS` one."""
    from fidelity.bound import MACHINE_TEXTS

    return not path.name.endswith((".py", *MACHINE_TEXTS))


def _modules() -> list[Path]:
    """About 40 of the machine's Perl modules (:data:`PERL`), spread over them in path order."""
    found = sorted({p for root in PERL if root.is_dir() for p in root.rglob("*.pm")})
    found = [p for p in found if p.is_file() and held_out(p)]
    return found[:: max(1, len(found) // 40)]


@functools.lru_cache(maxsize=1)
def _usr_names() -> frozenset[str]:
    """The name of every file and folder under ``/usr``, whose paths the vocabulary reads
    (``/etc/alternatives`` and ``/etc/ssl/certs`` repeat many)."""
    names: set[str] = set()
    for _, dirs, files in os.walk("/usr"):
        names.update(dirs)
        names.update(files)
    return frozenset(names)


def _etc_entries(folder: Path) -> list[Path]:
    """The entries of ``folder`` (under :data:`ETC`) named as no entry under ``/usr``, in
    name order."""
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return []
    return [p for p in entries if p.name not in _usr_names()]


def _etc_names() -> list[str]:
    """The names of :func:`_etc_entries` all the way down :data:`ETC`, in path order."""
    out: list[str] = []
    todo = [ETC]
    while todo:
        entries = _etc_entries(todo.pop())
        out += [p.name for p in entries]
        todo += [p for p in reversed(entries) if p.is_dir() and not p.is_symlink()]
    return sorted(set(out))


def cyrillic_code() -> list[str]:
    """Lines of Perl modules, each comment and string literal replaced by a Russian
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
    """``tree`` of :data:`ETC` (box drawing and names), its entries named as one under
    ``/usr`` left out (:func:`_etc_entries`)."""
    return _chunks(_tree(ETC, _etc_entries), "\n")


def _tree(root: Path, entries: Callable[[Path], list[Path]]) -> list[str]:
    """The lines ``tree`` prints under ``root`` (box drawing and names; about 30,000 at
    most), each folder's ``entries`` in their order."""
    lines: list[str] = []

    def walk(folder: Path, prefix: str) -> None:
        found = entries(folder)
        for i, p in enumerate(found):
            last = i == len(found) - 1
            lines.append(f"{prefix}{'└── ' if last else '├── '}{p.name}")
            if p.is_dir() and not p.is_symlink() and len(lines) < 30_000:
                walk(p, prefix + ("    " if last else "│   "))

    walk(root, "")
    return lines


def cat_n() -> list[str]:
    """Perl modules as Claude Code's Read shows a file (``     1→``)."""
    lines = [
        f"{n:6d}→{line}"
        for path in _modules()
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
    ]
    return _chunks(lines, "\n")


def symbol_lists() -> list[str]:
    """Status lists of agents and test runners: check marks, crosses, bullets, arrows,
    emoji, with the names of :data:`ETC`'s files."""
    rng = random.Random("fidelity.scripts:symbols")
    marks = ["✅", "❌", "✓", "✗", "•", "◦", "▸", "→", "⇒", "⚠️", "🚀", "📁", "📄", "🔧", "★", "…"]
    names = _etc_names()
    states = ["passed", "failed", "→ done", "updated", "— skipped"]
    items = [f"{rng.choice(marks)} {rng.choice(names)} {rng.choice(states)}" for _ in range(3000)]
    return _chunks(items, "\n") if names else []


def box_tables() -> list[str]:
    """Tables drawn with box characters (``┌─┬─┐``, ``│ x │``), as CLIs print them, of the
    names of :data:`ETC`'s files."""
    rng = random.Random("fidelity.scripts:box")
    names = _etc_names()
    out: list[str] = []
    for _ in range(TEXTS if names else 0):
        widths = [rng.randint(6, 24) for _ in range(rng.randint(2, 5))]
        rows = ["┌" + "┬".join("─" * w for w in widths) + "┐"]
        while sum(map(len, rows)) < SIZE:
            rows.append("│" + "│".join(rng.choice(names)[:w].ljust(w) for w in widths) + "│")
            rows.append("├" + "┼".join("─" * w for w in widths) + "┤")
        rows.append("└" + "┴".join("─" * w for w in widths) + "┘")
        out.append("\n".join(rows))
    return out


SYLLABLES = (*(c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"), "th", "ng", "x")
"""What the generated names are made of: no file, so no text the vocabulary reads."""


def _name(rng: random.Random) -> str:
    """A name as a project's files and identifiers look, of random syllables: ``kevotar``,
    ``mipa_sulo``, ``dorekTavi``, ``Zuna-fe``."""
    words = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(3)]
    joiner = rng.choice(["_", "-", "", "camel"])
    n = rng.randint(1, 3)
    if joiner == "camel":
        return words[0] + "".join(w.capitalize() for w in words[1:n])
    name = joiner.join(words[:n])
    return name.capitalize() if rng.random() < 0.2 else name


def generated_tree() -> list[str]:
    """``tree`` output of a generated project: folders and files of :func:`_name` names,
    with extensions, read from no file."""
    rng = random.Random("fidelity.scripts:generated-tree")
    exts = [".c", ".h", ".rs", ".go", ".toml", ".json", ".md", ".txt", ".lock", ".yaml", ""]
    lines: list[str] = []

    def walk(depth: int, prefix: str) -> None:
        entries = rng.randint(2, 7)
        for i in range(entries):
            last = i == entries - 1
            folder = depth < 4 and rng.random() < 0.3
            name = _name(rng) + ("" if folder else rng.choice(exts))
            lines.append(f"{prefix}{'└── ' if last else '├── '}{name}")
            if folder:
                walk(depth + 1, prefix + ("    " if last else "│   "))

    while len(lines) < TEXTS * SIZE // 24:
        lines.append(_name(rng))
        walk(0, "")
    return _chunks(lines, "\n")


def generated_code() -> list[str]:
    """Code of generated identifiers, numbers and strings as Claude Code's Read shows a file
    (``     1→``), read from no file."""
    rng = random.Random("fidelity.scripts:generated-code")
    lines: list[str] = []
    while len(lines) < TEXTS * SIZE // 30:
        indent = "    " * rng.randint(0, 3)
        a, b, c = _name(rng), _name(rng), _name(rng)
        line = rng.choice(
            [
                f"{indent}{a} = {b}({c}, {rng.randint(0, 99999)})",
                f"{indent}def {a}({b}, {c}={rng.random():.3f}):",
                f"{indent}if {a}.{b} >= {rng.randint(0, 512)}:",
                f'{indent}return "{b} {c}: " + str({a})',
                f"{indent}# {a} {b} {c}",
                f"{indent}{a}[{rng.randint(0, 9)}] += {b}.{c}()",
            ]
        )
        lines.append(f"{len(lines) + 1:6d}→{line}")
    return _chunks(lines, "\n")


def stdlib_tree() -> list[str]:
    """``tree`` of Python's standard library: text the vocabulary reads (its ``.py`` files'
    paths and names are pieces of it), so not held out; the reference the held-out tool
    output is read against."""
    import sysconfig

    def entries(folder: Path) -> list[Path]:
        try:
            return sorted(p for p in folder.iterdir() if p.name != "__pycache__")
        except OSError:
            return []

    return _chunks(_tree(Path(sysconfig.get_paths()["stdlib"]), entries), "\n")


STRETCHED = ("Korean", "Thai")
"""The classes measured on every stretch of their catalogs too, not only on :data:`TEXTS`
of them: the scripts whose targets are named (2.0 for a spaced script, 2.8 for one
without spaces)."""


def stretches(lang: str) -> list[str]:
    """Every text of about :data:`SIZE` characters the language's catalogs hold, one after
    the other."""
    out, text = [], ""
    for message in messages(lang):
        text += message + "\n"
        if len(text) >= SIZE:
            out.append(text)
            text = ""
    return out


NOT_HELD_OUT = {"tree output of the standard library (read by the vocabulary)": stdlib_tree}
"""Classes built from text the vocabulary reads: reported apart, never as held out."""


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
        "tree output of generated names": generated_tree,
        "cat -n output of generated code": generated_code,
    }
    out.update({k: f() for k, f in extra.items()})
    return {k: v for k, v in out.items() if v}


def ratios(
    names: tuple[str, ...], of: dict[str, list[str]] | None = None
) -> Iterator[tuple[str, dict[str, list[float]]]]:
    """(class, estimator → estimate ÷ largest of the four, per text) of ``of`` (default:
    :func:`classes`)."""
    encs = adversarial.encoders()
    for label, texts in (classes() if of is None else of).items():
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
    every = {label: stretches(LANGUAGES[label]) for label in STRETCHED}
    lines += _ratio_table(
        names,
        "Every stretch",
        f"Every text of about {SIZE:,} characters of the catalogs of "
        + " and ".join(STRETCHED)
        + ", one after the other (held out as above): median (lowest–highest).",
        every,
    )
    lines += _ratio_table(
        names,
        "Not held out",
        "Built from text the vocabulary reads, so not a held-out measure: what the same kind "
        "of tool output gives when its names are pieces of the vocabulary.",
        {k: f() for k, f in NOT_HELD_OUT.items()},
    )
    return lines


def _ratio_table(
    names: tuple[str, ...], title: str, intro: str, texts: dict[str, list[str]]
) -> list[str]:
    """A section of the report: per class of ``texts``, each estimator's ratio to the largest
    of the four counts, median (lowest–highest)."""
    lines = [
        "",
        f"## {title}",
        "",
        intro,
        "",
        "| class | texts | " + " | ".join(f"{n} ÷ largest" for n in names) + " |",
        "|---|---:|" + "---:|" * len(names),
    ]
    for label, per in ratios(names, {k: v for k, v in texts.items() if v}):
        cells = [
            f"{statistics.median(per[n]):.2f} ({min(per[n]):.2f}–{max(per[n]):.2f})" for n in names
        ]
        lines.append(f"| {label} | {len(per[names[0]])} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = corpus.parser("python -m fidelity.scripts", __doc__, "scripts.md", corpus=False)
    a = p.parse_args(argv)
    names = tuple(a.estimator or ["bound", "content"])
    return corpus.publish("\n".join(report(names)), a.out)


if __name__ == "__main__":
    raise SystemExit(main())
