"""Failures inside a test server running in the test process, kept by the test they belong to.

:class:`SessionLayer` sits in front of the app. It notes exceptions that escaped the app and
cassette misses under the request's session (``x-mockserver-session``), for the plugin to
re-raise in the test that caused them, and lets them go on (the client still gets its 500
or 404). Attributing a request to a test is the other half of its job: a provider request
that names no session is the running test's, and gets that test's headers (session,
cassette, record mode) — so code that builds its own client, from ``OPENAI_BASE_URL`` say,
is still that test's.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mockserver.wire import headers as h
from mockserver.wire.scope import NOTE_KEY

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["Failure", "Failures", "SessionLayer"]

SESSION = h.SESSION


@dataclass(frozen=True)
class Failure:
    """Something that went wrong inside the server during a test."""

    session: str | None
    what: str
    error: BaseException | None = None


@dataclass
class Failures:
    """Failures by session, kept until the test they belong to takes them."""

    _kept: list[Failure] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, failure: Failure) -> None:
        with self._lock:
            self._kept.append(failure)

    def take(self, session: str) -> list[Failure]:
        with self._lock:
            mine = [f for f in self._kept if f.session == session]
            self._kept = [f for f in self._kept if f.session != session]
            return mine


class SessionLayer:
    """ASGI wrapper in front of a local test server's app (see the module's docstring)."""

    def __init__(self, app: ASGIApp, failures: Failures) -> None:
        self.app = app
        self.failures = failures
        self._running: list[tuple[bytes, bytes]] = []  # the running test's headers (one at a time here)

    @property
    def session(self) -> str | None:
        """The running test's session, if a test has claimed this server."""
        return next((v.decode("latin-1") for k, v in self._running if k == SESSION), None)

    def claim(self, headers: Mapping[str, str]) -> None:
        """Requests naming no session are, from now on, those of the test sending ``headers``."""
        self._running = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]

    def release(self, session: str) -> None:
        if self.session == session:
            self._running = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        session = next((v.decode("latin-1") for k, v in scope["headers"] if k == SESSION), None)
        if session is None and self._running and not scope["path"].startswith("/__mockserver/"):
            session = self.session
            given = {k for k, _ in scope["headers"]}
            scope = {**scope, "headers": [*scope["headers"], *((k, v) for k, v in self._running if k not in given)]}
        where = f"{scope['method']} {scope['path']}"
        status = 0
        held: Message | None = None
        scope = {**scope, NOTE_KEY: lambda what: self.failures.add(Failure(session, what))}  # a cassette miss

        async def watching(message: Message) -> None:
            nonlocal status, held
            if message["type"] == "http.response.start":
                status = message["status"]
            elif status >= 500 and message["type"] == "http.response.body" and not message.get("more_body"):
                # Starlette raises only after the 500 is sent: held back, the answer cannot reach
                # the test (which then checks for failures) before the failure is on record.
                held = message
                return
            await send(message)

        try:
            await self.app(scope, receive, watching)
        except Exception as exc:
            self.failures.add(Failure(session, f"{where} raised {type(exc).__name__}: {exc}", exc))
            raise
        finally:
            if held is not None:
                with contextlib.suppress(Exception):  # a client already gone; the app's error goes on
                    await send(held)
