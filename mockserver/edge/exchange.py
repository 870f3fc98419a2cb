"""The one ``send`` every answer goes out through: what the edge learns from it and adds to it.

The edge wraps ``send`` once per request (not once per concern): at the status line it notes
the status, journals the answer (its status, seed, ``retry-after``), adds the headers the edge
owes it (rate-limit headers, the faults applied, ``x-request-id``) and counts it in the metrics
(faults, streams); at the last body message it closes the journal entry (pushed to a shared
journal before the last byte leaves) and counts the request answered. Each part does its work
only when the edge switched it on for this request.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.types import Message, Send

from mockserver.faults.catalogue import Fault
from mockserver.faults.journal import Entry
from mockserver.http.metrics import Metrics
from mockserver.http.request_id import HEADER, Hash, id_of
from mockserver.wire import headers as h

__all__ = ["Copy", "Exchange", "Seen"]

ANTHROPIC_ID = b"request-id"  # Anthropic's name for x-request-id


class Copy:
    """What an answer was sent as, copied as it passes (for the edge to remember it:
    :mod:`mockserver.edge.repeats`): its status, its headers as they left, its body's messages."""

    __slots__ = ("bodies", "headers", "status")

    def __init__(self) -> None:
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.bodies: list[tuple[bytes, bool]] = []  # (body, more_body)


class Exchange:
    """``send`` for one request. Not slotted: :func:`~mockserver.http.link.find_transport` finds
    the connection through :attr:`inner` (uvicorn's ``send``)."""

    def __init__(self, send: Send, running: Hash) -> None:
        self.inner = send
        self.running = running  # the request's hash: its x-request-id
        self.status = 0  # none sent yet: a transport fault, or a client gone before the answer
        # Metrics, once measure() is called.
        self.metrics: Metrics | None = None
        self.endpoint = self.method = self.profile = ""
        self.started = 0.0
        self.counted = True
        self.faulted = False  # the faults header was counted (else the applied list is, at the end)
        # The journal, once the injector opens an entry.
        self.entry: Entry | None = None
        self.applied: list[Fault] = []
        self.extra: list[tuple[bytes, bytes]] = []  # headers the edge adds (the rate limiter's)
        self.last: Callable[[], Awaitable[None]] | None = None  # before the last body message (a shared journal's push)
        self.pushed = False
        self.copy: Copy | None = None  # what the answer is sent as, for the edge to remember

    def measure(self, metrics: Metrics, endpoint: str, method: str, profile: str) -> None:
        """Count this request in ``metrics`` (in flight now; answered at its last byte)."""
        self.metrics = metrics
        self.endpoint, self.method, self.profile = endpoint, method, profile
        self.started = time.perf_counter()
        self.counted = False
        metrics.in_flight += 1

    def count(self) -> None:
        """The request is answered (or ended without an answer): counted once."""
        if self.counted or self.metrics is None:
            return
        self.counted = True
        m = self.metrics
        m.in_flight -= 1
        m.answered(self.endpoint, self.method, self.status, self.profile, time.perf_counter() - self.started)

    async def __call__(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            status = message["status"]
            headers = message.get("headers", [])
            extra = self.extra
            if self.applied:
                extra = [*extra, (h.FAULTS, "; ".join(f.render() for f in self.applied).encode())]
            if extra:
                headers = [*headers, *extra]
            seen = Seen.of(headers)
            if not seen.stamped:
                rid = id_of(self.running).encode()
                headers = [*headers, (HEADER, rid)]
                if self.profile == "anthropic" and all(k != ANTHROPIC_ID for k, _ in headers):
                    headers.append((ANTHROPIC_ID, rid))  # what Anthropic's SDKs read, errors included
            message = {**message, "headers": headers}
            self.began(status, headers, seen)
        elif kind == "http.response.body":
            await self.passing(message.get("body", b""), not message.get("more_body", False))
        await self.out(message)

    def began(self, status: int, headers: list[tuple[bytes, bytes]], seen: Seen) -> None:
        """An answer begins with ``status`` and ``headers`` (as they leave; ``seen`` read in them):
        its journal entry and the metrics learn of it."""
        self.status = status
        entry, metrics = self.entry, self.metrics
        if entry is not None:
            if seen.seed is not None:
                entry.seed = int(seen.seed)
            if seen.retry_after is not None:
                entry.retry_after = float(seen.retry_after)
        if metrics is not None:
            if seen.faults is not None:
                self.faulted = True
                metrics.count_faults(self.endpoint, seen.faults)
            if seen.stream:
                metrics.count_stream(self.endpoint, self.profile)
        if self.copy is not None:
            self.copy.status, self.copy.headers = status, headers
        if entry is not None:
            entry.status = status
            entry.answering(headers, seen.text)

    async def passing(self, chunk: bytes, last: bool) -> None:
        """A piece of the body is about to leave (``last``: the body's end)."""
        if self.copy is not None:
            self.copy.bodies.append((chunk, not last))
        entry = self.entry
        if entry is not None:
            entry.bytes += len(chunk)
            entry.answered(chunk)
            if last:
                if entry.ended == "pending":
                    entry.ended = "done"  # a stream's writer says how it ended before this
                if self.last is not None and not self.pushed:
                    self.pushed = True
                    await self.last()
        if last:
            # Counted before the last byte goes out, so a client that has its answer and
            # then scrapes always sees it counted.
            self.count()

    async def out(self, message: Message) -> None:
        """``message`` to the client (a write that fails is a client gone, in the journal too)."""
        try:
            await self.inner(message)
        except OSError:
            if self.entry is not None:
                self.entry.ended = "client_disconnect"
            raise


@dataclass(frozen=True, slots=True)
class Seen:
    """What the edge reads in an answer's headers, in one pass over them."""

    seed: bytes | None = None  # x-mockserver-seed (the journal's seed)
    retry_after: bytes | None = None
    faults: bytes | None = None  # x-mockserver-faults (counted in the metrics)
    text: bool = True  # a body the journal keeps the first bytes of (no content type: an error page, small)
    stream: bool = False  # an event stream
    stamped: bool = False  # it carries its x-request-id (a recording's own is kept)

    @classmethod
    def of(cls, headers: list[tuple[bytes, bytes]]) -> Seen:
        seed = retry_after = faults = None
        text, stream, stamped = True, False, False
        for key, value in headers:
            if key == h.SEED:
                seed = value
            elif key == b"retry-after":
                retry_after = value
            elif key == h.FAULTS:
                faults = value
            elif key == b"content-type":
                text = value.startswith(_TEXT)
                stream = value.startswith(b"text/event-stream")
            elif key.lower() == HEADER:
                stamped = True
        return cls(seed, retry_after, faults, text, stream, stamped)


# Answers the journal keeps the first bytes of (JSON, SSE, text), not audio or images.
_TEXT = (b"application/json", b"text/", b"application/x-ndjson", b"application/problem+json")
