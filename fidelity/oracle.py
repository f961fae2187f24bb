"""How low a piece-priced bound of all four tokenizers can go on the recorded corpus.

    python -m fidelity.oracle [--corpus DIR] [--every N] [--vocab]

:class:`ctxwin.tokens.BoundEstimator` cuts text into pieces
(:func:`ctxwin.tokens.bound.bound_pieces`) and adds up one price per piece, the
largest count any of o200k_base, cl100k_base, Llama 3 and Qwen 3 gives it.
The tokenizers are not worst on the same pieces (Qwen 3 gives every digit its
own token, the others group three), so a sum of per-piece maxima pays for the
worst tokenizer of every piece at once; four sums, one per tokenizer, with the
largest taken at the end, would not. This module measures both, for several
ways of cutting the text, on every transcript of the corpus with the framing
of :func:`fidelity.run.count`: each figure is an estimate ÷ the exact
o200k_base count (:class:`fidelity.run.RealCount`), median over transcripts.

Cuts:

* ``bound``: :func:`ctxwin.tokens.bound.bound_pieces`, as the estimator cuts;
* ``union``: at every place where one of the four tokenizers' pre-tokenizers
  (:data:`PRETOKENIZE`) cuts — the finest cut none of them crosses;
* ``shared``: only where all four cut (each piece is whole pre-tokens of all
  four, so each tokenizer's sum is its exact count);
* ``ascii``: :data:`ASCII_CUT`, the estimator's ``re`` pattern over bytes that
  follows the pre-tokenizers on ASCII (a punctuation or space byte joins the
  letters after it, a punctuation run takes the line breaks after it, a run of
  line breaks stays whole, ``'s`` and the like are a piece), applied to the
  whole text.

Figures, per cut: *largest per piece* (every piece at the largest of its four
exact counts, summed: the least any price table of per-piece maxima can give)
and *four sums* (each piece at each tokenizer's exact count, the largest of the
four sums). Priced variants, pieces not known exactly at the estimator's pair
price (:func:`ctxwin.tokens.bound.bound_parts`, the same in all four sums):

* ``bound`` cut, *vocabulary exact*: the pieces
  :func:`ctxwin.tokens.bound.fixed_cents` prices (the shipped vocabulary, digit
  runs, non-ASCII runs) at each tokenizer's count — for a non-ASCII run that is
  below the estimator's price, one token a byte, which the corpus seldom needs;
* ``ascii`` cut, *coverable exact*: digit runs, and the ASCII pieces without
  digits that are one token in at least one tokenizer and at most two in each
  (what a vocabulary of ``ascii`` pieces would hold, :func:`vocabulary_size`);
* ``ascii`` cut, *split*: as above, and any other ASCII piece without digits
  cut into coverable parts, longest first — not a bound: BPE can cost more
  than the parts (the report counts the pieces where it does); *split+1* adds a
  token for each cut.

Each is given without the per-string price K
(:data:`ctxwin.tokens.bound.BOUND_STRING_CENTS`, 2 tokens) and with it, as the
estimator has it. The report also gives the share of the o200k_base tokens in
pair-priced pieces, and counts the strings and transcripts where a tokenizer's
sum falls below its exact count (a cut finer than a tokenizer's relies on BPE
costing no less in parts). Whole tokens are the estimator's (3 a message, 3 a
tool call); the real count has none a tool call, which is why the ``shared``
four sums, each exact, come to 1.072 and not 1.068.

Measured on all 252 transcripts (``python -m fidelity.oracle``, about 20 s),
median estimate ÷ o200k_base, without K / with K:

* the largest of the four exact counts: 1.068;
* ``bound`` cut: largest per piece 1.074 / 1.096; four sums 1.072 / 1.092;
  four sums, vocabulary exact, 1.106 / 1.125 (the estimator: 1.131; before the
  vocabulary took the forms of common English words, 1.140 / 1.159 and 1.161);
* ``union`` cut: largest per piece 1.074 / 1.095; four sums 1.072 / 1.092;
* ``shared`` cut: largest per piece 1.074 / 1.095; four sums 1.072 / 1.091;
* ``ascii`` cut: largest per piece 1.074 / 1.095; four sums 1.072 / 1.091;
  coverable exact 1.140 / 1.159; split 1.074 / 1.092 (222 distinct pieces
  whose parts count less than the piece, one transcript under the largest
  count without K); split+1 1.122 / 1.139;
* on the ``bound`` cut, 7.5 % of the o200k_base tokens (counted piece by
  piece) lie in pair-priced pieces and 8.4 % in digit runs (exact, outside the
  vocabulary); the pair-priced pieces are words no vocabulary or English word
  list holds (``_baggages``, ``nonfree``, ``ponyc``), airport codes (``SFO``),
  names, random ids and punctuation runs of three tokens or more (``"}],``).
  Before the vocabulary took the forms of the 20,000 commonest English words
  it was 11.6 %, mostly words of two or three tokens (``flights``,
  ``economy``).

No cut's four sums fell below a tokenizer's count on any transcript; on the
``bound`` and ``ascii`` cuts, 5 strings count one token more in o200k_base and 1
in Qwen 3 than the sum of their pieces.

So four sums instead of a sum of maxima gain 0.004 at most, on every cut: the
loss is in the cut and in the pricing. ``bound_pieces`` used to cut where none
of the four tokenizers does (``_`` from ``id`` in ``user_id``, ``.`` from the
line breaks after it, ``'`` from ``m`` in ``I'm``, a run of line breaks): 1.126
/ 1.149 with every piece exact, the estimator 1.194. It now follows them
(nearly the ``ascii`` cut: it cuts a whitespace run mixing spaces with tabs or
line breaks finer), and what is left is the price of the words it leaves
whole that are no vocabulary's tokens.
"""

from __future__ import annotations

import argparse
import itertools
import re
import statistics
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ctxwin.fitting.pruning import total_cost
from ctxwin.formats import get_adapter
from ctxwin.tokens.base import Kind
from ctxwin.tokens.bound import (
    _SEGMENT,
    BOUND_STRING_CENTS,
    BoundEstimator,
    _pair_cents,
    bound_parts,
    bound_pieces,
)
from ctxwin.tokens.bpe import TOKENIZERS
from ctxwin.tokens.vocabulary import bound_vocabulary, fixed_cents
from fidelity.adversarial import vocab_tokens

N = len(TOKENIZERS)
ROOT = Path(__file__).resolve().parent.parent

PRETOKENIZE = {
    "o200k_base": r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
    r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "cl100k_base": r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
    "llama3": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen3": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}
"""Each tokenizer's pre-tokenizer pattern (tiktoken's for o200k_base and cl100k_base,
the ``tokenizer.json`` split pattern for Llama 3 and Qwen 3; needs ``regex``): a
tokenizer never makes a token across the cuts between its matches. The report checks
that each tokenizer's count of a string is the sum over these matches."""

ASCII_CUT = re.compile(_SEGMENT)
"""The ``ascii`` cut: the estimator's own pattern (:data:`ctxwin.tokens.bound._SEGMENT`, the
pre-tokenizers' shared grammar on ASCII: o200k_base's cut for letter case, a contraction
apart as the other three have it, a digit run whole — every tokenizer cuts digits from
what surrounds them; a run of non-ASCII bytes is one piece) over the whole text, where
:func:`ctxwin.tokens.bound.bound_pieces` first splits at single spaces."""


class Cut:
    """One way of cutting: the distinct pieces it made, and per tokenizer the strings
    whose exact count exceeds the sum of their pieces' counts."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.pieces: set[bytes] = set()
        self.short_strings = [0] * N
        """Strings whose exact count exceeds their pieces' sum, per tokenizer."""


class FourSums(BoundEstimator):
    """Every piece of every string counted by each of the four tokenizers, for each
    cut; the cost vector's slots are laid out by :meth:`slot`."""

    CUTS = ("bound", "union", "shared", "ascii")
    PRICED = ("bound", "ascii", "split", "split+1")
    """The priced variants (module docstring): pieces known exactly at each tokenizer's
    count, the others at the pair price."""

    def __init__(self) -> None:
        super().__init__()
        import quicktok
        import regex  # type: ignore[import-untyped]

        self._counts: list[Callable[[str], int]] = [
            quicktok.get_encoding(e).count for e in TOKENIZERS
        ]
        self._pretokens: list[Callable[[str], list[str]]] = [
            regex.compile(PRETOKENIZE[e]).findall for e in TOKENIZERS
        ]
        self._memo: dict[bytes, tuple[int, ...]] = {}
        self.cuts = {name: Cut(name) for name in self.CUTS}
        self.own_differs = [0] * N
        """Strings whose exact count is not the sum over their own pre-tokens."""
        self._parts: dict[bytes, list[bytes]] = {}
        self.split_short: set[bytes] = set()
        """ASCII pieces whose coverable parts sum to less than a tokenizer's count."""
        layout = ["whole", "strings"]
        for name in self.CUTS:
            layout += [f"{name} sum {i}" for i in range(N)] + [f"{name} largest", f"{name} n"]
        for name in self.PRICED:
            layout += [f"{name} priced {i}" for i in range(N)] + [f"{name} paired o200k"]
        layout += ["digits o200k"]
        self._slots = {key: i for i, key in enumerate(layout)}
        self.width = len(layout)

    def slot(self, key: str) -> int:
        return self._slots[key]

    def exact(self, piece: bytes) -> tuple[int, ...]:
        """The four exact counts of ``piece`` (memoized)."""
        known = self._memo.get(piece)
        if known is None:
            text = piece.decode("utf-8", "replace")
            known = self._memo[piece] = tuple(c(text) for c in self._counts)
        return known

    def _sum(self, cost: list[int], cut: Cut, pieces: Iterable[bytes], wholes: list[int]) -> None:
        sums = [0] * N
        largest = n = 0
        for piece in pieces:
            counts = self.exact(piece)
            for i, c in enumerate(counts):
                sums[i] += c
            largest += max(counts)
            n += 1
            cut.pieces.add(piece)
        for i, (s, whole) in enumerate(zip(sums, wholes, strict=True)):
            cost[self.slot(f"{cut.name} sum {i}")] += s
            cut.short_strings[i] += whole > s
        cost[self.slot(f"{cut.name} largest")] += largest
        cost[self.slot(f"{cut.name} n")] += n

    def _priced(self, cost: list[int], name: str, piece: bytes, exact: bool) -> None:
        """Add ``piece`` to the ``name priced`` sums (in 1/100 token): at each
        tokenizer's exact count if ``exact``, else at its pair price."""
        if exact:
            for i, c in enumerate(self.exact(piece)):
                cost[self.slot(f"{name} priced {i}")] += 100 * c
            return
        price = _pair_cents(piece)
        for i in range(N):
            cost[self.slot(f"{name} priced {i}")] += price
        cost[self.slot(f"{name} paired o200k")] += self.exact(piece)[0]

    def _add(self, cost: list[int], data: bytes) -> None:
        if not data:
            return
        text = data.decode("utf-8", "replace")
        wholes = [count(text) for count in self._counts]
        cost[self.slot("strings")] += 1
        vocab = bound_vocabulary()
        bound = list(bound_pieces(data))
        self._sum(cost, self.cuts["bound"], bound, wholes)
        for piece in bound:
            if fixed_cents(piece, vocab) is not None:
                self._priced(cost, "bound", piece, True)
                if piece.isdigit():
                    cost[self.slot("digits o200k")] += self.exact(piece)[0]
            else:
                for part in bound_parts(piece, vocab):
                    self._priced(cost, "bound", part, fixed_cents(part, vocab) is not None)
        ascii_pieces = ASCII_CUT.findall(data)
        self._sum(cost, self.cuts["ascii"], ascii_pieces, wholes)
        for piece in ascii_pieces:
            covered = self._coverable(piece)
            self._priced(cost, "ascii", piece, covered)
            if covered or not piece.isascii() or any(c in b"0123456789" for c in piece):
                self._priced(cost, "split", piece, covered)
                self._priced(cost, "split+1", piece, covered)
            else:
                parts = self._split(piece)
                if any(
                    sum(self.exact(q)[i] for q in parts) < c
                    for i, c in enumerate(self.exact(piece))
                ):
                    self.split_short.add(piece)
                for part in parts:
                    self._priced(cost, "split", part, True)
                    self._priced(cost, "split+1", part, True)
                for i in range(N):  # a token more for each cut made
                    cost[self.slot(f"split+1 priced {i}")] += 100 * (len(parts) - 1)
        self._pretokenized(cost, text, wholes)

    def _split(self, piece: bytes) -> list[bytes]:
        """``piece`` cut into coverable parts, longest first from the left (every ASCII
        byte is one token in each tokenizer, so a cut always exists)."""
        parts = self._parts.get(piece)
        if parts is None:
            parts = []
            i = 0
            while i < len(piece):
                j = len(piece)
                while j > i + 1 and not self._coverable(piece[i:j]):
                    j -= 1
                parts.append(piece[i:j])
                i = j
            self._parts[piece] = parts
        return parts

    def _coverable(self, piece: bytes) -> bool:
        """A digit run, or an ASCII piece without digits that is one token in at least
        one of the four tokenizers and at most two in each."""
        if piece.isdigit():
            return True
        if not piece.isascii() or any(c in b"0123456789" for c in piece):
            return False
        counts = self.exact(piece)
        return min(counts) == 1 and max(counts) <= 2

    def _pretokenized(self, cost: list[int], text: str, wholes: list[int]) -> None:
        """The ``union`` and ``shared`` cuts, and the check of :data:`PRETOKENIZE`."""
        cuts: list[set[int]] = []
        for i, pretokens in enumerate(self._pretokens):
            at = own = 0
            edges = {0}
            for token in pretokens(text):
                own += self.exact(token.encode("utf-8", "surrogatepass"))[i]
                at += len(token)
                edges.add(at)
            cuts.append(edges)
            self.own_differs[i] += own != wholes[i]
        for name, edges in (("union", set.union(*cuts)), ("shared", set.intersection(*cuts))):
            ends = sorted(edges | {len(text)})
            pieces = (
                text[a:b].encode("utf-8", "surrogatepass") for a, b in itertools.pairwise(ends)
            )
            self._sum(cost, self.cuts[name], pieces, wholes)

    def add_text(self, cost: list[int], text: str, kind: Kind) -> None:
        self._add(cost, text.encode("utf-8", "surrogatepass"))

    def add_bytes(self, cost: list[int], data: bytes, kind: Kind) -> None:
        self._add(cost, data)

    def raw(self, totals: Sequence[int]) -> int:
        """Whole tokens + the largest of the four exact sums on the ``bound`` cut."""
        return totals[0] + max(totals[self.slot("bound sum 0") :][:N])


def measure(bodies: Sequence[Any]) -> tuple[FourSums, dict[str, list[float]]]:
    """Per figure, per body: estimate ÷ exact o200k_base count (and the checks)."""
    from fidelity.run import RealCount, count

    est = FourSums()
    bound = BoundEstimator()
    reals = [RealCount(e) for e in TOKENIZERS]
    out: dict[str, list[float]] = {}

    def put(key: str, value: float) -> None:
        out.setdefault(key, []).append(value)

    for body in bodies:
        real = [count(body, r) for r in reals]
        t = total_cost(get_adapter(body, "auto").read(body, est))
        whole = t[0]
        k = -(-BOUND_STRING_CENTS * t[est.slot("strings")] // 100)
        o200k = real[0]
        put("largest real", max(real) / o200k)
        put("bound", count(body, bound) / o200k)
        for name in est.CUTS:
            sums = [whole + t[est.slot(f"{name} sum {i}")] for i in range(N)]
            largest = whole + t[est.slot(f"{name} largest")]
            put(f"{name} largest", largest / o200k)
            put(f"{name} largest +K", (largest + k) / o200k)
            put(f"{name} sums", max(sums) / o200k)
            put(f"{name} sums +K", (max(sums) + k) / o200k)
            put(f"{name} n", t[est.slot(f"{name} n")])
            for i in range(N):
                put(f"{name} under {i}", float(sums[i] < real[i]))
            put(f"{name} sums under", float(any(max(sums) < r for r in real)))
            put(f"{name} o200k", t[est.slot(f"{name} sum 0")])
        for name in est.PRICED:
            cents = max(t[est.slot(f"{name} priced {i}")] for i in range(N))
            put(f"{name} priced", (whole + -(-cents // 100)) / o200k)
            put(f"{name} priced +K", (whole + -(-(cents + 100 * k) // 100)) / o200k)
            put(f"{name} paired", t[est.slot(f"{name} paired o200k")])
            put(f"{name} priced under", float(whole + -(-cents // 100) < max(real)))
        put("digits", t[est.slot("digits o200k")])
    return est, out


def _med(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f} ({min(xs):.3f}–{max(xs):.3f})"


def report(est: FourSums, m: dict[str, list[float]]) -> list[str]:
    n = len(m["bound"])
    lines = [
        f"Median (min–max) estimate ÷ exact o200k_base count over {n} transcripts; "
        "K is 2 tokens a string:",
        "",
        "| cut | figure | without K | with K |",
        "|---|---|---:|---:|",
        f"| | largest of the four exact counts | {_med(m['largest real'])} | |",
        f"| `bound` | the estimator | | {_med(m['bound'])} |",
    ]
    for name in est.CUTS:
        for key, label in (("largest", "largest per piece"), ("sums", "four sums")):
            lines.append(
                f"| `{name}` | {label} | {_med(m[f'{name} {key}'])} "
                f"| {_med(m[f'{name} {key} +K'])} |"
            )
        for priced in (
            p for p in est.PRICED if p == name or (name == "ascii" and p.startswith("split"))
        ):
            label = {
                "bound": "vocabulary exact",
                "ascii": "coverable exact",
                "split": "coverable exact, other ASCII pieces cut into coverable parts",
                "split+1": "as above, plus a token for each cut",
            }[priced]
            lines.append(
                f"| `{name}` | four sums, {label}, other pieces at the pair price "
                f"| {_med(m[f'{priced} priced'])} | {_med(m[f'{priced} priced +K'])} |"
            )
    lines.append("")
    for name in est.PRICED:
        shown = "ascii" if name.startswith("split") else name
        total = sum(m[f"{shown} o200k"])
        paired = sum(m[f"{name} paired"])
        under = int(sum(m[f"{name} priced under"]))
        lines.append(
            f"- `{shown}` cut{f' ({name})' if name != shown else ''}: "
            f"{paired:,.0f} of {total:,.0f} o200k_base tokens (counted piece "
            f"by piece) in pair-priced pieces ({100 * paired / total:.1f} %); "
            f"transcripts under the largest real count without K: {under}."
        )
    digits = sum(m["digits"])
    total = sum(m["bound o200k"])
    lines.append(
        f"- `bound` cut: {digits:,.0f} o200k_base tokens in digit runs "
        f"({100 * digits / total:.1f} %; exact, not in the vocabulary)."
    )
    for name, cut in est.cuts.items():
        shorts = ", ".join(f"{e} {s}" for e, s in zip(TOKENIZERS, cut.short_strings, strict=True))
        unders = ", ".join(
            f"{e} {int(sum(m[f'{name} under {i}']))}" for i, e in enumerate(TOKENIZERS)
        )
        lines.append(
            f"- `{name}` cut: {sum(m[f'{name} n']):,.0f} pieces, {len(cut.pieces):,} distinct; "
            f"strings whose exact count exceeds their pieces' sum: {shorts}; transcripts "
            f"where a tokenizer's sum is under its count: {unders}; where the largest "
            f"sum is under one of the four: {int(sum(m[f'{name} sums under']))}."
        )
    lines.append(
        f"- ASCII pieces whose coverable parts sum to less than a tokenizer's count: "
        f"{len(est.split_short):,} distinct (e.g. "
        + ", ".join(
            f"`{p.decode()}`" for p in sorted(est.split_short, key=lambda p: (len(p), p))[:5]
        )
        + ")."
    )
    lines.append(
        "- strings whose exact count is not the sum over their own pre-tokens "
        "(checks `PRETOKENIZE`): "
        + ", ".join(f"{e} {s}" for e, s in zip(TOKENIZERS, est.own_differs, strict=True))
        + "."
    )
    return lines


def vocabulary_size() -> list[str]:
    """How big a vocabulary of :data:`ASCII_CUT`'s pieces would be: every token of the
    four vocabularies that is one such piece, without digits, and at most two tokens in
    each tokenizer, stored as the records of ``bound-vocab.bin`` (one byte, the piece, NUL) with
    the byte holding the four counts (one bit each: 1 or 2) instead of their largest."""
    import gzip

    import quicktok

    encs = [quicktok.get_encoding(e) for e in TOKENIZERS]
    shaped: set[bytes] = set()
    for enc in encs:
        for token in vocab_tokens(enc):
            if (
                token.isascii()
                and not any(c in b"0123456789" for c in token)
                and ASCII_CUT.fullmatch(token)
            ):
                shaped.add(token)
    largest: list[bytes] = []
    four: list[bytes] = []
    for token in sorted(shaped):
        text = token.decode()
        counts = [e.count(text) for e in encs]
        if max(counts) <= 2:
            largest.append(bytes([max(counts)]) + token + b"\0")
            mask = sum((c - 1) << i for i, c in enumerate(counts))
            four.append(bytes([mask]) + token + b"\0")
    shipped = bound_vocabulary()
    masks = b"".join(
        bytes([sum((e.count(p.decode()) - 1) << i for i, e in enumerate(encs))]) + p + b"\0"
        for p in sorted(shipped)
    )
    records = b"".join(bytes([c]) + p + b"\0" for p, c in shipped.records())
    return [
        f"- the shipped vocabulary with all four counts: gzip -9 "
        f"{len(gzip.compress(masks, 9, mtime=0)):,} bytes (with the largest, as shipped: "
        f"{len(gzip.compress(records, 9, mtime=0)):,}).",
        f"- `ascii`-shaped vocabulary: {len(four):,} pieces (the shipped one: {len(shipped):,}); "
        f"gzip -9 {len(gzip.compress(b''.join(largest), 9, mtime=0)):,} bytes with the "
        f"largest count, {len(gzip.compress(b''.join(four), 9, mtime=0)):,} with all four.",
    ]


def main(argv: list[str] | None = None) -> int:
    from fidelity import corpus

    p = argparse.ArgumentParser(
        prog="python -m fidelity.oracle", description=__doc__.splitlines()[0]
    )
    p.add_argument("--corpus", type=Path, default=None)
    p.add_argument("--every", type=int, default=1, help="take every N-th transcript")
    p.add_argument("--vocab", action="store_true", help="the size of an ascii-cut vocabulary")
    a = p.parse_args(argv)
    if a.vocab:
        sys.stdout.write("\n".join(vocabulary_size()) + "\n")
        return 0
    root = a.corpus or corpus.corpus_dir()
    if root is None:
        sys.stderr.write("no corpus (../shared/corpus or $CTXWIN_CORPUS)\n")
        return 1
    bodies = [t.body for t in corpus.transcripts(root)][:: a.every]
    sys.stdout.write("\n".join(report(*measure(bodies))) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
