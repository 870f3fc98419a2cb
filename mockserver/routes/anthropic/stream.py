"""A Messages stream, event by event, as Anthropic sends it.

``message_start`` (the message with no content yet, its input tokens known), one ``ping``,
then per content block ``content_block_start`` → ``content_block_delta``\\* →
``content_block_stop`` (``text_delta``, ``thinking_delta`` then one ``signature_delta``,
``input_json_delta``), then ``message_delta`` (``stop_reason``, ``stop_sequence``, the usage
totals) and ``message_stop``. Blocks open in the order the events come, by the rules
:func:`~mockserver.routes.anthropic.codec.blocks` writes the folded message with, so the SDK's
own stream helper folds a stream into the non-streamed twin.

A failure once the stream has begun is Anthropic's in-band ``error`` event (its envelope, as
a 4xx/5xx body would carry it), and the stream ends — ``stream.error_at`` included, which the
SSE writer throws in here.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from mockserver.errors import APIError, InternalError
from mockserver.http.sse import Framing
from mockserver.routes.anthropic.message import head, message, signature, stop_of, tool_id, usage
from mockserver.routes.codec import Call
from mockserver.spine.backend import aclose
from mockserver.spine.events import Event, Finished, Reasoning, Refusal, Started, TextDelta, ToolCallDelta
from mockserver.spine.result import Result
from mockserver.wire.json import Json

__all__ = ["MessagesFraming", "all_frames", "frames"]

log = logging.getLogger("mockserver")

PING: Json = {"type": "ping"}
STOP: Json = {"type": "message_stop"}


class _Writer:
    """The open block of one stream, and what has been said."""

    def __init__(self, call: Call, result: Result) -> None:
        self.call = call
        self.result = result
        self.started = False
        self.kind: str | None = None  # the open block's type
        self.index = -1  # the open (or last) block's index

    def start(self, prompt_tokens: int) -> list[Json]:
        if self.started:
            return []
        self.started = True
        u = usage(None, self.call.service_tier)
        u["input_tokens"] = prompt_tokens
        opened = {**head(self.call), "content": [], "stop_reason": None, "stop_sequence": None, "usage": u}
        return [{"type": "message_start", "message": opened}, PING]

    def _close(self) -> list[Json]:
        if self.kind is None:
            return []
        out: list[Json] = []
        if self.kind == "thinking":
            thought = self.result.choices[0].reasoning or ""
            sig = {"type": "signature_delta", "signature": signature(self.call, thought)}
            out.append({"type": "content_block_delta", "index": self.index, "delta": sig})
        out.append({"type": "content_block_stop", "index": self.index})
        self.kind = None
        return out

    def _open(self, block: Json) -> list[Json]:
        out = self._close()
        self.index += 1
        self.kind = str(block["type"])
        out.append({"type": "content_block_start", "index": self.index, "content_block": block})
        return out

    def _delta(self, delta: Json) -> Json:
        return {"type": "content_block_delta", "index": self.index, "delta": delta}

    def event(self, event: Event) -> list[Json]:
        if isinstance(event, Started):
            return self.start(event.prompt_tokens) if event.index == 0 else []
        out = self.start(0)  # a backend that sent no Started: the message opens now
        if getattr(event, "index", 0) != 0:
            return out  # one choice only (Anthropic has no ``n``)
        if isinstance(event, Reasoning):
            if self.kind != "thinking":
                out += self._open({"type": "thinking", "thinking": "", "signature": ""})
            out.append(self._delta({"type": "thinking_delta", "thinking": event.text}))
        elif isinstance(event, TextDelta | Refusal):
            if self.kind != "text":
                out += self._open({"type": "text", "text": ""})
            out.append(self._delta({"type": "text_delta", "text": event.text}))
        elif isinstance(event, ToolCallDelta):
            if event.id is not None or event.name is not None:
                call = self.result.choices[0].tool_calls[event.call_index]
                out += self._open({"type": "tool_use", "id": tool_id(call.id), "name": call.name, "input": {}})
            if event.arguments:
                out.append(self._delta({"type": "input_json_delta", "partial_json": event.arguments}))
        elif isinstance(event, Finished):
            if self.index < 0:  # nothing said: the message still has its (empty) text block
                out += self._open({"type": "text", "text": ""})
            out += self._close()
        return out

    def end(self) -> list[Json]:
        out = self.start(0) + self._close()
        reason, sequence = stop_of(self.result.choices.get(0))
        totals = usage(self.result.usage, None)
        counts = {k: totals[k] for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")}
        closing = {"stop_reason": reason, "stop_sequence": sequence}
        out.append(
            {"type": "message_delta", "delta": closing, "usage": {**counts, "output_tokens": totals["output_tokens"]}}
        )
        out.append(STOP)
        return out


def error_event(exc: APIError) -> Json:
    """Anthropic's in-band error: the same envelope an error status carries."""
    return exc.body("anthropic")


class MessagesFraming(Framing):
    """Named events; an error after the first byte (a stream made at once cannot answer one
    itself) is Anthropic's ``error`` event, as :func:`frames` writes it."""

    def error(self, exc: APIError, sequence: int) -> bytes:
        return self.encode(error_event(exc))


def all_frames(call: Call, events: Sequence[Event]) -> list[Json]:
    """Every event of a stream whose answer was made at once (a scripted one)."""
    result = Result()
    writer = _Writer(call, result)
    out: list[Json] = []
    for event in events:
        result.apply(event)
        out += writer.event(event)
    return out + writer.end()


async def frames(
    call: Call,
    first: Event | None,
    events: AsyncIterator[Event],
    keep: Callable[[Json], Awaitable[None]] | None = None,
) -> AsyncIterator[Json]:
    """The stream's events (``first`` taken off ``events`` already), each named by its ``type``;
    ``keep`` is given the whole message before ``message_stop`` (a threaded turn is kept)."""
    result = Result()
    writer = _Writer(call, result)
    try:
        if first is not None:
            result.apply(first)
            for frame in writer.event(first):
                yield frame
        async for event in events:
            result.apply(event)
            for frame in writer.event(event):
                yield frame
        if keep is not None:
            await keep(message(call, result))
        for frame in writer.end():
            yield frame
    except APIError as exc:  # mid-stream (stream.error_at is thrown in here): in-band, then the end
        yield error_event(exc)
    except Exception:  # never a stack trace on the wire; the log keeps it
        log.exception("Messages stream failed after the first byte")
        yield error_event(InternalError("Internal server error"))
    finally:
        await aclose(events)
