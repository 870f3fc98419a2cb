"""The connection under a response: found through uvicorn's ``send``, closed or reset on purpose.

ASGI does not expose the socket, but uvicorn's ``send`` is a bound method of its protocol
cycle, and :func:`find_transport` follows it (and closures around it) to the asyncio transport.
Transport faults and stream resets need it; where it cannot be found (an in-process ASGI
client) they degrade to ending the body.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from typing import Any

__all__ = ["Link", "find_transport", "reset"]


def find_transport(send: Any, depth: int = 8) -> Any:
    """The asyncio transport behind uvicorn's ``send`` (None if it cannot be found): through
    the closures and ``send``-wrapping objects of the middleware in between."""
    owner = getattr(send, "__self__", None)
    found = getattr(owner, "transport", None)
    if found is not None or depth == 0:
        return found
    inner: list[Any] = []
    for cell in getattr(send, "__closure__", None) or ():
        try:
            inner.append(cell.cell_contents)
        except ValueError:
            continue
    if owner is None:  # a callable object wrapping another send (the journal's)
        inner.extend(getattr(send, "__dict__", {}).values())
    for candidate in inner:
        if callable(candidate) and not isinstance(candidate, type):
            found = find_transport(candidate, depth - 1)
            if found is not None:
                return found
    return None


def reset(transport: Any) -> None:
    """Abort the connection with a TCP RST (SO_LINGER 0), not a polite FIN."""
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is not None:
        # Not every transport has a real socket; and a closed one's is gone (uvloop: ValueError).
        with contextlib.suppress(OSError, ValueError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    if transport is not None:
        transport.abort()


class Link:
    """One response's connection, bound once the response is sent; found when first asked for
    (most streams never ask: only a stream fault or a recorded reset does)."""

    def __init__(self) -> None:
        self._send: Any = None
        self._transport: Any = None
        self._found = False

    def bind(self, send: Any) -> None:
        self._send, self._found = send, False

    @property
    def transport(self) -> Any:
        """The connection's transport (None when it cannot be found, or before the response is sent)."""
        if not self._found and self._send is not None:
            self._transport, self._found = find_transport(self._send), True
        return self._transport

    def closed(self) -> bool:
        """Has the client gone? (False when the connection cannot be seen.)"""
        transport = self.transport
        return transport is not None and bool(transport.is_closing())

    def reset(self) -> None:
        reset(self.transport)
