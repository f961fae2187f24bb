"""Model names: the built-in model table, and the one rule every table of model names
matches by.

Tables keyed by model name or family prefix: the model table here (window, caps,
tokenizer, prices), the calibration seeds (:mod:`ctxwin.tokens.seeds`), the open
tokenizers' families (:mod:`ctxwin.tokens.bpe`) and OpenAI's reasoning models
(:mod:`ctxwin.tokens.framing`). Each looks a name up with :func:`match`: lower case,
provider prefixes (``openai/``, ``litellm_proxy/anthropic/``) and vendor words
(Bedrock's ``us.anthropic.``) stripped one at a time; then the key the name is, else
the longest key it starts with followed by a boundary character. A table states its
boundaries (``.`` ends a family only where a table says so: ``gpt-5.4`` is a release
of the reasoning family ``gpt-5`` but has a model-table row of its own).

A leaf: it imports nothing of ctxwin but errors (for the prices, on use).
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Container, Iterator, Mapping
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

if TYPE_CHECKING:
    from ctxwin.cost.pricing import CacheRules, Pricing

BOUNDARY = "-:@_"
"""What may follow a key in a longer name of the same family (``gpt-4o-mini`` is not
``gpt-4o``'s by this alone: see :func:`lookup_model`)."""


SNAPSHOT_WORDS = frozenset(("latest", "preview", "exp", "experimental", "instruct"))
"""Words after a model name that name a release of the same model, as a date does
(``gpt-4o-2024-08-06``, ``gemini-2.5-flash-preview-05-20``), not a sibling model."""


class ModelRow(NamedTuple):
    """One row of the built-in model table.

    A NamedTuple: a dataclass would compile its methods at every start.
    """

    name: str
    provider: str
    context_length: int
    max_output_tokens: int | None
    source: str
    date: str
    tokenizer: str | None = None
    """The model's tokenizer family: an encoding ``--tokenizer`` counts exactly
    (``o200k_base``, ``cl100k_base``, ``llama3``, ``qwen3``) or a family it does not
    ship (``claude``, ``gemini``, ``llama4``, ``mistral``, ``deepseek-v3``, ``qwen``)."""
    tokenizer_generation: int | None = None
    """Claude only: 1 for Claude 3 through Opus 4.6 / Sonnet 4.6 / Haiku 4.5, 2 for the
    tokenizer of Claude Opus 4.7 and later (up to 1.35× the tokens of generation 1,
    :data:`ctxwin.tokens.CLAUDE_TOKENIZER_GROWTH`)."""
    max_input_tokens: int | None = None
    """The provider's cap on the prompt where it is below ``context_length`` minus the
    output cap (GPT-5: 272,000 of 400,000); ``None``: the window is the only cap."""
    extra: Mapping[str, Any] | None = None
    """The row as ``models.json`` has it, for the fields read on use: :attr:`price`,
    :attr:`cache` and their sources (one field, not seven: each field of a NamedTuple adds
    to every command's start-up)."""

    @property
    def price(self) -> Pricing | None:
        """The model's prices (:class:`~ctxwin.cost.pricing.Pricing`), ``None`` when unknown;
        built on use, so a command that prices nothing never loads :mod:`ctxwin.cost.pricing`."""
        data = self._get("price")
        if data is None:
            return None
        from ctxwin.cost.pricing import table_pricing

        return table_pricing(data)

    @property
    def cache(self) -> CacheRules | None:
        """The model's prompt-caching rules (:class:`~ctxwin.cost.pricing.CacheRules`)."""
        data = self._get("cache")
        if data is None:
            return None
        from ctxwin.cost.pricing import CacheRules

        return CacheRules(**data)

    @property
    def price_source(self) -> str | None:
        """The page or file the prices were read from."""
        return self._text("price_source")

    @property
    def price_date(self) -> str | None:
        """The day the prices were read."""
        return self._text("price_date")

    @property
    def cache_source(self) -> str | None:
        """The page the caching rules were read from."""
        return self._text("cache_source")

    @property
    def note(self) -> str | None:
        """Where the figures differ from a source read, or could not be re-read."""
        return self._text("note")

    @property
    def litellm_key(self) -> str | None:
        """The entry of LiteLLM's model map the figures (and prices) were read from."""
        return self._text("litellm_key")

    def _get(self, key: str) -> Any:
        return None if self.extra is None else self.extra.get(key)

    def _text(self, key: str) -> str | None:
        value = self._get(key)
        return value if isinstance(value, str) else None


@cache
def _models_json() -> bytes:
    # os.path: pathlib would add to every command's start-up
    data = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "models.json")
    with open(data, "rb") as f:
        return f.read()


def _row(r: dict[str, Any]) -> ModelRow:
    return ModelRow(
        name=r["name"],
        provider=r["provider"],
        context_length=int(r["context_length"]),
        max_output_tokens=r.get("max_output_tokens"),
        source=r["source"],
        date=r["date"],
        tokenizer=r.get("tokenizer"),
        tokenizer_generation=r.get("tokenizer_generation"),
        max_input_tokens=r.get("max_input_tokens"),
        extra=r,
    )


@cache
def model_table() -> tuple[ModelRow, ...]:
    """The built-in model table, in file order."""
    return tuple(_row(r) for r in orjson.loads(_models_json())["models"])


ROW_START = b'{"name": "'
"""How each row's line of ``models.json`` starts (:func:`_named`)."""


@lru_cache(maxsize=256)
def _named(key: str) -> ModelRow | None:
    """The row named ``key`` (lower case), if any: the same row :func:`model_table` holds.

    Found by its line of ``models.json``, which holds one row a line, its name first and
    in lower case (the table's tests check it): a lookup parses only the row it finds.
    Parsing the whole table (every row's prices, caching rules and notes) and indexing it
    took 2.6 M instructions of every command's start-up; a search of the file for a name
    takes some 35 K.
    """
    data = _models_json()
    at = data.find(ROW_START + key.encode(errors="surrogatepass") + b'"')
    if at < 0:
        return None
    end = data.find(b"\n", at)
    return _row(orjson.loads(data[at : len(data) if end < 0 else end].rstrip(b" ,\r")))


class _TableNames:
    """The model table's names in lower case, as :func:`match` asks for them (``in``),
    without reading them all."""

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and _named(key) is not None


def table_row(name: str | None) -> ModelRow | None:
    """The row named exactly ``name`` (a spec's ``table_row``), if any."""
    return None if name is None else _named(name.lower())


def lookup_model(name: str) -> ModelRow | None:
    """The table row for ``name`` (:func:`match`: exact, else the longest row name it
    starts with followed by ``-``, ``:``, ``@`` or ``_``, after provider and vendor
    prefixes), so ``gpt-4o-2024-08-06`` finds ``gpt-4o`` but ``gpt-4o`` never finds
    ``gpt-4``.

    A name that extends a row's by a word (``gpt-5.4-mini`` after ``gpt-5.4``) names a
    sibling model, not a release of that row's (a date, a number or one of
    :data:`SNAPSHOT_WORDS`): it never inherits a larger window than the family's row
    for that word. The row's name is shortened one ``-`` or ``.`` part at a time to
    find that family row (``gpt-5`` + ``-mini``: ``gpt-5-mini``), and of the two the
    one with the smaller window is the answer.
    """
    found = match(name, _TableNames())
    if found is None:
        return None
    key, rest = found
    row = _named(key)
    assert row is not None  # match found it
    return row if not rest else _sibling_guard(row, rest)


def _sibling_guard(row: ModelRow, rest: str) -> ModelRow:
    """``row``, or the family row of the variant word that starts ``rest`` when its
    window is no larger (see :func:`lookup_model`)."""
    word = rest
    for i, ch in enumerate(rest):
        if ch in BOUNDARY or ch == ".":
            word = rest[:i]
            break
    if not word or not word[0].isalpha() or word in SNAPSHOT_WORDS:
        return row
    stem = row.name.lower()
    while True:
        cut = max(stem.rfind("-"), stem.rfind("."))
        if cut <= 0:
            return row
        stem = stem[:cut]
        family = _named(f"{stem}-{word}")
        if family is not None:
            return family if family.context_length <= row.context_length else row


_CLAUDE_DOT = re.compile(r"(?<=\d)\.(?=\d)")
"""A dot between two digits: the version separator other services put in Claude's names."""


LONG_CONTEXT_SUFFIX = "[1m]"
"""What ends a model id that asks for the model's 1M-token window (Claude Code's
``sonnet[1m]``, ``claude-opus-4-6[1m]``: ``--model`` and the ``model`` setting)."""
LONG_CONTEXT_WINDOW = 1_000_000


def long_context(name: str | None) -> bool:
    """Whether the model id ``name`` asks for the 1M-token window (ends with ``[1m]``)."""
    return name is not None and name.strip().lower().endswith(LONG_CONTEXT_SUFFIX)


def candidates(name: str) -> Iterator[str]:
    """``name`` in lower case (without a ``[1m]`` suffix: :func:`long_context`), then with
    each provider prefix (``x/``) and each vendor word (``us.``, ``anthropic.``: letters
    only, then a dot) taken off in turn. A Claude name whose version has a dot
    (``claude-sonnet-4.5``, as GitHub Copilot and OpenRouter name it) is also tried with
    Anthropic's dash (``claude-sonnet-4-5``)."""
    candidate = name.strip().lower().removesuffix(LONG_CONTEXT_SUFFIX)
    while candidate:
        yield candidate
        if candidate.startswith("claude") and (dashed := _CLAUDE_DOT.sub("-", candidate)) != (
            candidate
        ):
            yield dashed
        head, slash, rest = candidate.partition("/")
        if slash:
            candidate = rest
            continue
        head, dot, rest = candidate.partition(".")
        candidate = rest if dot and head.isalpha() else ""


def match(name: str, keys: Container[str], ends: str = BOUNDARY) -> tuple[str, str] | None:
    """The key of ``keys`` that ``name`` names, and what ``name`` adds after it (``""``
    for an exact match): for the first of :func:`candidates` that has one, the key it
    is, else the longest key it starts with followed by one of ``ends``. ``None`` when
    no candidate has one."""
    for candidate in candidates(name):
        if candidate in keys:
            return candidate, ""
        # the longest key: the longest start of the name that ends before one of ``ends``
        for i in range(len(candidate) - 1, 0, -1):
            if candidate[i] in ends and candidate[:i] in keys:
                return candidate[:i], candidate[i + 1 :]
    return None


def name_family(model: str, prefixes: Collection[str], ends: str = BOUNDARY) -> str | None:
    """The family of ``prefixes`` that ``model`` belongs to (:func:`match`), or ``None``."""
    found = match(model, prefixes, ends)
    return None if found is None else found[0]


def closest_models(name: str, n: int = 3) -> list[str]:
    """The model table's names closest to ``name`` (its :func:`candidates`, each compared
    whole), the closest first: what a name the table does not know was most likely meant
    to be (``gpt4o`` → ``gpt-4o``). Empty when none is close."""
    import difflib  # here: only a name the table does not know needs it

    names = [row.name for row in model_table()]
    scored: dict[str, float] = {}
    for candidate in candidates(name):
        for found in difflib.get_close_matches(candidate, names, n=n, cutoff=0.6):
            ratio = difflib.SequenceMatcher(None, candidate, found).ratio()
            scored[found] = max(scored.get(found, 0.0), ratio)
    return sorted(scored, key=lambda found: (-scored[found], found))[:n]


def unknown_model_words(name: str | None, window: int) -> str:
    """The warning for a model whose window the table does not know (the body's, or none
    named): the window assumed, and the names it most likely meant."""
    if name is None:
        return f"unknown context length (no model named); assuming {window:,} tokens"
    meant = did_you_mean(name)
    return (
        f"unknown context length: model {name!r} is not in the model table; assuming "
        f"{window:,} tokens" + (f"; {meant}" if meant else "")
    )


def did_you_mean(name: str) -> str:
    """``did you mean gpt-4o? (or gpt-4, gpt-5.4)`` for a name the table does not know
    (:func:`closest_models`); ``""`` when no name is close."""
    near = closest_models(name)
    if not near:
        return ""
    more = f" (or {', '.join(near[1:])})" if len(near) > 1 else ""
    return f"did you mean {near[0]}?{more}"
