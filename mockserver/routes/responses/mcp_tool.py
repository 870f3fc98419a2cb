"""The Responses API's ``mcp`` tool: the answer lists an MCP server's tools, calls one, then the
model's message follows — or, when the call needs approval, the answer ends with an
``mcp_approval_request`` that a later request approves (or denies) with an
``mcp_approval_response`` and ``previous_response_id``.

The MCP traffic is real: the server's own ``/mcp`` or any MCP server the test runs, on hosts the
server allows (:mod:`mockserver.mcp_fakes.remote`), through the official ``mcp`` client. Which
tool is called is decided like the model's tool choice, deterministically: the allowed tool the
input names, else the first; its arguments are drawn from its ``inputSchema`` with the request's
seed. The items come first in ``output`` (and in the stream: ``response.mcp_list_tools.*``,
``response.mcp_call.*``, ``response.mcp_call_arguments.*``), the model's items after them
(:class:`McpNarrator` shifts their ``output_index``); the Responses narrator is not changed.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any

from mockserver.errors import InvalidRequest
from mockserver.lifecycle.runs import Narrator, Status
from mockserver.mcp_fakes.remote import McpSession, RemoteFailure, open_session
from mockserver.mcp_fakes.tool_use import Server
from mockserver.mcp_fakes.tool_use import arguments as _arguments
from mockserver.mcp_fakes.tool_use import call as _call
from mockserver.mcp_fakes.tool_use import choose as _choose
from mockserver.mcp_fakes.tool_use import invalid as _invalid
from mockserver.mcp_fakes.tool_use import servers as _servers
from mockserver.routes.handler import Opened, Prepared
from mockserver.spine import seeding
from mockserver.spine.backend import aclose
from mockserver.spine.events import Event
from mockserver.wire import headers as h
from mockserver.wire.json import Json

__all__ = ["Lead", "McpNarrator", "lead", "narrating", "opening"]


@dataclass(frozen=True, slots=True)
class Lead:
    """The MCP items an answer opens with; ``pending``: it ends with an approval request."""

    items: tuple[Json, ...]
    pending: bool = False


def _text(data: Json) -> str:
    """What the input says, for choosing the tool it names."""
    given = data.get("input")
    return given if isinstance(given, str) else json.dumps(given, ensure_ascii=False)


async def lead(prepared: Prepared, allowed_hosts: frozenset[str]) -> Lead | None:
    """The MCP items the answer opens with (None: the request offers no ``mcp`` tool)."""
    data, gen = prepared.data, prepared.call.gen
    tools = data.get("tools")
    session = h.header(prepared.request.scope["headers"], h.SESSION) or None
    servers = _servers(tools if isinstance(tools, list) else [], allowed_hosts, session)
    if not servers:
        return None
    salt = gen.canonical

    def ident(prefix: str, *parts: object) -> str:
        return seeding.make_id(prefix, salt + repr(parts).encode(), gen.seed)

    answered = await _approval_answered(prepared, servers)
    if answered is not None:
        return answered
    items: list[Json] = []
    listed: list[tuple[Server, list[Json]]] = []
    async with contextlib.AsyncExitStack() as stack:  # each server's session stays open for the call
        sessions: dict[int, McpSession] = {}
        for server in servers:
            item: Json = {"id": ident("mcpl_", server.label), "type": "mcp_list_tools", "server_label": server.label}
            try:
                sessions[server.index] = await stack.enter_async_context(open_session(server.url, server.headers))
                tools_of = await sessions[server.index].list_tools()
            except RemoteFailure as failure:
                items.append({**item, "tools": [], "error": failure.text})
                continue
            kept = [t for t in tools_of if server.allowed is None or t["name"] in server.allowed]
            items.append({**item, "tools": kept, "error": None})
            listed.append((server, kept))
        chosen = _choose(listed, _text(data))
        if chosen is None:
            return Lead(tuple(items))
        server, tool = chosen
        name, arguments = str(tool["name"]), _arguments(tool, gen.seed)
        head: Json = {"server_label": server.label, "name": name, "arguments": arguments}
        if server.needs_approval(name):
            request = {"id": ident("mcpr_", server.label, name), "type": "mcp_approval_request", **head}
            return Lead((*items, request), pending=True)
        call = {"id": ident("mcp_", server.label, name), "type": "mcp_call", **head, "approval_request_id": None}
        return Lead((*items, await _call(server, name, arguments, call, sessions[server.index])))


async def _approval_answered(prepared: Prepared, servers: list[Server]) -> Lead | None:
    """An ``mcp_approval_response`` in the input: the approved call (or, denied, none)."""
    raw = prepared.data.get("input")
    given: list[Any] = raw if isinstance(raw, list) else []
    answers = [
        (k, item)
        for k, item in enumerate(given)
        if isinstance(item, dict) and item.get("type") == "mcp_approval_response"
    ]
    if not answers:
        return None
    k, answer = answers[-1]
    asked = [item for item in given if isinstance(item, dict) and item.get("type") == "mcp_approval_request"]
    previous = prepared.data.get("previous_response_id")
    if isinstance(previous, str):
        record = await prepared.ctx.responses.get(previous, param="previous_response_id")
        asked += [o for o in record.response.get("output") or [] if o.get("type") == "mcp_approval_request"]
    wanted = answer.get("approval_request_id")
    request = next((r for r in asked if r.get("id") == wanted), None)
    if request is None:
        raise _invalid(f"input[{k}].approval_request_id", f"no mcp_approval_request {wanted!r} in this conversation.")
    if not answer.get("approve"):
        return Lead(())  # denied: no call, the model answers
    server = next((s for s in servers if s.label == request.get("server_label")), None)
    if server is None:
        raise _invalid("tools", f"the approved call's server {request.get('server_label')!r} is not among the tools.")
    gen = prepared.call.gen
    call: Json = {
        "id": seeding.make_id("mcp_", gen.canonical + str(wanted).encode(), gen.seed),
        "type": "mcp_call",
        "server_label": server.label,
        "name": request["name"],
        "arguments": request["arguments"],
        "approval_request_id": wanted,
    }
    return Lead((await _call(server, str(request["name"]), str(request["arguments"]), call),))


def _events_of(item: Json, index: int) -> list[Json]:
    """The stream events of one finished MCP item at ``index``."""
    where = {"item_id": item["id"], "output_index": index}
    kind = item["type"]
    if kind == "mcp_list_tools":
        opening = {**item, "tools": [], "error": None}
        ended = "failed" if item.get("error") else "completed"
        middle = [
            {"type": "response.mcp_list_tools.in_progress", **where},
            {"type": f"response.mcp_list_tools.{ended}", **where},
        ]
    elif kind == "mcp_call":
        opening = {**item, "arguments": "", "output": None, "error": None, "status": "in_progress"}
        middle = [
            {"type": "response.mcp_call.in_progress", **where},
            {"type": "response.mcp_call_arguments.delta", **where, "delta": item["arguments"]},
            {"type": "response.mcp_call_arguments.done", **where, "arguments": item["arguments"]},
            {"type": f"response.mcp_call.{item['status']}", **where},
        ]
    else:
        opening, middle = item, []
    return [
        {"type": "response.output_item.added", "output_index": index, "item": opening},
        *middle,
        {"type": "response.output_item.done", "output_index": index, "item": item},
    ]


class McpNarrator:
    """A Responses narrator with the MCP items first (see the module docstring)."""

    def __init__(self, inner: Narrator, opening: Lead) -> None:
        self.inner = inner
        self.opening = opening
        self._told = False

    def narrate(self, event: Event) -> list[Json]:
        events: list[Json] = []
        if not self._told:
            self._told = True
            for index, item in enumerate(self.opening.items):
                events += _events_of(item, index)
        made = self.inner.narrate(event)  # folded even when unsaid: the usage counts it
        if self.opening.pending:  # the answer ends with the approval request
            return events
        shift = len(self.opening.items)
        return events + [{**e, "output_index": e["output_index"] + shift} if "output_index" in e else e for e in made]

    def snapshot(self, status: Status, error: Json | None = None) -> Json:
        response = self.inner.snapshot(status, error)
        if self._told:
            own = [] if self.opening.pending else response["output"]
            response["output"] = [*self.opening.items, *own]
        return response

    def outcome(self) -> Status:
        return "completed" if self.opening.pending else self.inner.outcome()


async def opening(prepared: Prepared, opened: Opened) -> Lead | None:
    """:func:`lead` on the hosts the server allows (``--mcp-allow-host``); a refused request
    closes the model's answer already opened."""
    try:
        return await lead(prepared, prepared.request.app.state.mcp.allow_hosts)
    except InvalidRequest:
        if opened.rest is not None:
            await aclose(opened.rest)
        raise


def narrating(narrator: Narrator, found: Lead | None) -> Narrator:
    """``narrator``, with the MCP items first when there are any."""
    return narrator if found is None else McpNarrator(narrator, found)
