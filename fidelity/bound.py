"""Derive the prices of :class:`ctxwin.tokens.BoundEstimator` from the four tokenizers.

    python -m fidelity.bound [--margin 1.1] [--check] [--walks] [--words] [--vocab] [--chars]

The estimator cuts text into pieces (:func:`ctxwin.tokens.bound.bound_pieces`, as the
four tokenizers' pre-tokenizers cut ASCII), counts a piece of its vocabulary at its
exact count and a run of non-ASCII bytes at the most tokens the four can start in it
(one a byte or fewer, ``--chars``; of its NFC form if that is more), and prices every
byte of the other pieces by its class and the class of the byte before it (three
tables: per byte, per run start, per pair of word classes) plus a fixed price per
string. ``--vocab`` writes
the vocabulary, each piece with the largest of the four counts: every token of the
four vocabularies that is one whole piece without digits (:func:`vocab_shaped`)
and that each of the four tokenizers encodes in one or two tokens, the forms of
the commonest English words (:func:`word_forms`, needs ``wordfreq``) and the pieces of code
and paths on this machine (:func:`machine_pieces`); and the any-prefix records of words
(:func:`letter_runs`, :func:`other_words`): the most tokens the four give the word alone or
after any one ASCII byte that may open it. ``--chars``
writes the characters none of the four tokenizers can split into a token a byte
(:func:`char_cap_table`, :func:`ctxwin.tokens.bound.char_caps`). This
module builds the texts each price is derived from and solves for the prices
with a linear program (``scipy``, in the ``fidelity`` dependency group):

* *run and pair texts*: for every ordered pair of character classes
  (:data:`CHAR_CLASSES`: letter groups, digits, punctuation, whitespace,
  combining marks, 2-, 3- and 4-byte scripts, symbols, emoji), random
  alternations of the two at run lengths 1-1, 1-3, 2-8 against 1-2 and
  1-2 against 2-8, from 2 to 600 characters; a class paired with itself is a
  random run of it;
* *union texts*: random strings over unions of classes (all lower-case
  letters, all letters, alphanumerics, printable ASCII, every class), 2 to
  1,200 characters;
* *word texts* (:func:`word_texts`): 68,000 random words of 1 to 40 letters,
  over every union of the five lower-case letter groups (from one group to all
  26 letters), upper-case, mixed-case and capitalized, each with and without a
  space before it. A word outside the vocabulary is one piece priced by its
  first letter and the w of each pair after it, and the few words a union
  text of a given length holds leave w too low on the cheap pairs (before
  these, 21 of 20,000 random lower-case words of 1-20 letters were under,
  lowest 0.75). They are drawn from one string seed (:data:`WORD_SEED`), so
  the integer-seeded words of the tests stay held out; they weigh nothing in
  the objective (there are too many to tie-break with);
* the *fit* half of the adversarial classes (:func:`fidelity.adversarial.split`).

Every one of them is a constraint: estimate ≥ the largest count of
o200k_base, cl100k_base, Llama 3 and Qwen 3, with ``margin`` × the tokens its
pieces with a fixed price do not account for (vocabulary pieces, digit runs and
non-ASCII runs: exact or a hard cap), less 0.99 (the estimate
is rounded up). Among the prices that satisfy them all, the program takes those with the
lowest estimate on the natural-text classes of the fit half (code, prose,
data formats, scripts, logs; :data:`NATURAL_SEED`), with the constraint texts
as a tie-break — the recorded corpus is never used. ``--check`` compares the
solution with the tables in ``ctxwin/tokens/bound.py`` (``python -m fidelity.oracle``
gives the corpus median the estimator would reach with every piece at its exact
count, the least any price table for these pieces can give); ``--words`` checks the bound
on random words the program never saw (:data:`HELD_OUT_WORDS`); ``--walks`` prints why a
bigram or trigram price cannot be much cheaper on English (random walks over
the commonest letter pairs and triples of the vocabularies).
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import random
import string
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from ctxwin.tokens.bound import (
    _BCLASS,
    _RUNS,
    BOUND_BYTE_CENTS,
    BOUND_CLASSES,
    BOUND_RUN_CENTS,
    BOUND_STRING_CENTS,
    BOUND_WORD,
    BOUND_WORD_CENTS,
    RUN_SPAN,
    bound_parts,
    bound_pieces,
    unicode_subpieces,
)
from ctxwin.tokens.vocabulary import (
    ANY_PREFIX,
    PREFIX_BYTES,
    bound_vocabulary,
    code_point_file,
    fixed_cents,
    letter_spans,
    vocab_file,
)
from fidelity import adversarial

ROOT = Path(__file__).resolve().parent.parent
WORD = {c: i for i, c in enumerate(BOUND_WORD)}
NW = len(BOUND_WORD)
NC = len(BOUND_CLASSES)
NON_ASCII = NC - 1
"""Code of the ``non-ascii`` class: its bytes are priced by
:func:`ctxwin.tokens.bound.run_cap`, never by pairs, so its prices are not derived but
fixed (1 token a byte, no run price)."""


def _chars(lo: int, hi: int) -> str:
    return "".join(chr(c) for c in range(lo, hi + 1) if chr(c).isprintable())


CHAR_CLASSES = {
    "e": "e",
    "vowel": "aoiu",
    "th": "ths",
    "consonant": "nrldcm",
    "rare letter": "bfgjkpqvwxyz",
    "upper": string.ascii_uppercase,
    "digit": string.digits,
    "space": " \t",
    "newline": "\n\r",
    "combining": _chars(0x300, 0x36F),
    "punct": ".,:;'\"()[]{}-_/=",
    "other ascii": "!#$%&*+<>?@\\^`|~"
    + "".join(chr(c) for c in (*range(0, 9), 11, 12, *range(14, 32), 127)),
    "latin 2-byte": _chars(0xA0, 0x2FF),
    "other 2-byte": "".join(c for c in _chars(0x370, 0x7FF)),
    "symbols E2": _chars(0x2000, 0x2FFF),
    "cjk": _chars(0x4E00, 0x9FFF),
    "hangul": _chars(0xAC00, 0xD7A3),
    "other 3-byte": _chars(0x800, 0x1FFF) + _chars(0x3000, 0x33FF) + _chars(0xF900, 0xFFEF),
    "emoji": _chars(0x1F300, 0x1F6FF),
    "astral": _chars(0x10000, 0x103FF) + _chars(0x1D400, 0x1D7FF) + _chars(0x20000, 0x20FFF),
}
"""Character classes whose runs and alternations set the prices."""

UNIONS = {
    "lower": string.ascii_lowercase,
    "letters": string.ascii_letters,
    "alnum": string.ascii_letters + string.digits,
    "lower+space": string.ascii_lowercase + " ",
    "printable": string.printable[:95],
    "lower+digit": string.ascii_lowercase + string.digits,
    "lower+punct": string.ascii_lowercase + string.punctuation,
    "space+digit": " " + string.digits,
    "everything": "".join(CHAR_CLASSES.values()),
}
"""Unions of classes, drawn from at random."""

RUNS = (((1, 1), (1, 1)), ((1, 3), (1, 3)), ((2, 8), (1, 2)), ((1, 2), (2, 8)))


def _alternate(
    rng: random.Random, a: str, b: str, runs: tuple[tuple[int, int], ...], n: int
) -> str:
    out: list[str] = []
    size = turn = 0
    while size < n:
        m = rng.randint(*runs[turn])
        out.append("".join(rng.choice(a if turn == 0 else b) for _ in range(m)))
        size += m
        turn ^= 1
    return "".join(out)


def pair_texts(seed: int) -> Iterator[tuple[str, str]]:
    """(label, text): alternations of every ordered pair of :data:`CHAR_CLASSES`."""
    rng = random.Random(seed)
    for x, a in CHAR_CLASSES.items():
        for y, b in CHAR_CLASSES.items():
            for runs in RUNS if x != y else RUNS[:1]:
                for n in (rng.randint(2, 12), rng.randint(12, 60), 600):
                    yield f"pair:{x}/{y}", _alternate(rng, a, b, runs, n)


def union_texts(seed: int) -> Iterator[tuple[str, str]]:
    """(label, text): random strings over :data:`UNIONS`, 2 to 1,200 characters."""
    rng = random.Random(seed)
    for name, alphabet in UNIONS.items():
        for n in (2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 300, 600, 1200) * 4:
            yield f"union:{name}", "".join(rng.choice(alphabet) for _ in range(n))


LOWER_GROUPS = ("e", "vowel", "th", "consonant", "rare letter")
"""The lower-case letter groups of :data:`CHAR_CLASSES` (the word classes of the bound)."""

WORD_ALPHABETS = {
    **{
        "+".join(groups): "".join(CHAR_CLASSES[g] for g in groups)
        for k in range(1, len(LOWER_GROUPS) + 1)
        for groups in itertools.combinations(LOWER_GROUPS, k)
    },
    "upper": string.ascii_uppercase,
    "letters": string.ascii_letters,
}
"""Alphabets of the short random words: every union of lower-case letter groups (31,
from one group to all lower-case letters), upper-case and mixed-case letters."""

WORD_SEED = "fidelity.bound:words"
"""Seed of :func:`word_texts` (a string: no integer seed draws the same words)."""

WORD_COUNT = 1000
"""Short random words per alphabet and lead (with and without a space before them)."""

WORD_LENGTHS = (1, 40)


def word_texts(seed: str = WORD_SEED, count: int = WORD_COUNT) -> Iterator[tuple[str, str]]:
    """(label, text): short random words, 1 to 40 letters, over each of
    :data:`WORD_ALPHABETS` and capitalized (one upper-case letter, then lower-case
    ones), with and without a space before them."""
    rng = random.Random(seed)
    alphabets = {**WORD_ALPHABETS, "capitalized": ""}
    for name, alphabet in alphabets.items():
        for lead in ("", " "):
            for _ in range(count):
                n = rng.randint(*WORD_LENGTHS)
                if alphabet:
                    word = "".join(rng.choice(alphabet) for _ in range(n))
                else:
                    word = rng.choice(string.ascii_uppercase) + "".join(
                        rng.choice(string.ascii_lowercase) for _ in range(n - 1)
                    )
                yield f"word:{name}", lead + word


def constraint_texts() -> Iterator[tuple[str, str]]:
    """Every text a price must bound (see the module docstring)."""
    for seed in (1, 2):
        yield from pair_texts(seed)
    yield from union_texts(9)
    yield from word_texts()
    fit, _ = adversarial.split()
    for seed, per_class, size in ((5, 20, 1500), (21, 30, 300), (22, 10, 2000), (23, 30, 60)):
        yield from adversarial.cases(seed, per_class, size, fit)


NATURAL_SEED = 31
"""Seed of the natural-text cases the program minimizes the estimate on."""


def natural_texts() -> Iterator[str]:
    """Code, prose, data, script and log cases of the fit half (the objective)."""
    fit, _ = adversarial.split()
    natural = [k for k in fit if k.startswith(("code:", "text:", "data:", "script:", "log:"))]
    for _, text in adversarial.cases(NATURAL_SEED, 20, 1500, natural):
        yield text


NPARAM = NC + NC + NW * NW
TIE_BREAK = 0.01
"""Weight of the constraint texts in the objective: among equally cheap prices for
natural text, the program takes the lowest on the constraint texts too."""
MAX_PRICE = 2.55
"""The dearest a byte may cost (a pair price is stored in one byte, in 1/100 token)."""


def _pair_features(data: bytes, v: np.ndarray) -> None:
    codes = data.translate(_BCLASS)
    v[codes[0]] += 1
    v[NC + codes[0]] += 1
    for x, y in itertools.pairwise(codes):
        if x in WORD and y in WORD:
            v[2 * NC + NW * WORD[x] + WORD[y]] += 1
        else:
            v[y] += 1
            if x != y:
                v[NC + y] += 1


def features(text: str) -> tuple[np.ndarray, int]:
    """(how often each price — u by class, s by class, w by word-class pair — is paid,
    how many tokens the pieces with a fixed price cost: :func:`fixed_cents`)."""
    v = np.zeros(NPARAM)
    vocab = bound_vocabulary()
    known = 0
    for piece in bound_pieces(text.encode("utf-8", "surrogatepass")):
        for part in bound_parts(piece, vocab):
            exact = fixed_cents(part, vocab)
            if exact is None:
                _pair_features(part, v)
            else:
                known += exact // 100
    return v, known


def current_prices() -> np.ndarray:
    """The prices in ``ctxwin/tokens/bound.py``, in tokens, in :func:`features` order."""
    # u by class, s by class, then w row by row
    cents = [*BOUND_BYTE_CENTS, *BOUND_RUN_CENTS, *(c for row in BOUND_WORD_CENTS for c in row)]
    return np.array(cents, float) / 100


def derive(margin: float, string_tokens: float) -> tuple[np.ndarray, int]:
    """(prices in tokens, number of constraints) — see the module docstring."""
    from scipy.optimize import linprog

    encs = adversarial.encoders()
    rows, rhs = [], []
    objective = np.zeros(NPARAM)
    for label, text in constraint_texts():
        real = adversarial.worst_real(text, encs)
        if real:
            f, known = features(text)
            rows.append(f)
            # the margin covers the tokens not given a fixed price (known: those that are)
            rhs.append(max(0, real - known) * margin - 0.99 - string_tokens)
            if not label.startswith("word:"):
                objective += TIE_BREAK * f / real
    for text in natural_texts():
        real = adversarial.worst_real(text, encs)
        if real:
            objective += features(text)[0] / real
    for y in range(NC):  # a byte's price and its run-start price fit in one byte together
        cap = np.zeros(NPARAM)
        cap[y] = cap[NC + y] = -1
        rows.append(cap)
        rhs.append(-MAX_PRICE)
    bounds = [(0.0, MAX_PRICE)] * NPARAM
    bounds[NON_ASCII], bounds[NC + NON_ASCII] = (1.0, 1.0), (0.0, 0.0)
    res = linprog(
        objective,
        A_ub=-np.array(rows),
        b_ub=-np.array(rhs),
        bounds=bounds,
        method="highs",
    )
    if res.status != 0:
        raise SystemExit(f"fidelity.bound: no solution: {res.message}")
    return np.asarray(res.x), len(rows)


def _cents(x: np.ndarray) -> list[int]:
    return [int(c) for c in np.ceil(np.round(x * 100, 6))]


def vocab_shaped(token: bytes) -> bool:
    """Whether the vocabulary may hold ``token``: no ASCII digit (a digit run is priced
    exactly anyway) nor NUL (it ends a record of the file), and, if ASCII, one whole piece
    of :func:`ctxwin.tokens.bound.bound_pieces` (`` the``, ``_id``, ``.\\n\\n``, ``'s``,
    eight spaces); if not, UTF-8 that is one whole :func:`ctxwin.tokens.bound.unicode_subpieces`
    piece (`` Привет``, ``→``, `` ├──``, ``，``), the shape of every non-ASCII part
    :func:`ctxwin.tokens.bound.bound_parts` looks up."""
    if any(c in b"0123456789\0" for c in token):
        return False
    if token.isascii():
        return list(bound_pieces(token)) == [token]
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return unicode_subpieces(text) == [text]


VOCAB_PATH = ROOT / "ctxwin" / "data" / "bound-vocab.bin"
SPANS_PATH = ROOT / "ctxwin" / "data" / "letter-spans.bin.gz"


VOCAB_MAX = 2
"""The vocabulary keeps the tokens whose exact count is at most this."""

WORDS = 20_000
"""How many of the commonest English words (``wordfreq``'s list) give the vocabulary
their forms (:func:`word_forms`)."""

WORD_PREFIXES = ("", " ", "_", "/", "-", ".")
"""What a word form may start with: nothing, a space (prose), an underscore (``_id``,
``user_name``: identifiers and JSON keys), a slash, a hyphen or a dot (paths, file names,
options, attributes: ``/Contents``, ``-clients``, ``.Project``)."""

OTHER_LANGUAGES = (
    *("ar", "bg", "bn", "ca", "cs", "da", "de", "el", "es", "fa", "fi", "fr", "he", "hi"),
    *("hu", "is", "it", "ko", "lt", "lv", "mk", "nb", "nl", "pl", "pt", "ro", "ru", "sh"),
    *("sk", "sl", "sv", "ta", "tr", "uk", "ur", "vi"),
)
"""The ``wordfreq`` languages whose words give the vocabulary their non-ASCII forms
(:func:`other_words`): every one written with spaces between words (Chinese and
Japanese are not, so their words never stand alone as a piece)."""

OTHER_WORDS = 10_000
"""How many of each of :data:`OTHER_LANGUAGES`' commonest words are taken."""


def word_forms() -> set[bytes]:
    """Lower-case, capitalized and upper-case forms of the :data:`WORDS` commonest
    English words made of ASCII letters (``wordfreq.top_n_list``, pinned in the
    ``fidelity`` group; its frequencies come from Wikipedia, subtitles, news, books and
    web text, not from the recorded corpus), each after each of
    :data:`WORD_PREFIXES`, if :func:`vocab_shaped` (`` economy``, ``_Flights``,
    ``JFK``)."""
    import wordfreq

    out: set[bytes] = set()
    for word in wordfreq.top_n_list("en", WORDS):
        if word.isascii() and word.isalpha():
            for form in (word, word.capitalize(), word.upper()):
                for prefix in WORD_PREFIXES:
                    piece = (prefix + form).encode()
                    if vocab_shaped(piece):
                        out.add(piece)
    return out


MACHINE_MIN_FILES = 8
"""A piece of :func:`machine_pieces` must turn up in this many files or folders."""


MACHINE_TEXTS = (
    *(".js", ".ts", ".css", ".html", ".c", ".h", ".sh"),
    *(".md", ".rst", ".txt", ".json", ".yaml", ".yml", ".toml", ".cfg", ".ini"),
)
"""The other text files :func:`machine_sources` reads besides ``.py`` ones: code of other
languages, documentation and configuration (never a gettext catalog nor a Perl module,
and nothing under ``/etc``: ``python -m fidelity.scripts`` measures the bound on those,
:func:`fidelity.scripts.held_out`)."""

MACHINE_HEAD = 16_384
"""How much of each :data:`MACHINE_TEXTS` file :func:`machine_sources` reads."""


def machine_sources() -> Iterator[str]:
    """The text :func:`machine_pieces` reads, none of it from the recorded corpus: every
    ``.py`` file of Python's standard library and of the installed packages (the
    environment this runs in; the first 64 KB of each), and the first
    :data:`MACHINE_HEAD` bytes of every :data:`MACHINE_TEXTS` file under those folders and
    ``/usr``, one text per file: as it is, as a JSON string and as a JSON string inside a
    JSON string (code as tool calls carry it: ``\\"``, ``\\n``); and the path of every
    file and folder under ``/usr`` (one text per folder: its path and its entries'
    names)."""
    import os
    import sysconfig

    def read(path: Path, size: int) -> Iterator[str]:
        try:
            with path.open("rb") as f:
                text = f.read(size).decode("utf-8", "replace")
        except OSError:
            return
        yield "\n".join((text, json.dumps(text), json.dumps(json.dumps(text))))

    paths = sysconfig.get_paths()
    seen: set[str] = set()
    roots = []
    for key in ("stdlib", "purelib"):
        root = Path(paths[key])
        if str(root) in seen or not root.is_dir():
            continue
        seen.add(str(root))
        roots.append(root)
        for path in sorted(root.rglob("*.py")):
            yield from read(path, 65_536)
    for root in (*roots, Path("/usr")):
        for folder, dirs, files in os.walk(root):
            dirs.sort()
            if root == Path("/usr") and folder.startswith(tuple(seen)):
                continue
            for name in sorted(files):
                if name.endswith(MACHINE_TEXTS) and os.path.isfile(
                    file := os.path.join(folder, name)
                ):
                    yield from read(Path(file), MACHINE_HEAD)
    for folder, dirs, files in os.walk("/usr"):
        dirs.sort()
        yield "\n".join([folder, *(f"{folder}/{name}" for name in sorted(dirs + files))])


def machine_pieces() -> set[bytes]:
    """The ASCII pieces of code and paths: every :func:`vocab_shaped` ASCII piece
    (:func:`ctxwin.tokens.bound.bound_pieces`) of :func:`machine_sources` found in at least
    :data:`MACHINE_MIN_FILES` of its texts (``/site``, ``-packages``, ``.pyc``,
    ``__init__``, ``.append``, ``_dtype``)."""
    seen: collections.Counter[bytes] = collections.Counter()
    for text in machine_sources():
        data = text.encode("utf-8", "replace")
        seen.update({p for p in bound_pieces(data) if p.isascii()})
    return {
        p for p, n in seen.items() if n >= MACHINE_MIN_FILES and len(p) <= 64 and vocab_shaped(p)
    }


MORE_WORDS = 60_000
"""How many of the commonest English words give the vocabulary their forms' any-prefix
records (:func:`letter_runs`; the :data:`WORDS` commonest have their prefixed forms too)."""


def letter_runs(pieces: set[bytes]) -> set[bytes]:
    """The letter runs that get an any-prefix record
    (:data:`ctxwin.tokens.vocabulary.ANY_PREFIX`): the letters of every ASCII piece of
    ``pieces`` that is a letter run alone or after one byte (the four vocabularies' tokens,
    :func:`word_forms`, :func:`machine_pieces`), the lower-case, capitalized and upper-case
    forms of the :data:`MORE_WORDS` commonest English words, and :func:`other_words`."""
    import wordfreq

    out = set()
    for piece in pieces:
        letters = piece[1:] if piece[:1] in PREFIX_BYTES else piece
        if piece.isascii() and letters.isalpha():
            out.add(letters)
    for word in wordfreq.top_n_list("en", MORE_WORDS):
        if word.isascii() and word.isalpha():
            out |= {form.encode() for form in (word, word.capitalize(), word.upper())}
    out |= other_words()
    return {letters for letters in out if prefixed_shape(letters)}


def prefixed_shape(letters: bytes) -> bool:
    """Whether ``letters`` may have an any-prefix record: one piece after
    :data:`ctxwin.tokens.vocabulary.ANY_PREFIX` (:func:`vocab_shaped`) and, if ASCII,
    lower-case, capitalized or upper-case, the shapes
    :func:`ctxwin.tokens.vocabulary.prefixed_count` looks up (``AAAAABoy`` of a base64
    blob is not looked up: a miss would cost a lookup)."""
    if letters.isascii() and not (letters.islower() or letters.istitle() or letters.isupper()):
        return False
    return vocab_shaped(ANY_PREFIX + letters)


MORE_OTHER_WORDS = {"ru": 60_000, "uk": 30_000, "bg": 30_000, "mk": 15_000, "ko": 20_000}
"""Languages whose words are inflected past :data:`OTHER_WORDS` (Cyrillic, Korean): how
many of their commonest words :func:`other_words` takes instead."""


def other_words() -> set[bytes]:
    """The :data:`OTHER_WORDS` commonest words of each of :data:`OTHER_LANGUAGES` (more
    of :data:`MORE_OTHER_WORDS`' ones) that hold a non-ASCII letter and only letters and
    marks (``wordfreq``, as :func:`word_forms`), as written and capitalized (``Привет``,
    ``Việt``, ``हिन्दी``), if their any-prefix key is one piece."""
    import unicodedata

    import wordfreq

    out: set[bytes] = set()
    for lang in OTHER_LANGUAGES:
        for word in wordfreq.top_n_list(lang, MORE_OTHER_WORDS.get(lang, OTHER_WORDS)):
            if word.isascii() or any(unicodedata.category(c)[0] not in "LM" for c in word):
                continue
            out |= {form.encode() for form in (word, word.capitalize())}
    return out


def any_prefix_count(letters: bytes, encs: list[object]) -> int:
    """The most tokens any of ``encs`` gives ``letters`` alone or after any one of
    :data:`ctxwin.tokens.vocabulary.PREFIX_BYTES`."""
    texts = [letters.decode()] + [chr(b) + letters.decode() for b in PREFIX_BYTES]
    return max(int(max(map(e.count, texts))) for e in encs)  # type: ignore[attr-defined]


def run_pieces() -> set[bytes]:
    """Every run of one byte of :data:`ctxwin.tokens.bound._RUNS` (spaces, tabs,
    punctuation) up to :data:`ctxwin.tokens.bound.RUN_SPAN` long, alone and, for a
    punctuation byte, after a space (`` -----``), if :func:`vocab_shaped`: such runs the
    vocabulary lacks are cut into its longest runs (:func:`ctxwin.tokens.bound.bound_parts`)."""
    out = set()
    for b in _RUNS:
        for n in range(1, RUN_SPAN + 1):
            for lead in (b"", b" "):
                piece = lead + bytes([b]) * n
                if vocab_shaped(piece):
                    out.add(piece)
    return out


def vocabulary() -> list[tuple[bytes, int]]:
    """(piece, count): every token of the four vocabularies that :func:`vocab_shaped`
    admits, if the largest count of the four tokenizers is at most :data:`VOCAB_MAX`,
    and every :func:`word_forms`, :func:`machine_pieces` and :func:`run_pieces` piece
    whatever its count (up to 255), each with that largest count; and an any-prefix record for every
    :func:`letter_runs` run (:func:`any_prefix_count`)."""
    encs = adversarial.encoders()
    shaped = {t for enc in encs for t in adversarial.vocab_tokens(enc) if vocab_shaped(t)}
    words = word_forms() | machine_pieces() | run_pieces()
    counts = {}
    for token in sorted(shaped | words):
        text = token.decode("utf-8")
        count = max(e.count(text) for e in encs)  # type: ignore[attr-defined]
        if count <= VOCAB_MAX or (token in words and count <= 255):
            counts[token] = count
    for letters in letter_runs(shaped | words):
        count = any_prefix_count(letters, encs)
        if count <= 255:
            counts[ANY_PREFIX + letters] = count
    return sorted(counts.items())


CHARS_PATH = ROOT / "ctxwin" / "data" / "char-caps.bin.gz"


def _vocab_sets(enc: object) -> tuple[set[bytes], set[bytes], set[bytes]]:
    """(every token of ``enc``, every head of up to 3 bytes of a longer token, every tail
    of up to 3 bytes of a longer token)."""
    tokens = set(adversarial.vocab_tokens(enc))
    heads = {t[:k] for t in tokens for k in range(1, min(len(t), 4))}
    tails = {t[-k:] for t in tokens for k in range(1, min(len(t), 4))}
    return tokens, heads, tails


def most_starts(char: bytes, tokens: set[bytes], heads: set[bytes], tails: set[bytes]) -> int:
    """The most tokens a tokenizer with these sets can start inside ``char`` (its UTF-8
    bytes), wherever it stands: the most parts of any split of it in which every part is a
    token, except that the first may be the tail of a longer token (``tails``) and the last
    the head of one (``heads``), and no two neighbouring one-byte parts make a two-byte
    token (BPE would have merged them), unless one of them is such a tail or head. See
    :func:`ctxwin.tokens.bound.char_caps`."""
    n = len(char)
    best = 1
    for k in range(1, n):
        for cuts in itertools.combinations(range(1, n), k):
            edges = (0, *cuts, n)
            parts = [char[a:b] for a, b in itertools.pairwise(edges)]
            first, last = parts[0], parts[-1]
            if first not in tokens and first not in tails:
                continue
            if last not in tokens and last not in heads:
                continue
            if any(p not in tokens for p in parts[1:-1]):
                continue
            merged = False
            for j, (x, y) in enumerate(itertools.pairwise(parts)):
                if (j == 0 and x in tails) or (j == len(parts) - 2 and y in heads):
                    continue
                if len(x) == 1 and len(y) == 1 and x + y in tokens:
                    merged = True
                    break
            if not merged:
                best = max(best, k + 1)
    return best


def char_cap_table() -> list[tuple[int, int]]:
    """(code point, cap) for every character whose cap (:func:`most_starts`, the largest
    of the four tokenizers) is below its UTF-8 length."""
    sets = [_vocab_sets(enc) for enc in adversarial.encoders()]
    out = []
    for cp in (*range(0x80, 0xD800), *range(0xE000, 0x110000)):
        char = chr(cp).encode()
        cap = max(most_starts(char, *s) for s in sets)
        if cap < len(char):
            out.append((cp, cap))
    return out


def write_char_caps() -> int:
    """Write :func:`char_cap_table` to :data:`CHARS_PATH` (gzip; three bytes of code
    point and one of cap per character)."""
    table = char_cap_table()
    CHARS_PATH.write_bytes(code_point_file(table))
    return len(table)


def write_vocabulary() -> int:
    """Write :func:`vocabulary` to :data:`VOCAB_PATH` (:func:`ctxwin.tokens.bound.vocab_file`:
    each record the count byte, the piece and NUL, as pieces may hold line breaks, then a
    hash index over them). The file is replaced whole, never rewritten in place: a process
    may have it mapped."""
    pieces = vocabulary()
    tmp = VOCAB_PATH.with_suffix(".tmp")
    tmp.write_bytes(vocab_file(pieces))
    os.replace(tmp, VOCAB_PATH)
    write_letter_spans(pieces)
    return len(pieces)


def write_letter_spans(records: Iterable[tuple[bytes, int]]) -> int:
    """Write :func:`ctxwin.tokens.vocabulary.letter_spans` of the vocabulary's ``records``
    to :data:`SPANS_PATH` (as :data:`CHARS_PATH`: three bytes of code point, one of span),
    the spans over 1 alone (:func:`~ctxwin.tokens.vocabulary.letter_spans_of` reads 1 for
    any other character)."""
    spans = letter_spans(records)
    SPANS_PATH.write_bytes(code_point_file(sorted(i for i in spans.items() if i[1] > 1)))
    return len(spans)


ENGLISH_FREQUENCIES = {
    "e": 127,
    "t": 91,
    "a": 82,
    "o": 75,
    "i": 70,
    "n": 67,
    "s": 63,
    "h": 61,
    "r": 60,
    "d": 43,
    "l": 40,
    "c": 28,
    "u": 28,
    "m": 24,
    "w": 24,
    "f": 22,
    "g": 20,
    "y": 20,
    "p": 19,
    "b": 15,
    "v": 10,
    "k": 8,
    "j": 2,
    "x": 2,
    "q": 1,
    "z": 1,
}
"""Letter frequencies of English text, per mille (rounded), for :func:`held_out_words`."""

HELD_OUT_WORDS = (
    # label, first seed, how many, lengths, space before
    ("1-20 lower-case letters (the test's seeds)", 0, 20_000, (1, 20), ""),
    ("1-20 lower-case letters", 100_000, 100_000, (1, 20), ""),
    ("21-40 lower-case letters", 200_000, 50_000, (21, 40), ""),
    ("a space and 1-40 lower-case letters", 300_000, 50_000, (1, 40), " "),
    ("1-40 letters at English frequencies", 400_000, 50_000, (1, 40), ""),
    ("a space and 1-40 letters at English frequencies", 500_000, 50_000, (1, 40), " "),
)
"""Random words :func:`word_texts` does not draw (integer seeds, one word per seed, as
the test does), for ``--words``."""


def held_out_words() -> list[str]:
    """Per set of :data:`HELD_OUT_WORDS`: how many words the bound under-counts and the
    lowest ratio to the largest of the four counts."""
    encs = adversarial.encoders()
    letters, weights = list(ENGLISH_FREQUENCIES), list(ENGLISH_FREQUENCIES.values())
    lines = []
    for label, first, count, lengths, lead in HELD_OUT_WORDS:
        under, low, worst = 0, float("inf"), ""
        for seed in range(first, first + count):
            rng = random.Random(seed)
            n = rng.randint(*lengths)
            if "English" in label:
                word = "".join(rng.choices(letters, weights, k=n))
            else:
                word = "".join(rng.choice(string.ascii_lowercase) for _ in range(n))
            text = lead + word
            ratio = adversarial.estimate_tokens(text, "bound") / adversarial.worst_real(text, encs)
            under += ratio < 1
            if ratio < low:
                low, worst = ratio, text
        lines.append(
            f"- {label}, seeds {first:,}-{first + count - 1:,}: {under:,} of {count:,} under, "
            f"lowest {low:.3f} ({worst!r})"
        )
    return lines


def walks(seed: int = 1, size: int = 3000) -> list[str]:
    """Worst tokens per letter of random walks over the commonest letter pairs / triples."""
    encs = adversarial.encoders()
    grams: dict[int, collections.Counter[bytes]] = {k: collections.Counter() for k in (2, 3)}
    for enc in encs[:2]:
        for token in adversarial.vocab_tokens(enc):
            word = token.strip().lower()
            if word.isalpha() and word.isascii():
                for k, counter in grams.items():
                    counter.update(word[j : j + k] for j in range(len(word) - k + 1))
    rng = random.Random(seed)
    lines = []
    for k, counter in grams.items():
        ranked = [g for g, _ in counter.most_common()]
        for top in (50, 300, 2000) if k == 2 else (300, 2000, 8000):
            nxt: dict[bytes, list[int]] = collections.defaultdict(list)
            for g in ranked[:top]:
                nxt[g[:-1]].append(g[-1])
            heads = list(nxt)
            out = bytearray(rng.choice(heads))
            while len(out) < size:
                opts = nxt.get(bytes(out[len(out) - k + 1 :]))
                out += bytes([rng.choice(opts)]) if opts else rng.choice(heads)
            text = out[:size].decode()
            rate = adversarial.worst_real(text, encs) / size
            lines.append(
                f"- walk over the {top:,} commonest {k}-letter sequences: {rate:.3f} tokens/letter"
            )
    english = " ".join(
        w for w in (ROOT / "README.md").read_text(encoding="utf-8").lower().split() if w.isalpha()
    )
    letters = sum(c.isalpha() for c in english)
    lines.append(
        f"- README.md's words (letters and spaces only): "
        f"{adversarial.worst_real(english, encs) / letters:.3f} tokens/letter"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m fidelity.bound", description=__doc__.splitlines()[0]
    )
    p.add_argument("--margin", type=float, default=1.1)
    p.add_argument("--check", action="store_true", help="compare with ctxwin/tokens/bound.py")
    p.add_argument("--walks", action="store_true", help="print the letter-walk rates")
    p.add_argument("--words", action="store_true", help="the bound on held-out random words")
    p.add_argument(
        "--vocab", action="store_true", help=f"write {VOCAB_PATH.name} and {SPANS_PATH.name}"
    )
    p.add_argument(
        "--spans", action="store_true", help=f"write {SPANS_PATH.name} from {VOCAB_PATH.name}"
    )
    p.add_argument("--chars", action="store_true", help=f"write {CHARS_PATH.name}")
    a = p.parse_args(argv)
    out = sys.stdout
    if a.vocab:
        out.write(f"{write_vocabulary():,} pieces written to {VOCAB_PATH}\n")
        return 0
    if a.spans:
        spans = write_letter_spans(bound_vocabulary().records())
        out.write(f"{spans:,} characters written to {SPANS_PATH}\n")
        return 0
    if a.chars:
        out.write(f"{write_char_caps():,} characters written to {CHARS_PATH}\n")
        return 0
    if a.words:
        out.write("\n".join(held_out_words()) + "\n")
        return 0
    if a.walks:
        out.write("\n".join(walks()) + "\n")
        return 0
    x, n = derive(a.margin, BOUND_STRING_CENTS / 100)
    c = _cents(x)
    out.write(f"{n:,} constraints, margin {a.margin}\n")
    out.write(f"BOUND_BYTE_CENTS = {tuple(c[:NC])}\n")
    out.write(f"BOUND_RUN_CENTS = {tuple(c[NC : 2 * NC])}\n")
    g = NW
    words = tuple(tuple(c[2 * NC + g * i : 2 * NC + g * i + g]) for i in range(g))
    out.write(f"BOUND_WORD_CENTS = {words}\n")
    if a.check:
        same = np.array(c) == np.round(current_prices() * 100)
        verdict = "matches" if same.all() else "differs from"
        out.write(f"{verdict} ctxwin/tokens/bound.py\n")
        return 0 if same.all() else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
