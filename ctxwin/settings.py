"""The one settings type: how to budget and how to estimate.

Every way of fitting a request takes a :class:`Settings`: :func:`ctxwin.plan`,
:func:`ctxwin.prune`, :class:`~ctxwin.ContextWindowManager` and the replay and
check workers. The command line builds one from its flags, once. The library
functions also take the same names as keyword arguments, applied on top of
``settings`` with :func:`settings_with` (an unknown name is a ``TypeError``)::

    ctxwin.prune(body, model="gpt-4o", max_tokens=2_000)
    ctxwin.prune(body, Settings(context_length=32_000))

A ``Settings`` is frozen and picklable (when its estimator is named, not an
object), so worker processes get a copy.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ctxwin.fitting.strategy import DEFAULT_STRATEGY, Strategy
from ctxwin.formats import AUTO
from ctxwin.tokens.base import Estimator
from ctxwin.tokens.registry import estimator_for


class Settings(NamedTuple):
    """The model, the budget and the estimation settings of a fit.

    Immutable; give the fields by name (their order is not part of the API). A
    NamedTuple: a dataclass would compile its methods at every start.
    """

    model: str | None = None
    """Model to budget for, looked up in the built-in table; ``None``: the body's ``model``."""
    context_length: int | None = None
    """Context window in tokens; overrides ``spec`` and the table."""
    max_output_tokens: int | None = None
    """The model's output cap (the reserve when the body sets no ``max_tokens``)."""
    max_tokens: int | None = None
    """Tokens to reserve for the response; overrides the body's ``max_tokens``."""
    spec: Any = None
    """A model spec mapping (``context_length``/``max_output_tokens``, or LiteLLM's keys)."""
    calibration: float | None = None
    """Factor the raw estimate is scaled by; ``None``: the estimator's default for the model."""
    fmt: str = AUTO
    """Wire format, or ``auto`` to detect it from the body's shape."""
    estimator: str | Estimator | None = None
    """The estimator's name (:func:`~ctxwin.tokens.get_estimator`): ``bound`` (an upper
    bound), ``content`` (alias ``fast``: a faster fit, not a bound), ``seed``, or
    ``tokenizer:ENCODING`` to count exactly with a BPE encoding (``o200k_base``,
    ``cl100k_base``, ``llama3``, ``qwen3``; the ``bpe`` extra); ``None``: the default,
    ``bound`` (:func:`~ctxwin.tokens.default_estimator`). An estimator
    object is accepted too (see :meth:`portable`)."""
    tokenizer: str | None = None
    """``auto``: count exactly when the model's tokenizer is one the ``bpe`` extra has,
    else with ``estimator`` (:func:`~ctxwin.tokens.auto_estimator`). An encoding named
    here is the estimator ``tokenizer:ENCODING``, whatever ``estimator`` says."""
    strategy: Strategy = DEFAULT_STRATEGY
    """The steps that fit a request (:mod:`ctxwin.fitting.strategy`); by default drop turns only,
    the cut moving in blocks of :data:`~ctxwin.fitting.strategy.DEFAULT_BLOCK` of the budget."""

    cache_mark: bool = False
    """Add one Anthropic ``cache_control`` mark at the end of the stable prefix, the last
    block of the request's last message (what the next request of a growing run sends
    again), unless the request holds Anthropic's limit of four marks already or that
    block is marked (:func:`~ctxwin.formats.anthropic.with_stable_mark`); Anthropic
    Messages requests only. Off by default: a request that fits is sent as it is."""

    def make_estimator(self, model: str | None = None) -> Estimator:
        """The estimator these settings name (a fresh one when named). ``model`` names
        the model when :attr:`model` does not (the body's), for ``tokenizer="auto"``."""
        return estimator_for(self.estimator, self.tokenizer, self.model or model)

    def portable(self) -> Settings:
        """These settings with the estimator named rather than held (for worker processes):
        for an estimator object a library caller gave; named settings are returned as
        they are."""
        if self.estimator is None or isinstance(self.estimator, str):
            return self
        return self._replace(estimator=self.estimator.name)


DEFAULT = Settings()


def body_model(body: Any) -> str | None:
    """The ``model`` a request body names, if any (Gemini bodies name none)."""
    model = body.get("model") if isinstance(body, dict) else None
    return model if isinstance(model, str) else None


def settings_with(settings: Settings | None, changes: dict[str, Any]) -> Settings:
    """``settings`` (default: :data:`DEFAULT`) with ``changes`` applied.

    ``None`` values in ``changes`` are applied too (they mean "not set").
    Raises ``TypeError`` naming an unknown setting.
    """
    base = DEFAULT if settings is None else settings
    if not changes:
        return base
    unknown = sorted(set(changes) - _FIELDS)
    if unknown:
        raise TypeError(f"unknown setting(s): {', '.join(unknown)} (known: {', '.join(_ORDER)})")
    return base._replace(**changes)


_ORDER = Settings._fields
_FIELDS = frozenset(_ORDER)
