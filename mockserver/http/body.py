"""Request bodies: read once, parsed once, shared by everything that needs them.

The fault injector at the edge reads the body (it journals it and decides faults on it) and
leaves ``(raw, parsed)`` in the ASGI scope under :data:`BODY_KEY`; handlers take it from
there with :func:`json_body` instead of reading and parsing again.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.types import Message, Receive, Send

from mockserver.errors import InvalidRequest

__all__ = ["BODY_KEY", "Json", "buffered", "json_body", "parse_json", "parse_lenient", "send_bytes"]

Json = dict[str, Any]  # a JSON object, as the wire and the stores carry it
BODY_KEY = "mockserver.body"  # (raw bytes, parsed JSON or None), set by the edge

_NOT_JSON = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
    "using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was "
    "sent was not valid JSON.)"
)


def parse_lenient(raw: bytes) -> Any:
    """The JSON body, or None when there is none or it does not parse (the handler says why)."""
    try:
        return json.loads(raw) if raw else None
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def parse_json(raw: bytes) -> Json:
    """The body as a JSON object, or OpenAI's 400 for anything else."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise InvalidRequest(_NOT_JSON) from None
    if not isinstance(data, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    return data


async def json_body(request: Request) -> tuple[bytes, Json]:
    """The raw body and its JSON object (parsed at the edge when it ran; a 400 if not JSON)."""
    parsed = request.scope.get(BODY_KEY)
    if parsed is not None:
        raw, data = parsed
        return raw, data if isinstance(data, dict) else parse_json(raw)
    raw = await request.body()
    return raw, parse_json(raw)


async def buffered(receive: Receive) -> tuple[bytes, Receive]:
    """The whole request body, and a ``receive`` that replays it, then passes through."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    raw = b"".join(chunks)
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": raw, "more_body": False}
        return await receive()

    return raw, replay


async def send_bytes(send: Send, status: int, body: bytes, media: str, headers: dict[str, str]) -> None:
    """A whole response from ready bytes (errors and answers written at the edge)."""
    head = [(b"content-type", media.encode()), (b"content-length", str(len(body)).encode())]
    head += [(k.encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body, "more_body": False})
