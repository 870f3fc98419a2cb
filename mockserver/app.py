"""``create_app(settings)``: the Starlette application.

Errors are mapped to OpenAI's envelope here and nowhere else: our own :class:`APIError`
tree, Starlette's 404/405, and — as a last resort — any other exception as a 500 whose body
says nothing of the traceback (the log keeps it).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Scope

from mockserver import __version__
from mockserver.answers.scripted import Script
from mockserver.backends import ModelOptions, Parts, build_chain
from mockserver.batches.desk import Batches
from mockserver.batches.inprocess import InProcess
from mockserver.cassettes.library import CassetteOptions, pace_of
from mockserver.cassettes.order import ReplayOrder
from mockserver.clock import Clock, SystemClock, VirtualClock
from mockserver.config import Settings
from mockserver.context import Chaos, Options, ServerContext
from mockserver.edge import Edge
from mockserver.engine import Engine
from mockserver.errors import APIError, ErrorStyle, InternalError, MethodNotAllowed, NotFound
from mockserver.faults.catalogue import CATALOGUE
from mockserver.faults.catalogue import parse as parse_faults
from mockserver.faults.journal import Journal
from mockserver.faults.latency import Timeline
from mockserver.faults.ratelimit import RateLimiter
from mockserver.faults.rules import RuleBook
from mockserver.files.store import FileStore
from mockserver.files.uploads import Uploads
from mockserver.gpt.tokenizer import ASSETS, Tokenizer
from mockserver.http.auth import Admin
from mockserver.http.limits import Limits
from mockserver.http.metrics import Metrics
from mockserver.http.request_id import HEADER as REQUEST_ID
from mockserver.http.request_id import request_id
from mockserver.lifecycle.runs import Lifecycle
from mockserver.mcp_fakes.endpoint import McpEndpoint
from mockserver.mcp_fakes.store import McpStore, load_file
from mockserver.media.vectors import MAX_INPUT_TOKENS
from mockserver.profiles import PROFILES, Models, profile_named
from mockserver.routes.batches import model_check
from mockserver.routes.table import routes
from mockserver.spine.backend import Model
from mockserver.state.open import open_state
from mockserver.state.sync import Bridge, Refresh
from mockserver.wire.json import dumps
from mockserver.wire.scope import NOTE_KEY

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
    note = request.scope.get(NOTE_KEY)
    if note is not None and exc.code == "cassette_miss":
        note(f"cassette miss on {request.method} {request.url.path}: {exc.message}")
    return error_response(exc, _style(request.scope))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    where = f"{request.method} {request.url.path}"
    style = _style(request.scope)
    if exc.status_code == 405:
        # Starlette names the methods the path takes in its Allow header (RFC 9110: a 405 must).
        allowed = {k: v for k, v in (exc.headers or {}).items() if k.lower() == "allow"}
        return error_response(MethodNotAllowed(f"Method not allowed ({where}).", headers=allowed), style)
    if exc.status_code == 404:
        return error_response(NotFound(f"Invalid URL ({where})"), style)
    return error_response(APIError(str(exc.detail)), style)


async def _unexpected(request: Request, exc: Exception) -> Response:
    problem: APIError
    if isinstance(exc, APIError):
        # Raised outside the routes (a middleware that reads shared state, say), so it skipped
        # _api_error: still its own answer — a StateUnavailable is a 503 with x-should-retry,
        # which the SDKs retry, not a 500. A warning, not a traceback: while Redis is down there
        # is one per request, and the message says all there is to say.
        log.warning("%s %s: %s", request.method, request.url.path, exc.message)
        problem = exc
    else:
        log.exception("unhandled error", exc_info=exc)
        problem = InternalError("The server had an error while processing your request.")
    response = error_response(problem, _style(request.scope))
    # Sent by Starlette's outermost layer, outside RequestId: the id is added here.
    given = request_id(request.scope)
    if given is not None:
        response.headers[REQUEST_ID.decode()] = given
    return response


# The errors a route's answer may raise, and who answers them (the edge calls the routes of
# fixed paths itself, with these; Starlette's exception layer, the rest).
_HANDLERS: dict[type[Exception], Callable[[Request, Exception], Awaitable[Response]]] = {
    APIError: _api_error,
    HTTPException: _http_error,
}


class _Application(Starlette):
    """Starlette with the edge outermost. Starlette puts its last-resort error layer outside every
    middleware, and it wraps ``send`` for every message of every answer; here it sits inside the
    edge, for the routes the edge does not call itself, and the edge answers an exception that
    reaches it as that layer would (:meth:`~mockserver.edge.gate.Edge.__call__`). Middleware a
    caller adds stays outside the edge, as it was."""

    edge: Callable[[ASGIApp], ASGIApp] | None = None

    def build_middleware_stack(self) -> ASGIApp:
        if self.edge is None:
            return super().build_middleware_stack()
        if self.user_middleware:
            # A caller's own middleware (a test's) keeps its place: outside the edge, under the
            # error layer, where Starlette puts what is added; the edge is the innermost of them.
            added = self.user_middleware
            self.user_middleware = [*added, Middleware(self.edge)]
            try:
                return super().build_middleware_stack()
            finally:
                self.user_middleware = added
        return self.edge(super().build_middleware_stack())


def _vocab_size(model: Model | None) -> int:
    """The model's vocabulary, read from its shipped config (no torch), unless the model says."""
    if model is not None and model.vocab_size is not None:
        return model.vocab_size
    config = json.loads((ASSETS / "config.json").read_text())
    return int(config["vocab_size"])


def _cassettes(settings: Settings) -> CassetteOptions | None:
    if not settings.cassettes:
        return None
    key = settings.upstream_api_key
    return CassetteOptions(
        directory=settings.cassettes,
        record_mode=settings.record_mode,
        cassette=settings.cassette,
        upstream=settings.upstream,
        upstream_key=key.get_secret_value() if key is not None else None,
        pace=pace_of(settings.replay_timing),
        ignore=tuple(settings.match_ignore),
    )


def create_app(
    settings: Settings | None = None, *, clock: Clock | None = None, backend: Model | None = None
) -> Starlette:
    """Build the app from ``settings`` — the one place they are read. ``clock`` and ``backend``
    (the model the chain's ``reference`` uses) are injectable, for tests."""
    settings = settings or Settings()
    if clock is None:
        clock = VirtualClock(settings.frozen_time) if settings.frozen_time is not None else SystemClock()
    names = settings.chain()
    limits = Limits(
        body_bytes=settings.max_body_bytes,
        json_depth=settings.max_json_depth,
        choices=settings.max_choices,
        list_entries=settings.max_list,
    )
    state = open_state(
        settings.state, clock, store=settings.store or None, capacity=settings.store_size, ttl=settings.store_ttl
    )
    bridge = Bridge(state)  # every subsystem keeps its truth in the state (shared by a fleet)
    chaos = Chaos(
        rules=RuleBook(parse_faults(settings.faults), bridge),
        journal=Journal(settings.journal_size, bridge),
        limiter=RateLimiter(clock, settings.rate_limit_rpm, settings.rate_limit_tpm, bridge),
        replay=ReplayOrder(bridge),
    )
    metrics = Metrics(version=__version__, backend=",".join(names), profile=settings.profile, faults=CATALOGUE)
    script = Script(bridge)
    if settings.rules:  # pinned: the file's rules outlive resets, like --faults (and stay local)
        script.load_file(settings.rules, pinned=True)
    virtual = clock if isinstance(clock, VirtualClock) else None
    refresh = Refresh(bridge, (script, chaos.rules), virtual)
    if virtual is not None and state.shared:
        virtual.on_listen = refresh.watch  # another process may move it while someone here waits
    windows = settings.model_windows()
    # Embedding inputs reach MAX_INPUT_TOKENS whatever the generation windows are.
    longest = max([settings.context_window, MAX_INPUT_TOKENS, *windows.values()])
    parts = Parts(
        script=script,
        replay_order=chaos.replay,
        model_options=ModelOptions(settings.model_threads, longest, settings.max_batch, settings.kernel),
        cassettes=_cassettes(settings),
        model=backend,
    )
    chain = build_chain(names, parts)
    model = parts.reference() if "reference" in names else None
    ctx = ServerContext(
        engine=Engine(chain, Timeline.parse(settings.latency), settings.time_scale, metrics.count_usage),
        chain=chain,
        clock=clock,
        profile=profile_named(settings.profile),
        chaos=chaos,
        responses=Lifecycle(
            state.records,
            clock,
            settings.responses_queue_time,
            settings.responses_tokens_per_second,
        ),
        options=Options(
            strict=settings.strict,
            vocab_size=_vocab_size(backend),
            models=Models(windows, settings.context_window, settings.reject_unknown_models),
            reasoning_models=tuple(settings.reasoning_models),
            limits=limits,
        ),
        seed=settings.seed,
        script=script,
        admin=Admin(settings.admin_token, settings.admin_remote),
        model=model,
        limits=limits,
        state=state,
        bridge=bridge,
        refresh=refresh,
    )

    # /mcp: the fake MCP server's catalogs live in the state with the rest (the --mcp file's pinned).
    mcp = McpEndpoint(
        McpStore(bridge, load_file(settings.mcp) if settings.mcp else None),
        journal=chaos.journal,
        rules=chaos.rules,
        refresh=refresh if state.shared else None,
        seed=settings.seed,
        time_scale=settings.time_scale,
        allow_hosts=frozenset(settings.mcp_allow_host),
        cassettes=settings.cassettes,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if model is not None:
            model.warm_up()  # load the model in the background; /health answers meanwhile
        # A state engine that cannot be reached stops start-up (StateUnavailable names it).
        await state.ping()
        bridge.loop = asyncio.get_running_loop()  # where sync callers (a test's thread) reach the state
        await refresh.sync()  # rules other processes added, and where a shared clock stands
        # Responses a killed server left running are failed before the first request can see
        # them (with a memory store there are none, and this returns at once).
        await ctx.responses.recover()
        await app.state.batches.start()  # batches a killed server left unfinished are resumed
        # What start-up made lives as long as the server: the garbage collector's full passes
        # leave it alone from here on (they walked it on every pass, a cost per request).
        Tokenizer.shipped()  # every answer reads it: made now, so it is frozen too
        gc.collect()
        gc.freeze()
        yield
        gc.unfreeze()
        await mcp.close()  # the open MCP sessions end first: their GET streams hold connections
        await app.state.batches.close()  # batch lines stop before the model they run on
        await ctx.responses.close()  # background runs stop before the model they run on
        await chain.aclose()
        if model is not None:
            model.close()
        await refresh.close()
        bridge.loop = None
        await state.close()  # after the runs that write to it (the Lifecycle closed the records)

    app = _Application(
        routes=routes(recorded=bool(set(names) & {"replay", "record"})),
        exception_handlers={**_HANDLERS, Exception: _unexpected},
        lifespan=lifespan,
    )
    app.state.ctx = ctx
    app.state.metrics = metrics
    # OpenAI's platform: files and uploads kept on the state; a batch's lines sent through this
    # very app, in process, so each is answered as the same request sent directly.
    files = FileStore(state, clock, settings.max_file_bytes)
    app.state.files = files
    app.state.uploads = Uploads(state, clock, files)
    app.state.batches = Batches(
        state,
        clock,
        files,
        InProcess(app),
        model_check(ctx),
        step=settings.batch_step_time,
        concurrency=settings.batch_concurrency,
    )
    app.state.mcp = mcp
    # One pass in front of every route, outermost: request id, prefix, metrics, body limits, the
    # recording guard, the fault injector (or a shared state's first look) and the bearer keys.
    app.edge = functools.partial(
        Edge,
        ctx=ctx,
        metrics=metrics,
        routes=app.routes,
        profiles=PROFILES,
        answer=_answer,
        handlers=_HANDLERS,
        unexpected=_unexpected,
        injector=settings.injector,
        recording=bool(settings.cassettes),
        keys=frozenset(settings.api_keys),
    )
    return app


def _answer(problem: APIError, scope: Scope) -> Response:
    return error_response(problem, _style(scope))
