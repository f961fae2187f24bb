"""Seeded, deterministic generators for the stress classes.

Each generator takes a :class:`random.Random` and a size in characters and
returns one string of roughly that size. The same seed always gives the
same text, so the harness's table is reproducible byte for byte.
"""

from __future__ import annotations

import base64
import random
import string
from collections.abc import Callable

import orjson

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
    "however",
    "because",
    "without",
    "against",
    "government",
    "development",
    "environment",
    "information",
    "performance",
    "international",
    "particular",
    "approximately",
    "responsibility",
    "characteristics",
    "implementation",
    "infrastructure",
    "notwithstanding",
    "acknowledgement",
    "troubleshooting",
    "configuration",
    "reproducibility",
    "serialization",
    "deserialization",
    "authentication",
    "authorization",
    "asynchronous",
    "idempotent",
    "heuristic",
    "throughput",
    "latency",
    "middleware",
    "orchestration",
    "observability",
    "mitochondria",
    "photosynthesis",
    "archipelago",
    "chrysanthemum",
    "onomatopoeia",
    "sesquipedalian",
    "Wednesday",
    "February",
    "Copenhagen",
    "Massachusetts",
    "Kubernetes",
    "PostgreSQL",
    "TypeScript",
]

CHINESE = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后"
    "多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还"
    "因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结"
    "解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级"
)
CN_PUNCT = "，。、；：？！"

HIRAGANA = "".join(chr(c) for c in range(0x3041, 0x3097))
KATAKANA = "".join(chr(c) for c in range(0x30A1, 0x30FB))
KANJI = CHINESE[:120]

RUSSIAN = [
    "и",
    "в",
    "не",
    "на",
    "я",
    "быть",
    "он",
    "с",
    "что",
    "а",
    "по",
    "это",
    "она",
    "этот",
    "к",
    "но",
    "они",
    "мы",
    "как",
    "из",
    "у",
    "который",
    "то",
    "за",
    "свой",
    "весь",
    "год",
    "от",
    "так",
    "о",
    "для",
    "ты",
    "же",
    "все",
    "тот",
    "мочь",
    "вы",
    "человек",
    "такой",
    "его",
    "сказать",
    "только",
    "или",
    "ещё",
    "бы",
    "себя",
    "один",
    "как",
    "уже",
    "до",
    "время",
    "если",
    "сам",
    "когда",
    "другой",
    "вот",
    "говорить",
    "наш",
    "мой",
    "знать",
    "стать",
    "при",
    "чтобы",
    "дело",
    "жизнь",
    "кто",
    "первый",
    "очень",
    "два",
    "день",
    "её",
    "новый",
    "рука",
    "даже",
    "во",
    "со",
    "раз",
    "где",
    "там",
    "под",
    "можно",
    "ну",
    "какой",
    "после",
    "их",
    "работа",
    "без",
    "самый",
    "потом",
    "надо",
    "хотеть",
    "ли",
    "слово",
    "идти",
    "большой",
    "должен",
    "место",
    "иметь",
    "ничто",
    "разработка",
    "производительность",
    "конфигурация",
    "аутентификация",
    "достопримечательность",
    "взаимодействие",
]

EMOJI = [
    chr(c)
    for c in (
        *range(0x1F600, 0x1F650),
        *range(0x1F680, 0x1F6C6),
        *range(0x1F90C, 0x1F9FF, 3),
        *range(0x2600, 0x2700, 7),
    )
]
EMOJI_SEQ = [
    "👨\u200d👩\u200d👧\u200d👦",
    "🏳️\u200d🌈",
    "👍🏽",
    "🇩🇪",
    "🇯🇵",
    "❤️",
    "🧑🏿\u200d💻",
    "✅",
    "⚠️",
]

IDENTS = [
    "user",
    "order",
    "item",
    "cache",
    "session",
    "token",
    "parser",
    "config",
    "result",
    "payload",
    "buffer",
    "index",
    "request",
    "response",
    "handler",
    "client",
    "server",
    "record",
    "entry",
    "batch",
    "queue",
    "worker",
    "task",
    "value",
    "count",
    "total",
    "offset",
    "limit",
    "node",
    "edge",
    "graph",
    "tree",
    "visitor",
    "factory",
    "builder",
    "adapter",
    "manager",
    "service",
]


def _words(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(WORDS) for _ in range(n)]


def english(rng: random.Random, size: int) -> str:
    out: list[str] = []
    total = 0
    while total < size:
        words = _words(rng, rng.randint(6, 22))
        words[0] = words[0].capitalize()
        sentence = " ".join(words)
        if rng.random() < 0.3:
            sentence = sentence.replace(" ", ", ", 1)
        sentence += rng.choice(".....?!")
        if rng.random() < 0.1:
            sentence += "\n\n"
        out.append(sentence)
        total += len(sentence) + 1
    return " ".join(out)


def _ident(rng: random.Random) -> str:
    parts = [rng.choice(IDENTS) for _ in range(rng.randint(1, 3))]
    style = rng.random()
    if style < 0.5:
        return "_".join(parts)
    if style < 0.8:
        return parts[0] + "".join(p.capitalize() for p in parts[1:])
    return "".join(p.capitalize() for p in parts)


def code(rng: random.Random, size: int) -> str:
    lines: list[str] = []
    total = 0
    depth = 0
    while total < size:
        r = rng.random()
        ind = "    " * depth
        if r < 0.12 or depth == 0:
            args = ", ".join(_ident(rng) for _ in range(rng.randint(0, 4)))
            ret = rng.choice(["int", "str", "None", "dict[str, Any]"])
            line = f"{ind}def {_ident(rng)}({args}) -> {ret}:"
            depth = min(depth + 1, 4)
        elif r < 0.22:
            op = rng.choice(["==", ">=", "<", "is not"])
            line = f"{ind}if {_ident(rng)} {op} {rng.randint(0, 4096)}:"
            depth = min(depth + 1, 4)
        elif r < 0.3:
            line = f"{ind}for {_ident(rng)} in range({rng.randint(1, 100)}):"
            depth = min(depth + 1, 4)
        elif r < 0.5:
            call = f'{_ident(rng)}("{rng.choice(WORDS)}", {rng.randint(0, 999)})'
            line = f"{ind}{_ident(rng)} = {_ident(rng)}.{call}"
        elif r < 0.6:
            line = f"{ind}# {' '.join(_words(rng, rng.randint(3, 10)))}"
        elif r < 0.7:
            line = f"{ind}return {_ident(rng)}[{rng.randint(0, 9)}] + {rng.random():.3f}"
            depth = max(depth - 1, 0)
        elif r < 0.75:
            line = ""
        else:
            line = f"{ind}{_ident(rng)}.{_ident(rng)}({_ident(rng)}={_ident(rng)})"
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)


def minified_js(rng: random.Random, size: int) -> str:
    out: list[str] = []
    total = 0
    short = [a + b for a in string.ascii_letters for b in "0123456789_$"] + list(
        string.ascii_letters
    )
    while total < size:
        a, b, c = (rng.choice(short) for _ in range(3))
        piece = rng.choice(
            [
                f"function {a}({b},{c}){{return {b}+{c}*{rng.randint(0, 99)}}}",
                f"var {a}={b}.{c}||{{}};",
                f'{a}.{b}=function(){{if(!{c})throw new Error("{rng.choice(WORDS)}");return {c}}};',
                f"for(var {a}=0;{a}<{b}.length;{a}++){c}[{a}]={b}[{a}]>>>{rng.randint(1, 31)};",
                f'{a}["{rng.choice(IDENTS)}"]=({b},{c})=>{b}!=={c}?{b}:{rng.randint(0, 65535)};',
            ]
        )
        out.append(piece)
        total += len(piece)
    return "".join(out)


def json_numbers(rng: random.Random, size: int) -> str:
    rows: list[bytes] = []
    total = 0
    while total < size:
        row = {
            "id": rng.randint(1, 10**9),
            "sku": f"SKU-{rng.randint(0, 10**6):06d}",
            "price": round(rng.uniform(0, 10000), 2),
            "qty": rng.randint(0, 500),
            "ratio": rng.random(),
            "ts": 1_700_000_000 + rng.randint(0, 10**8),
            "lat": round(rng.uniform(-90, 90), 6),
            "lon": round(rng.uniform(-180, 180), 6),
            "tags": [rng.choice(IDENTS) for _ in range(rng.randint(0, 3))],
            "ok": rng.random() < 0.5,
        }
        data = orjson.dumps(row)
        rows.append(data)
        total += len(data) + 1
    return "[" + ",".join(r.decode() for r in rows) + "]"


def digit_logs(rng: random.Random, size: int) -> str:
    lines: list[str] = []
    total = 0
    while total < size:
        line = (
            f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:"
            f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999999):06d}Z "
            f"{rng.choice(['INFO', 'WARN', 'DEBUG', 'ERROR'])} [worker-{rng.randint(0, 64)}] "
            f"pid={rng.randint(1000, 99999)} req={rng.randint(10**7, 10**8)} "
            f"latency={rng.uniform(0, 5000):.3f}ms bytes={rng.randint(0, 10**7)} "
            f"ip=10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}"
            f":{rng.randint(1024, 65535)}"
        )
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)


def hex_ids(rng: random.Random, size: int) -> str:
    parts: list[str] = []
    total = 0
    while total < size:
        r = rng.random()
        if r < 0.4:
            h = f"{rng.getrandbits(128):032x}"
            p = f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{h[16:20]}-{h[20:32]}"
        elif r < 0.7:
            p = f"{rng.getrandbits(256):064x}"
        elif r < 0.9:
            p = f"{rng.getrandbits(160):040x}"
        else:
            p = f"0x{rng.getrandbits(64):016X}"
        parts.append(p)
        total += len(p) + 1
    return "\n".join(parts)


def base64_blob(rng: random.Random, size: int) -> str:
    raw = rng.randbytes(size * 3 // 4 + 3)
    return base64.b64encode(raw).decode()[:size]


def chinese(rng: random.Random, size: int) -> str:
    out: list[str] = []
    for _ in range(size):
        out.append(rng.choice(CN_PUNCT) if rng.random() < 0.08 else rng.choice(CHINESE))
    return "".join(out)


def japanese(rng: random.Random, size: int) -> str:
    out: list[str] = []
    for _ in range(size):
        r = rng.random()
        if r < 0.45:
            out.append(rng.choice(HIRAGANA))
        elif r < 0.7:
            out.append(rng.choice(KATAKANA))
        elif r < 0.94:
            out.append(rng.choice(KANJI))
        else:
            out.append(rng.choice("、。「」"))
    return "".join(out)


def cyrillic(rng: random.Random, size: int) -> str:
    out: list[str] = []
    total = 0
    while total < size:
        words = [rng.choice(RUSSIAN) for _ in range(rng.randint(5, 16))]
        words[0] = words[0].capitalize()
        s = " ".join(words) + rng.choice("..,!?")
        out.append(s)
        total += len(s) + 1
    return " ".join(out)


def emoji(rng: random.Random, size: int) -> str:
    out: list[str] = []
    total = 0
    while total < size:
        r = rng.random()
        e = rng.choice(EMOJI_SEQ) if r < 0.2 else rng.choice(EMOJI)
        if rng.random() < 0.15:
            e += " "
        out.append(e)
        total += len(e)
    return "".join(out)


def deep_indent(rng: random.Random, size: int) -> str:
    lines: list[str] = []
    total = 0
    while total < size:
        depth = rng.randint(8, 40)
        ws = "\t" * depth if rng.random() < 0.3 else " " * (depth * rng.choice([2, 4]))
        line = ws + rng.choice(["}", "{", "</div>", f"{_ident(rng)}: {rng.randint(0, 9)},", "end"])
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)


def char_runs(rng: random.Random, size: int) -> str:
    out: list[str] = []
    total = 0
    while total < size:
        ch = rng.choice(
            ["=", "-", "*", "#", " ", "a", "Z", "0", "9", ".", "\n", "_", "~", "é", "中", "🙂"]
        )
        run = ch * rng.randint(50, 3000)
        out.append(run)
        total += len(run)
    return "".join(out)


def mixed_intl(rng: random.Random, size: int) -> str:
    part = size // 5
    return "\n".join(f(rng, part) for f in (english, chinese, cyrillic, japanese, emoji))


CLASSES: dict[str, Callable[[random.Random, int], str]] = {
    "English prose": english,
    "source code": code,
    "minified JS": minified_js,
    "JSON with numbers": json_numbers,
    "digit-heavy logs": digit_logs,
    "hex hashes, UUIDs": hex_ids,
    "base64 blob": base64_blob,
    "Chinese": chinese,
    "Japanese": japanese,
    "Cyrillic": cyrillic,
    "emoji": emoji,
    "deep indentation": deep_indent,
    "runs of one character": char_runs,
    "mixed scripts": mixed_intl,
}
"""Every stress class by its table label."""


def samples(seed: int = 1, size: int = 20_000, count: int = 5) -> dict[str, list[str]]:
    """``count`` texts of about ``size`` characters per class, seeded."""
    out: dict[str, list[str]] = {}
    for i, (label, fn) in enumerate(CLASSES.items()):
        rng = random.Random(seed * 1000 + i)
        sizes = [size] + [rng.randint(50, size) for _ in range(count - 1)]
        out[label] = [fn(rng, n) for n in sizes]
    return out
