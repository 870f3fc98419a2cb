"""The edge: every request passes it once, before any route, and its answer passes it back.

One pass, in this order (each step only where it applies, and set up at start-up):

0. a request asked before whose answer the edge remembers, and all it stood on stands, is
   answered as remembered: journaled and counted like any other, its bytes sent again
   (:mod:`mockserver.edge.repeats`); the answer of one it may remember is kept as it leaves;
1. the request's id starts hashing (:mod:`mockserver.http.request_id`);
2. its profile prefix is read (``/fireworks/v1/…`` → ``/v1/…`` as Fireworks; Azure's paths);
3. ``GET /metrics`` is answered; every other request is counted in the metrics;
4. its body is read against the limits and parsed once (413 / 400);
5. on provider paths (``/v1/…``): the recording headers are held to the admin rule (when
   cassettes are on), the fault injector journals the request, decides its faults, charges the
   rate limiter and answers an HTTP or transport fault itself (or, without the injector, a
   shared state gets the request's first look), then the bearer keys are checked (a fault can
   stand in for any answer, a missing key included);
6. the routes answer: a route of a fixed path (every generation endpoint) is called here
   directly, its errors answered by the app's handlers, as Starlette's router and exception
   layer would (two layers and a ``send`` wrapper less on the path test suites call most);
   any other request goes through Starlette's router.

``send`` is wrapped once for all of them (:class:`~mockserver.edge.exchange.Exchange`), and
``receive`` only to replay a body the edge has read. An error the edge answers itself is worded
as the request's profile words errors.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping

from starlette._utils import is_async_callable
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mockserver.context import ServerContext
from mockserver.edge.exchange import Copy, Exchange
from mockserver.edge.injection import Injection
from mockserver.edge.repeats import LARGEST, Key, Repeats, Reply
from mockserver.errors import APIError
from mockserver.http.auth import bearer_problem, recording_problem
from mockserver.http.body import read_body, replaying
from mockserver.http.gone import ClientGone
from mockserver.http.limits import framing, take_body
from mockserver.http.metrics import METHODS, OTHER, Endpoints, Metrics, measured, measuring
from mockserver.http.prefix import Prefixes, provider_path
from mockserver.http.request_id import Hash, begin, hashing
from mockserver.profiles import Profile
from mockserver.spine.repeat import Promise
from mockserver.state.base import StateUnavailable
from mockserver.wire.scope import BATCH_KEY, DEPLOYMENT, PROFILE_KEY, REPEAT_KEY, SYNCED_KEY

__all__ = ["Edge"]

Wording = Callable[[APIError, Scope], Response]  # an error as the request's profile words it
RouteCall = Callable[[Request], Awaitable[Response]]  # a route of a fixed path, called directly
ErrorHandler = Callable[[Request, Exception], Awaitable[Response]]


ADMIN = "/__mockserver/"


def _direct(routes: Iterable[BaseRoute]) -> dict[tuple[str, str], RouteCall]:
    """The routes of a fixed path, by ``(path, method)``: the first listed wins, as in the router."""
    table: dict[tuple[str, str], RouteCall] = {}
    for route in routes:
        if not isinstance(route, Route) or "{" in route.path or not is_async_callable(route.endpoint):
            continue
        for method in route.methods or ():
            table.setdefault((route.path, method), route.endpoint)
    return table


class Edge:
    """ASGI middleware: the one pass (see the module docstring). ``answer`` words an error as
    the request's profile does; ``injector``, ``recording`` and ``keys`` switch their steps on."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        ctx: ServerContext,
        metrics: Metrics,
        routes: Iterable[BaseRoute],
        profiles: Mapping[str, Profile],
        answer: Wording,
        handlers: Mapping[type[Exception], ErrorHandler] | None = None,
        unexpected: ErrorHandler | None = None,
        injector: bool = True,
        recording: bool = False,
        keys: frozenset[str] = frozenset(),
    ) -> None:
        self.app = app
        self.ctx = ctx
        self.metrics = metrics
        routes = list(routes)
        self.endpoints = Endpoints(routes)
        self.direct = _direct(routes) if handlers is not None else {}
        self.handlers = dict(handlers or {})
        self.unexpected = unexpected
        self.prefixes = Prefixes(profiles)
        self.answer = answer
        self.injection = Injection(ctx) if injector else None
        # Without the injector (which pays it), a shared state's first look is the edge's.
        self.first_look = ctx.refresh if not injector and ctx.state.shared else None
        self.recording = recording
        self.keys = keys
        # Answers remembered for requests asked again (see mockserver.edge.repeats): not on a
        # shared state (another process may change what answers), nor with latency (a repeat
        # would not wait). A recording backend makes no promise, so what it records is not kept.
        steady = not ctx.state.shared and ctx.engine.timeline.idle
        self.repeats = Repeats(ctx) if steady else None
        self.remembered = min(LARGEST, ctx.limits.body_bytes)  # the largest body answered as remembered

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        key: Key | None = None
        repeats = self.repeats
        if repeats is not None and scope["method"] == "POST" and BATCH_KEY not in scope and repeats.open():
            length, chunked = framing(scope["headers"])
            if not chunked and length and length <= self.remembered:
                raw = await read_body(receive)  # bounded by its length, under every limit
                if raw is not None:  # (else the long way finds the client gone)
                    key = repeats.key(scope, raw)
                    reply = repeats.get(key)
                    if reply is not None and self._may_repeat(scope):
                        await self._again(reply, raw, send)  # asked before, and all it stood on stands
                        return
                    receive = replaying(raw, receive)
        running = begin(scope)  # in the scope as sent: the error layer outside reads it there
        routed = self.prefixes.route(scope)
        scope = routed.scope
        path, method = scope["path"], scope["method"]
        if path == "/metrics" and method in ("GET", "HEAD"):
            await self.metrics.expose(scope, Exchange(send, running))
            return
        exchange = Exchange(send, running)
        if routed.problem is not None:
            await self.answer(routed.problem, scope)(scope, receive, exchange)
            return
        m = self.metrics
        profile: str = scope.get(PROFILE_KEY) or m.profile
        endpoint = self.endpoints.label(path)
        exchange.measure(m, endpoint, method if method in METHODS else OTHER, profile)
        token = measuring(endpoint, profile)
        deployment = DEPLOYMENT.set(routed.deployment) if routed.deployment is not None else None
        try:
            await self._serve(scope, receive, exchange, running, key)
        except Exception as exc:
            if not exchange.status:
                exchange.status = 500
                await self._last_resort(exc, scope, receive, exchange.inner)
            raise
        finally:
            if deployment is not None:
                DEPLOYMENT.reset(deployment)
            measured(token)
            if not exchange.faulted and exchange.applied:  # a transport fault sends no headers to read
                m.count_faults(endpoint, "; ".join(f.name for f in exchange.applied).encode())
            exchange.count()  # it raised, or sent no answer, or the client left mid-stream

    async def _last_resort(self, exc: Exception, scope: Scope, receive: Receive, send: Send) -> None:
        """The answer to an exception no handler took, before any answer began (a 500 that says
        nothing of the traceback: ``unexpected``), sent as Starlette's outermost error layer
        sends it: past the journal, whose entry the exception left unfinished ("error"). The
        exception is raised on after it, so the server logs it."""
        if self.unexpected is None:
            return
        response = await self.unexpected(Request(scope, receive), exc)
        await response(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Exchange, running: Hash, key: Key | None) -> None:
        limits = self.ctx.limits
        try:
            raw = await take_body(scope, hashing(running, receive), limits)
        except APIError as exc:  # too large, too deep, a number JSON cannot carry
            await self.answer(exc, scope)(scope, receive, send)
            return
        except ClientGone:  # the client left while sending it: nobody to answer
            return
        if raw is not None:
            receive = replaying(raw, receive)
        if not provider_path(scope["path"]):
            if self.repeats is not None and scope["method"] not in ("GET", "HEAD") and scope["path"].startswith(ADMIN):
                self.repeats.moved()  # an admin write: whatever it changed, no answer kept holds
            await self._route(scope, receive, send)
            return
        if key is None or self.repeats is None:
            await self._provider_path(scope, receive, send)
            return
        # A request the edge may remember the answer of: the handler says whether it may.
        promise = scope[REPEAT_KEY] = Promise()
        copy = send.copy = Copy()
        generation = self.repeats.generation  # an admin write meanwhile: the answer may be stale
        await self._provider_path(scope, receive, send)
        self.repeats.keep(key, promise, copy, send, generation)

    def _may_repeat(self, scope: Scope) -> bool:
        """Would the recording headers' rule let this request through (it reads the client's
        address, which the remembered request's key does not hold)? If not, it is answered
        the long way, which refuses it."""
        return not self.recording or recording_problem(self.ctx.admin, scope) is None

    async def _again(self, reply: Reply, raw: bytes, send: Send) -> None:
        """A request answered as remembered: journaled and counted as the long way would, and
        its bytes sent again (see :mod:`mockserver.edge.repeats`)."""
        exchange = Exchange(send, None)  # the headers carry their request id
        exchange.measure(self.metrics, reply.endpoint, reply.method, reply.profile)
        injection = self.injection
        entry = None
        if injection is not None:
            entry = exchange.entry = injection.open("POST", reply.path, raw, None, reply.session, reply.retry_attempt)
        token = measuring(reply.endpoint, reply.profile) if reply.promise.usage else None
        started = time.perf_counter()
        try:
            await reply.send(self.ctx, exchange)
        finally:
            if token is not None:
                measured(token)
            if injection is not None and entry is not None:
                entry.faults = []
                await injection.close(entry, started, reply.seen.stream)
            exchange.count()

    async def _provider_path(self, scope: Scope, receive: Receive, send: Exchange) -> None:
        """A provider request (``/v1/…``) with its body read: the recording rule, the faults,
        the keys, the routes."""
        if self.recording:
            problem = recording_problem(self.ctx.admin, scope)
            if problem is not None:
                await self.answer(problem, scope)(scope, receive, send)
                return
        if self.injection is not None:
            await self.injection(scope, receive, send, self._provider)
            return
        if self.first_look is not None and SYNCED_KEY not in scope:
            try:
                scope[SYNCED_KEY] = await self.first_look.begin(False)
            except StateUnavailable as exc:
                await self.answer(exc, scope)(scope, receive, send)
                return
        await self._provider(scope, receive, send)

    async def _provider(self, scope: Scope, receive: Receive, send: Exchange) -> None:
        """A provider request past the faults: the bearer keys, then the routes."""
        if self.keys:
            problem = bearer_problem(self.keys, scope)
            if problem is not None:
                await self.answer(problem, scope)(scope, receive, send)
                return
        await self._route(scope, receive, send)

    async def _route(self, scope: Scope, receive: Receive, send: Exchange) -> None:
        """The route's answer: called here when its path is fixed (see the module docstring)."""
        endpoint = self.direct.get((scope["path"], scope["method"]))
        if endpoint is None:
            await self.app(scope, receive, send)
            return
        scope["endpoint"] = endpoint
        request = Request(scope, receive, send)
        try:
            response = await endpoint(request)
            await response(scope, receive, send)
        except Exception as exc:
            handler = next((self.handlers[c] for c in type(exc).__mro__ if c in self.handlers), None)
            if handler is None:
                raise
            if send.status:  # the answer has begun: the error layer outside ends it
                raise RuntimeError("Caught handled exception, but response already started.") from exc
            await (await handler(request, exc))(scope, receive, send)
            exc.__traceback__ = None  # a reused exception would gather tracebacks
