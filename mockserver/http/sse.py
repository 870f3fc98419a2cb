"""Server-sent events: framing, the terminator, and errors once bytes have been sent.

A stream is ``data: {json}\\n\\n`` frames then ``data: [DONE]\\n\\n``. Once the first frame
is out the status line is gone, so a failure mid-stream is reported in-band with the same
envelope as an HTTP error (``data: {"error": {...}}``) and the stream ends without
``[DONE]`` — which is how OpenAI's SDK recognises it and raises ``APIError``.

When the client goes away Starlette stops iterating the body and the backend's next step is
never requested; the body is then closed explicitly (Starlette leaves that to the garbage
collector when ``send`` raised), so every ``finally`` below it runs at once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from mockserver.errors import APIError, ErrorStyle, InternalError

__all__ = ["DONE", "dumps", "event_sse_response", "frame", "named_frame", "sse_response"]

log = logging.getLogger("mockserver")

DONE = b"data: [DONE]\n\n"
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


def dumps(obj: Any) -> bytes:
    """Compact JSON, UTF-8 kept as is (stable bytes for the same object). A lone surrogate
    (JSON may escape half a pair, ``"\\ud800"``, and a field such as ``model`` or ``metadata``
    echoes it back) has no UTF-8 form: such an object goes out ``\\u``-escaped instead."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode()
    except UnicodeEncodeError:
        return json.dumps(obj, separators=(",", ":")).encode()


def frame(obj: Any) -> bytes:
    return b"data: " + dumps(obj) + b"\n\n"


async def _aclose(iterator: object) -> None:
    aclose = getattr(iterator, "aclose", None)
    if aclose is not None:
        await aclose()


class _ClosingStreamingResponse(StreamingResponse):
    """Closes its body however the response ends. Starlette stops iterating a body whose
    ``send`` raised (a stream fault ended the response, or the client left during a stall) and
    leaves it to the garbage collector: what the body's ``finally`` does — a stored Responses
    stream written ``cancelled`` — would wait for a collection, however long that takes."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await _aclose(self.body_iterator)


async def _guarded(frames: AsyncIterator[Iterable[Any]], style: ErrorStyle) -> AsyncIterator[bytes]:
    try:
        async for objects in frames:
            chunk = b"".join(frame(o) for o in objects)
            if chunk:
                yield chunk
        yield DONE
    except APIError as exc:
        yield frame(exc.body(style))
    except Exception:  # never a stack trace on the wire; the log keeps it
        log.exception("stream failed after the first byte")
        yield frame(InternalError("The server had an error while processing your request.").body(style))
    finally:  # closed early (see _ClosingStreamingResponse): so is what it streams
        await _aclose(frames)


def sse_response(
    frames: AsyncIterator[Iterable[Any]], headers: dict[str, str] | None = None, style: ErrorStyle = "openai"
) -> StreamingResponse:
    """Stream JSON objects as SSE; ``frames`` yields a batch of objects per event; errors after
    the first byte are sent in ``style``."""
    return _ClosingStreamingResponse(
        _guarded(frames, style), media_type="text/event-stream", headers={**SSE_HEADERS, **(headers or {})}
    )


def named_frame(obj: dict[str, Any]) -> bytes:
    """A named event, as the Responses API sends them: ``event: <type>`` then its data."""
    return b"event: " + str(obj["type"]).encode() + b"\n" + frame(obj)


async def _guarded_events(events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[bytes]:
    last = -1
    try:
        async for obj in events:
            last = obj.get("sequence_number", last)
            yield named_frame(obj)
    except APIError as exc:
        yield named_frame(_error_event(exc, last + 1))
    except Exception:  # never a stack trace on the wire; the log keeps it
        log.exception("stream failed after the first byte")
        yield named_frame(
            _error_event(InternalError("The server had an error while processing your request."), last + 1)
        )
    finally:
        await _aclose(events)


def _error_event(exc: APIError, number: int) -> dict[str, Any]:
    return {"type": "error", "code": exc.code, "message": exc.message, "param": exc.param, "sequence_number": number}


def event_sse_response(
    events: AsyncIterator[dict[str, Any]], headers: dict[str, str] | None = None
) -> StreamingResponse:
    """Stream named events (each a JSON object with a ``type``), with no ``[DONE]``: a
    Responses stream ends with its closing event. Errors after the first byte become an
    ``error`` event numbered after the last event sent."""
    return _ClosingStreamingResponse(
        _guarded_events(events), media_type="text/event-stream", headers={**SSE_HEADERS, **(headers or {})}
    )
