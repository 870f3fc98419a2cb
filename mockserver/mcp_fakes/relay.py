"""A session's MCP request relayed to the server it records (kept in its cassette), or answered
from the cassette it replays (:mod:`mockserver.mcp_fakes.cassette`). The SDK's server calls
this first in every handler; None means the session neither records nor replays."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mockserver.mcp_fakes.answers import McpProblem
from mockserver.mcp_fakes.cassette import Cassettes
from mockserver.mcp_fakes.remote import RemoteFailure, open_session
from mockserver.mcp_fakes.store import McpStore

__all__ = ["Relay"]

Ask = Callable[[Any], Awaitable[Any]]  # the request, made on the SDK's mcp.Client


class Relay:
    def __init__(self, store: McpStore, cassettes: Cassettes) -> None:
        self.store = store
        self.cassettes = cassettes

    async def __call__(self, session: str | None, method: str, params: Any, ask: Ask) -> dict[str, Any] | None:
        """The answer as MCP's JSON; a JSON-RPC error (recorded, or the upstream's) raised as
        :class:`McpProblem`."""
        proxy = await self.store.proxy_of(session)
        if proxy is None:
            return None
        sent = params.model_dump(by_alias=True, mode="json", exclude_none=True) if params is not None else {}
        if proxy.mode == "replay":
            return self.cassettes.replay(proxy, method, sent)
        from mcp.shared.exceptions import MCPError

        try:
            async with open_session(proxy.url, {}) as upstream:
                try:
                    result = await ask(upstream.client)
                except MCPError as exc:  # the upstream's own answer: recorded as it is
                    self.cassettes.record(proxy, method, sent, {"error": {"code": exc.code, "message": exc.message}})
                    raise McpProblem(exc.code, exc.message) from None
        except RemoteFailure as failure:  # not reached: nothing to record
            raise McpProblem(-32603, f"The recorded MCP server failed: {failure.text}") from None
        answer: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        self.cassettes.record(proxy, method, sent, {"result": answer})
        return answer
