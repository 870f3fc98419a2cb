"""Stream faults: an ASGI ``send`` wrapper that breaks a server-sent-event stream on purpose.

It sits between the app and the server, so it breaks any SSE body alike — the model's, a
scripted one, a replayed cassette's. The body arrives as messages holding whole frames
(``data: …\\n\\n``); the wrapper splits them into frames and counts *events* (data frames
other than ``[DONE]``) to know where "after N events" is. Faults that end the stream raise
:class:`StreamEnded`, which stops the app producing more; the injector catches it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
from collections.abc import Callable
from typing import Any

from starlette.types import Message, Send

from mockserver.cassettes.format import split_events
from mockserver.faults.catalogue import Fault

__all__ = ["StreamEnded", "StreamFaults", "reset"]

DONE = b"data: [DONE]\n\n"
KEEPALIVE = b": keep-alive\n\n"


class StreamEnded(Exception):
    """A fault ended the stream; ``how`` is the journal's ending."""

    def __init__(self, how: str) -> None:
        super().__init__(how)
        self.how = how


def reset(transport: Any) -> None:
    """Abort the connection with a TCP RST (SO_LINGER 0), not a polite FIN."""
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is not None:
        # Not every transport has a real socket; and a closed one's is gone (uvloop: ValueError).
        with contextlib.suppress(OSError, ValueError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    if transport is not None:
        transport.abort()


class StreamFaults:
    """``send`` for one response, applying ``faults`` (all of kind ``stream``) to its SSE body."""

    def __init__(self, send: Send, faults: tuple[Fault, ...], transport: Any, closed: Callable[[], bool]) -> None:
        self._send = send
        self._faults = {f.name: f for f in faults}
        self._transport = transport
        self._closed = closed  # has the client gone? (polled while stalling)
        self._sse = False
        self.events = 0
        self.stalling = False  # inside a stall right now (the journal's ending if the client leaves)

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = dict(message.get("headers", []))
            self._sse = headers.get(b"content-type", b"").startswith(b"text/event-stream")
            await self._send(message)
            return
        if message["type"] != "http.response.body" or not self._sse:
            await self._send(message)
            return
        body: bytes = message.get("body", b"")
        more = bool(message.get("more_body", False))
        for frame in split_events(body):
            await self._frame(frame)
        if not more:
            await self._write(b"", more=False)

    async def _frame(self, frame: bytes) -> None:
        f = self._faults
        if frame == DONE:
            if "stream.no_done" in f:
                return
            await self._write(frame)
            if "stream.double_done" in f:
                await self._write(frame)
            return
        # Data frames, and the Responses API's named events (``event: <type>`` then data).
        is_event = frame.startswith((b"data: ", b"event: "))
        if is_event:
            number = self.events + 1
            if "stream.error_at" in f and number == int(f["stream.error_at"]["n"]):
                await self._write(_error_frame())
                await self._write(b"", more=False)
                raise StreamEnded("error")
            rewritten = self._rewrite(frame)
            if rewritten is None:
                return
            frame = rewritten
            if "stream.malformed_at" in f and number == int(f["stream.malformed_at"]["n"]):
                frame = frame[: max(8, len(frame) // 2)] + b"\n\n"
        await self._write(frame)
        if not is_event:
            return
        self.events += 1
        await self._after_event()

    async def _after_event(self) -> None:
        f, n = self._faults, self.events
        if "stream.cut_after" in f and n == int(f["stream.cut_after"]["n"]):
            await self._write(b"", more=False)
            raise StreamEnded("eof")
        if "stream.reset_after" in f and n == int(f["stream.reset_after"]["n"]):
            reset(self._transport)
            await asyncio.sleep(0)  # let the server see the connection go
            raise StreamEnded("reset")
        if "stream.stall_after" in f and n == int(f["stream.stall_after"]["n"]):
            await self._stall(f["stream.stall_after"]["for"], f["stream.stall_after"]["keepalive"])

    async def _stall(self, seconds: float, keepalive: float) -> None:
        """Say nothing (or only keep-alive comments) for ``seconds``; 0 is until the client leaves."""
        self.stalling = True
        loop = asyncio.get_running_loop()
        until = loop.time() + seconds if seconds > 0 else float("inf")
        next_comment = loop.time() + keepalive if keepalive > 0 else float("inf")
        while loop.time() < until:
            if self._closed():
                raise StreamEnded("stall")
            await asyncio.sleep(min(0.05, max(0.0, until - loop.time())))
            if loop.time() >= next_comment:
                await self._write(KEEPALIVE)
                next_comment += keepalive
        self.stalling = False

    def _rewrite(self, frame: bytes) -> bytes | None:
        """Drop or edit a JSON event for the faults that change chunks (None: drop it)."""
        f = self._faults
        if frame.startswith(b"event: "):
            return _rewrite_named(frame, f)
        if "stream.no_finish_reason" not in f and "stream.no_usage" not in f:
            return frame
        try:
            chunk = json.loads(frame[6:])
        except ValueError:
            return frame
        if not isinstance(chunk, dict):
            return frame
        if "stream.no_usage" in f and chunk.get("usage") is not None:
            if chunk.get("choices") == []:
                return None
            chunk["usage"] = None
        if "stream.no_finish_reason" in f:
            for choice in chunk.get("choices") or []:
                if isinstance(choice, dict) and "finish_reason" in choice:
                    choice["finish_reason"] = None
        return b"data: " + json.dumps(chunk, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"

    async def _write(self, data: bytes, more: bool = True) -> None:
        if not data or not more:
            await self._send({"type": "http.response.body", "body": data, "more_body": more})
            return
        for piece in self._pieces(data):
            await self._send({"type": "http.response.body", "body": piece, "more_body": True})

    def _pieces(self, data: bytes) -> list[bytes]:
        if "stream.bytewise" in self._faults:
            return [data[i : i + 1] for i in range(len(data))]
        if "stream.split_utf8" in self._faults:
            return _split_characters(data)
        return [data]


def _rewrite_named(frame: bytes, f: dict[str, Fault]) -> bytes | None:
    """The Responses faults, on a named event: drop ``response.completed``, or skip one
    ``sequence_number`` (every number from ``n`` on is one higher)."""
    if "stream.no_completed" not in f and "stream.skip_sequence" not in f:
        return frame
    head, sep, payload = frame.partition(b"data: ")
    try:
        event = json.loads(payload)
    except ValueError:
        return frame
    if not sep or not isinstance(event, dict):
        return frame
    if "stream.no_completed" in f and event.get("type") == "response.completed":
        return None
    number = event.get("sequence_number")
    if "stream.skip_sequence" in f and isinstance(number, int) and number >= int(f["stream.skip_sequence"]["n"]):
        event["sequence_number"] = number + 1
    return head + sep + json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


def _split_characters(data: bytes) -> list[bytes]:
    """Cut inside every multi-byte UTF-8 character (after its lead byte)."""
    pieces, start = [], 0
    for i, byte in enumerate(data):
        if byte >= 0xC0 and i + 1 < len(data):  # a lead byte of a multi-byte character
            pieces.append(data[start : i + 1])
            start = i + 1
    pieces.append(data[start:])
    return [p for p in pieces if p]


def _error_frame() -> bytes:
    error = {
        "error": {
            "message": "The server had an error while processing your request.",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }
    return b"data: " + json.dumps(error, separators=(",", ":")).encode() + b"\n\n"
