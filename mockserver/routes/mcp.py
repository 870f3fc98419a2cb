"""``/mcp`` (the fake MCP server, :mod:`mockserver.mcp_fakes`) and its admin API
``/__mockserver/mcp``: POST a catalog (tools, resources, prompts), GET what a session is offered,
DELETE a session's own definitions; ``/__mockserver/mcp/proxy`` records a real MCP server into a
cassette, or replays one. Errors name the field (``tools[0].inputSchema``)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from mockserver.context import ServerContext
from mockserver.errors import InvalidRequest
from mockserver.mcp_fakes.cassette import parse_proxy
from mockserver.mcp_fakes.endpoint import McpEndpoint
from mockserver.mcp_fakes.parse import CatalogError, parse_catalog
from mockserver.mcp_fakes.remote import host_problem
from mockserver.routes.admin import PREFIX, _admin, _body, _scoped, _session

__all__ = ["routes"]


class _Mounted:
    """The app's MCP endpoint (``app.state.mcp``), as an ASGI app for the router."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint: McpEndpoint = scope["app"].state.mcp
        await endpoint(scope, receive, send)


async def catalog(request: Request, ctx: ServerContext) -> Any:
    """GET: what the session is offered (its own over the global over the ``--mcp`` file's).
    POST ``{"tools", "resources", "prompts"}``: added over the session's own (a name again replaces
    it). DELETE: the session's own (without a session, every one but the file's)."""
    store = request.app.state.mcp.store
    session = _session(request)
    if request.method == "POST":
        data = _scoped(await _body(request), session)
        try:
            added = parse_catalog(data)
        except CatalogError as exc:
            raise InvalidRequest(str(exc), param=exc.field or None) from None
        await store.add(session, added)
    elif request.method == "DELETE":
        await store.clear(session)
        return {"cleared": True}
    return (await store.catalog(session)).to_json()


async def proxy(request: Request, ctx: ServerContext) -> Any:
    """POST ``{"url", "cassette", "mode": "record" | "replay"}``: the session's MCP messages are
    relayed to ``url`` and kept in the cassette, or answered from it. GET: what is set (or
    null). DELETE: answer from the catalog again."""
    endpoint: McpEndpoint = request.app.state.mcp
    session = _session(request)
    if request.method == "POST":
        if endpoint.cassettes.directory is None:
            raise InvalidRequest("This server has no cassettes: start it with --cassettes DIR.", param="cassette")
        try:
            found = parse_proxy(await _body(request), lambda url: host_problem(url, endpoint.allow_hosts))
        except ValueError as exc:
            field, message = exc.args
            raise InvalidRequest(message, param=field or None) from None
        await endpoint.store.set_proxy(session, found)
        return found.to_json()
    if request.method == "DELETE":
        await endpoint.store.set_proxy(session, None)
        return {"cleared": True}
    given = await endpoint.store.proxy_of(session)
    return given.to_json() if given is not None else None


def routes() -> list[BaseRoute]:
    return [
        Route("/mcp{rest:path}", _Mounted()),  # any method: the SDK answers 405 itself
        Route(f"{PREFIX}/mcp", _admin(catalog), methods=["GET", "POST", "DELETE"]),
        Route(f"{PREFIX}/mcp/proxy", _admin(proxy), methods=["GET", "POST", "DELETE"]),
    ]
