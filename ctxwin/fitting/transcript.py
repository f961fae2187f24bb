"""A parsed request body: its adapter, its neutral view, and the estimator that priced it.

:func:`load` detects (or is told) the wire format and reads the body into a
:class:`~ctxwin.view.View` whose items carry their estimated sizes; everything that fits,
prunes, clears or lints a request starts from a :class:`Transcript`. :mod:`ctxwin.core`
(the front door) re-exports both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ctxwin.fitting.rules import problems as rule_problems
from ctxwin.formats import AUTO, get_adapter
from ctxwin.formats.base import Adapter
from ctxwin.tokens.base import Estimator
from ctxwin.tokens.registry import default_estimator
from ctxwin.view import Problem, View

__all__ = ["Transcript", "load"]


class Transcript(NamedTuple):
    """A parsed request body, its adapter, and its neutral view.

    A NamedTuple: a dataclass would compile its methods at every start.
    """

    body: Any
    adapter: Adapter
    view: View
    estimator: Estimator

    @property
    def format(self) -> str:
        return self.adapter.name

    def write(self, keep: list[int]) -> Any:
        """The body with only the items at ``keep`` (the body itself when all are kept)."""
        if len(keep) == len(self.view.items):
            return self.body
        return self.adapter.write(self.body, keep)

    def raw_tokens(self, keep: Sequence[int]) -> int:
        """Uncalibrated estimate of the items at ``keep`` with the body's fixed part (what
        a calibration learns against when only those items are sent)."""
        view = self.view
        total = list(view.base)
        width = len(total)
        items = view.items
        for i in keep:
            cost = items[i].cost
            for k in range(width):
                total[k] += cost[k]
        return self.estimator.raw(total)

    def problems(self, keep: Sequence[int] | None = None) -> list[Problem]:
        """Structural problems of the items at ``keep`` (all when ``None``), by the fit's rules."""
        return rule_problems(self.view, self.adapter, keep)


def load(
    body: Any, fmt: str = AUTO, estimator: Estimator | None = None, *, lazy: bool = False
) -> Transcript:
    """Detect (or force) the format of ``body`` and read it into a view.

    With ``lazy``, an estimator that has a cheap tier (``bound``:
    :meth:`~ctxwin.tokens.tiered.TieredBound.lazy`) prices the items at it, and the view's
    :attr:`~ctxwin.view.View.tighten` prices them at the estimator's own price when a fit
    needs them: every estimate stays an upper bound of the estimator's, and a fit finds
    the same cut (what ``prune`` and ``check`` do; ``estimate`` gives the exact total)."""
    est = estimator or default_estimator()
    adapter = get_adapter(body, fmt)
    reader = getattr(est, "lazy", None) if lazy else None
    if reader is None:
        return Transcript(body, adapter, adapter.read(body, est), est)
    from ctxwin.tokens.tiered import tightener

    cheap = reader()
    view = adapter.read(body, cheap)
    view.tighten = tightener(view, cheap)
    if view.tighten is None:  # an adapter summed part costs: read it at the bound
        view = adapter.read(body, est)
    return Transcript(body, adapter, view, est)
