"""One uvicorn configuration, for ``mockserver serve``, the pytest plugin's socket servers and the tests.

Keep-alive: an idle connection stays open :data:`KEEP_ALIVE` seconds, longer than clients keep
idle connections (httpx, so the OpenAI SDK: 5 s; aiohttp: 15 s; Go: 90 s). At uvicorn's
default, 5 s, both ends expire together, and a request sent on a connection the server is just
closing gets a TCP reset (an SDK with ``max_retries=0`` fails with ``APIConnectionError``).
The keep-alive timer uvicorn arms after every answer is a deadline the sweep below notices
(up to a tick late), not a timer handle armed and cancelled per request.

One write per answer: a response's head is held until its body's first write and leaves with
it (:class:`_Joined`), where uvicorn writes them apart — one system call and one segment for a
whole answer, not two. A stream's head leaves by the end of the loop's turn, whatever follows.

Bounded connections, because a test double is also pointed at by load and chaos tests:

* **A head timeout** (:data:`HEADER_TIMEOUT`): a connection that has not sent a whole request
  head within that many seconds of opening — or of starting its next request — is closed.
  uvicorn arms no timer until a first response, so without it a connection that sends nothing,
  or a head a byte at a time, is held for ever (3,000 of them were, in the issue that added it).
  Deadlines are noticed by one sweep of the open connections per tick (a quarter of the
  timeout, at most a second), not by a timer per request.
* **A bounded head** (:data:`MAX_HEAD_BYTES`): a request head (request line and headers)
  past 64 KiB is answered 431 in OpenAI's envelope and the connection closed, whichever parser
  runs — httptools has no limit of its own (one header streamed for 5 s was ~50 MB, and
  200 MB of RSS), and h11's (16 KiB, a bare 400) is raised above ours so ours answers.
* **A body timeout** (:data:`BODY_TIMEOUT`, ``--body-timeout``): a request whose body has not
  all arrived that many seconds after its head is answered 408 (when nothing of its answer was
  sent yet) and closed. The head timeout stops at the head: a body trickled a byte at a time
  was held for ever, and ``--max-connections`` such clients locked everyone out.
* **A cap on open connections** (:data:`MAX_CONNECTIONS`): a request on a connection beyond it
  is answered 503 in OpenAI's envelope, with ``retry-after`` and ``connection: close`` (so the
  client's retry comes on a fresh connection, if one is free). uvicorn's own
  ``limit_concurrency`` answers in plain text, which no SDK reads as an error body.
* **A bounded shutdown** (``timeout_graceful_shutdown``): answers in flight get that long, then
  are cancelled, so a SIGTERM never waits on a request whose client is long gone.

With ``workers`` > 1 (``mockserver serve --workers N``) the same configuration is handed to
uvicorn's supervisor, which pickles it into each spawned worker: the app goes as an import
string (a factory that rebuilds it from the settings, :mod:`mockserver.cli`), and the bounded
protocol class pickles as "rebuild with this timeout and cap" (:class:`_Rebuilt`), so every
worker bounds its connections exactly as one process does.
"""

from __future__ import annotations

import asyncio
import contextlib
import copyreg
import json
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from mockserver.errors import envelope

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "BODY_TIMEOUT",
    "HEADER_TIMEOUT",
    "KEEP_ALIVE",
    "MAX_CONNECTIONS",
    "MAX_HEAD_BYTES",
    "SHUTDOWN_TIMEOUT",
    "uvicorn_config",
]

KEEP_ALIVE = 120
HEADER_TIMEOUT = 10.0  # seconds to send a whole request head
BODY_TIMEOUT = 30.0  # seconds to send a whole request body, from the end of its head
MAX_HEAD_BYTES = 64 * 1024  # bytes of one request head (request line and headers): 431 beyond
MAX_CONNECTIONS = 1000  # open connections (and requests in flight) before a 503
SHUTDOWN_TIMEOUT = 1.0  # seconds answers in flight get on shutdown (so a busy server exits within 2 s)


def _overloaded(cap: int) -> bytes:
    message = f"This server is serving its limit of {cap} open connections (--max-connections); retry later."
    return json.dumps(envelope(message, "server_error", None, "overloaded")).encode()


def _raw_answer(status: int, reason: str, message: str, code: str) -> bytes:
    """A whole HTTP/1.1 answer that closes its connection, written to the transport directly:
    the request it answers never reached the app (or its body never came)."""
    body = json.dumps(envelope(message, "invalid_request_error", None, code)).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        "x-should-retry: false\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


_TOO_BIG = _raw_answer(
    431,
    "Request Header Fields Too Large",
    f"The request head (request line and headers) is over {MAX_HEAD_BYTES} bytes (limit MAX_HEAD_BYTES).",
    "request_header_fields_too_large",
)


class _Rebuilt(type):
    """The metaclass of the bounded protocols: a class made at run time has no importable name,
    so pickle (uvicorn sends its config to spawned workers by pickle) is told to rebuild it from
    its parameters instead (registered with :mod:`copyreg` below)."""

    parameters: tuple[float, int, float]


def _rebuild(cls: _Rebuilt) -> tuple[Any, tuple[float, int, float]]:
    return _http_protocol, cls.parameters


copyreg.pickle(_Rebuilt, _rebuild)


class _Joined:
    """The connection's transport as one response cycle writes to it: the answer's head is held
    until its body's first write and leaves with it, so a whole answer is one write (one system
    call, one segment), where uvicorn writes head and body apart. A head of a known length is
    held until its body comes or the answer is complete (a ``HEAD`` answer has no body); a
    stream's (no ``content-length``), which may wait long for its first frame, at most until the
    end of this turn of the event loop. Closing or aborting writes what is held first, so the
    bytes on the wire are the same, in the same order."""

    __slots__ = ("completed", "held", "loop", "raw", "started")

    def __init__(self, raw: asyncio.Transport, loop: asyncio.AbstractEventLoop, completed: Callable[[], None]) -> None:
        self.raw = raw
        self.loop = loop
        self.completed = completed  # the protocol's: the answer is complete
        self.held: bytes | None = None
        self.started = False  # the head was written (held or gone)

    def write(self, data: bytes) -> None:
        if not self.started:
            self.started = True
            self.held = data
            if _LENGTH not in data:  # a body of unknown length: a stream, which may wait
                self.loop.call_soon(self.flush)
            return
        held = self.held
        if held is not None:
            self.held = None
            data = held + data
        self.raw.write(data)

    def flush(self) -> None:
        held = self.held
        if held is not None:
            self.held = None
            with contextlib.suppress(RuntimeError):  # uvloop's word for a connection already gone
                self.raw.write(held)

    def complete(self) -> None:
        """The cycle's answer is complete: what is held leaves, then the protocol hears of it."""
        self.flush()
        self.completed()

    def close(self) -> None:
        self.flush()
        self.raw.close()

    def abort(self) -> None:
        self.flush()
        self.raw.abort()

    def is_closing(self) -> bool:
        return self.raw.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.raw.get_extra_info(name, default)


# How uvicorn writes a head's length (names lowercased, one header a line, no CR or LF in values).
_LENGTH = b"\r\ncontent-length: "


class _Idle:
    """The keep-alive timer uvicorn arms after each answer (and cancels at the next request), as
    the connection's own deadline, noticed by the sweep (see :class:`_LoopView`)."""

    __slots__ = ("callback", "deadline")

    def __init__(self) -> None:
        self.deadline = 0.0  # loop time (0: not armed)
        self.callback: Callable[[], object] | None = None

    def cancel(self) -> None:
        self.deadline = 0.0


class _LoopView:
    """The event loop as one bounded connection's protocol sees it: the loop's own ``create_task``
    and ``time``, and a ``call_later`` that arms the connection's idle deadline (:class:`_Idle`),
    which the sweep of open connections notices — the only timer uvicorn's protocol arms, once
    per answer, where a timer handle armed and cancelled cost more than the rest of the step."""

    __slots__ = ("create_task", "idle", "time")

    def __init__(self, loop: asyncio.AbstractEventLoop, idle: _Idle) -> None:
        self.create_task = loop.create_task
        self.time = loop.time
        self.idle = idle

    def call_later(self, delay: float, callback: Callable[[], object]) -> _Idle:
        idle = self.idle
        idle.deadline = self.time() + delay
        idle.callback = callback
        return idle


class _Sweeper:
    """The deadlines of one event loop's bounded connections, checked every ``tick`` seconds by
    one timer while any connection is open: a deadline is a float per connection (set and
    cleared per request for nothing), where a timer armed and cancelled per request cost a
    timer handle each on the path every keep-alive request takes."""

    _per_loop: ClassVar[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[float, _Sweeper]]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, tick: float) -> None:
        self.loop = loop
        self.tick = tick
        self.watched: set[Any] = set()  # the open connections (each has ``sweep(now)``)
        self.timer: asyncio.TimerHandle | None = None

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop, tick: float) -> _Sweeper:
        """The loop's sweeper for ``tick`` (one per loop and tick)."""
        mine = cls._per_loop.setdefault(loop, {})
        found = mine.get(tick)
        if found is None:
            found = mine[tick] = cls(loop, tick)
        return found

    def wake(self) -> None:
        """Sweep every tick from now on (until no connection is open)."""
        if self.timer is None:
            self.timer = self.loop.call_later(self.tick, self._sweep)

    def _sweep(self) -> None:
        self.timer = None
        now = self.loop.time()
        for connection in list(self.watched):
            connection.sweep(now)
        if self.watched:
            self.timer = self.loop.call_later(self.tick, self._sweep)


def _bounded_protocol(
    base: type[asyncio.Protocol], timeout: float, cap: int, body_timeout: float = BODY_TIMEOUT, per_task: bool = False
) -> type[asyncio.Protocol]:
    """``base`` (uvicorn's httptools or h11 protocol) with the head timeout and size, the body
    timeout and the connection cap. Both keep the request being answered in ``self.cycle``, a
    new object per request head parsed: a timer armed while no head is pending fires harmlessly
    if a new cycle began since.
    Both answer through ``self.app`` and count open connections in ``self.connections`` (shared
    by the server's connections), and both mark a request whose body is still coming with
    ``cycle.more_body`` (and one answered with ``cycle.response_started``)."""
    slow = _raw_answer(
        408,
        "Request Timeout",
        f"The request body did not arrive within {body_timeout:g} seconds of its head (--body-timeout).",
        "request_timeout",
    )
    refusal = _overloaded(cap)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(refusal)).encode()),
        (b"retry-after", b"1"),
        (b"x-should-retry", b"true"),
        (b"connection", b"close"),
    ]

    async def refuse(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": refusal})

    tick = max(0.05, min(1.0, timeout / 4, body_timeout / 4))  # how late a deadline may be noticed

    class Bounded(base, metaclass=_Rebuilt):  # type: ignore[valid-type,misc]
        parameters = (timeout, cap, body_timeout)
        _head_deadline = 0.0  # loop time by which the pending head must be whole (0: none pending)
        _armed_for: object = None  # the cycle current when the head deadline was set
        _head_bytes = 0  # bytes received since the head now pending began
        _tail = b""  # the last bytes of them: a blank line may straddle two reads
        _body_deadline = 0.0  # loop time by which the body of _body_for must be whole (0: none)
        _body_for: Any = None  # the cycle whose body the body deadline waits for
        _seen_cycle: Any = None  # the last cycle (request head) this connection parsed
        _sweeper: _Sweeper | None = None
        _joined_for: Any = None  # the last cycle given a joining transport
        _idle: _Idle | None = None  # the keep-alive deadline (httptools' protocol)

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._loop: asyncio.AbstractEventLoop = self.loop  # type: ignore[has-type]
            if per_task:
                # httptools' protocol arms its keep-alive timer through self.loop: as a deadline.
                self._idle = _Idle()
                self.loop = _LoopView(self._loop, self._idle)
                return  # the cap is checked as each request's task starts (below)
            app: ASGIApp = self.app  # type: ignore[has-type]
            connections = self.connections

            async def capped(scope: Scope, receive: Receive, send: Send) -> None:
                if scope["type"] == "http" and len(connections) > cap:
                    await refuse(scope, receive, send)
                    return
                await app(scope, receive, send)

            self.app = capped

        def _start_asgi_task(self, cycle: Any, app: ASGIApp) -> None:
            # httptools' protocol starts each request here: past the cap it is refused, with no
            # layer of ours around the app on every other request.
            super()._start_asgi_task(cycle, refuse if len(self.connections) > cap else app)

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            self._sweeper = _Sweeper.of(self._loop, tick)
            self._sweeper.watched.add(self)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self.transport.is_closing():
                return  # answered 431 or 408 already: the rest is not read
            cycle: Any = self.cycle
            if (
                not self._head_deadline
                and data
                and (cycle is None or (cycle.response_complete and not getattr(cycle, "more_body", False)))
            ):
                # The start of a next request on a kept-alive connection (not the rest of a body
                # the answer did not wait for: the parser discards that, and it is no head).
                self._arm()
            if self._head_deadline and self._head_too_big(data):
                self._head_deadline = 0.0
                self.transport.write(_TOO_BIG)
                self.transport.close()
                return
            super().data_received(data)
            cycle = self.cycle
            if self._head_deadline and cycle is not self._armed_for:
                self._head_deadline = 0.0  # a whole head came: the request is being answered
            if cycle is not self._seen_cycle:  # a new head was parsed
                self._seen_cycle = cycle
                if cycle is not None and getattr(cycle, "more_body", False):
                    self._body_for = cycle
                    self._body_deadline = self._loop.time() + body_timeout
            if self._body_deadline and (cycle is not self._body_for or not cycle.more_body):
                self._body_deadline = 0.0  # the whole body came

        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            cycle = self.cycle
            if cycle is not None and cycle is not self._joined_for:  # a new request (not an upgrade)
                self._joined_for = cycle
                joined = _Joined(self.transport, self._loop, cycle.on_response)
                cycle.transport = joined
                cycle.on_response = joined.complete

        def _head_too_big(self, data: bytes) -> bool:
            """Would the pending head, with ``data``, pass :data:`MAX_HEAD_BYTES`? Told before
            the parser buffers it (h11 would fail first, httptools never): the head ends at its
            blank line, and what follows it in the same read (a body) does not count."""
            if self._head_bytes + len(data) <= MAX_HEAD_BYTES:  # wherever the head ends, it fits
                self._head_bytes += len(data)
                self._tail = (self._tail + data[-3:])[-3:]
                return False
            seen = self._tail + data
            end = seen.find(b"\r\n\r\n")
            size = self._head_bytes + (len(data) if end < 0 else end + 4 - len(self._tail))
            self._head_bytes += len(data)
            self._tail = seen[-3:]
            return size > MAX_HEAD_BYTES

        def sweep(self, now: float) -> None:
            """Close the connection if a deadline has passed (the sweeper calls this every tick)."""
            idle = self._idle
            if idle is not None and idle.deadline and now >= idle.deadline:
                idle.deadline = 0.0
                if idle.callback is not None:
                    idle.callback()  # uvicorn's keep-alive timeout: it closes the connection
            if self._head_deadline and now >= self._head_deadline:
                self._head_deadline = 0.0
                if self.cycle is self._armed_for and not self.transport.is_closing():
                    self.transport.close()
            if self._body_deadline and now >= self._body_deadline:
                self._body_deadline = 0.0
                self._body_timed_out()

        def _body_timed_out(self) -> None:
            cycle: Any = self.cycle
            if cycle is not self._body_for or cycle is None or not cycle.more_body or self.transport.is_closing():
                return
            if not cycle.response_started:
                self.transport.write(slow)
            self.transport.close()  # the app's receive() gets http.disconnect

        def connection_lost(self, exc: Exception | None) -> None:
            self._head_deadline = self._body_deadline = 0.0
            if self._sweeper is not None:
                self._sweeper.watched.discard(self)
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._armed_for = self.cycle
            self._head_bytes, self._tail = 0, b""
            self._head_deadline = self._loop.time() + timeout
            assert self._sweeper is not None
            self._sweeper.wake()

    Bounded.__name__ = Bounded.__qualname__ = f"Bounded{base.__name__}"
    return Bounded


def _http_protocol(timeout: float, cap: int, body_timeout: float = BODY_TIMEOUT) -> type[asyncio.Protocol]:
    """The HTTP protocol uvicorn's ``http="auto"`` picks (httptools when installed), bounded."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # pragma: no cover - httptools ships with uvicorn[standard]
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return _bounded_protocol(H11Protocol, timeout, cap, body_timeout)
    # httptools' protocol starts every request's task in one method: the cap is checked there.
    return _bounded_protocol(HttpToolsProtocol, timeout, cap, body_timeout, per_task=True)


def uvicorn_config(
    app: ASGIApp | str,
    host: str = "127.0.0.1",
    port: int = 0,
    log_level: str = "warning",
    *,
    header_timeout: float = HEADER_TIMEOUT,
    max_connections: int = MAX_CONNECTIONS,
    body_timeout: float = BODY_TIMEOUT,
    shutdown_timeout: float = SHUTDOWN_TIMEOUT,
    **overrides: Any,
) -> uvicorn.Config:
    """uvicorn's ``Config`` as every mockserver server runs: uvloop and httptools where they
    are installed, no access log (a test double answers thousands of calls), the lifespan on,
    the keep-alive and connection bounds above. ``overrides`` are the few things a caller must
    differ in (``workers`` with ``factory=True`` and an import string for ``app``: see above)."""
    import uvicorn

    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "log_level": log_level,
        "access_log": False,
        "loop": "auto",
        "http": _http_protocol(header_timeout, max_connections, body_timeout),
        # h11 (when it is the parser) stops at 16 KiB with a bare 400: above ours, ours answers.
        "h11_max_incomplete_event_size": MAX_HEAD_BYTES + 4096,
        "lifespan": "on",
        "timeout_keep_alive": KEEP_ALIVE,
        "timeout_graceful_shutdown": shutdown_timeout,
        **overrides,
    }
    return uvicorn.Config(app, **options)
