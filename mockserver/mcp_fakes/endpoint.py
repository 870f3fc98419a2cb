"""``/mcp`` and ``/mcp/{session}``: the SDK's Streamable HTTP app, behind one thin ASGI layer.

The layer does what the SDK cannot know: whose session a message is (the path's, else
``x-mockserver-session``), the transport's MUSTs that depend on this server (a foreign
``Origin`` refused with 403; an ``MCP-Protocol-Version`` it does not speak refused with 400, and
the ``mcp`` 2.x client's ``server/discover`` probe answered "method not found" so that it falls
back to the ``initialize`` handshake), the journal (every POSTed JSON-RPC message, ``kind:
"mcp"``, beside the model's calls) and the ``mcp.*`` faults (:mod:`mockserver.mcp_fakes.faults`).

The SDK's server is built and its session manager started on the first MCP message, never at
start-up: neither the server's start nor the generation endpoints pay for it.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from starlette.types import Message as AsgiMessage
from starlette.types import Receive, Scope, Send

from mockserver.faults.catalogue import Fault
from mockserver.faults.journal import Journal
from mockserver.faults.rules import RuleBook
from mockserver.mcp_fakes.cassette import Cassettes
from mockserver.mcp_fakes.faults import McpFaults
from mockserver.mcp_fakes.store import McpStore
from mockserver.state.sync import Refresh
from mockserver.wire import headers as h
from mockserver.wire.scope import BODY_KEY

__all__ = ["ROOT", "McpEndpoint"]

ROOT = "/mcp"
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
METHOD_NOT_FOUND = -32601
INVALID_REQUEST = -32600


def rpc_error(
    status: int, code: int, message: str, rpc_id: Any = None, headers: Mapping[str, str] | None = None
) -> Any:
    """A JSON-RPC error as an ASGI response (the SDK's own shape for what it refuses)."""
    from starlette.responses import Response

    body = {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": message}}
    return Response(json.dumps(body), status_code=status, media_type="application/json", headers=dict(headers or {}))


class McpEndpoint:
    """The ASGI app the route table mounts at ``/mcp`` (see the module docstring)."""

    def __init__(
        self,
        store: McpStore,
        *,
        journal: Journal,
        rules: RuleBook,
        refresh: Refresh | None = None,
        seed: int = 0,
        time_scale: float = 1.0,
        allow_hosts: frozenset[str] = frozenset(),
        cassettes: str = "",
    ) -> None:
        self.store = store
        self.allow_hosts = allow_hosts  # what a Responses mcp tool (or a recording) may call besides loopback
        self.cassettes = Cassettes(cassettes)  # where recorded MCP servers are kept (--cassettes)
        self.journal = journal
        self.refresh = refresh
        self.seed = seed
        self.faults = McpFaults(rules, seed, time_scale)
        self._manager: Any = None  # the SDK's StreamableHTTPSessionManager, once started
        self._lock = asyncio.Lock()
        self._stop: asyncio.Event | None = None
        self._runner: asyncio.Task[None] | None = None

    async def _started(self) -> Any:
        if self._manager is not None:
            return self._manager
        async with self._lock:
            if self._manager is None:
                from mockserver.mcp_fakes.relay import Relay
                from mockserver.mcp_fakes.server import build

                manager = build(self.store, self.seed, Relay(self.store, self.cassettes))
                ready, stop = asyncio.Event(), asyncio.Event()

                async def run() -> None:
                    async with manager.run():
                        ready.set()
                        await stop.wait()

                # A fresh context: the sessions must not keep the first request's (its id, its metrics labels).
                runner = asyncio.create_task(run(), name="mcp-sessions", context=contextvars.Context())
                self._stop, self._runner = stop, runner
                await ready.wait()
                self._manager = manager
        return self._manager

    async def close(self) -> None:
        """End the open MCP sessions (the app's shutdown)."""
        await self.store.close()
        if self._runner is not None and self._stop is not None:
            self._stop.set()
            await self._runner
            self._runner = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        rest = path[len(ROOT) :].strip("/")
        if not path.startswith(ROOT) or (path[len(ROOT) :][:1] not in ("", "/")) or "/" in rest:
            await rpc_error(404, INVALID_REQUEST, f"Not found: {path} (MCP is served at /mcp and /mcp/{{session}}).")(
                scope, receive, send
            )
            return
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        given = h.header(headers, h.SESSION) or None
        session = unquote(rest) if rest else given
        if rest and given is not None and given != session:
            message = f"The session is given twice and differs: {path} and {h.name(h.SESSION)}: {given!r}."
            await rpc_error(400, INVALID_REQUEST, message)(scope, receive, send)
            return
        problem = _origin_problem(scope, headers)
        if problem is not None:
            await rpc_error(403, INVALID_REQUEST, problem)(scope, receive, send)
            return
        raw, parsed = scope.get(BODY_KEY, (None, None)) if scope["method"] == "POST" else (None, None)
        version = h.header(headers, b"mcp-protocol-version")
        if version is not None and not _spoken(version):
            await self._refuse_version(version, parsed)(scope, receive, send)
            return
        manager = await self._started()
        if scope["method"] != "POST":  # the GET stream and DELETE: the SDK's alone
            await manager.handle_request(scope, receive, send)
            sid = h.header(headers, b"mcp-session-id")
            if scope["method"] == "DELETE" and sid is not None:
                self.store.forget(sid)  # the client ended it: no more list_changed for it
            return
        await self._message(manager, scope, receive, send, session, raw, parsed)

    def _refuse_version(self, version: str, parsed: Any) -> Any:
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

        rpc_id = parsed.get("id") if isinstance(parsed, dict) else None
        if isinstance(parsed, dict) and parsed.get("method") == "server/discover":
            # What a handshake-era server answers: the 2.x client then sends initialize.
            text = "Method not found: server/discover (this server speaks the initialize handshake)."
            return rpc_error(200, METHOD_NOT_FOUND, text, rpc_id)
        text = f"Unsupported MCP-Protocol-Version: {version!r} (supported: {', '.join(HANDSHAKE_PROTOCOL_VERSIONS)})."
        return rpc_error(400, INVALID_REQUEST, text, rpc_id)

    async def _message(
        self, manager: Any, scope: Scope, receive: Receive, send: Send, session: str | None, raw: Any, parsed: Any
    ) -> None:
        """One POSTed JSON-RPC message: journaled, its faults applied, then the SDK's answer."""
        from mockserver.mcp_fakes.server import MESSAGE_KEY, Message

        entry_id = await self.refresh.begin(True) if self.refresh is not None else 0
        entry = self.journal.open(
            time=time.time(),
            method="POST",
            path=scope["path"],
            session=session,
            retry_attempt=0,
            body=parsed,
            raw=raw,
            entry_id=entry_id,
            kind="mcp",
        )
        started = time.monotonic()
        status: list[int] = []

        async def sending(message: AsgiMessage) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            elif message["type"] == "http.response.body":
                entry.bytes += len(message.get("body", b""))
            await send(message)

        try:
            asked = _header_faults(scope)
            if isinstance(asked, str):
                await rpc_error(400, INVALID_REQUEST, asked, _rpc_id(parsed))(scope, receive, sending)
                return
            plan = await self.faults.decide(parsed, session, asked)
            entry.faults.extend(f.render() for f in plan.applied)
            scope[MESSAGE_KEY] = Message(session, failed=plan.tool_error)
            await self.faults.delay(plan)
            if plan.drop:
                await _drop(manager, scope)
            if plan.error_code is not None:
                answer = f"The mcp.protocol_error fault: JSON-RPC error {plan.error_code}."
                faults = {h.name(h.FAULTS): "; ".join(entry.faults)}
                await rpc_error(200, plan.error_code, answer, _rpc_id(parsed), faults)(scope, receive, sending)
                return
            await manager.handle_request(scope, receive, sending)
            entry.ended = "done"
        except BaseException:
            entry.ended = "error"
            raise
        finally:
            entry.status = status[0] if status else None
            if entry.ended == "pending":
                entry.ended = "done"
            entry.duration = time.monotonic() - started
            await asyncio.shield(self.journal.close(entry))


def _rpc_id(parsed: Any) -> Any:
    return parsed.get("id") if isinstance(parsed, dict) else None


def _spoken(version: str) -> bool:
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    return version in HANDSHAKE_PROTOCOL_VERSIONS


def _header_faults(scope: Scope) -> tuple[Fault, ...] | str:
    """The ``x-mockserver-fault`` header's MCP faults (others are the model's), or why it is wrong."""
    from mockserver.faults.catalogue import FaultError, parse

    spec = h.header(scope["headers"], h.FAULT)
    if not spec:
        return ()
    try:
        return tuple(f for f in parse(spec) if f.kind == "mcp")
    except FaultError as exc:
        return f"Invalid {h.name(h.FAULT)} header: {exc}"


def _origin_problem(scope: Scope, headers: list[tuple[bytes, bytes]]) -> str | None:
    """Why the ``Origin`` is refused (DNS rebinding: the spec's MUST), or None: no Origin, a
    loopback one, or this server's own."""
    origin = h.header(headers, b"origin")
    if not origin:
        return None
    host = h.header(headers, b"host") or ""
    split = urlsplit(origin)
    if (split.hostname or "") in _LOOPBACK or split.netloc == host:
        return None
    return f"Origin {origin!r} is not allowed to call this MCP server (only loopback origins and its own)."


async def _drop(manager: Any, scope: Scope) -> None:
    """End the message's MCP session through the SDK, as a client's DELETE would."""
    sid = h.header(scope["headers"], b"mcp-session-id")
    if sid is None:
        return
    headers = [(k, v) for k, v in scope["headers"] if k in (b"host", b"mcp-session-id", b"mcp-protocol-version")]
    delete = {**scope, "method": "DELETE", "headers": headers}
    delete.pop(BODY_KEY, None)

    async def nothing() -> AsgiMessage:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def discard(message: AsgiMessage) -> None:
        return None

    await manager.handle_request(delete, nothing, discard)
