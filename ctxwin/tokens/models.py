"""Model names: the one rule every table of model names matches by.

A table keys its rows by a family prefix (``gpt-5``, ``llama-3.1``, ``claude``);
:func:`name_family` says which prefix a model's name belongs to.
"""

from __future__ import annotations

from collections.abc import Iterable


def name_family(model: str, prefixes: Iterable[str], ends: str = "-:@_") -> str | None:
    """The first of ``prefixes`` that ``model``'s name (lower case, after any
    ``provider/`` part) is, or starts with followed by one of ``ends``; else ``None``."""
    name = model.strip().lower().rpartition("/")[2]
    for prefix in prefixes:
        if name == prefix or (name.startswith(prefix) and name[len(prefix)] in ends):
            return prefix
    return None
