"""The fit layer: a transcript's estimate against its budget, and what must go.

- :mod:`~ctxwin.fitting.budget`: model spec → token budget.
- :mod:`~ctxwin.fitting.rules`: the structural rules a transcript must keep (tool-call pairing).
- :mod:`~ctxwin.fitting.pruning`: turn-atomic units and the fit of one request.
- :mod:`~ctxwin.fitting.cut`: the one search for the fewest oldest units to drop.
- :mod:`~ctxwin.fitting.strategy`: the steps taken before (and with) dropping turns.
- :mod:`~ctxwin.fitting.incremental`: every prefix of a growing transcript, at O(new items).
- :mod:`~ctxwin.fitting.calibration`: the estimate's factor and overhead, learned from usage.
- :mod:`~ctxwin.breakdown`: where a request's tokens go (``estimate --explain``).
- :mod:`~ctxwin.fitting.repairing`: the minimal provider-valid fix of what ``lint`` flags.

Below it: :mod:`ctxwin.tokens` (estimators) and :mod:`ctxwin.formats` (wire formats).
Above it: :mod:`ctxwin.core` (the front door), the manager, runs, and the optional layers.
Importing this package imports none of its modules.
"""
