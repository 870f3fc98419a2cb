"""An ``mcp`` tool as a model API hosts it (OpenAI's Responses and Realtime APIs alike): the MCP
servers a request's ``tools`` name, checked; the tool an input names; arguments drawn from its
``inputSchema`` with the request's seed; and one call, whose ``mcp_call`` item carries the output
or MCP's typed error. The wires (:mod:`mockserver.routes.responses.mcp_tool`,
:mod:`mockserver.routes.realtime.mcp`) shape the items into their own events.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mockserver.errors import InvalidRequest
from mockserver.mcp_fakes.remote import McpSession, RemoteFailure, host_problem, open_session
from mockserver.wire import headers as h
from mockserver.wire.json import Json

__all__ = ["Server", "arguments", "call", "choose", "invalid", "servers"]


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


def invalid(where: str, message: str) -> InvalidRequest:
    return InvalidRequest(f"Invalid '{where}': {message}", param=where)


def servers(tools: list[Any], allowed_hosts: frozenset[str], session: str | None, where: str = "tools") -> list[Server]:
    """The ``mcp`` tools among ``tools`` (``where`` names the list in errors); :class:`InvalidRequest`
    naming the field of one that cannot be served."""
    found = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "mcp":
            continue
        at = f"{where}[{i}]"
        label = tool.get("server_label")
        if not isinstance(label, str) or not label:
            raise invalid(f"{at}.server_label", "an mcp tool needs a server_label.")
        if tool.get("connector_id") is not None:
            raise invalid(f"{at}.connector_id", "connectors are not served here; give a server_url (docs/mcp.md).")
        url = tool.get("server_url")
        if not isinstance(url, str):
            raise invalid(f"{at}.server_url", "an mcp tool needs a server_url (or a connector_id).")
        problem = host_problem(url, allowed_hosts)
        if problem is not None:
            raise invalid(f"{at}.server_url", problem)
        headers = tool.get("headers") or {}
        if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
            raise invalid(f"{at}.headers", "headers are an object of strings.")
        if session is not None and not any(k.lower() == h.name(h.SESSION) for k in headers):
            headers = {**headers, h.name(h.SESSION): session}  # the MCP calls join the request's session
        allowed = tool.get("allowed_tools")
        if isinstance(allowed, dict):
            allowed = allowed.get("tool_names")
        if allowed is not None and not (isinstance(allowed, list) and all(isinstance(n, str) for n in allowed)):
            raise invalid(f"{at}.allowed_tools", 'a list of tool names, or {"tool_names": [...]}.')
        approval = tool.get("require_approval")
        approval = "always" if approval is None else approval  # the spec's default
        if approval not in ("always", "never") and not isinstance(approval, dict):
            raise invalid(f"{at}.require_approval", '"always", "never", or {"never": {"tool_names": [...]}}.')
        found.append(Server(i, label, url, headers, frozenset(allowed) if allowed is not None else None, approval))
    return found


def choose(listed: list[tuple[Server, list[Json]]], text: str) -> tuple[Server, Json] | None:
    """The allowed tool the input names (``get_weather`` or "get weather"), else the first."""
    lowered = text.lower()
    candidates = [(server, tool) for server, tools in listed for tool in tools]
    for server, tool in candidates:
        name = str(tool["name"]).lower()
        if name in lowered or name.replace("_", " ") in lowered:
            return server, tool
    return candidates[0] if candidates else None


def arguments(tool: Json, seed: int) -> str:
    from mockserver.fakejson.generate import fake_value

    schema = tool.get("input_schema") or {"type": "object"}
    try:
        value = fake_value(schema, seed)
    except ValueError:
        value = {}
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


async def call(server: Server, name: str, arguments: str, item: Json, session: McpSession | None = None) -> Json:
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
