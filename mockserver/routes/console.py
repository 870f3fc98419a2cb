"""The console's routes under ``/__mockserver/console``: the page, its two static files, and
the JSON and SSE it reads (rows a page at a time, one entry opened, a session's trajectory,
the server's state, the live feed).

Everything here answers under the admin rule (:func:`mockserver.http.auth.admin_problem`):
loopback clients only unless ``--admin-remote``, and the ``--admin-token`` when one is set —
as a header like the admin API, or as ``?token=`` (a browser opening the page, and its
``EventSource``, cannot send a header). The page then sends it as a header on every call it
makes. Resetting a session and downloading its journal are the admin API's own endpoints.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from mockserver.console import static
from mockserver.console.feed import PAGE, feed, page
from mockserver.console.overview import overview
from mockserver.console.view import FILTERS, Rows, detail, turn
from mockserver.context import ServerContext
from mockserver.errors import InvalidRequest, NotFound
from mockserver.faults.journal import Journal
from mockserver.http.auth import admin_problem
from mockserver.routes.admin import PREFIX, _library
from mockserver.wire import headers as h
from mockserver.wire.json import dumps

__all__ = ["routes"]

BASE = f"{PREFIX}/console"
# The page runs its own two files and nothing else: no inline script, no other origin.
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_ROWS: weakref.WeakKeyDictionary[Journal, Rows] = weakref.WeakKeyDictionary()

Endpoint = Callable[[Request, ServerContext], Awaitable[Response]]


def _guarded(handler: Endpoint) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        ctx: ServerContext = request.app.state.ctx
        client = request.client.host if request.client is not None else None
        headers = list(request.headers.raw)
        token = request.query_params.get("token")
        if token:
            headers.append((h.ADMIN_TOKEN, token.encode("utf-8")))
        problem = admin_problem(ctx.admin, client, headers, "The console")
        if problem is not None:
            raise problem
        response = await handler(request, ctx)
        response.headers["cache-control"] = "no-store"
        response.headers["x-content-type-options"] = "nosniff"
        return response

    return endpoint


def _json(data: Any) -> Response:
    return Response(dumps(data), media_type="application/json")


def _rows(journal: Journal) -> Rows:
    found = _ROWS.get(journal)
    if found is None:
        found = _ROWS[journal] = Rows()
    return found


def _int(request: Request, name: str, default: int | None) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidRequest(f"{name} must be an integer, not {raw!r}.", param=name) from None
    if value < 0:
        raise InvalidRequest(f"{name} must be 0 or more, not {value}.", param=name)
    return value


def _filters(request: Request) -> dict[str, str]:
    return {name: request.query_params.get(name, "") for name in FILTERS}


async def page_html(request: Request, ctx: ServerContext) -> Response:
    response = Response(static.file("console.html"), media_type="text/html; charset=utf-8")
    response.headers["content-security-policy"] = POLICY
    response.headers["referrer-policy"] = "no-referrer"
    return response


async def asset(request: Request, ctx: ServerContext) -> Response:
    name = request.path_params["name"]
    if name not in static.FILES:
        raise NotFound(f"No console file {name!r}.")
    return Response(static.file(name), media_type=static.FILES[name])


async def rows(request: Request, ctx: ServerContext) -> Response:
    limit = min(_int(request, "limit", PAGE) or PAGE, PAGE * 4)
    journal = ctx.chaos.journal
    return _json(await page(journal, _rows(journal), _filters(request), _int(request, "before", None), limit))


async def entry(request: Request, ctx: ServerContext) -> Response:
    wanted = int(request.path_params["entry_id"])
    found = next((e for e in await ctx.chaos.journal.anewer(wanted - 1) if e.id == wanted), None)
    if found is None:
        raise NotFound(f"No journal entry {wanted} (cleared, or pushed out of the journal).")
    return _json(detail(found))


async def trajectory(request: Request, ctx: ServerContext) -> Response:
    """A session's calls in order, oldest first, a page at a time (``after``: the last id shown)."""
    session = request.query_params.get("session") or ""
    if not session:
        raise InvalidRequest("Name the session whose trajectory to show: ?session=…", param="session")
    after = _int(request, "after", 0) or 0
    entries = await ctx.chaos.journal.anewer(after, session)
    shown = entries[:PAGE]
    return _json({"turns": [turn(e) for e in shown], "next": shown[-1].id if len(entries) > PAGE else None})


async def state(request: Request, ctx: ServerContext) -> Response:
    return _json(await overview(ctx, getattr(request.app.state, "metrics", None), _library(ctx)))


async def live(request: Request, ctx: ServerContext) -> Response:
    journal = ctx.chaos.journal
    frames = feed(journal, _rows(journal), _filters(request), _int(request, "after", 0) or 0)
    return StreamingResponse(
        frames, media_type="text/event-stream", headers={"cache-control": "no-cache", "x-accel-buffering": "no"}
    )


def routes() -> list[BaseRoute]:
    return [
        Route(BASE, _guarded(page_html), methods=["GET"]),
        Route(BASE + "/static/{name}", _guarded(asset), methods=["GET"]),
        Route(f"{BASE}/rows", _guarded(rows), methods=["GET"]),
        Route(BASE + "/entries/{entry_id:int}", _guarded(entry), methods=["GET"]),
        Route(f"{BASE}/trajectory", _guarded(trajectory), methods=["GET"]),
        Route(f"{BASE}/state", _guarded(state), methods=["GET"]),
        Route(f"{BASE}/feed", _guarded(live), methods=["GET"]),
    ]
