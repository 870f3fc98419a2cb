"""The Realtime API at ``/v1/realtime``: a WebSocket (:mod:`.socket`) and the parts it lends
itself to (:mod:`.port`): a response (:mod:`.turn`, :mod:`.output`), the conversation's items
(:mod:`.items`), input audio (:mod:`.ears`, :mod:`.hearing`), MCP tools (:mod:`.mcp`) and faults
(:mod:`.faults`)."""

from mockserver.routes.realtime.socket import routes

__all__ = ["routes"]
