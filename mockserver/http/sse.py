"""Server-sent events: frames written, the terminator, and errors once bytes have been sent.

A stream is *frames*: objects we encode (``data: {json}``; the Responses API names each,
``event: <type>`` first) or bytes a recording holds, sent as they are — then, for chat and
completions, ``data: [DONE]``. Once the first frame is out the status line is gone, so a
failure mid-stream is reported in-band, in the shape of the stream: the producer's own when
it has one (a Responses run fails with an ``error`` event and ``response.failed``), else the
profile's error envelope (``data: {"error": …}``, which is how OpenAI's SDK recognises it) or
a Responses ``error`` event numbered after the last one sent; and the stream ends.

Stream faults (:class:`~mockserver.faults.stream.StreamFaults`, a
:class:`~mockserver.wire.stream.FrameFilter`) act here, on the frames before
they are encoded, so they break every stream alike. ``stream.error_at`` is thrown *into* the
producer, which answers it in its own shape. The journal learns from here how many events went
out and how the stream ended.

When the client goes away the body is closed at once (Starlette leaves that to the garbage
collector when ``send`` raised), so every ``finally`` below it runs: a stored Responses stream
is written ``cancelled``, a model's queued step is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from starlette.requests import ClientDisconnect
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from mockserver.errors import APIError, ErrorStyle, InternalError
from mockserver.http.gone import Resumed, disconnected
from mockserver.http.link import Link
from mockserver.wire.json import dumps
from mockserver.wire.scope import TALLY_KEY
from mockserver.wire.stream import FrameFilter, StreamEnded

__all__ = ["DONE", "Frame", "Framing", "InjectedError", "Ready", "Tally", "event_stream", "events_in"]

log = logging.getLogger("mockserver")

DONE = b"data: [DONE]\n\n"
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}
_EVENT_STREAM = b"text/event-stream; charset=utf-8"  # as Starlette writes the media type


class Encodable(Protocol):
    """A frame that encodes itself (fast), and can be had as an object (to be edited)."""

    def to_json(self) -> dict[str, Any]: ...

    def json_bytes(self) -> bytes: ...


# An object we encode, one that encodes itself, or a recording's bytes sent as they are.
Frame = dict[str, Any] | Encodable | bytes


class Ready:
    """A stream's frames made at once (its answer was made in one pass: a scripted answer, an
    unpaced replay). Without stream faults the writer takes them all in one step (an async
    iterator's step per frame cost as much as encoding one); with faults, one at a time, as
    any producer's."""

    __slots__ = ("_at", "events", "frames")

    def __init__(self, frames: Sequence[Frame], events: int | None = None) -> None:
        self.frames = frames
        self.events = events  # how many of them are events (None: not counted yet), all bytes then
        self._at = 0

    def take(self) -> Sequence[Frame]:
        """Every frame not yet handed out."""
        at, self._at = self._at, len(self.frames)
        return self.frames[at:] if at else self.frames

    def __aiter__(self) -> Ready:
        return self

    async def __anext__(self) -> Frame:
        at = self._at
        if at >= len(self.frames):
            raise StopAsyncIteration
        self._at = at + 1
        return self.frames[at]


class InjectedError(InternalError):
    """The ``stream.error_at`` fault, thrown into a stream's producer."""

    def __init__(self) -> None:
        super().__init__("The server had an error while processing your request.")


class Tally(Protocol):
    """What the journal keeps of a stream (a :class:`~mockserver.faults.journal.Entry`)."""

    events: int
    ended: str


@dataclass(frozen=True, slots=True)
class Framing:
    """How one family writes its stream: named events (Responses), a ``[DONE]`` terminator
    (chat, completions), and the error style of the profile answering."""

    named: bool = False
    done: bool = True
    style: ErrorStyle = "openai"

    def encode(self, frame: Frame) -> bytes:
        if isinstance(frame, bytes):
            return frame
        if not isinstance(frame, dict):
            return b"data: " + frame.json_bytes() + b"\n\n"
        data = b"data: " + dumps(frame) + b"\n\n"
        return b"event: " + str(frame["type"]).encode() + b"\n" + data if self.named else data

    def error(self, exc: APIError, sequence: int) -> bytes:
        """The in-band error of a stream that cannot go on."""
        if self.named:
            event = {"type": "error", "code": exc.code, "message": exc.message, "param": exc.param}
            return self.encode({**event, "sequence_number": sequence})
        return self.encode(exc.body(self.style))


def events_in(frames: Sequence[bytes]) -> int:
    """How many of encoded ``frames`` are events (what a stream's journal counts)."""
    return sum(1 for frame in frames if _is_event(frame))


def _is_event(frame: Frame) -> bool:
    if not isinstance(frame, bytes):
        return True
    return frame.startswith((b"data: ", b"event: ")) and not frame.startswith(DONE[:12])


class _Writer:
    """The bytes of one stream (see the module docstring).

    Frames that are ready at once leave together in one write, and what is held is written
    before the producer waits: a scripted or replayed stream is one write, the model's a write
    per step. While the producer waits, a client that hangs up ends the stream (its producer is
    cancelled, so a model stops within a step). With stream faults every frame is written on
    its own, as the faults cut, stall and split writes.
    """

    def __init__(self, frames: AsyncIterator[Frame], framing: Framing, faults: FrameFilter | None) -> None:
        self.frames = frames
        self.framing = framing
        self.faults = faults
        self.tally: Tally | None = None
        self.receive: Receive | None = None  # for the client's disconnect, while the producer waits
        self._gone: asyncio.Future[Any] | None = None
        self._waiting = False  # the producer is waiting now (a hang-up cancels the wait)
        self.events = 0
        self.sequence = -1  # the last sequence_number sent (Responses)
        self.last = False  # the chunk just yielded is the stream's last

    def _end(self, how: str) -> None:
        if self.tally is not None:
            self.tally.ended = how

    def _pulled(self) -> Any:
        """The awaitable of the next frame (``stream.error_at`` thrown in where it falls)."""
        faults = self.faults
        if faults is None or faults.error_at != self.events + 1:
            return anext(self.frames)
        faults.error_at = None
        return self._injected()

    async def _injected(self) -> Frame:
        """The producer's answer to the ``stream.error_at`` error (its own error shape)."""
        if self.events == 0:  # a producer that has not started cannot answer: start it first
            await anext(self.frames)
        throw = getattr(self.frames, "athrow", None)
        if throw is None:
            raise InjectedError()
        frame: Frame = await throw(InjectedError())
        self._end("error")
        return frame

    async def _waited(self, resumed: Resumed) -> Frame:
        """``resumed``'s frame, unless the client hangs up first: a watcher, started the first
        time the producer waits, cancels the wait (so the producer's ``finally`` runs at once,
        in its own task — some producers hold cancel scopes bound to it)."""
        frame: Frame
        if self.receive is None:
            frame = await resumed
            return frame
        if self._gone is None:
            task = asyncio.current_task()
            self._gone = asyncio.ensure_future(disconnected(self.receive))

            def hang_up(gone: asyncio.Future[Any]) -> None:
                if self._waiting and task is not None and not gone.cancelled():
                    task.cancel()

            self._gone.add_done_callback(hang_up)
        if self._gone.done():  # gone already: the producer's step, begun, is cancelled (its finally runs)
            resumed.cancel = True
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await resumed
            raise StreamEnded("client_disconnect")
        self._waiting = True
        try:
            frame = await resumed
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if self._gone.done() and not self._gone.cancelled() and task is not None:
                task.uncancel()
                raise StreamEnded("client_disconnect") from None
            raise
        finally:
            self._waiting = False
        return frame

    def whole(self) -> bytes | None:
        """The whole stream's bytes, when its frames were all made at once and no stream fault
        applies (None otherwise, or when a frame will not encode: :meth:`chunks` then says so in
        band): the very bytes :meth:`chunks` would yield, with the same counts and ending."""
        frames = self.frames
        if self.faults is not None or not isinstance(frames, Ready) or frames._at:
            return None
        events = self.events
        if frames.events is not None:
            held = list(cast("Sequence[bytes]", frames.frames))
            events += frames.events
        else:
            held = []
            try:
                for made in frames.frames:
                    held.append(self.framing.encode(made))
                    if _is_event(made):
                        events += 1
                        if isinstance(made, dict):
                            self.sequence = made.get("sequence_number", self.sequence)
            except Exception:
                return None
        frames._at = len(frames.frames)
        self.events = events
        if self.framing.done:
            held.append(DONE)
            self._end("done")
        elif self.tally is None or self.tally.ended == "pending":
            self._end("done")
        if self.tally is not None:
            self.tally.events = events
        return b"".join(held)

    async def chunks(self) -> AsyncIterator[bytes]:
        faults, framing = self.faults, self.framing
        held: list[bytes] = []
        try:
            frames = self.frames
            if faults is None and isinstance(frames, Ready) and frames.events is not None:
                held += cast(
                    "Sequence[bytes]", frames.take()
                )  # encoded and counted before (the same body's last answer)
                self.events += frames.events
            elif faults is None and isinstance(frames, Ready):  # all made, nothing to break: one step
                for made in frames.take():
                    held.append(framing.encode(made))
                    if _is_event(made):
                        self.events += 1
                        if isinstance(made, dict):
                            self.sequence = made.get("sequence_number", self.sequence)
            else:
                while True:
                    pulled = self._pulled()
                    try:
                        waiting = pulled.send(None)  # run the producer until it has a frame, or waits
                    except StopIteration as ready:
                        got: Frame = ready.value
                    except StopAsyncIteration:
                        break
                    else:
                        if held:
                            yield b"".join(held)
                            held.clear()
                        try:
                            got = await self._waited(Resumed(pulled, waiting))
                        except StopAsyncIteration:
                            break
                    frame = faults.rewrite(got) if faults is not None else got
                    if frame is None:
                        continue
                    data = framing.encode(frame)
                    event = _is_event(frame)
                    if event:
                        self.events += 1
                        if isinstance(frame, dict):
                            self.sequence = frame.get("sequence_number", self.sequence)
                    if faults is None:
                        held.append(data)
                        continue
                    if self.tally is not None:
                        self.tally.events = self.events
                    if event:
                        data = faults.malformed(self.events, data)
                    for piece in faults.pieces(data):
                        yield piece
                    if event:
                        async for comment in faults.after(self.events):
                            yield comment
            if framing.done:
                held += faults.terminators(DONE) if faults is not None else (DONE,)
                self._end("done" if held else "eof")
            elif self.tally is None or self.tally.ended == "pending":
                self._end("done")
            if held:
                self.last = True  # nothing follows it: it goes out with the body's end
                yield b"".join(held)
        except StreamEnded as ended:
            if held:
                yield b"".join(held)
            if ended.after is not None:
                ended.after()
            self._end(ended.how)
        except APIError as exc:
            yield b"".join([*held, framing.error(exc, self.sequence + 1)])
            self._end("error")
        except Exception:  # never a stack trace on the wire; the log keeps it
            log.exception("stream failed after the first byte")
            problem = InternalError("The server had an error while processing your request.")
            yield b"".join([*held, framing.error(problem, self.sequence + 1)])
            self._end("error")
        finally:
            if self.tally is not None:
                self.tally.events = self.events
            if self._gone is not None:
                self._gone.cancel()
            await _aclose(self.frames)


async def _aclose(iterator: object) -> None:
    aclose = getattr(iterator, "aclose", None)
    if aclose is not None:
        await aclose()


class _EventStream(StreamingResponse):
    """An SSE response: binds its connection for stream faults, counts into the journal, and
    closes its body however the response ends."""

    def __init__(self, writer: _Writer, link: Link, headers: dict[str, str]) -> None:
        # Starlette's fields, set as its __init__ would set them for these headers (made here:
        # one pass over them, on the path every stream takes).
        self.writer = writer
        self.link = link
        self.body_iterator = writer.chunks()
        self.status_code = 200
        self.media_type = "text/event-stream"
        self.background = None
        merged = {**SSE_HEADERS, **headers} if headers else SSE_HEADERS
        raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in merged.items()]
        if all(key != b"content-type" for key, _ in raw):
            raw.append((b"content-type", _EVENT_STREAM))
        self.raw_headers = raw

    async def stream_response(self, send: Send) -> None:
        """Starlette's, but the last chunk carries the body's end (one write, not two: a
        scripted or replayed stream is then a head and one write)."""
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        chunks = aiter(self.body_iterator)
        async for chunk in chunks:
            if self.writer.last:
                with contextlib.suppress(StopAsyncIteration):
                    await anext(chunks)  # the writer's own end (its journal counts) first
                await send({"type": "http.response.body", "body": chunk, "more_body": False})
                return
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Not Starlette's way (a task group listening for the disconnect the whole time, which
        # costs more than a scripted stream): the writer listens only while its producer waits.
        self.link.bind(send)
        self.writer.tally = scope.get(TALLY_KEY)
        self.writer.receive = receive
        try:
            whole = self.writer.whole()
            if whole is not None:  # all made, nothing to break: a head and one write
                await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
                await send({"type": "http.response.body", "body": whole, "more_body": False})
                return
            await self.stream_response(send)
        except OSError:
            raise ClientDisconnect() from None
        finally:
            body = self.body_iterator
            await _aclose(body)
            if self.writer.faults is not None and self.writer.faults.stalling and self.writer.tally is not None:
                self.writer.tally.ended = "stall"  # the client gave up during a stall


def event_stream(
    frames: AsyncGenerator[Frame, None] | AsyncIterator[Frame],
    framing: Framing,
    headers: dict[str, str] | None = None,
    faults: FrameFilter | None = None,
    link: Link | None = None,
) -> StreamingResponse:
    """Stream ``frames`` as SSE, written as ``framing`` says, broken as ``faults`` say."""
    writer = _Writer(frames, framing, faults)
    return _EventStream(writer, link or Link(), headers or {})
