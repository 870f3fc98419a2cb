"""Request bodies: read once, parsed once, shared by everything that needs them.

The edge (:func:`~mockserver.http.limits.take_body`) reads the body, bounded, and parses a
JSON one; the fault injector (it journals the body and decides faults on it) reads it there,
or itself when the edge did not; either leaves ``(raw, parsed)`` in the ASGI scope under
:data:`BODY_KEY`, and handlers take it from there with :func:`json_body` instead of reading and
parsing again.

JSON is read strictly (:func:`loads`): ``NaN``, ``Infinity`` and numbers too big for a double
(``1e400``) are no JSON numbers, and whatever was read may be echoed back, so they are a 400
naming the field, never a float that no JSON encoder can write.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import Message, Receive, Send

from mockserver.errors import RequestTooLarge
from mockserver.wire.json import Json, parse_json
from mockserver.wire.scope import BODY_KEY

__all__ = ["buffered", "json_body", "read_body", "replaying", "send_bytes"]


async def json_body(request: Request) -> tuple[bytes, Json]:
    """The raw body and its JSON object (parsed at the edge when it ran; a 400 if not JSON)."""
    parsed = request.scope.get(BODY_KEY)
    if parsed is not None:
        raw, data = parsed
        return raw, data if isinstance(data, dict) else parse_json(raw)
    raw = await request.body()
    return raw, parse_json(raw)


async def read_body(receive: Receive, limit: int | None = None) -> bytes | None:
    """The whole request body (None if the client left before sending it all), read no
    further than ``limit`` bytes: :class:`~mockserver.errors.RequestTooLarge` once past it."""
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if limit is not None and size > limit:
            raise RequestTooLarge(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def buffered(receive: Receive, limit: int | None = None) -> tuple[bytes, Receive]:
    """The whole request body (as far as it came: the client may have left), and a
    ``receive`` that replays it, then passes through; bounded as :func:`read_body`."""
    read = await read_body(receive, limit)
    raw = read if read is not None else b""
    return raw, replaying(raw, receive)


def replaying(raw: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the body read already, then passes through (a disconnect)."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": raw, "more_body": False}
        return await receive()

    return replay


async def send_bytes(send: Send, status: int, body: bytes, media: str, headers: dict[str, str]) -> None:
    """A whole response from ready bytes (errors and answers written at the edge)."""
    head = [(b"content-type", media.encode()), (b"content-length", str(len(body)).encode())]
    head += [(k.encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body, "more_body": False})
