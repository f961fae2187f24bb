"""Adversarial text generator: every byte class, script and machine format the issue lists.

    python -m fidelity.adversarial [--seed 1] [--per-class 40] [--size 2000] [--estimator NAME]

Each class is a function ``(rng, size) -> str`` giving roughly ``size``
characters. :func:`cases` yields ``(class, text)`` pairs for a seed; the same
seed always gives the same texts. :data:`FAMILIES` names the group each class
belongs to, and :func:`split` halves the classes into a *fit* half and a
*held-out* half by a fixed rule (alternate classes in name order), so weights
chosen on one half can be judged on the other.

Run as a script it prints, per estimator (``content`` and ``bound`` unless
``--estimator`` names some) and per class, the lowest, median and highest
estimate ÷ largest real count of the four reference tokenizers (needs the
``bpe`` extra).
"""

# ruff: noqa: E501  (character tables and code templates are kept on one line)
from __future__ import annotations

import argparse
import base64
import random
import statistics
import string
import sys
import urllib.parse
from collections.abc import Callable, Iterator

Gen = Callable[[random.Random, int], str]

PUNCT = string.punctuation
PRINTABLE = string.digits + string.ascii_letters + PUNCT + " "
WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "that",
    "for",
    "on",
    "with",
    "as",
    "by",
    "at",
    "from",
    "this",
    "be",
    "are",
    "have",
    "it",
    "not",
    "or",
    "which",
    "but",
    "had",
    "they",
    "were",
    "their",
    "been",
    "has",
    "one",
    "all",
    "would",
    "there",
    "what",
    "about",
    "when",
    "more",
    "some",
    "into",
    "can",
    "only",
    "other",
    "time",
    "new",
    "could",
    "these",
    "may",
    "first",
    "after",
    "any",
    "most",
    "also",
    "made",
    "many",
    "between",
    "before",
    "over",
    "such",
    "through",
    "where",
    "much",
    "under",
    "state",
    "value",
    "result",
    "error",
    "file",
]


def _pick(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _chars(lo: int, hi: int) -> str:
    return "".join(chr(c) for c in range(lo, hi + 1) if chr(c).isprintable())


def _run(alphabet: str) -> Gen:
    return lambda rng, n: _pick(rng, alphabet, n)


def _mix(alphabets: tuple[str, ...], density: float) -> Gen:
    """Runs drawn from the first alphabet, with ``density`` of the characters from the others."""

    def gen(rng: random.Random, n: int) -> str:
        out = []
        for _ in range(n):
            if rng.random() < density:
                out.append(rng.choice(rng.choice(alphabets[1:])))
            else:
                out.append(rng.choice(alphabets[0]))
        return "".join(out)

    return gen


def _words(rng: random.Random, n: int) -> str:
    out: list[str] = []
    size = 0
    while size < n:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


def _script_text(letters: str, marks: str = "", space: str = " ") -> Gen:
    """Word-shaped text in a script: words of 2-9 letters, optional combining signs."""

    def gen(rng: random.Random, n: int) -> str:
        out: list[str] = []
        size = 0
        while size < n:
            word = []
            for _ in range(rng.randint(2, 9)):
                word.append(rng.choice(letters))
                if marks and rng.random() < 0.4:
                    word.append(rng.choice(marks))
            out.append("".join(word))
            size += len(word) + 1
        return space.join(out)

    return gen


COMBINING = _chars(0x300, 0x36F)
LATIN_DIACRITIC = _chars(0xC0, 0xFF) + _chars(0x100, 0x17F)
GREEK = _chars(0x391, 0x3A9) + _chars(0x3B1, 0x3C9)
CYRILLIC = _chars(0x410, 0x44F)
ARABIC = _chars(0x621, 0x64A)
ARABIC_MARKS = _chars(0x64B, 0x652)
HEBREW = _chars(0x5D0, 0x5EA)
HEBREW_MARKS = _chars(0x5B0, 0x5BC)
DEVANAGARI = _chars(0x905, 0x939)
DEVANAGARI_MARKS = "".join(chr(c) for c in (*range(0x93E, 0x94D + 1), 0x902, 0x901))
BENGALI = _chars(0x995, 0x9B9)
TAMIL = _chars(0xB95, 0xBB9)
TAMIL_MARKS = _chars(0xBBE, 0xBCD)
THAI = _chars(0xE01, 0xE2E)
THAI_MARKS = "".join(chr(c) for c in (0xE31, *range(0xE34, 0xE3A + 1), *range(0xE47, 0xE4E + 1)))
CJK = _chars(0x4E00, 0x9FFF)
CJK_COMMON = "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴乎够送"
HIRAGANA = _chars(0x3041, 0x3096)
KATAKANA = _chars(0x30A1, 0x30FA)
HANGUL = _chars(0xAC00, 0xD7A3)
MATH = _chars(0x2200, 0x22FF)
ARROWS = _chars(0x2190, 0x21FF)
BOX = _chars(0x2500, 0x257F)
EMOJI = _chars(0x1F300, 0x1F5FF) + _chars(0x1F600, 0x1F64F) + _chars(0x1F680, 0x1F6FF)
SKIN = "".join(chr(c) for c in range(0x1F3FB, 0x1F3FF + 1))
PEOPLE = "👩👨🧑👧👦"
SYMBOLS = _chars(0x2000, 0x206F) + _chars(0x20A0, 0x20C0) + _chars(0x2100, 0x214F)


def emoji_seq(rng: random.Random, n: int) -> str:
    out: list[str] = []
    size = 0
    while size < n:
        kind = rng.randrange(4)
        if kind == 0:  # ZWJ family
            s = "\u200d".join(rng.choice(PEOPLE) for _ in range(rng.randint(2, 4)))
        elif kind == 1:  # flag: two regional indicators
            s = chr(0x1F1E6 + rng.randrange(26)) + chr(0x1F1E6 + rng.randrange(26))
        elif kind == 2:  # skin tone
            s = rng.choice("👍👋🙏✋👌") + rng.choice(SKIN)
        else:
            s = rng.choice(EMOJI) + ("\ufe0f" if rng.random() < 0.5 else "")
        out.append(s)
        size += len(s)
    return "".join(out)


def kana_ascii(rng: random.Random, n: int) -> str:
    out: list[str] = []
    size = 0
    while size < n:
        s = rng.choice(
            [
                _pick(rng, HIRAGANA, rng.randint(2, 8)),
                _pick(rng, KATAKANA, rng.randint(2, 6)),
                _pick(rng, CJK[:300], rng.randint(1, 4)),
                rng.choice(WORDS),
                str(rng.randint(0, 999)),
                rng.choice("、。「」（）"),
                " ",
            ]
        )
        out.append(s)
        size += len(s)
    return "".join(out)


def _ident(rng: random.Random) -> str:
    parts = [rng.choice(WORDS) for _ in range(rng.randint(1, 3))]
    style = rng.randrange(3)
    if style == 0:
        return "_".join(parts)
    if style == 1:
        return parts[0] + "".join(p.title() for p in parts[1:])
    return "".join(p.title() for p in parts)


TEMPLATES = {
    "python": [
        "def {a}({b}, {c}=None):\n    return {b}.{a}({c}) + {n}\n",
        "    if {a} is not None:\n        {b}[{n}] = {c}\n",
    ],
    "javascript": [
        "const {a} = ({b}) => {{ return {b}.{c}?.[{n}] ?? null; }};\n",
        "  {a}.{b}({c}, {n});\n",
    ],
    "typescript": [
        "export function {a}<T>({b}: T[]): Promise<{C}> {{\n  return {c}({b}, {n});\n}}\n"
    ],
    "rust": [
        "fn {a}(&mut self, {b}: &[u8]) -> Result<{C}, Error> {{\n    self.{c}.push({n}u32);\n    Ok(())\n}}\n"
    ],
    "go": [
        "func ({b} *{C}) {A}(ctx context.Context) (int, error) {{\n\tif err != nil {{\n\t\treturn {n}, err\n\t}}\n}}\n"
    ],
    "java": [
        "public static {C} {a}(final List<{C}> {b}) throws IOException {{\n    return {b}.get({n});\n}}\n"
    ],
    "c": [
        "static int {a}(const char *{b}, size_t {c}) {{\n    return {b}[{n}] & 0x{h};\n}}\n",
        "#define {A}_{N} ({n} << 2)\n",
    ],
    "cpp": [
        "template <typename T> std::vector<T> {a}(const std::map<int, T>& {b}) {{ return {{}}; }}\n"
    ],
    "ruby": ["def {a}({b})\n  @{c} ||= {b}.map {{ |x| x * {n} }}\nend\n"],
    "php": ["<?php function {a}($this->{b}) {{ return $arr['{c}'] ?? {n}; }} ?>\n"],
    "shell": [
        "for f in $(ls *.{a}); do echo \"${{f%.*}}\" | sed -e 's/{b}/{c}/g' >> /tmp/{a}.log; done\n"
    ],
    "sql": ["SELECT {a}.{b}, COUNT(*) FROM {c} WHERE {b} > {n} GROUP BY 1 ORDER BY 2 DESC;\n"],
    "haskell": [
        "{a} :: [{C}] -> Maybe {C}\n{a} ({b}:xs) = fmap (+{n}) (lookup {b} xs) >>= \\x -> pure x\n"
    ],
    "css": [".{a}-{b} > #{c}:hover {{ margin: {n}px 0 0 -{n}em; color: #{h}; }}\n"],
}


def _fill(rng: random.Random, tpl: str) -> str:
    a, b, c = _ident(rng), _ident(rng), _ident(rng)
    return tpl.format(
        a=a,
        b=b,
        c=c,
        A=a.title().replace("_", ""),
        C=c.title().replace("_", ""),
        n=rng.randint(0, 99999),
        N=rng.randint(0, 9),
        h=f"{rng.getrandbits(24):06x}",
    )


def _code(lang: str, minify: bool = False) -> Gen:
    def gen(rng: random.Random, n: int) -> str:
        out: list[str] = []
        size = 0
        while size < n:
            s = _fill(rng, rng.choice(TEMPLATES[lang]))
            out.append(s)
            size += len(s)
        text = "".join(out)
        if minify:
            text = " ".join(text.split()).replace(" {", "{").replace("; ", ";").replace(", ", ",")
        return text

    return gen


def regex_code(rng: random.Random, n: int) -> str:
    pieces = [
        r"(?:[A-Za-z_]\w*)",
        r"\d{1,3}(?:\.\d{1,3}){3}",
        r"^\s*#.*$",
        r"[^\\/\"']+",
        r"(?P<name>[a-z]+)=(?P<v>[^&;]*)",
        r"\b(?:0x)?[0-9a-f]+\b",
        r"(?<!\\)\$\{([^}]+)\}",
        r"[\u0300-\u036f]",
        r"(?i)^(?=.*\d)(?=.*[!@#$%^&*]).{8,}$",
        r"\\[nrt\\\"']",
    ]
    out: list[str] = []
    size = 0
    while size < n:
        s = f"re.compile(r'{''.join(rng.choice(pieces) for _ in range(rng.randint(1, 4)))}')\n"
        out.append(s)
        size += len(s)
    return "".join(out)


def latex(rng: random.Random, n: int) -> str:
    pieces = [
        r"\frac{\partial^{2} u}{\partial x_{i}^{2}}",
        r"\sum_{k=0}^{\infty} \binom{n}{k} x^{k}",
        r"\begin{align*} a &= b \\ c &\le d \end{align*}",
        r"\mathbb{R}^{n \times m}",
        r"\left( \int_{0}^{1} f(t)\,dt \right)^{1/p}",
        r"$\alpha_{i,j} \cdot \beta^{\prime}$",
        r"\label{eq:%d} \ref{fig:%d}",
        r"\hat{\theta} = \arg\min_{\theta} \|y - X\theta\|_2^2",
    ]
    out: list[str] = []
    size = 0
    while size < n:
        s = rng.choice(pieces)
        s = s % (rng.randint(1, 99), rng.randint(1, 99)) if "%d" in s else s
        out.append(s + rng.choice([" ", "\n", " ", _words(rng, 30) + " "]))
        size += len(out[-1])
    return "".join(out)


def markdown_table(rng: random.Random, n: int) -> str:
    cols = rng.randint(3, 7)
    rows = ["| " + " | ".join(_ident(rng) for _ in range(cols)) + " |", "|" + "---|" * cols]
    size = sum(map(len, rows))
    while size < n:
        cells = [
            rng.choice(
                [
                    str(rng.randint(0, 10**6)),
                    rng.choice(WORDS),
                    f"{rng.random():.3f}",
                    "`x`",
                    "**y**",
                ]
            )
            for _ in range(cols)
        ]
        rows.append("| " + " | ".join(cells) + " |")
        size += len(rows[-1])
    return "\n".join(rows)


def _json_value(rng: random.Random, depth: int) -> object:
    k = rng.randrange(6 if depth < 4 else 4)
    if k == 0:
        return rng.randint(-(10**9), 10**9)
    if k == 1:
        return rng.random() * 10 ** rng.randint(-5, 5)
    if k == 2:
        return _ident(rng)
    if k == 3:
        return rng.choice([True, False, None])
    if k == 4:
        return [_json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {_ident(rng): _json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def _json(pretty: bool) -> Gen:
    import json

    def gen(rng: random.Random, n: int) -> str:
        out: list[str] = []
        size = 0
        while size < n:
            v = {_ident(rng): _json_value(rng, 0) for _ in range(3)}
            s = json.dumps(v, indent=2) if pretty else json.dumps(v, separators=(",", ":"))
            out.append(s)
            size += len(s)
        return "\n".join(out)

    return gen


def brace_lines(rng: random.Random, n: int) -> str:
    return "\n".join(
        rng.choice(["{", "}", "[", "],", "},", ");", "end", "fi", "x", "0", "  }", "\t]"])
        for _ in range(n // 3)
    )


def csv_rows(rng: random.Random, n: int) -> str:
    rows: list[str] = []
    size = 0
    while size < n:
        r = [
            str(rng.randint(0, 99999)),
            _ident(rng),
            f"{rng.uniform(-1e4, 1e4):.4f}",
            f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
            f'"{rng.choice(WORDS)}, {rng.choice(WORDS)}"',
        ]
        rows.append(",".join(r))
        size += len(rows[-1])
    return "\n".join(rows)


def ansi_log(rng: random.Random, n: int) -> str:
    rows: list[str] = []
    size = 0
    while size < n:
        color = rng.choice(["31", "32", "33", "1;34", "0", "38;5;208"])
        r = f"\x1b[{color}m2026-12-03T01:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z\x1b[0m [{rng.choice(['INFO', 'WARN', 'ERROR'])}] {_ident(rng)}: {_words(rng, 40)} pid={rng.randint(1, 65535)}"
        rows.append(r)
        size += len(r)
    return "\n".join(rows)


def hexdump(rng: random.Random, n: int) -> str:
    rows: list[str] = []
    off = 0
    while off * 4 < n:
        data = rng.randbytes(16)
        hx = " ".join(f"{b:02x}" for b in data)
        asc = "".join(chr(b) if 32 <= b < 127 else "." for b in data)
        rows.append(f"{off:08x}  {hx}  |{asc}|")
        off += 16
    return "\n".join(rows)


def _encoded(fn: Callable[[bytes], bytes]) -> Gen:
    return lambda rng, n: fn(rng.randbytes(max(1, n * 5 // 8))).decode("ascii")[:n]


def url_encoded(rng: random.Random, n: int) -> str:
    raw = "".join(
        rng.choice([_words(rng, 10), "é", "中", "&", "=", "/", "?", " ", "ü"])
        for _ in range(n // 4)
    )
    return urllib.parse.quote(raw)[:n]


def file_paths(rng: random.Random, n: int) -> str:
    rows: list[str] = []
    size = 0
    while size < n:
        sep = rng.choice(["/", "\\"])
        parts = [
            rng.choice(
                [
                    _ident(rng),
                    f"v{rng.randint(0, 9)}.{rng.randint(0, 99)}",
                    ".git",
                    "node_modules",
                    "__pycache__",
                ]
            )
            for _ in range(rng.randint(2, 7))
        ]
        p = (
            ("C:" if sep == "\\" else "")
            + sep
            + sep.join(parts)
            + rng.choice([".py", ".rs", ".tar.gz", ".json", ":123:45", ""])
        )
        rows.append(p)
        size += len(p)
    return "\n".join(rows)


def prose(rng: random.Random, n: int) -> str:
    out: list[str] = []
    size = 0
    while size < n:
        s = _words(rng, rng.randint(30, 120)).capitalize() + rng.choice(
            [". ", ", ", "? ", "! ", ".\n\n"]
        )
        out.append(s)
        size += len(s)
    return "".join(out)


def _interleave(gens: tuple[Gen, ...], chunk: tuple[int, int]) -> Gen:
    """Alternating chunks of the given generators (mixtures at any order)."""

    def gen(rng: random.Random, n: int) -> str:
        out: list[str] = []
        size = 0
        while size < n:
            s = rng.choice(gens)(rng, rng.randint(*chunk))
            out.append(s)
            size += len(s)
        return "".join(out)

    return gen


BYTE_CLASSES = {
    "lower": string.ascii_lowercase,
    "upper": string.ascii_uppercase,
    "digit": string.digits,
    "punct": PUNCT,
    "space": " \t\n\r",
    "control": "".join(chr(c) for c in (*range(0, 9), 11, 12, *range(14, 32), 127)),
    "printable": PRINTABLE,
    "latin1": _chars(0xA0, 0xFF),
    "combining": COMBINING,
    "bmp_symbols": SYMBOLS + MATH + ARROWS + BOX,
    "emoji_chars": EMOJI,
    "astral": "".join(chr(c) for c in range(0x10000, 0x10400))
    + "".join(chr(c) for c in range(0x1D400, 0x1D500)),
}

CLASSES: dict[str, Gen] = {f"run:{k}": _run(v) for k, v in BYTE_CLASSES.items()}
for _a in ("lower", "upper", "digit", "punct", "space", "combining", "bmp_symbols", "latin1"):
    for _b in ("lower", "digit", "punct", "space", "combining", "emoji_chars"):
        if _a != _b:
            for _d in (0.1, 0.5):
                CLASSES[f"mix:{_a}+{_b}@{_d}"] = _mix((BYTE_CLASSES[_a], BYTE_CLASSES[_b]), _d)
CLASSES.update(
    {
        "script:latin_diacritics": _script_text(string.ascii_lowercase + LATIN_DIACRITIC),
        "script:latin_combining": _script_text(string.ascii_lowercase, COMBINING),
        "script:stacked_marks": _script_text("aeiou", COMBINING * 3),
        "script:greek": _script_text(GREEK),
        "script:cyrillic": _script_text(CYRILLIC),
        "script:arabic": _script_text(ARABIC, ARABIC_MARKS),
        "script:hebrew": _script_text(HEBREW, HEBREW_MARKS),
        "script:devanagari": _script_text(DEVANAGARI, DEVANAGARI_MARKS),
        "script:bengali": _script_text(BENGALI, DEVANAGARI_MARKS[:0] + _chars(0x9BE, 0x9CC)),
        "script:tamil": _script_text(TAMIL, TAMIL_MARKS),
        "script:thai": _script_text(THAI, THAI_MARKS, space=""),
        "script:cjk": _script_text(CJK, space=""),
        "script:cjk_rare": _run(CJK),
        "script:hangul": _script_text(HANGUL),
        "script:kana_ascii": kana_ascii,
        "symbols:math": _run(MATH),
        "symbols:arrows": _run(ARROWS),
        "symbols:box": _run(BOX),
        "symbols:emoji_seq": emoji_seq,
        "text:prose": prose,
        "text:latex": latex,
        "text:markdown_table": markdown_table,
        "data:json_pretty": _json(True),
        "data:json_min": _json(False),
        "data:csv": csv_rows,
        "data:brace_lines": brace_lines,
        "log:ansi": ansi_log,
        "enc:hexdump": hexdump,
        "enc:base16": _encoded(base64.b16encode),
        "enc:base32": _encoded(base64.b32encode),
        "enc:base64": _encoded(base64.b64encode),
        "enc:base85": _encoded(base64.b85encode),
        "enc:ascii85": _encoded(base64.a85encode),
        "enc:url": url_encoded,
        "data:paths": file_paths,
        "code:regex": regex_code,
        "code:minified_js": _code("javascript", minify=True),
        "code:minified_css": _code("css", minify=True),
        **{f"code:{lang}": _code(lang) for lang in TEMPLATES},
    }
)
BASE = tuple(sorted(CLASSES))
"""The classes that draw on no other class, in name order: :func:`split` alternates them."""

MIXTURES = {
    "mix:everything": ((), (1, 40)),
    "mix:scripts_and_code": (("script:", "code:", "symbols:"), (5, 80)),
}
"""Interleavings of other classes (name: class-name prefixes drawn from, every class when
empty; chunk sizes). Each is made twice, once from each half of :data:`BASE`, so a
mixture never draws on a generator of the other half: ``mix:everything`` from the fit half,
``mix:everything:held`` from the held-out half."""

HALVES = (BASE[0::2], BASE[1::2])
"""(fit half, held-out half) of :data:`BASE`: alternate names in sorted order."""

SOURCES: dict[str, tuple[str, ...]] = {}
"""Mixture → the classes it interleaves."""

for _name, (_prefixes, _chunk) in MIXTURES.items():
    for _half, _suffix in zip(HALVES, ("", ":held"), strict=True):
        SOURCES[_name + _suffix] = tuple(
            k for k in _half if not _prefixes or k.startswith(_prefixes)
        )
        CLASSES[_name + _suffix] = _interleave(
            tuple(CLASSES[k] for k in SOURCES[_name + _suffix]), _chunk
        )


def split() -> tuple[list[str], list[str]]:
    """(fit half, held-out half): alternate names of :data:`BASE` in sorted order, and each
    mixture of :data:`MIXTURES` with the half it draws from (the ``:held`` ones held out)."""
    fit = [*HALVES[0], *MIXTURES]
    held = [*HALVES[1], *(name + ":held" for name in MIXTURES)]
    return fit, held


def cases(
    seed: int, per_class: int, size: int, names: list[str] | None = None
) -> Iterator[tuple[str, str]]:
    """``per_class`` texts of each class (sizes 1..``size``, log-spread), deterministic in ``seed``."""
    for name in names if names is not None else sorted(CLASSES):
        rng = random.Random(f"{seed}:{name}")
        for i in range(per_class):
            n = max(1, int(size ** (rng.random())) if i % 2 else size)
            yield name, CLASSES[name](rng, n)


def worst_real(text: str, encoders: list[object]) -> int:
    """The largest token count of ``text`` among ``encoders`` (``quicktok`` encodings)."""
    return max(int(e.count(text)) for e in encoders)  # type: ignore[attr-defined]


def encoders() -> list[object]:
    """The four reference encodings (needs the ``bpe`` extra)."""
    import quicktok

    from ctxwin.tokens.bpe import TOKENIZERS

    return [quicktok.get_encoding(e) for e in TOKENIZERS]


def vocab_tokens(enc: object) -> Iterator[bytes]:
    """Every token of encoding ``enc`` (a ``quicktok`` encoding), as bytes; ids with no
    token are skipped."""
    for i in range(enc.n_vocab):  # type: ignore[attr-defined]
        try:
            yield enc.decode_single_token_bytes(i)  # type: ignore[attr-defined]
        except Exception:  # ids with no token
            continue


ESTIMATORS = ("content", "bound")
"""The estimators a report covers by default."""


def estimate_tokens(text: str, estimator: str = "content") -> int:
    """Raw tokens of ``text`` alone (no message framing) by the estimator so named."""
    from ctxwin.tokens.base import Kind
    from ctxwin.tokens.registry import get_estimator

    est = get_estimator(estimator)
    cost = [0] * est.width
    est.add_text(cost, text, Kind.PROSE)
    return est.raw(cost)


def content_tokens(text: str) -> int:
    """The ``content`` estimator's raw tokens for ``text`` alone (no message framing)."""
    return estimate_tokens(text, "content")


def ratios(
    seed: int, per_class: int, size: int, estimators: tuple[str, ...] = ESTIMATORS
) -> dict[str, dict[str, list[float]]]:
    """Per estimator, per class: estimate ÷ largest real count, for every generated case."""
    encs = encoders()
    out: dict[str, dict[str, list[float]]] = {e: {} for e in estimators}
    for name, text in cases(seed, per_class, size):
        real = worst_real(text, encs)
        if real:
            for e in estimators:
                out[e].setdefault(name, []).append(estimate_tokens(text, e) / real)
    return out


def lowest(per: dict[str, list[float]]) -> tuple[float, float]:
    """(lowest ratio on the fit half, lowest on the held-out half) of :func:`split`."""
    fit, held = split()
    lows = {k: min(v) for k, v in per.items()}
    return min(lows[k] for k in fit if k in lows), min(lows[k] for k in held if k in lows)


def report(
    seed: int, per_class: int, size: int, estimators: tuple[str, ...] = ESTIMATORS
) -> list[str]:
    """Markdown, per estimator: lowest and highest ratio per class, and per half of :func:`split`."""
    lines: list[str] = []
    for estimator, per in ratios(seed, per_class, size, estimators).items():
        lines += _section(estimator, per, seed, per_class, size)
    return lines


def _section(
    estimator: str, per: dict[str, list[float]], seed: int, per_class: int, size: int
) -> list[str]:
    fit_low, held_low = lowest(per)
    n = sum(map(len, per.values()))
    lows = {k: min(v) for k, v in per.items()}
    highs = {k: max(v) for k, v in per.items()}
    mids = {k: statistics.median(v) for k, v in per.items()}
    under = sorted((v, k) for k, v in lows.items() if v < 1)
    lines = [
        f"## `{estimator}`",
        "",
        f"Seed {seed}, {per_class} cases per class up to {size} characters: {n:,} cases, "
        f"{len(per)} classes.",
        "",
        f"- lowest ratio, fit half: {fit_low:.3f}; held-out half: {held_low:.3f}",
        f"- cases under 1.0: {sum(r < 1 for v in per.values() for r in v):,} of {n:,}; "
        f"classes with a case under: {len(under)} of {len(per)}",
        f"- classes whose highest ratio exceeds 2.0: {sum(v > 2 for v in highs.values())}; "
        f"whose median ratio does: {sum(v > 2 for v in mids.values())}",
        "",
        "| class | lowest | median | highest |",
        "|---|---:|---:|---:|",
    ]
    lines += [
        f"| {k} | {v:.3f} | {mids[k]:.3f} | {highs[k]:.3f} |"
        for v, k in sorted((v, k) for k, v in lows.items())
    ]
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m fidelity.adversarial", description=__doc__.splitlines()[0]
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--per-class", type=int, default=40)
    p.add_argument("--size", type=int, default=2000)
    p.add_argument("--out", type=argparse.FileType("w", encoding="utf-8"), default=sys.stdout)
    p.add_argument("--estimator", action="append", default=None, help="content, bound (both)")
    a = p.parse_args(argv)
    names = tuple(a.estimator or ESTIMATORS)
    a.out.write("\n".join(report(a.seed, a.per_class, a.size, names)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
