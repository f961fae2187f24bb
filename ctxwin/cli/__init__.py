"""The ``ctxwin`` command line: the only part of ctxwin that knows about processes.

- :mod:`ctxwin.cli.main` is the console entry point (process policy lives there);
- :mod:`ctxwin.cli.fastargs` parses plain ``estimate``/``prune`` lines without typer;
- :mod:`ctxwin.cli.commands` runs a transcript command and maps errors to exit codes;
- :mod:`ctxwin.cli.app` declares the typer application;
- :mod:`ctxwin.cli.runs` and :mod:`ctxwin.cli.lint` hold the recorded-run and lint commands;
- :mod:`ctxwin.cli.report` renders the plan for people (rich) and machines (orjson);
- :mod:`ctxwin.cli.streams` reads input and writes output files safely.

This package's ``__init__`` imports nothing, so the fast path stays fast.
"""
