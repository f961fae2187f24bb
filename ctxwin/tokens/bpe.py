"""Exact counts through the optional BPE tokenizer (the ``bpe`` extra), and
``--tokenizer auto``'s choice of encoding by model name."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ctxwin.extras import install_hint
from ctxwin.tokens.base import Estimator, Kind
from ctxwin.tokens.framing import provider_framing
from ctxwin.tokens.models import lookup_model, name_family

TOKENIZERS = ("o200k_base", "cl100k_base", "llama3", "qwen3")
"""BPE encodings ``--tokenizer`` accepts (all ship with the ``bpe`` extra)."""

AUTO_TOKENIZER = "auto"
"""``--tokenizer auto``: count exactly when the model's tokenizer is one of
:data:`TOKENIZERS` and the ``bpe`` extra is installed, else use the estimator
(:func:`auto_estimator`)."""

OPEN_FAMILIES: tuple[tuple[str, str], ...] = (
    ("chatgpt-4o", "o200k_base"),
    ("gpt-4o", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4-mini", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5-turbo", "cl100k_base"),
    ("meta-llama-3", "llama3"),
    ("meta-llama-3.1", "llama3"),
    ("llama-3", "llama3"),
    ("llama-3.1", "llama3"),
    ("llama-3.2", "llama3"),
    ("llama-3.3", "llama3"),
    ("llama3", "llama3"),
    ("qwen2.5", "qwen3"),
    ("qwen3", "qwen3"),
)
"""Name prefixes → encoding, for models the table does not list (a Hugging Face id
such as ``Qwen/Qwen2.5-7B-Instruct``): the prefix must be the whole name or end at
``-``, ``:``, ``@`` or ``_``, and the longest wins. Qwen 2.5 and 3 share one
vocabulary (``qwen3``), as do Llama 3, 3.1, 3.2 and 3.3 (``llama3``)."""

_FAMILY_ENCODING = dict(OPEN_FAMILIES)


def exact_encoding(model: str | None) -> str | None:
    """The encoding of :data:`TOKENIZERS` that ``model`` uses, or ``None``.

    The model table decides when it lists the model (its ``tokenizer`` column);
    otherwise :data:`OPEN_FAMILIES`, after any ``provider/`` prefix.
    """
    if not model:
        return None
    row = lookup_model(model)
    if row is not None:
        return row.tokenizer if row.tokenizer in TOKENIZERS else None
    family = name_family(model, _FAMILY_ENCODING)
    return None if family is None else _FAMILY_ENCODING[family]


def auto_estimator(model: str | None, fallback: Estimator) -> Estimator:
    """``--tokenizer auto``: exact counts in ``model``'s encoding
    (:func:`exact_encoding`) when the ``bpe`` extra is installed, else ``fallback``.
    The estimator's ``name`` (the report's ``estimator``) says which it is."""
    encoding = exact_encoding(model)
    if encoding is None:
        return fallback
    try:
        import quicktok  # noqa: F401
    except ImportError:
        return fallback
    return TokenizerEstimator(encoding)


BPE_MISSING = (
    f"exact counts need the optional BPE tokenizer: {install_hint('bpe')} "
    "(or leave the tokenizer unset to use the built-in estimator)"
)


def check_encoding(encoding: str) -> Any:
    """The tokenizer (``quicktok``) when it can count ``encoding`` here, for
    :class:`TokenizerEstimator`; :class:`~ctxwin.errors.UsageError` about the
    ``tokenizer`` setting for an encoding not in :data:`TOKENIZERS` or a missing
    ``bpe`` extra."""
    from ctxwin.errors import UsageError

    if encoding not in TOKENIZERS:
        raise UsageError(
            f"unknown encoding {encoding!r} "
            f"(choose from: {AUTO_TOKENIZER}, {', '.join(TOKENIZERS)})",
            setting="tokenizer",
        )
    try:
        import quicktok
    except ImportError:
        raise UsageError(BPE_MISSING, setting="tokenizer") from None
    return quicktok


class TokenizerEstimator:
    """Exact BPE token counts (``quicktok``) plus OpenAI's chat framing.

    raw = Σ tokens of every counted string + 3 per message + 3 per tool call
    + :func:`provider_framing`. The tokenizer is imported on first use, so the
    core never needs it; a missing install raises :class:`UsageError` naming
    ``pip install 'ctxwin[bpe]'``.
    """

    width = 1

    def __init__(self, encoding: str, *, per_message: int = 3, per_tool_call: int = 3) -> None:
        quicktok = check_encoding(encoding)
        self.name = f"tokenizer:{encoding}"
        self.encoding = encoding
        self.per_message = per_message
        self.per_tool_call = per_tool_call
        self._count: Callable[[str], int] = quicktok.get_encoding(encoding).count

    def add_text(self, cost: list[int], text: str, kind: Kind) -> None:
        if text:
            cost[0] += self._count(text)

    def add_bytes(self, cost: list[int], data: bytes, kind: Kind) -> None:
        if data:
            cost[0] += self._count(data.decode("utf-8", "replace"))

    def raw(self, totals: Sequence[int]) -> int:
        return totals[0]

    def framing(self, fmt: str, *, has_tools: bool, model: str | None = None) -> int:
        return provider_framing(fmt, has_tools=has_tools, model=model)

    def seed(self, model: str | None = None) -> float:
        """1.0: exact counts (the framing is added on top)."""
        return 1.0
