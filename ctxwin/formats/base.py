"""The adapter interface: one implementation per wire format."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ctxwin.estimate import Estimator
from ctxwin.view import Problem, View


class Adapter(Protocol):
    """Detects, reads and writes one wire format.

    ``read`` never modifies ``body``; ``write`` returns a new body holding the
    kept entries of the message list (the original objects, untouched) and
    every other part of ``body`` unchanged.
    """

    name: str
    description: str
    items_key: str
    """Top-level key of the body's message list (``messages``, ``input``, ``contents``)."""

    def detect(self, body: Any) -> bool:
        """Whether ``body`` has this format's shape."""

    def read(self, body: Any, estimator: Estimator) -> View:
        """The neutral view of ``body``; ``InputError`` names the bad field."""

    def write(self, body: Any, keep: Sequence[int]) -> Any:
        """``body`` with only the message-list entries at indices ``keep``."""

    def problems(self, view: View, keep: Sequence[int]) -> list[Problem]:
        """Format-specific rule violations among the kept items (beyond pairing)."""
