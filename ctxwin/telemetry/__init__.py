"""What ctxwin tells an operator about the fits it makes before a send: log records and spans.

Every fit that precedes a send — :meth:`ContextWindowManager.fit
<ctxwin.manager.ContextWindowManager.fit>` and
:meth:`~ctxwin.manager.ContextWindowManager.before_send`, which every SDK wrapper,
framework hook and the proxy call — is seen here once, from its
one outcome record (:class:`ctxwin.core.Plan`), under the logger of whoever sent it
(``ctxwin.manager``, ``ctxwin.integrations.openai``, ..., ``ctxwin.proxy``):

* **INFO** for a fit that changed the request (turns dropped, results cleared or cut,
  thinking removed): the model, the window and where it came from, the budget, the
  estimate before and after, what was dropped and edited, and the strategy steps taken;
* **ERROR** when nothing may be sent (:class:`~ctxwin.errors.ContextTruncated`, or its
  :class:`~ctxwin.errors.NoBudget`);
* **WARNING** for a window that fell back to 8,192 tokens (no model named, or one the
  table does not know; once per manager and model), usage that reports zero prompt tokens
  (once per run), and one report that grows the calibration by more than the manager's
  ``growth_warning`` share (:data:`GROWTH_WARNING` by default).

The fields travel in ``extra`` as ``ctxwin_*`` keys (:data:`FIELDS` names them), so a
JSON formatter writes them; a record never holds message content, headers or keys. The
library installs no handler: the application's logging configuration decides where the
records go (Python prints WARNING and above to stderr when none is configured).
``logging`` itself is imported the first time a record may be written, so commands that
never send (``estimate``, ``replay``) do not pay for it.

With ``opentelemetry-api`` installed (the ``otel`` extra) and an SDK's tracer provider set,
each such fit is a ``ctxwin.fit`` span, or adds to the proxy's server span
(:mod:`ctxwin.telemetry.otel`); without either, spans cost one check per fit.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import logging

    from ctxwin.core import Plan

MANAGER = "ctxwin.manager"
"""The logger of :class:`~ctxwin.manager.ContextWindowManager` used on its own."""

GROWTH_WARNING = 0.25
"""A report that grows the calibration by more than this share (a quarter) is a WARNING:
the estimator under-counts what the provider counts by that much."""

FIT_SPAN = "ctxwin.fit"
"""The name of the span of a fit ctxwin opens itself."""

FIELDS = (
    "status",
    "model",
    "format",
    "context_length",
    "context_length_source",
    "reserve",
    "budget",
    "messages",
    "raw_tokens",
    "estimated_tokens",
    "estimated_tokens_after",
    "calibration",
    "overhead",
    "dropped_turns",
    "kept_turns",
    "dropped_messages",
    "cleared_results",
    "cleared_tokens",
    "cleared_thinking",
    "truncated_results",
    "truncated_tokens",
    "strategy",
    "steps",
)
"""The fields of a fit, each ``ctxwin_NAME`` in a record's ``extra`` and ``ctxwin.NAME`` on
its span: the keys of :meth:`Plan.row() <ctxwin.core.Plan.row>` (what ``replay`` rows
carry, so a span reads back as a row) and where the window came from, the reserve, the
messages dropped, the tokens cut, the strategy and the steps it took."""

_INFO, _WARNING, _ERROR = 20, 30, 40
"""``logging.INFO``, ``WARNING`` and ``ERROR`` (``logging`` is not imported at start)."""

_LOGGERS: dict[str, logging.Logger] = {}
_OTEL: ModuleType | bool | None = None
""":mod:`ctxwin.telemetry.otel` once imported; ``False`` when it cannot be (no
``opentelemetry-api``); ``None`` before the first try."""


def logger(name: str) -> logging.Logger:
    """The logger ``name`` (``logging`` imported on the first call)."""
    found = _LOGGERS.get(name)
    if found is None:
        import logging  # here: only a send ever logs

        found = _LOGGERS[name] = logging.getLogger(name)
    return found


def traces() -> ModuleType | None:
    """:mod:`ctxwin.telemetry.otel`, or ``None`` when ``opentelemetry-api`` is not
    installed (tried once)."""
    global _OTEL
    found = _OTEL
    if found is None:
        try:
            from ctxwin.telemetry import otel as found
        except ImportError:  # MissingExtra, or an opentelemetry that cannot be imported
            found = False
        _OTEL = found
    return found if isinstance(found, ModuleType) else None


def fit_span(source: str) -> Any:
    """A ``ctxwin.fit`` span for a fit about to be made by ``source`` (a logger name),
    child of the current span; ``None`` when nothing is traced (no ``opentelemetry-api``,
    or no SDK tracer provider set)."""
    module = traces()
    return None if module is None else module.start(FIT_SPAN, source)


@contextmanager
def current(span: Any) -> Iterator[None]:
    """Make ``span`` the current span inside the block (nothing for ``None``)."""
    module = traces() if span is not None else None
    if module is None:
        yield
        return
    with module.current(span):
        yield


def end(span: Any) -> None:
    """End ``span`` (nothing for ``None``)."""
    if span is not None:
        span.end()


def failed(span: Any, exc: BaseException) -> None:
    """Mark ``span`` failed by ``exc``: its type only, never its message (which may quote
    the request)."""
    module = traces() if span is not None else None
    if module is not None:
        module.failed(span, exc)


def usage(span: Any, prompt_tokens: int | None) -> None:
    """Put the prompt tokens the provider reported on ``span`` (``gen_ai.usage.input_tokens``)."""
    if span is not None and prompt_tokens is not None:
        span.set_attribute("gen_ai.usage.input_tokens", prompt_tokens)


# --- a fit --------------------------------------------------------------------------


def steps_taken(p: Plan) -> list[str]:
    """The strategy's steps that changed the request, in the strategy's order."""
    from ctxwin.fitting.strategy import CLEAR_RESULTS, CLEAR_THINKING, DROP_TURNS, TRUNCATE_RESULTS

    a, r = p.applied, p.result
    did = {
        CLEAR_RESULTS: a.cleared_results > 0,
        CLEAR_THINKING: a.cleared_thinking > 0,
        DROP_TURNS: r.pruned,
        TRUNCATE_RESULTS: a.truncated_results > 0,
    }
    return [s for s in a.strategy.steps if did.get(s)]


def fields(p: Plan) -> dict[str, Any]:
    """The :data:`FIELDS` of the fit ``p``, by name (an unknown estimate is ``None``)."""
    r, b, a = p.result, p.budget, p.applied
    spec = b.spec
    return {
        "status": p.status,
        "model": spec.name,
        "format": p.transcript.format,
        "context_length": b.context_length,
        "context_length_source": spec.context_length_source,
        "reserve": b.reserve,
        "budget": b.budget,
        "messages": r.items,
        "raw_tokens": r.known_raw,
        "estimated_tokens": r.known_tokens,
        "estimated_tokens_after": r.estimated_tokens_after,
        "calibration": round(r.calibration, 4),
        "overhead": r.overhead,
        "dropped_turns": r.dropped_turns,
        "kept_turns": r.kept_turns,
        "dropped_messages": r.items - r.kept_count,
        "cleared_results": a.cleared_results,
        "cleared_tokens": a.cleared_tokens,
        "cleared_thinking": a.cleared_thinking,
        "truncated_results": a.truncated_results,
        "truncated_tokens": a.truncated_tokens,
        "strategy": a.strategy.name,
        "steps": steps_taken(p),
    }


def extra(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` as a record's ``extra``: each key ``ctxwin_KEY``."""
    return {f"ctxwin_{k}": v for k, v in values.items()}


def printable(text: str | None, limit: int = 200) -> str:
    """A name from a request (a model) fit for one log line: control characters escaped,
    at most ``limit`` characters."""
    if text is None:
        return "(no model named)"
    text = text[:limit]
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def _changes(f: Mapping[str, Any]) -> str:
    """What a fit did, in words."""
    parts = []
    if f["dropped_turns"] or f["dropped_messages"]:
        parts.append(f"dropped {f['dropped_turns']:,} turns ({f['dropped_messages']:,} messages)")
    if f["cleared_results"]:
        parts.append(
            f"cleared {f['cleared_results']:,} tool results ({f['cleared_tokens']:,} tokens)"
        )
    if f["cleared_thinking"]:
        parts.append(f"removed thinking from {f['cleared_thinking']:,} parts")
    if f["truncated_results"]:
        parts.append(
            f"cut {f['truncated_results']:,} tool results ({f['truncated_tokens']:,} tokens)"
        )
    return ", ".join(parts)


_SOURCE_WORDS = {
    "flag": "as given",
    "spec": "from the model spec",
    "table": "from the model table",
    "fallback": "the fallback",
}


def _window(f: Mapping[str, Any]) -> str:
    source = f["context_length_source"]
    return f"a {f['context_length']:,}-token window ({_SOURCE_WORDS.get(source, source)})"


def _number(n: int | None) -> str:
    return "?" if n is None else f"{n:,}"


def fitted(p: Plan, source: str, span: Any = None, told: set[Any] | None = None) -> None:
    """Make the fit ``p``, made by ``source`` (a logger name) before a send, seen: its log
    records (see the module docstring) and, on ``span``, its attributes and an event per
    edit. ``told`` holds the models a fallback window was already reported for (this
    manager's); a model reported is added to it."""
    spec = p.budget.spec
    warn = spec.context_length_source == "fallback" and (told is None or spec.name not in told)
    status_bad = p.result.overflow_at_floor
    level = _ERROR if status_bad else _INFO if p.changed else 0
    logs = level > 0 and logger(source).isEnabledFor(level)
    if span is None and not logs and not warn:
        return
    f = fields(p)
    log = logger(source)
    if warn:
        if told is not None:
            told.add(spec.name)
        if log.isEnabledFor(_WARNING):
            unknown = spec.name is not None
            what = (
                f"unknown model {printable(spec.name)}: no row of the model table matches"
                if unknown
                else "no model named"
            )
            log.warning(
                "%s; budgeting for the fallback %s-token window (give context_length or a "
                "model spec)",
                what,
                f"{f['context_length']:,}",
                extra=extra({**f, "warning": "unknown_model" if unknown else "fallback_window"}),
            )
    if logs:
        model = printable(spec.name)
        if status_bad:
            from ctxwin.errors import truncated

            log.error(
                "%s (%s, %s); nothing may be sent",
                truncated(p.result, p.budget),
                model,
                _window(f),
                extra=extra(f),
            )
        else:
            log.info(
                "fitted %s: %s; %s → %s estimated tokens, budget %s of %s; steps: %s",
                model,
                _changes(f),
                _number(f["estimated_tokens"]),
                _number(f["estimated_tokens_after"]),
                f"{f['budget']:,}",
                _window(f),
                ",".join(f["steps"]) or "none",
                extra=extra(f),
            )
    if span is not None:
        module = traces()
        if module is not None:
            module.record(span, p, f)


def observed(
    source: str,
    *,
    before: float,
    after: float,
    reported: int | None,
    raw: int | None,
    zero: bool,
    share: float | None,
) -> None:
    """Log what one usage report taught a manager sending under ``source``: a WARNING when
    it reported zero prompt tokens (``zero``: the run's first such report), or when it grew
    the calibration from ``before`` to ``after`` by more than ``share``."""
    log = logger(source)
    if not log.isEnabledFor(_WARNING):
        return
    if zero:
        log.warning(
            "usage reported 0 prompt tokens (a gateway that does not count?): taken as no "
            "report; the calibration stays %.3f",
            before,
            extra=extra({"warning": "zero_usage", "calibration": round(before, 4)}),
        )
    if share is not None and before > 0 and after > before * (1 + share):
        log.warning(
            "one report grew the calibration from %.3f to %.3f (+%.0f %%): %s prompt tokens "
            "reported for an estimate of %s raw tokens; the estimator under-counts this "
            "model's tokens",
            before,
            after,
            100 * (after / before - 1),
            _number(reported),
            _number(raw),
            extra=extra(
                {
                    "warning": "calibration_growth",
                    "calibration_before": round(before, 4),
                    "calibration": round(after, 4),
                    "reported_tokens": reported,
                    "raw_tokens": raw,
                }
            ),
        )


__all__ = [
    "FIELDS",
    "FIT_SPAN",
    "GROWTH_WARNING",
    "MANAGER",
    "current",
    "end",
    "failed",
    "fields",
    "fit_span",
    "fitted",
    "logger",
    "observed",
    "steps_taken",
    "traces",
    "usage",
]
