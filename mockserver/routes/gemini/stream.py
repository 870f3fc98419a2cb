"""The chunks of ``:streamGenerateContent``, from the spine's events.

Each chunk is a whole ``GenerateContentResponse`` carrying one candidate's new parts. One chunk
is held back while the next event may still belong on it: a candidate's ``finishReason`` goes on
its last content chunk, and ``usageMetadata`` on the stream's last chunk (as Gemini sends them),
so nothing but what a non-streamed body holds goes out, and the chunks' parts joined are its
parts. A function call goes out whole, in the chunk that ends its candidate (Gemini never
splits a call's arguments across chunks).

Delivered two ways: server-sent events (``?alt=sse``, what google-genai asks for), each chunk a
``data:`` line with no terminator; or, without ``alt``, one JSON array written element by element.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from mockserver.errors import APIError
from mockserver.http.sse import Frame, Framing
from mockserver.routes.codec import Call
from mockserver.routes.gemini.codec import FINISH, arguments, image_tokens, logprobs_fields, usage_metadata
from mockserver.spine.backend import aclose
from mockserver.spine.events import Event, Finished, Reasoning, Refusal, TextDelta, Usage
from mockserver.spine.result import Result
from mockserver.wire.json import Json, dumps

__all__ = ["ArrayFraming", "all_chunks", "array_frames", "chunks", "in_array"]


_OPEN = b'{"candidates":[{"content":{"parts":[{"text":'


class _TextChunk:
    """A chunk of nothing but one candidate's text, the most common by far: its bytes made with
    one string encoded, the rest written once per stream (``tail``); the same bytes as the
    chunk's object encoded whole (:meth:`to_json`, for whoever edits it: a stream fault)."""

    __slots__ = ("chunk", "tail")

    def __init__(self, chunk: Json, tail: bytes) -> None:
        self.chunk = chunk
        self.tail = tail

    def to_json(self) -> Json:
        return self.chunk

    def json_bytes(self) -> bytes:
        candidate = self.chunk["candidates"][0]
        text = dumps(candidate["content"]["parts"][0]["text"])
        return b'%s%s}],"role":"model"},"index":%d}]%s' % (_OPEN, text, candidate["index"], self.tail)


Chunk = Json | _TextChunk


class _Chunker:
    """Events → chunks, one held back (see the module docstring)."""

    def __init__(self, call: Call, response_id: str, shows_thoughts: bool) -> None:
        self.head: Json = {"modelVersion": call.gen.model, "responseId": response_id}
        self.tail = b"," + dumps(self.head)[1:]
        self.gen = call.gen
        self.shows_thoughts = shows_thoughts
        self.logprobs = call.gen.sampling.logprobs
        self.held: Json | None = None
        self.held_index = -1

    def _chunk(self, index: int, parts: list[Json], extra: Json | None = None) -> Json:
        candidate: Json = {"content": {"parts": parts, "role": "model"}, "index": index}
        if extra:
            candidate.update(extra)
        return {"candidates": [candidate], **self.head}

    def _hold(self, chunk: Json, index: int) -> list[Chunk]:
        out = self._flush()
        self.held, self.held_index = chunk, index
        return out

    def on(self, event: Event, result: Result) -> list[Chunk]:
        if isinstance(event, TextDelta):
            if event.echo or (not event.text and not event.tokens):
                return []
            lp = logprobs_fields(event.tokens, self.logprobs, average=False) if self.logprobs is not None else None
            return self._hold(self._chunk(event.index, [{"text": event.text}], lp), event.index)
        if isinstance(event, Reasoning):
            if not self.shows_thoughts:
                return []
            return self._hold(self._chunk(event.index, [{"text": event.text, "thought": True}]), event.index)
        if isinstance(event, Refusal):
            return self._hold(self._chunk(event.index, [{"text": event.text}]), event.index)
        if isinstance(event, Finished):
            choice = result.choices[event.index]
            reason = "SAFETY" if choice.refusal is not None else FINISH[event.reason]
            calls = [{"functionCall": {"name": t.name, "args": arguments(t.arguments)}} for t in choice.tool_calls]
            if calls:
                return self._hold(self._chunk(event.index, calls, {"finishReason": reason}), event.index)
            if self.held is not None and self.held_index == event.index:
                self.held["candidates"][0]["finishReason"] = reason
                return []
            return self._hold(self._chunk(event.index, [{"text": ""}], {"finishReason": reason}), event.index)
        if isinstance(event, Usage):
            usage = usage_metadata(result, image_tokens(self.gen))
            if self.held is None:
                self.held = {"candidates": [], **self.head}
            self.held["usageMetadata"] = usage
            # usageMetadata before the envelope's fields, as Gemini orders them
            self.held = {k: v for k, v in self.held.items() if k not in self.head} | self.head
            return self._flush()
        return []

    def _flush(self) -> list[Chunk]:
        held = self.held
        if held is None:
            return []
        self.held = None
        if len(held) == 3 and len(held["candidates"]) == 1:  # no usageMetadata
            candidate = held["candidates"][0]
            parts = candidate["content"]["parts"]
            if len(candidate) == 2 and len(parts) == 1 and len(parts[0]) == 1 and "text" in parts[0]:
                return [_TextChunk(held, self.tail)]
        return [held]


def all_chunks(call: Call, response_id: str, shows_thoughts: bool, events: Sequence[Event]) -> list[Chunk]:
    """Every chunk of a stream whose events were made at once (a scripted answer)."""
    result = Result()
    chunker = _Chunker(call, response_id, shows_thoughts)
    out: list[Chunk] = []
    for event in events:
        result.apply(event)
        out += chunker.on(event, result)
    return out + chunker._flush()


def array_frames(chunks: Sequence[Chunk]) -> list[Frame]:
    """Ready chunks as one JSON array's pieces (see :func:`in_array`)."""
    if not chunks:
        return [b"[]"]
    out: list[Frame] = [b"[" + _encoded(chunks[0])]
    out += [b",\r\n" + _encoded(chunk) for chunk in chunks[1:]]
    out.append(b"]")
    return out


def _encoded(chunk: Chunk) -> bytes:
    return chunk.json_bytes() if isinstance(chunk, _TextChunk) else dumps(chunk)


async def chunks(
    call: Call, response_id: str, shows_thoughts: bool, first: Event | None, events: AsyncIterator[Event]
) -> AsyncIterator[Chunk]:
    """The stream's chunks (``first`` is the answer's first event, taken off ``events``)."""
    result = Result()
    chunker = _Chunker(call, response_id, shows_thoughts)
    try:
        if first is not None:
            result.apply(first)
            for chunk in chunker.on(first, result):
                yield chunk
        async for event in events:
            result.apply(event)
            for chunk in chunker.on(event, result):
                yield chunk
        for chunk in chunker._flush():
            yield chunk
    finally:
        await aclose(events)


async def in_array(chunks: AsyncIterator[Chunk]) -> AsyncIterator[Frame]:
    """The chunks as one JSON array, written element by element (``[``, ``,\\r\\n``, ``]``)."""
    opened = False
    try:
        async for chunk in chunks:
            yield (b",\r\n" if opened else b"[") + _encoded(chunk)
            opened = True
        yield b"]" if opened else b"[]"
    finally:
        await aclose(chunks)


class ArrayFraming(Framing):
    """A JSON-array stream's error after its first byte: one more element, ``{"error": …}``,
    and the array closed, so what was sent still parses."""

    def error(self, exc: APIError, sequence: int) -> bytes:
        return b",\r\n" + dumps(exc.body(self.style)) + b"]"
