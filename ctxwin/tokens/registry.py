"""Estimators by name: the default, and what ``--estimator`` accepts.

Each estimator's module is imported when that estimator is first built: a command
loads only the one it uses (start-up time).
"""

from __future__ import annotations

from collections.abc import Callable

from ctxwin.tokens.base import SEED_CALIBRATION, Estimator


def _seed() -> Estimator:
    from ctxwin.tokens.seed import SeedEstimator

    return SeedEstimator()


def _content() -> Estimator:
    from ctxwin.tokens.content import ContentEstimator

    return ContentEstimator()


def _bound() -> Estimator:
    from ctxwin.tokens.tiered import TieredBound

    return TieredBound()


DEFAULT_ESTIMATOR = "bound"
"""The name of the estimator used when none is named: ``bound``, an upper bound on the four
open tokenizers' counts of any text. ``content`` (alias ``fast``) is a fit to the recorded
corpus, faster but not a bound: generated text outside that corpus is under-counted."""


def default_estimator() -> Estimator:
    """The estimator used when none is named (:data:`DEFAULT_ESTIMATOR`)."""
    return _bound()


ESTIMATORS: dict[str, Callable[[], Estimator]] = {
    "seed": _seed,
    "content": _content,
    "fast": _content,
    "bound": _bound,
}
"""Estimators selectable by name (``--estimator``): name → a function that builds one
(``fast`` is another name for ``content``)."""


TOKENIZER_PREFIX = "tokenizer:"
"""``tokenizer:ENCODING`` names the estimator that counts exactly in ``ENCODING``."""


def get_estimator(name: str) -> Estimator:
    """Build the estimator called ``name``: one of :data:`ESTIMATORS`, or
    ``tokenizer:ENCODING`` for exact counts (the ``bpe`` extra); ``ValueError`` names
    the choices (:class:`~ctxwin.errors.UsageError` about the ``tokenizer`` setting for
    an encoding that cannot count here)."""
    if name.startswith(TOKENIZER_PREFIX):
        from ctxwin.tokens.bpe import TokenizerEstimator

        return TokenizerEstimator(name.removeprefix(TOKENIZER_PREFIX))
    factory = ESTIMATORS.get(name)
    if factory is None:
        raise _unknown(name)
    return factory()


def check_estimator(name: str) -> str:
    """``name``, when :func:`get_estimator` can build the estimator it names; raises what
    that would, without building one (the command line checks its flags before it
    reads any input)."""
    if name.startswith(TOKENIZER_PREFIX):
        from ctxwin.tokens.bpe import check_encoding

        check_encoding(name.removeprefix(TOKENIZER_PREFIX))
    elif name not in ESTIMATORS:
        raise _unknown(name)
    return name


def _unknown(name: str) -> ValueError:
    choices = ", ".join(sorted(ESTIMATORS))
    return ValueError(f"unknown estimator {name!r} (choose from: {choices})")


def estimator_for(
    estimator: str | Estimator | None, tokenizer: str | None = None, model: str | None = None
) -> Estimator:
    """The estimator a setting names: ``estimator`` (a name for :func:`get_estimator`,
    ``None`` for the default, or an object a library caller built), unless ``tokenizer``
    is ``auto``: exactly when ``model``'s tokenizer is one the ``bpe`` extra has, else
    ``estimator`` (:func:`~ctxwin.tokens.bpe.auto_estimator`). Any other ``tokenizer``
    is an encoding, the estimator ``tokenizer:ENCODING``."""
    if tokenizer is None:
        return _named(estimator)
    from ctxwin.tokens import bpe

    if tokenizer == bpe.AUTO_TOKENIZER:
        return bpe.auto_estimator(model, _named(estimator))
    return get_estimator(TOKENIZER_PREFIX + tokenizer)


def _named(estimator: str | Estimator | None) -> Estimator:
    if estimator is None:
        return default_estimator()
    if isinstance(estimator, str):
        return get_estimator(estimator)
    return estimator


def seed_of(estimator: Estimator, model: str | None = None) -> float:
    """The calibration ``estimator`` starts at with ``model`` (its
    :meth:`~ctxwin.tokens.base.Estimator.seed`); the ADR's 1.15 for an estimator of
    another library that states none."""
    seed = getattr(estimator, "seed", None)
    return SEED_CALIBRATION if seed is None else float(seed(model))


def default_calibration(name: str, model: str | None = None) -> float:
    """The calibration seed of the estimator called ``name`` used with ``model``
    (:func:`seed_of`): 1.15 for ``seed``; 1.0 for ``tokenizer:ENCODING``; for
    ``content`` and ``bound`` 1.0 or their model family's measured seed
    (:mod:`ctxwin.tokens.seeds`). A name this registry does not know gets the ADR's
    1.15."""
    if name.startswith(TOKENIZER_PREFIX):
        return 1.0  # exact counts, without needing the bpe extra to say so
    factory = ESTIMATORS.get(name)
    return SEED_CALIBRATION if factory is None else seed_of(factory(), model)
