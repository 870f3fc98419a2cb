"""What a Realtime socket lends the parts that serve it: a response (:mod:`.turn`), the
conversation's item events (:mod:`.items`), the input audio (:mod:`.ears`) and the MCP tools
(:mod:`.mcp`) send through it and read the session from it, and never import the socket itself
(:mod:`.socket` imports them: the arrows run one way).
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from mockserver.context import ServerContext
from mockserver.faults.catalogue import Fault
from mockserver.voice.session import Session

__all__ = ["Port"]


class Port(Protocol):
    """One open Realtime socket, as its parts see it."""

    ctx: ServerContext
    session: Session
    session_header: str | None  # the handshake's x-mockserver-session
    responses: int  # responses asked so far (a fault rule's ``nth`` counts them)
    turn_faults: tuple[Fault, ...]  # the last response's, for the journal
    pending: set[asyncio.Task[None]]  # transcripts being made, MCP tools being listed: a response waits for them

    def send(self, event: dict[str, Any]) -> None:
        """Queue one server event (numbered in order)."""

    def error(self, message: str, client_event: str | None, param: str | None = None, code: str | None = None) -> None:
        """Queue an ``error`` event about a client event (the session goes on)."""

    def drop(self, code: int) -> None:
        """Close the socket with ``code`` once the events queued before it are sent."""

    def respond(self, event: dict[str, Any]) -> None:
        """Start a response, as ``response.create`` does (the server's VAD asks for one too)."""
