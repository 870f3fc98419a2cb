"""Prometheus metrics: the counts the edge keeps of every request, and ``GET /metrics``.

Each app owns a :class:`~prometheus_client.CollectorRegistry` (never the process-global
default: a test suite builds many apps in one process, and each must count only its own).

Series are labelled by the route's path *template* (``/v1/responses/{response_id}``), never
the raw path: ids in paths would make a series per request. A path no route matches is
``other``. The edge (:mod:`mockserver.edge`) counts each request right after its path
prefix is read, so it sees every request, already as ``/v1/…`` with its profile known.
``/metrics`` is answered here and not counted (a scrape counting itself
only adds noise); ``/health`` is counted under its own endpoint. A request answered with no
status line at all (a transport fault, a client gone first) has ``status="none"``.

Tokens are counted where they are known without touching any handler: the engine hands each
answer's one :class:`~mockserver.spine.events.Usage` event to :meth:`Metrics.count_usage`,
and a context variable set by the edge (:func:`measuring`) says which endpoint and profile the generation runs
for (background Responses runs inherit it when their task is spawned). Recordings carry
no usage event, so replays count no tokens.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar, Token
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from starlette.routing import BaseRoute
from starlette.types import Scope, Send

from mockserver.spine.events import Usage

__all__ = ["METHODS", "OTHER", "Endpoints", "Metrics", "measured", "measuring"]

OTHER = "other"
# Methods are labelled as sent only if they are HTTP's own: a client inventing methods must not
# invent series too.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Fast answers are the point of a test double, so the buckets start at a millisecond; long
# streams with latency faults reach the top ones.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

# (endpoint, profile) of the request being answered; read where tokens are counted.
_CURRENT: ContextVar[tuple[str, str] | None] = ContextVar("mockserver_metrics_request", default=None)


def measuring(endpoint: str, profile: str) -> Token[tuple[str, str] | None]:
    """Say which endpoint and profile the generations run from here on are for (the edge, per
    request); ``_CURRENT.reset`` the token it returns when the request is answered."""
    return _CURRENT.set((endpoint, profile))


def measured(token: Token[tuple[str, str] | None]) -> None:
    """Undo :func:`measuring`."""
    _CURRENT.reset(token)


class Metrics:
    """Every series mockserver exports, in a registry of its own.

    Counts are plain numbers kept per label set and turned into Prometheus families only when
    scraped (:class:`_Families`): a request updates a few dict entries, never a lock. Every
    update happens on the event loop's thread.
    """

    def __init__(self, *, version: str, backend: str, profile: str, faults: Iterable[str] = ()) -> None:
        """``faults``: the fault names counted by name (the catalogue's); any other is ``other``,
        so a client naming faults cannot invent series."""
        self.registry = CollectorRegistry()
        self.known_faults = frozenset(faults)
        self.profile = profile  # the server's own: unprefixed paths are answered as it
        self.in_flight = 0
        self.requests: dict[tuple[str, str, str, str], int] = {}  # endpoint, method, status, profile
        self.durations: dict[tuple[str, str], list[float]] = {}  # endpoint, method → bucket counts, count, sum
        self.tokens: dict[tuple[str, str, str], int] = {}  # endpoint, profile, type
        self.faults: dict[tuple[str, str], int] = {}  # endpoint, fault
        self.streams: dict[tuple[str, str], int] = {}  # endpoint, profile
        self.info = {"version": version, "backend": backend, "profile": profile}
        self.registry.register(_Families(self))

    def exposition(self) -> bytes:
        """The text format Prometheus scrapes."""
        return generate_latest(self.registry)

    async def expose(self, scope: Scope, send: Send) -> None:
        """Answer ``GET /metrics`` (and ``HEAD``)."""
        body = self.exposition()
        headers = [(b"content-type", CONTENT_TYPE_LATEST.encode()), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})

    def answered(self, endpoint: str, method: str, status: int, profile: str, seconds: float) -> None:
        key = (endpoint, method, str(status) if status else "none", profile)
        self.requests[key] = self.requests.get(key, 0) + 1
        counts = self.durations.get((endpoint, method))
        if counts is None:
            counts = self.durations[(endpoint, method)] = [0.0] * (len(BUCKETS) + 2)
        counts[bisect.bisect_left(BUCKETS, seconds)] += 1  # the first bucket it fits (else +Inf)
        counts[-1] += seconds

    def count_usage(self, usage: Usage) -> None:
        endpoint, profile = _CURRENT.get() or (OTHER, self.profile)
        if usage.prompt_tokens:
            key = (endpoint, profile, "prompt")
            self.tokens[key] = self.tokens.get(key, 0) + usage.prompt_tokens
        if usage.completion_tokens:
            key = (endpoint, profile, "completion")
            self.tokens[key] = self.tokens.get(key, 0) + usage.completion_tokens

    def count_stream(self, endpoint: str, profile: str) -> None:
        self.streams[(endpoint, profile)] = self.streams.get((endpoint, profile), 0) + 1

    def count_faults(self, endpoint: str, header: bytes) -> None:
        """From ``x-mockserver-faults`` (``http.503; stream.cut_after=3@p=0.5``): by name, without
        parameters, so the label set stays the catalogue's."""
        for rendered in header.decode("latin-1").split(";"):
            name = re.split(r"[=,@]", rendered.strip(), maxsplit=1)[0]
            if name:
                key = (endpoint, name if name in self.known_faults else OTHER)
                self.faults[key] = self.faults.get(key, 0) + 1


class _Families:
    """The families of a :class:`Metrics`, built at scrape time from its counts."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        yield _counter(
            "mockserver_requests", "Requests answered.", ["endpoint", "method", "status", "profile"], m.requests
        )
        duration = HistogramMetricFamily(
            "mockserver_request_duration_seconds",
            "Time from the request's arrival to its last byte (a stream's whole length).",
            labels=["endpoint", "method"],
        )
        for labels, counts in sorted(m.durations.items()):
            cumulative, buckets = 0.0, []
            for bound, count in zip((*BUCKETS, float("inf")), counts[:-1], strict=True):
                cumulative += count
                buckets.append((_bound(bound), cumulative))
            duration.add_metric(list(labels), buckets, counts[-1])
        yield duration
        yield _counter(
            "mockserver_tokens",
            "Tokens the model read (prompt) and wrote (completion).",
            ["endpoint", "profile", "type"],
            m.tokens,
        )
        yield _counter("mockserver_faults", "Faults applied, by name.", ["endpoint", "fault"], m.faults)
        yield _counter("mockserver_streams", "Event-stream responses started.", ["endpoint", "profile"], m.streams)
        yield GaugeMetricFamily("mockserver_requests_in_flight", "Requests being answered now.", value=m.in_flight)
        info = InfoMetricFamily("mockserver", "The server's version, backend and profile.")
        info.add_metric([], m.info)
        yield info


def _bound(value: float) -> str:
    return "+Inf" if value == float("inf") else repr(value)


def _counter(name: str, doc: str, labels: list[str], counts: Mapping[Any, float]) -> Metric:
    family = CounterMetricFamily(name, doc, labels=labels)
    for values, count in sorted(counts.items()):
        family.add_metric(list(values), count)
    return family


class Endpoints:
    """Path → the template of the route it matches (``/v1/models/{model}``), else ``other``.
    Static paths are one dict lookup; only the few templated routes are matched by regex."""

    def __init__(self, routes: Iterable[BaseRoute]) -> None:
        self.static: dict[str, str] = {}
        self.templated: list[tuple[re.Pattern[str], str]] = []
        for route in routes:
            path, regex = getattr(route, "path", None), getattr(route, "path_regex", None)
            if not isinstance(path, str) or not isinstance(regex, re.Pattern):
                continue
            if "{" in path:
                self.templated.append((regex, re.sub(r":\w+}", "}", path)))  # {model:path} → {model}
            else:
                self.static[path] = path

    def label(self, path: str) -> str:
        found = self.static.get(path)
        if found is not None:
            return found
        for regex, template in self.templated:
            if regex.match(path):
                return template
        return OTHER
