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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mockserver.errors import InvalidRequest
from mockserver.lifecycle.runs import Narrator, Status
from mockserver.mcp_fakes.remote import McpSession, RemoteFailure, host_problem, open_session
from mockserver.routes.handler import Opened, Prepared
from mockserver.spine import seeding
from mockserver.spine.backend import aclose
from mockserver.spine.events import Event
from mockserver.wire import headers as h
from mockserver.wire.json import Json

__all__ = ["Lead", "McpNarrator", "lead", "narrating", "opening"]


@dataclass(frozen=True, slots=True)
class Server:
    index: int  # in ``tools``
    label: str
    url: str
    headers: Mapping[str, str]
    allowed: frozenset[str] | None  # None: every tool
    approval: str | Mapping[str, Any]  # "always", "never" or the spec's filter object

    def needs_approval(self, name: str) -> bool:
        if isinstance(self.approval, str):
            return self.approval != "never"
        never = (self.approval.get("never") or {}).get("tool_names") or []
        return name not in never


@dataclass(frozen=True, slots=True)
class Lead:
    """The MCP items an answer opens with; ``pending``: it ends with an approval request."""

    items: tuple[Json, ...]
    pending: bool = False


def _invalid(where: str, message: str) -> InvalidRequest:
    return InvalidRequest(f"Invalid '{where}': {message}", param=where)


def _servers(tools: list[Any], allowed_hosts: frozenset[str], session: str | None) -> list[Server]:
    found = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "mcp":
            continue
        at = f"tools[{i}]"
        label = tool.get("server_label")
        if not isinstance(label, str) or not label:
            raise _invalid(f"{at}.server_label", "an mcp tool needs a server_label.")
        if tool.get("connector_id") is not None:
            raise _invalid(f"{at}.connector_id", "connectors are not served here; give a server_url (docs/mcp.md).")
        url = tool.get("server_url")
        if not isinstance(url, str):
            raise _invalid(f"{at}.server_url", "an mcp tool needs a server_url (or a connector_id).")
        problem = host_problem(url, allowed_hosts)
        if problem is not None:
            raise _invalid(f"{at}.server_url", problem)
        headers = tool.get("headers") or {}
        if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
            raise _invalid(f"{at}.headers", "headers are an object of strings.")
        if session is not None and not any(k.lower() == h.name(h.SESSION) for k in headers):
            headers = {**headers, h.name(h.SESSION): session}  # the MCP calls join the request's session
        allowed = tool.get("allowed_tools")
        if isinstance(allowed, dict):
            allowed = allowed.get("tool_names")
        if allowed is not None and not (isinstance(allowed, list) and all(isinstance(n, str) for n in allowed)):
            raise _invalid(f"{at}.allowed_tools", 'a list of tool names, or {"tool_names": [...]}.')
        approval = tool.get("require_approval")
        approval = "always" if approval is None else approval  # the spec's default
        if approval not in ("always", "never") and not isinstance(approval, dict):
            raise _invalid(f"{at}.require_approval", '"always", "never", or {"never": {"tool_names": [...]}}.')
        found.append(Server(i, label, url, headers, frozenset(allowed) if allowed is not None else None, approval))
    return found


def _text(data: Json) -> str:
    """What the input says, for choosing the tool it names."""
    given = data.get("input")
    return given if isinstance(given, str) else json.dumps(given, ensure_ascii=False)


def _choose(listed: list[tuple[Server, list[Json]]], text: str) -> tuple[Server, Json] | None:
    """The allowed tool the input names (``get_weather`` or "get weather"), else the first."""
    lowered = text.lower()
    candidates = [(server, tool) for server, tools in listed for tool in tools]
    for server, tool in candidates:
        name = str(tool["name"]).lower()
        if name in lowered or name.replace("_", " ") in lowered:
            return server, tool
    return candidates[0] if candidates else None


def _arguments(tool: Json, seed: int) -> str:
    from mockserver.fakejson.generate import fake_value

    schema = tool.get("input_schema") or {"type": "object"}
    try:
        value = fake_value(schema, seed)
    except ValueError:
        value = {}
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


async def _call(server: Server, name: str, arguments: str, item: Json, session: McpSession | None = None) -> Json:
    """The ``mcp_call`` item of one call (its output, or the spec's typed error), on ``session``
    when one is open on the server already."""
    try:
        if session is not None:
            output = await session.call_tool(name, json.loads(arguments))
        else:
            async with open_session(server.url, server.headers) as opened:
                output = await opened.call_tool(name, json.loads(arguments))
        return {**item, "output": output, "error": None, "status": "completed"}
    except RemoteFailure as failure:
        return {**item, "output": None, "error": dict(failure.error), "status": "failed"}


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
