"""The admin API under ``/__mockserver/``: faults, rules, scripted answers, the journal, the
clock, reset, and a re-scan of the cassette directory.

It never shares a path with a provider surface, answers loopback clients only unless
``--admin-remote``, and wants ``Authorization: Bearer <--admin-token>`` when one is set (the
admin rule, :func:`mockserver.http.auth.admin_problem`). Everything is JSON; errors use
OpenAI's envelope like the rest of the server. A ``session`` (query parameter,
``x-mockserver-session``, or a rule's ``session`` field) scopes rules, scripted answers, the
journal and reset to one test worker. Where a request gives it more than once, every place
must agree (400 naming ``session``), and a request that gives a session never makes a global
rule: a body's ``"session": null`` under a session header is scoped to the header's session.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mockserver.answers.scripted import RuleError
from mockserver.cassettes.library import Library
from mockserver.clock import VirtualClock
from mockserver.context import ServerContext
from mockserver.errors import InvalidRequest, NotFound
from mockserver.faults.catalogue import CATALOGUE
from mockserver.faults.journal import verdicts
from mockserver.faults.rules import Rule, RuleFieldError
from mockserver.http.auth import admin_problem
from mockserver.schemas.common import refuse_unencodable
from mockserver.state.conversations import ConversationStore
from mockserver.state.sync import CLOCK_KEY, shared_time
from mockserver.wire import headers as h
from mockserver.wire.json import dumps, parse_json

__all__ = ["routes"]

PREFIX = "/__mockserver"

Handler = Callable[[Request, ServerContext], Awaitable[Any]]


def _admin(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        ctx: ServerContext = request.app.state.ctx
        client = request.client.host if request.client is not None else None
        problem = admin_problem(ctx.admin, client, request.headers.raw, "The admin API")
        if problem is not None:
            raise problem
        body = await handler(request, ctx)
        return Response(body if isinstance(body, bytes) else dumps(body), media_type="application/json")

    return endpoint


def _session(request: Request) -> str | None:
    """The session of the query parameter or the header (400 naming ``session`` if they differ)."""
    query = request.query_params.get("session") or None
    header = request.headers.get(h.name(h.SESSION)) or None
    if query is not None and header is not None and query != header:
        raise InvalidRequest(
            f"The session is given twice and differs: ?session={query!r}, {h.name(h.SESSION)}: {header!r}.",
            param="session",
        )
    return query or header


def _scoped(item: Mapping[str, Any], session: str | None) -> dict[str, Any]:
    """A rule as sent, scoped to the request's ``session``: a rule naming another session is a
    400 naming ``session``, and one naming none (absent or null) gets the request's, so a
    session-scoped request can never make a global rule."""
    data = dict(item)
    own = data.get("session")
    if session is not None:
        if own is not None and own != session:
            raise InvalidRequest(
                f"The rule's session {own!r} differs from the request's session {session!r} "
                f"({h.name(h.SESSION)} or ?session=).",
                param="session",
            )
        data["session"] = session
    return data


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    data = parse_json(raw) if raw.strip() else {}
    refuse_unencodable(data, "")  # a lone surrogate is no text any state engine can keep: 400
    return data


async def faults(request: Request, ctx: ServerContext) -> Any:
    """GET: the catalogue and the defaults. POST ``{"faults": spec}``: a rule for every request
    (of the session). DELETE: drop the session's rules (all rules without a session)."""
    rules = ctx.chaos.rules
    if request.method == "POST":
        data = _scoped(await _body(request), _session(request))
        return await _added(rules.aadd, {"faults": data.get("faults"), "session": data.get("session")})
    if request.method == "DELETE":
        await rules.aclear(_session(request))
        return {"cleared": True}
    return {
        "defaults": [f.render() for f in rules.defaults],
        "catalogue": [
            {"name": name, "kind": e.kind, "doc": e.doc, "params": dict(e.defaults)} for name, e in CATALOGUE.items()
        ],
    }


async def _added(add: Callable[[dict[str, Any]], Awaitable[Rule]], data: dict[str, Any]) -> Any:
    try:
        return (await add({k: v for k, v in data.items() if v is not None})).to_json()
    except RuleFieldError as exc:
        raise InvalidRequest(str(exc), param=exc.field) from None


async def rules(request: Request, ctx: ServerContext) -> Any:
    """GET: the rules (of the session). POST a rule. DELETE: drop the session's rules."""
    book = ctx.chaos.rules
    if request.method == "POST":
        return await _added(book.aadd, _scoped(await _body(request), _session(request)))
    if request.method == "DELETE":
        await book.aclear(_session(request))
        return {"cleared": True}
    return {"rules": [r.to_json() for r in await book.alist(_session(request))]}


async def rule(request: Request, ctx: ServerContext) -> Any:
    """DELETE /rules/{id}."""
    rule_id = int(request.path_params["rule_id"])
    if not await ctx.chaos.rules.aremove(rule_id):
        raise NotFound(f"No rule {rule_id}.")
    return {"deleted": rule_id}


async def answers(request: Request, ctx: ServerContext) -> Any:
    """GET: the scripted rules (of the session). POST a rule, a list of them or ``{"rules": [...]}``,
    all or none; the session scopes those naming none. DELETE: drop the session's rules (every
    rule but the ``--rules`` file's, without a session)."""
    script, session = ctx.script, _session(request)
    if request.method == "POST":
        items = [_scoped(i, session) if isinstance(i, Mapping) else i for i in await _rule_list(request)]
        try:
            added = await script.aextend(items, session)
        except RuleError as exc:
            raise InvalidRequest(str(exc), param=exc.field) from None
        return {"rules": [r.to_json() for r in added]}
    if request.method == "DELETE":
        await script.aclear(session)
        return {"cleared": True}
    return {"rules": [r.to_json() for r in await script.arules(session)]}


async def _rule_list(request: Request) -> list[Any]:
    raw = await request.body()
    if raw.lstrip().startswith(b"["):
        try:
            items = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            pass  # parse_json answers OpenAI's 400 for a body that is not JSON
        else:
            refuse_unencodable(items, "")
            return list(items)
    data = parse_json(raw)
    refuse_unencodable(data, "")
    return list(data["rules"]) if list(data) == ["rules"] and isinstance(data["rules"], list) else [data]


async def answer(request: Request, ctx: ServerContext) -> Any:
    """DELETE /answers/{id}."""
    rule_id = int(request.path_params["rule_id"])
    if not await ctx.script.aremove(rule_id):
        raise NotFound(f"No scripted rule {rule_id}.")
    return {"deleted": rule_id}


async def journal(request: Request, ctx: ServerContext) -> Any:
    """GET: the entries (of the session) and verdicts on its retries. DELETE: clear them."""
    session = _session(request)
    if request.method == "DELETE":
        await ctx.chaos.journal.aclear(session)
        return {"cleared": True}
    entries = await ctx.chaos.journal.aentries(session)
    # Read and written in a thread: the journal keeps bodies as bytes, read when asked for,
    # and thousands of big ones would hold the event loop for seconds.
    return await asyncio.to_thread(
        lambda: dumps({"entries": [e.to_json() for e in entries], "verdicts": verdicts(entries)})
    )


async def clock(request: Request, ctx: ServerContext) -> Any:
    """GET: the server's time. POST ``{"advance": seconds}`` or ``{"set": epoch}`` (virtual clock only)."""
    if request.method == "POST":
        if not isinstance(ctx.clock, VirtualClock):
            raise InvalidRequest("The server runs on real time; start it with --frozen-time to step its clock.")
        data = await _body(request)
        advance, at = data.get("advance"), data.get("set")
        if ctx.refresh is not None:
            await ctx.refresh.sync()  # a shared clock: advance from where the fleet's stands
        forward = isinstance(advance, int | float) and not isinstance(advance, bool) and advance >= 0
        given = advance if forward else at
        if not isinstance(given, int | float) or isinstance(given, bool):
            raise InvalidRequest('Send {"advance": seconds ≥ 0} or {"set": epoch seconds}.', param="advance")
        value = float(given)
        if not ctx.state.shared:
            moved = ctx.clock.now() + value if forward else value
        elif forward:  # an atomic add: another process's advance at the same moment counts too
            moved = shared_time(ctx.clock.origin, await ctx.state.add(CLOCK_KEY, round(value * 1e9)))
        else:  # written before the local move: waiters elsewhere may read it
            offset = round((value - ctx.clock.origin) * 1e9)
            await ctx.state.put(CLOCK_KEY, str(offset).encode())
            moved = shared_time(ctx.clock.origin, offset)
        ctx.clock.at = moved
    elif ctx.refresh is not None:
        await ctx.refresh.sync()
    return {"now": ctx.clock.now(), "virtual": isinstance(ctx.clock, VirtualClock)}


async def reset(request: Request, ctx: ServerContext) -> Any:
    """Forget rules, scripted answers (but the ``--rules`` file's), MCP catalogs, the journal, cassette
    replay positions and rate-limit buckets (only the session's, with a session; the
    buckets are not per session). Without a session, stored responses, chat completions and
    conversations too (they belong to no session), so a rerun gets the ids and answers of a fresh server."""
    session = _session(request)
    await ctx.script.aclear(session)
    await ctx.chaos.areset(session)
    await request.app.state.mcp.store.clear(session)  # the fake MCP server's catalogs (not the --mcp file's)
    if session is None:
        await ctx.responses.clear()
        await ConversationStore(ctx.state).clear()
    return {"reset": True}


async def cassettes_reload(request: Request, ctx: ServerContext) -> Any:
    """POST: re-scan the cassette directory now, as a replay miss does, and say what it did:
    the cassettes ``loaded`` (new or changed) and ``removed``, every file ``skipped`` (no
    cassette) and ``broken`` (a cassette that does not load), with why, and the totals."""
    library = _library(ctx)
    if library is None:
        raise InvalidRequest("This server has no cassettes: start it with --cassettes DIR.")
    return (await library.refresh()).to_json()


def _library(ctx: ServerContext) -> Library | None:
    """The cassette library the chain's replay (or record) backend shares, if it has one."""
    from mockserver.backends.record import RecordBackend  # vcrpy and httpx: only with cassettes
    from mockserver.backends.replay import ReplayBackend

    for name in ("replay", "record"):
        backend = ctx.chain.get(name)
        if isinstance(backend, ReplayBackend | RecordBackend):
            return backend.library
    return None


def routes() -> list[BaseRoute]:
    both = ["GET", "POST", "DELETE"]
    return [
        Route(f"{PREFIX}/faults", _admin(faults), methods=both),
        Route(f"{PREFIX}/rules", _admin(rules), methods=both),
        Route(PREFIX + "/rules/{rule_id:int}", _admin(rule), methods=["DELETE"]),
        Route(f"{PREFIX}/answers", _admin(answers), methods=both),
        Route(PREFIX + "/answers/{rule_id:int}", _admin(answer), methods=["DELETE"]),
        Route(f"{PREFIX}/journal", _admin(journal), methods=["GET", "DELETE"]),
        Route(f"{PREFIX}/clock", _admin(clock), methods=["GET", "POST"]),
        Route(f"{PREFIX}/reset", _admin(reset), methods=["POST"]),
        Route(f"{PREFIX}/cassettes/reload", _admin(cassettes_reload), methods=["POST"]),
    ]
