"""MCP tools on a Realtime socket: a session whose ``tools`` hold ``{"type": "mcp", ...}`` lists
each server's tools when the session is updated, and its responses call them, as the Responses
API's ``mcp`` tool does (the servers, the tool chosen, its arguments and the call are the same
code: :mod:`mockserver.mcp_fakes.tool_use`).

* ``session.update`` with mcp tools: per server an ``mcp_list_tools`` item joins the conversation
  (``conversation.item.added``, ``mcp_list_tools.in_progress``, ``…completed`` or ``…failed``,
  ``conversation.item.done``); a response waits for the listing.
* ``response.create``: when the last user message has not been served by a call yet, the allowed
  tool it names (else the first) is called: an ``mcp_call`` output item, its
  ``response.mcp_call.in_progress``, ``response.mcp_call_arguments.delta`` / ``done``, then
  ``response.mcp_call.completed`` (or ``failed``, with MCP's typed error); the model's message follows.
* a tool that needs approval: the response's one output is an ``mcp_approval_request``; the client
  answers with a ``conversation.item.create`` of an ``mcp_approval_response`` and a new
  ``response.create`` makes the approved call (a denied one makes none).
"""

from __future__ import annotations

import asyncio
from typing import Any

from mockserver.errors import InvalidRequest
from mockserver.mcp_fakes.remote import RemoteFailure, open_session
from mockserver.mcp_fakes.tool_use import Server, arguments, call, choose, servers
from mockserver.routes.realtime.output import Output
from mockserver.routes.realtime.port import Port
from mockserver.voice.session import text_of
from mockserver.wire.json import Json

__all__ = ["Tools"]


class Tools:
    """A session's MCP servers and the tools each listed."""

    def __init__(self, rt: Port, allow_hosts: frozenset[str]) -> None:
        self.rt, self.allow_hosts = rt, allow_hosts
        self.listed: list[tuple[Server, list[Json]]] = []

    def servers_of(self, update: dict[str, Any], event_id: str | None) -> list[Server] | None:
        """The mcp servers a ``session.update`` names ([] when it leaves ``tools`` alone); None
        after an ``error`` event naming the field of one that cannot be served."""
        tools = update.get("tools")
        if tools is None:
            return []
        try:
            return servers(
                tools if isinstance(tools, list) else [], self.allow_hosts, self.rt.session_header, "session.tools"
            )
        except InvalidRequest as exc:
            self.rt.error(exc.message, event_id, exc.param)
            return None

    def list_tools(self, found: list[Server]) -> None:
        """List each server's tools (in a task a response waits for); the tools replace the last list."""
        if not found:
            self.listed = []
            return
        task = asyncio.ensure_future(self._list(found))
        self.rt.pending.add(task)
        task.add_done_callback(self.rt.pending.discard)

    async def _list(self, found: list[Server]) -> None:
        rt, listed = self.rt, []
        for server in found:
            item: Json = {"id": rt.session.next_id("mcpl"), "type": "mcp_list_tools", "server_label": server.label}
            previous = rt.session.add({**item, "tools": []})
            rt.send({"type": "conversation.item.added", "previous_item_id": previous, "item": {**item, "tools": []}})
            rt.send({"type": "mcp_list_tools.in_progress", "item_id": item["id"]})
            try:
                async with open_session(server.url, server.headers) as opened:
                    tools = await opened.list_tools()
            except RemoteFailure:
                rt.send({"type": "mcp_list_tools.failed", "item_id": item["id"]})
                rt.send({"type": "conversation.item.done", "previous_item_id": previous, "item": {**item, "tools": []}})
                continue
            kept = [t for t in tools if server.allowed is None or t["name"] in server.allowed]
            listed.append((server, kept))
            at = rt.session.find(item["id"])
            if at is not None:
                rt.session.items[at]["tools"] = kept
            rt.send({"type": "mcp_list_tools.completed", "item_id": item["id"]})
            rt.send({"type": "conversation.item.done", "previous_item_id": previous, "item": {**item, "tools": kept}})
        self.listed = listed

    def answer_problem(self, item: dict[str, Any]) -> tuple[str, str] | None:
        """What is wrong with a created ``mcp_approval_response`` item, and the field it names."""
        wanted = item.get("approval_request_id")
        if not any(i.get("type") == "mcp_approval_request" and i.get("id") == wanted for i in self.rt.session.items):
            return f"no mcp_approval_request {wanted!r} in this conversation.", "item.approval_request_id"
        if not isinstance(item.get("approve"), bool):
            return "approve must be true or false.", "item.approve"
        return None

    async def lead(self, out: Output, seed: int) -> bool:
        """The MCP items a response opens with; True when it ends at an approval request."""
        items = self.rt.session.items
        last_user = max(
            (k for k, i in enumerate(items) if i.get("type") == "message" and i.get("role") == "user"), default=-1
        )
        since = items[last_user + 1 :]
        answer = next((i for i in reversed(since) if i.get("type") == "mcp_approval_response"), None)
        if answer is not None:
            request = next(i for i in items if i.get("id") == answer.get("approval_request_id"))
            done = any(i.get("approval_request_id") == request["id"] for i in since if i.get("type") == "mcp_call")
            server = next((s for s, _ in self.listed if s.label == request["server_label"]), None)
            if answer.get("approve") and not done and server is not None:
                await self._call(out, server, request["name"], request["arguments"], request["id"])
            return False
        if last_user < 0 or any(i.get("type") in ("mcp_call", "mcp_approval_request") for i in since):
            return False  # the user's words were served by a call already: the model answers
        chosen = choose(self.listed, text_of(items[last_user]))
        if chosen is None:
            return False
        server, tool = chosen
        name, args = str(tool["name"]), arguments(tool, seed)
        if server.needs_approval(name):
            request = {"id": self.rt.session.next_id("mcpr"), "type": "mcp_approval_request"}
            request |= {"server_label": server.label, "name": name, "arguments": args}
            out.add_item(request)
            out.close_item(request)
            return True
        await self._call(out, server, name, args, None)
        return False

    async def _call(self, out: Output, server: Server, name: str, args: str, approval: str | None) -> None:
        item: Json = {"id": self.rt.session.next_id("mcp"), "type": "mcp_call", "server_label": server.label}
        item |= {"name": name, "arguments": "", "approval_request_id": approval, "output": None, "error": None}
        out.add_item(item)
        where = out.where(item)
        out.send(
            {"type": "response.mcp_call.in_progress", "item_id": item["id"], "output_index": where["output_index"]}
        )
        out.send({"type": "response.mcp_call_arguments.delta", **where, "delta": args})
        out.send({"type": "response.mcp_call_arguments.done", **where, "arguments": args})
        made = await call(server, name, args, {**item, "arguments": args})
        item.update(made)
        status = "failed" if made["status"] == "failed" else "completed"
        item.pop("status", None)  # the Realtime mcp_call item has no status
        out.send({"type": f"response.mcp_call.{status}", "item_id": item["id"], "output_index": where["output_index"]})
        out.close_item(item)
