"""Stream faults: a stream broken on purpose, frame by frame, before the frames are encoded.

The SSE writer (:mod:`mockserver.http.sse`) hands every frame of a response through one
:class:`StreamFaults`: the model's, a scripted one, a replayed cassette's, a Responses run
and its resumption alike. Our own frames are objects here, edited as objects (nothing
re-parses bytes we wrote); a recording's frames are the provider's bytes, which the faults
that edit chunks read as JSON. *Events* are counted as they are written (dropped frames do
not count) to know where "after N events" is; the ``[DONE]`` terminator is not an event.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from mockserver.faults.catalogue import Fault
from mockserver.wire.json import Json
from mockserver.wire.stream import DONE, Connection, StreamEnded

__all__ = ["KEEPALIVE", "StreamFaults"]

KEEPALIVE = b": keep-alive\n\n"


class StreamFaults:
    """One response's faults of kind ``stream`` (a :class:`~mockserver.wire.stream.FrameFilter`);
    ``link`` is its connection (resets, stalls)."""

    def __init__(self, faults: Sequence[Fault], link: Connection) -> None:
        self._f = {f.name: f for f in faults}
        self._link = link
        error = self._f.get("stream.error_at")
        self.error_at: int | None = int(error["n"]) if error is not None else None  # event replaced by an error
        self.stalling = False  # inside a stall now (the journal's ending if the client leaves)

    def _n(self, name: str) -> int | None:
        fault = self._f.get(name)
        return int(fault["n"]) if fault is not None else None

    # ---- frames ---------------------------------------------------------------------------

    def rewrite(self, frame: Json | Any | bytes) -> Json | Any | bytes | None:
        """The frame as the chunk-editing faults leave it (None: dropped). A recording's own
        ``[DONE]`` obeys the terminator faults as ours does."""
        f = self._f
        if isinstance(frame, bytes) and frame.startswith(DONE):
            done = self.terminators(frame)
            return b"".join(done) if done else None
        if not (f.keys() & _EDITING):
            return frame
        if isinstance(frame, bytes):
            return self._rewrite_recorded(frame)
        return self._edit(frame if isinstance(frame, dict) else frame.to_json())

    def _edit(self, frame: Json) -> Json | None:
        f = self._f
        if "stream.no_completed" in f and frame.get("type") == "response.completed":
            return None
        skip = self._n("stream.skip_sequence")
        number = frame.get("sequence_number")
        if skip is not None and isinstance(number, int) and number >= skip:
            frame = {**frame, "sequence_number": number + 1}
        if "stream.no_usage" in f and frame.get("usage") is not None:
            if frame.get("choices") == []:
                return None
            frame = {**frame, "usage": None}
        if "stream.no_finish_reason" in f and isinstance(frame.get("choices"), list):
            frame = {**frame, "choices": [_unfinished(c) for c in frame["choices"]]}
        return frame

    def _rewrite_recorded(self, frame: bytes) -> bytes | None:
        """A provider's frame (``data: {json}``, perhaps after an ``event:`` line) edited as JSON."""
        head, sep, payload = frame.partition(b"data: ")
        try:
            event = json.loads(payload)
        except ValueError:
            return frame
        if not sep or not isinstance(event, dict):
            return frame
        edited = self._edit(event)
        if edited is None:
            return None
        if edited is event:
            return frame
        return head + sep + json.dumps(edited, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"

    def malformed(self, number: int, data: bytes) -> bytes:
        """Event ``number`` cut mid-JSON, when that is the fault."""
        if self._n("stream.malformed_at") == number:
            return data[: max(8, len(data) // 2)] + b"\n\n"
        return data

    def pieces(self, data: bytes) -> list[bytes]:
        """How ``data`` goes out: whole, byte by byte, or split inside every multi-byte character."""
        if "stream.bytewise" in self._f:
            return [data[i : i + 1] for i in range(len(data))]
        if "stream.split_utf8" in self._f:
            return _split_characters(data)
        return [data]

    def terminators(self, done: bytes) -> list[bytes]:
        """The ``[DONE]`` frames to send: none, one, or two."""
        if "stream.no_done" in self._f:
            return []
        return [done, done] if "stream.double_done" in self._f else [done]

    # ---- after an event -------------------------------------------------------------------

    async def after(self, number: int) -> AsyncIterator[bytes]:
        """What happens once event ``number`` is out: the stream cut, reset or stalled (its
        keep-alive comments are yielded); :class:`StreamEnded` ends it."""
        if self._n("stream.cut_after") == number:
            raise StreamEnded("eof")
        if self._n("stream.reset_after") == number:
            self._link.reset()
            await asyncio.sleep(0)  # let the server see the connection go
            raise StreamEnded("reset")
        stall = self._f.get("stream.stall_after")
        if stall is not None and int(stall["n"]) == number:
            async for comment in self._stall(stall["for"], stall["keepalive"]):
                yield comment

    async def _stall(self, seconds: float, keepalive: float) -> AsyncIterator[bytes]:
        """Say nothing (or only keep-alive comments) for ``seconds``; 0 is until the client leaves."""
        self.stalling = True
        loop = asyncio.get_running_loop()
        until = loop.time() + seconds if seconds > 0 else float("inf")
        next_comment = loop.time() + keepalive if keepalive > 0 else float("inf")
        while loop.time() < until:
            if self._link.closed():
                raise StreamEnded("stall")
            await asyncio.sleep(min(0.05, max(0.0, until - loop.time())))
            if loop.time() >= next_comment:
                yield KEEPALIVE
                next_comment += keepalive
        self.stalling = False


_EDITING = frozenset({"stream.no_completed", "stream.skip_sequence", "stream.no_usage", "stream.no_finish_reason"})


def _unfinished(choice: Any) -> Any:
    if isinstance(choice, dict) and "finish_reason" in choice:
        return {**choice, "finish_reason": None}
    return choice


def _split_characters(data: bytes) -> list[bytes]:
    """Cut inside every multi-byte UTF-8 character (after its lead byte)."""
    pieces, start = [], 0
    for i, byte in enumerate(data):
        if byte >= 0xC0 and i + 1 < len(data):  # a lead byte of a multi-byte character
            pieces.append(data[start : i + 1])
            start = i + 1
    pieces.append(data[start:])
    return [p for p in pieces if p]
