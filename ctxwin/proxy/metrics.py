"""Prometheus metrics of the proxy, in the text exposition format (no client library).

Served at ``GET /metrics``:

* ``ctxwin_proxy_requests_total{route,action}`` — requests by route
  (``chat``, ``responses``, ``messages``, ``gemini``, ``passthrough``) and
  what ctxwin did (``fit``, ``pruned``, ``cleared``, ``truncated``, ``unread``, ``unsafe``,
  ``invalid_json``, ``too_large``, ``forwarded``, ``refused``);
* ``ctxwin_proxy_refused_total{reason}`` — requests refused before anything was read or
  forwarded (:mod:`ctxwin.proxy.guard`): ``target``, ``dot_segment``, ``host``,
  ``origin``, ``token``, and ``bad_request`` (a head the HTTP parser refused);
* ``ctxwin_proxy_pruned_total`` — requests sent with older turns dropped;
* ``ctxwin_proxy_dropped_turns_total`` / ``ctxwin_proxy_dropped_messages_total``;
* ``ctxwin_proxy_cleared_total`` — tool results and thinking parts cleared
  (0 unless ``--strategy`` has a clearing step);
* ``ctxwin_proxy_truncated_results_total`` — results cut by ``truncate-results``;
* ``ctxwin_proxy_truncated_total`` — requests answered 400 because even the
  floor did not fit;
* ``ctxwin_proxy_head_timeouts_total``, ``ctxwin_proxy_body_timeouts_total`` — clients
  too slow to send a request head or body (408);
* ``ctxwin_proxy_refused_connections_total`` — connections refused (503) while
  ``--max-connections`` were open; gauge ``ctxwin_proxy_connections``: open now;
* ``ctxwin_proxy_upstream_errors_total{kind}`` — ``unreachable`` (502),
  ``timeout`` (504: silent before its headers, or after them before the end of a
  buffered response), ``broken_response`` (502: it closed or broke framing before the
  end of a buffered response), ``broken_stream`` (a streamed response cut short),
  ``disconnect`` (client gone mid-response);
* ``ctxwin_proxy_fit_seconds`` — histogram of the time spent parsing and fitting;
* ``ctxwin_proxy_request_seconds`` — histogram of whole requests, to the last byte;
* ``ctxwin_proxy_conversations`` — conversations currently remembered;
* ``ctxwin_proxy_conversation_bytes`` — what they hold, in bytes (an upper bound:
  :func:`ctxwin.proxy.fitting.held_bytes`), at most ``--max-memory``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxwin.core import Plan

FIT_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25)
REQUEST_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0)


class Histogram:
    """Cumulative-bucket histogram (seconds)."""

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.count = 0
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.count += 1
        self.sum += seconds

    def lines(self, name: str) -> list[str]:
        out = []
        running = 0
        for bound, n in zip(self.bounds, self.counts, strict=False):
            running += n
            out.append(f'{name}_bucket{{le="{bound}"}} {running}')
        out.append(f'{name}_bucket{{le="+Inf"}} {self.count}')
        out.append(f"{name}_sum {self.sum:.6f}")
        out.append(f"{name}_count {self.count}")
        return out


_COUNTERS = {
    "pruned": "Requests forwarded with older turns dropped.",
    "dropped_turns": "Turns dropped from forwarded requests.",
    "dropped_messages": "Message-list entries dropped from forwarded requests.",
    "cleared": "Tool results and thinking parts cleared from forwarded requests.",
    "truncated_results": "Tool results whose middle was cut in forwarded requests.",
    "truncated": "Requests answered 400 because even the floor exceeded the budget.",
    "head_timeouts": "Connections closed because a request head did not arrive in time (408).",
    "body_timeouts": "Requests answered 408 because their body did not arrive in time.",
    "refused_connections": "Connections answered 503 and closed: too many were open.",
}


class Metrics:
    """The proxy's counters and histograms; :meth:`render` writes the exposition text."""

    def __init__(
        self,
        conversations: Callable[[], int] = lambda: 0,
        conversation_bytes: Callable[[], int] = lambda: 0,
        connections: Callable[[], int] = lambda: 0,
    ) -> None:
        self.requests: defaultdict[tuple[str, str], int] = defaultdict(int)
        self.counters = dict.fromkeys(_COUNTERS, 0)
        self.upstream_errors: defaultdict[str, int] = defaultdict(int)
        self.refused: defaultdict[str, int] = defaultdict(int)
        self.fit_seconds = Histogram(FIT_BUCKETS)
        self.request_seconds = Histogram(REQUEST_BUCKETS)
        self.conversations = conversations
        self.conversation_bytes = conversation_bytes
        self.connections = connections

    def count(self, name: str, by: int = 1) -> None:
        self.counters[name] += by

    def fitted(self, plan: Plan) -> None:
        """Count what fitting one forwarded request did."""
        r, a = plan.result, plan.applied
        c = self.counters
        c["pruned"] += r.pruned
        c["dropped_turns"] += r.dropped_turns
        c["dropped_messages"] += len(r.dropped)
        c["cleared"] += a.cleared_results + a.cleared_thinking
        c["truncated_results"] += a.truncated_results

    def render(self) -> bytes:
        lines = [
            "# HELP ctxwin_proxy_requests_total Requests by route and what ctxwin did.",
            "# TYPE ctxwin_proxy_requests_total counter",
        ]
        for (route, action), n in sorted(self.requests.items()):
            lines.append(f'ctxwin_proxy_requests_total{{route="{route}",action="{action}"}} {n}')
        lines += [
            "# HELP ctxwin_proxy_refused_total Requests refused unforwarded, by reason.",
            "# TYPE ctxwin_proxy_refused_total counter",
        ]
        for reason, n in sorted(self.refused.items()):
            lines.append(f'ctxwin_proxy_refused_total{{reason="{reason}"}} {n}')
        for name, text in _COUNTERS.items():
            full = f"ctxwin_proxy_{name}_total"
            lines += [f"# HELP {full} {text}", f"# TYPE {full} counter"]
            lines.append(f"{full} {self.counters[name]}")
        lines += [
            "# HELP ctxwin_proxy_upstream_errors_total Upstream failures and client disconnects.",
            "# TYPE ctxwin_proxy_upstream_errors_total counter",
        ]
        for kind, n in sorted(self.upstream_errors.items()):
            lines.append(f'ctxwin_proxy_upstream_errors_total{{kind="{kind}"}} {n}')
        for name, hist, text in (
            ("ctxwin_proxy_fit_seconds", self.fit_seconds, "Time spent parsing and fitting."),
            ("ctxwin_proxy_request_seconds", self.request_seconds, "Whole requests."),
        ):
            lines += [f"# HELP {name} {text}", f"# TYPE {name} histogram", *hist.lines(name)]
        lines += [
            "# HELP ctxwin_proxy_conversations Conversations whose calibration is remembered.",
            "# TYPE ctxwin_proxy_conversations gauge",
            f"ctxwin_proxy_conversations {self.conversations()}",
            "# HELP ctxwin_proxy_conversation_bytes Bytes the remembered conversations hold "
            "(an upper bound).",
            "# TYPE ctxwin_proxy_conversation_bytes gauge",
            f"ctxwin_proxy_conversation_bytes {self.conversation_bytes()}",
            "# HELP ctxwin_proxy_connections Client connections open.",
            "# TYPE ctxwin_proxy_connections gauge",
            f"ctxwin_proxy_connections {self.connections()}",
        ]
        return ("\n".join(lines) + "\n").encode()
