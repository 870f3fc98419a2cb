"""``create_app(settings)``: the Starlette application.

Errors are mapped to OpenAI's envelope here and nowhere else: our own :class:`APIError`
tree, Starlette's 404/405, and — as a last resort — any other exception as a 500 whose body
says nothing of the traceback (the log keeps it).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from mockserver import __version__
from mockserver.answers.script import Script
from mockserver.backends import load_backend
from mockserver.clock import Clock, SystemClock, VirtualClock
from mockserver.config import Settings
from mockserver.context import Chaos, ServerContext
from mockserver.errors import APIError, AuthenticationError, ErrorStyle, InternalError, MethodNotAllowed, NotFound
from mockserver.faults.catalogue import parse as parse_faults
from mockserver.faults.injector import FaultInjector
from mockserver.faults.journal import Journal
from mockserver.faults.latency import Timeline
from mockserver.faults.ratelimit import RateLimiter
from mockserver.faults.rules import RuleBook
from mockserver.http.metrics import CountingEngine, Metrics, MetricsLayer
from mockserver.http.prefix import ProfilePrefix
from mockserver.http.sse import dumps
from mockserver.profiles import PROFILES, profile_named
from mockserver.responses.lifecycle import Lifecycle
from mockserver.responses.store import open_store
from mockserver.routes import routes
from mockserver.spine.backend import Backend

__all__ = ["create_app"]

log = logging.getLogger("mockserver")


def error_response(exc: APIError, style: ErrorStyle = "openai") -> Response:
    return Response(dumps(exc.body(style)), status_code=exc.status, media_type="application/json", headers=exc.headers)


def _style(scope: Scope) -> ErrorStyle:
    """The error style of the profile answering this request."""
    app = scope.get("app")
    ctx: ServerContext | None = getattr(app.state, "ctx", None) if app is not None else None
    return ctx.profile_of(scope).error_style if ctx is not None else "openai"


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, APIError)
    return error_response(exc, _style(request.scope))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    where = f"{request.method} {request.url.path}"
    style = _style(request.scope)
    if exc.status_code == 405:
        return error_response(MethodNotAllowed(f"Method not allowed ({where})."), style)
    if exc.status_code == 404:
        return error_response(NotFound(f"Invalid URL ({where})"), style)
    return error_response(APIError(str(exc.detail)), style)


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error", exc_info=exc)
    problem = InternalError("The server had an error while processing your request.")
    return error_response(problem, _style(request.scope))


class BearerAuth:
    """401 unless the bearer token is one of ``keys`` (an empty set accepts anything)."""

    def __init__(self, app: ASGIApp, keys: frozenset[str], ctx: ServerContext) -> None:
        self.app = app
        self.keys = keys
        self.ctx = ctx

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.keys and scope["type"] == "http" and scope["path"].startswith("/v1/"):
            problem = self._problem(dict(scope["headers"]).get(b"authorization", b"").decode("latin-1"))
            if problem is not None:
                await error_response(problem, self.ctx.profile_of(scope).error_style)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _problem(self, header: str) -> AuthenticationError | None:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return AuthenticationError(
                "You didn't provide an API key. You need to provide your API key in an Authorization "
                "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                code="missing_api_key",
            )
        token = token.strip()
        if token not in self.keys:
            shown = token[:3] + "*" * 4 + token[-4:] if len(token) > 8 else "*" * 4
            return AuthenticationError(f"Incorrect API key provided: {shown}.", code="invalid_api_key")
        return None


def create_app(
    settings: Settings | None = None, *, clock: Clock | None = None, backend: Backend | None = None
) -> Starlette:
    """Build the app. ``clock`` and ``backend`` are injectable for tests."""
    settings = settings or Settings()
    if clock is None:
        clock = VirtualClock(settings.frozen_time) if settings.frozen_time is not None else SystemClock()
    chosen = backend if backend is not None else load_backend(settings)
    chaos = Chaos(
        rules=RuleBook(defaults=parse_faults(settings.faults)),
        journal=Journal(settings.journal_size),
        limiter=RateLimiter(clock, settings.rate_limit_rpm, settings.rate_limit_tpm),
    )
    metrics = Metrics(version=__version__, backend=settings.backend, profile=settings.profile)
    script = Script()
    if settings.rules:  # pinned: the file's rules outlive resets, like --faults
        script.load_file(settings.rules, pinned=True)
    ctx = ServerContext(
        settings=settings,
        engine=CountingEngine(metrics, chosen, Timeline.parse(settings.latency), settings.time_scale),
        clock=clock,
        profile=profile_named(settings.profile),
        chaos=chaos,
        vocab_size=getattr(chosen, "vocab_size", None),
        responses=Lifecycle(
            open_store(settings.store, clock, settings.store_size, settings.store_ttl),
            clock,
            settings.responses_queue_time,
            settings.responses_tokens_per_second,
        ),
        script=script,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        warm_up = getattr(chosen, "warm_up", None)
        if warm_up is not None:
            warm_up()  # load the model in the background; /health answers meanwhile
        yield
        if ctx.responses is not None:
            await ctx.responses.close()  # background runs stop before the model they run on
        close = getattr(chosen, "close", None)
        if close is not None:
            close()

    app = Starlette(
        routes=routes(),
        exception_handlers={APIError: _api_error, HTTPException: _http_error, Exception: _unexpected},
        lifespan=lifespan,
    )
    app.state.ctx = ctx
    app.state.metrics = metrics
    if settings.cassettes:  # innermost: recordings answer in place of the routes
        from mockserver.cassettes.layer import CassetteLayer  # httpx and vcrpy only when used

        app.add_middleware(CassetteLayer, settings=settings, replay=chaos.replay)
    if settings.api_keys:
        app.add_middleware(BearerAuth, keys=frozenset(settings.api_keys), ctx=ctx)
    if settings.injector:
        app.add_middleware(FaultInjector, ctx=ctx)  # before auth: a fault can stand in for any answer
    # Right inside the prefix layer (which only rewrites paths): it sees every request, as /v1/….
    app.add_middleware(MetricsLayer, metrics=metrics, routes=app.routes)
    app.add_middleware(ProfilePrefix, names=PROFILES)  # outermost: everything sees /v1/ paths
    return app
