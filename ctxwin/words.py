"""How counts read in messages: one wording of a plural and of "(and N more …)".

Both the core's errors and the command line's lines use these, so a count reads the same
wherever it is printed.
"""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 turn``, ``2 turns``, ``1,200 messages`` (``many``: a plural that is not
    ``word + "s"``)."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {many or word + 's'}"


def and_more(extra: int, word: str = "problem") -> str:
    """`` (and 1 more problem)``, `` (and 3 more problems)``; empty when ``extra`` is 0."""
    return f" (and {extra:,} more {plural(extra, word).split(' ', 1)[1]})" if extra > 0 else ""
