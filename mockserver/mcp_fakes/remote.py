"""Calling an MCP server from the server (the Responses API's ``mcp`` tool), with the official
``mcp`` client, on allowed hosts only.

No request forgery: a ``server_url`` is called only when its host is a loopback name or address
(``127.0.0.1``, ``localhost``, ``::1``) or one ``--mcp-allow-host`` names, checked before any
connection is made; the client follows a redirect only on the same origin (the SDK's rule), so an
allowed host cannot hand the call on to one that is not. The client is the SDK's (imported on
first use), on the handshake (``mode="legacy"``): the servers a test runs speak it.

Failures come back as MCP's own typed errors, as the Responses API writes them in
``mcp_call.error``: a JSON-RPC error is ``mcp_protocol_error``, a tool's ``isError`` result
``mcp_tool_execution_error``, anything on the way ``http_error``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

__all__ = ["LOOPBACK", "McpSession", "RemoteFailure", "host_problem", "open_session"]

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
TIMEOUT = 30.0  # seconds one MCP request may take


class RemoteFailure(Exception):
    """What went wrong, as ``mcp_call.error`` (or ``mcp_list_tools.error``'s text) says it."""

    def __init__(self, error: Mapping[str, Any]) -> None:
        super().__init__(error)
        self.error = error

    @property
    def text(self) -> str:
        return str(self.error.get("message") or self.error.get("content") or self.error.get("type"))


def host_problem(url: str, allowed: Iterable[str]) -> str | None:
    """Why ``url`` may not be called (not http(s), or a host not allowed), or None."""
    try:
        split = urlsplit(url)
        host = (split.hostname or "").lower()
    except ValueError:
        return f"{url!r} is not a URL."
    if split.scheme not in ("http", "https") or not host:
        return f"{url!r} is not an http(s) URL."
    hosts = LOOPBACK | {h.lower() for h in allowed}
    if host not in hosts:
        return f"the host {host!r} is not allowed (loopback only; more with --mcp-allow-host)."
    return None


def _failure(exc: BaseException) -> RemoteFailure:
    from mcp.shared.exceptions import MCPError

    if isinstance(exc, MCPError):
        return RemoteFailure({"type": "mcp_protocol_error", "code": exc.code, "message": exc.message})
    status = getattr(getattr(exc, "response", None), "status_code", None)
    return RemoteFailure({"type": "http_error", "code": int(status or 502), "message": f"{type(exc).__name__}: {exc}"})


class McpSession:
    """One open MCP session: list and call, failures as :class:`RemoteFailure`."""

    def __init__(self, client: Any) -> None:
        self._client = client

    @property
    def client(self) -> Any:
        """The SDK's ``mcp.Client`` (what a recording forwards through, its errors unmapped)."""
        return self._client

    async def list_tools(self) -> list[dict[str, Any]]:
        try:
            listed = await self._client.list_tools()
        except Exception as exc:
            raise _failure(exc) from None
        return [
            t.model_dump(
                by_alias=False,  # input_schema, as the Responses API writes it
                mode="json",
                exclude_none=True,
                include={"name", "description", "input_schema", "annotations"},
            )
            for t in listed.tools
        ]

    async def call_tool(self, name: str, arguments: Mapping[str, Any]) -> str:
        """The tool's text output (its text parts, else its structured content as JSON)."""
        import json

        try:
            result = await self._client.call_tool(name, dict(arguments))
        except Exception as exc:
            raise _failure(exc) from None
        parts = [p.model_dump(by_alias=True, mode="json", exclude_none=True) for p in result.content]
        if result.is_error:
            raise RemoteFailure({"type": "mcp_tool_execution_error", "content": parts})
        texts = [str(p["text"]) for p in parts if p.get("type") == "text"]
        if texts:
            return "\n".join(texts)
        return json.dumps(result.structured_content, ensure_ascii=False) if result.structured_content else ""


@contextlib.asynccontextmanager
async def open_session(url: str, headers: Mapping[str, str]) -> AsyncIterator[McpSession]:
    """An MCP session on ``url`` (checked with :func:`host_problem` by the caller); a failure to
    connect or initialize is a :class:`RemoteFailure`."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers=dict(headers), timeout=TIMEOUT, trust_env=False) as http:
        client = Client(streamable_http_client(url, http_client=http), mode="legacy", read_timeout_seconds=TIMEOUT)
        try:
            await client.__aenter__()
        except Exception as exc:  # refused, not MCP, a failed handshake
            raise _failure(exc) from None
        try:
            yield McpSession(client)
        finally:
            with contextlib.suppress(Exception):  # a session the server already ended
                await client.__aexit__(None, None, None)
