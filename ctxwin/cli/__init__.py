"""The ``ctxwin`` command line: the only part of ctxwin that knows about processes.

- :mod:`ctxwin.cli.main` is the console entry point (process policy lives there);
- :mod:`ctxwin.cli.flags` declares the flags of the transcript commands once, and
  :mod:`ctxwin.cli.fastargs` reads plain ``estimate``/``prune``/``replay`` lines with them,
  without typer; :mod:`ctxwin.cli.options` turns them into typer options;
- :mod:`ctxwin.cli.commands` runs a transcript command, and :mod:`ctxwin.cli.funnel`
  maps every error to one line and its exit code, for both paths;
- :mod:`ctxwin.cli.app` declares the typer application; :mod:`ctxwin.cli.replay`,
  :mod:`ctxwin.cli.runs`, :mod:`ctxwin.cli.lint`, :mod:`ctxwin.cli.repair` and
  :mod:`ctxwin.cli.proxy` hold the other commands;
- :mod:`ctxwin.cli.report` renders the plan for machines (orjson) and people (a plain
  table into a pipe, rich on a terminal);
- :mod:`ctxwin.cli.streams` reads input and writes output files safely.

This package's ``__init__`` imports nothing, so the fast path stays fast.
"""
