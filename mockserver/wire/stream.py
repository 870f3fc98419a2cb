"""How an event stream meets what breaks it: the seam between the SSE writer and stream faults.

The writer (:mod:`mockserver.http.sse`) hands every frame through a :class:`FrameFilter`; the
stream faults (:class:`~mockserver.faults.stream.StreamFaults`) are one. Both sides import this
leaf and not each other, so the HTTP floor knows nothing of faults and faults nothing of HTTP.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

__all__ = ["DONE", "Connection", "FrameFilter", "StreamEnded"]

DONE = b"data: [DONE]"  # a stream's terminator, as it starts (a recording's may end in CRLF)


class StreamEnded(Exception):
    """The stream ends here, on purpose; ``how`` is the journal's ending (``eof``, ``reset``,
    ``stall``…), and ``after`` what to do once what was written is out (reset the connection)."""

    def __init__(self, how: str, after: Callable[[], None] | None = None) -> None:
        super().__init__(how)
        self.how = how
        self.after = after


class Connection(Protocol):
    """One response's connection, as a filter may act on it."""

    def closed(self) -> bool:
        """Has the client gone? (False when the connection cannot be seen.)"""

    def reset(self) -> None:
        """Abort the connection with a TCP reset."""


class FrameFilter(Protocol):
    """What may happen to a stream's frames between the producer and the socket."""

    error_at: int | None  # the event (1-based) to replace with an error thrown into the producer
    stalling: bool  # inside a stall now (the journal's ending if the client leaves)

    def rewrite(self, frame: Any) -> Any:
        """The frame as it goes on (None: dropped)."""

    def malformed(self, number: int, data: bytes) -> bytes:
        """Event ``number``'s encoded bytes as they are written."""

    def pieces(self, data: bytes) -> list[bytes]:
        """The writes one encoded event is sent in."""

    def terminators(self, done: bytes) -> list[bytes]:
        """What is written for the stream's terminator (none, or it)."""

    def after(self, number: int) -> AsyncIterator[bytes]:
        """What follows event ``number`` (keep-alive comments of a stall); raises
        :class:`StreamEnded` where the stream is cut."""
