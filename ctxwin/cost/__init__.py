"""What a run costs: prices, prompt-cache rules, and the bill of a replayed run.

- :mod:`~ctxwin.cost.pricing`: the ``price`` and ``cache`` objects of the model table.
- :mod:`~ctxwin.cost.caching`: how much of each request a provider reads from its cache.
- :mod:`~ctxwin.runs.billing`: each replayed call's cached tokens and input cost;
  :mod:`~ctxwin.runs.policies`: ``replay --compare``'s policies.

Importing this package imports none of its modules.
"""
