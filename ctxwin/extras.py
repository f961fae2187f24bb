"""Optional extras: the parts of ctxwin that need a package the core does not.

Each such part names the extra that brings its package (``[project.optional-dependencies]``
in pyproject.toml) the same way, :func:`install_hint`; a module that cannot work
without it imports the package inside :func:`needs_extra`, so a missing install raises
:class:`MissingExtra` — still a :class:`ModuleNotFoundError`, with the missing module's
``name`` — whose message says what to install, instead of a bare "No module named …".
Importing this module imports nothing else.
"""

from __future__ import annotations


def install_hint(extra: str) -> str:
    """The command that installs ``extra``: ``pip install 'ctxwin[extra]'``."""
    return f"pip install 'ctxwin[{extra}]'"


class MissingExtra(ModuleNotFoundError):
    """``feature`` was imported without a package its optional ``extra`` brings."""

    def __init__(self, feature: str, extra: str, cause: ImportError) -> None:
        self.feature = feature
        self.extra = extra
        super().__init__(
            f"{feature} needs the optional extra: {install_hint(extra)} ({cause})",
            name=cause.name,
            path=cause.path,
        )


class needs_extra:
    """``with needs_extra(feature, extra):`` import what ``feature`` needs from ``extra``'s
    packages; an :class:`ImportError` there becomes :class:`MissingExtra`."""

    __slots__ = ("extra", "feature")

    def __init__(self, feature: str, extra: str) -> None:
        self.feature = feature
        self.extra = extra

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if isinstance(exc, ImportError) and not isinstance(exc, MissingExtra):
            raise MissingExtra(self.feature, self.extra, exc) from exc


__all__ = ["MissingExtra", "install_hint", "needs_extra"]
