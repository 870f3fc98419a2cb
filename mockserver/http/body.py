"""Request bodies: read once, parsed once, shared by everything that needs them.

The edge (:class:`~mockserver.http.limits.BodyLimits`) reads the body, bounded, and parses a
JSON one; the fault injector (it journals the body and decides faults on it) reads it there,
or itself when the edge did not; either leaves ``(raw, parsed)`` in the ASGI scope under
:data:`BODY_KEY`, and handlers take it from there with :func:`json_body` instead of reading and
parsing again.

JSON is read strictly (:func:`loads`): ``NaN``, ``Infinity`` and numbers too big for a double
(``1e400``) are no JSON numbers, and whatever was read may be echoed back, so they are a 400
naming the field, never a float that no JSON encoder can write.
"""

from __future__ import annotations

import json
import math
from typing import Any

from starlette.requests import Request
from starlette.types import Message, Receive, Send

from mockserver.errors import InvalidRequest, RequestTooLarge, clip

__all__ = [
    "BODY_KEY",
    "Json",
    "NotFinite",
    "NotJson",
    "buffered",
    "json_body",
    "loads",
    "parse_json",
    "parse_lenient",
    "read_body",
    "replaying",
    "send_bytes",
]

Json = dict[str, Any]  # a JSON object, as the wire and the stores carry it
BODY_KEY = "mockserver.body"  # (raw bytes, parsed JSON or None), set by the edge

_NOT_JSON = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
    "using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was "
    "sent was not valid JSON.)"
)


class NotJson(ValueError):
    """Text that is not JSON (or nests deeper than the parser can follow)."""


class NotFinite(InvalidRequest):
    """A number JSON cannot carry, named by where it is in the body."""

    def __init__(self, literal: str, path: str | None) -> None:
        told = (
            f"'{clip(literal, 40)}' is not a JSON number: NaN and Infinity are not allowed, "
            "and numbers must fit a double."
        )
        where = f"Invalid value for '{path}': " if path else "Invalid JSON body: "
        super().__init__(where + told, param=path)


class _Unwritable(ValueError):
    def __init__(self, literal: str) -> None:
        super().__init__(literal)
        self.literal = literal


def _constant(name: str) -> Any:
    raise _Unwritable(name)  # NaN, Infinity, -Infinity


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e400: a float literal past the largest double
        raise _Unwritable(text)
    return value


def loads(raw: bytes | str) -> Any:
    """Strict JSON: :class:`NotJson` for what is not JSON, :class:`NotFinite` (a 400 naming
    the field) for ``NaN``, ``Infinity`` or a number that overflows a double."""
    try:
        return json.loads(raw, parse_constant=_constant, parse_float=_finite)
    except _Unwritable as exc:
        raise NotFinite(exc.literal, _path_of(raw)) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise NotJson(str(exc)) from None
    except RecursionError:
        raise NotJson("it nests too deeply") from None


class _Marker:
    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal


def _path_of(raw: bytes | str) -> str | None:
    """Where the first number JSON cannot carry is, as a parameter path (``tools[0].parameters.x``)."""

    def mark_float(text: str) -> Any:
        value = float(text)
        return _Marker(text) if math.isinf(value) else value

    try:
        parsed = json.loads(raw, parse_constant=_Marker, parse_float=mark_float)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[Any, str]] = [(parsed, "")]
    while stack:  # depth first, in document order
        value, path = stack.pop()
        if isinstance(value, _Marker):
            return path or None
        if isinstance(value, dict):
            items = [(v, f"{path}.{clip(str(k), 40)}" if path else clip(str(k), 40)) for k, v in value.items()]
        elif isinstance(value, list):
            items = [(v, f"{path}[{i}]") for i, v in enumerate(value)]
        else:
            continue
        stack.extend(reversed(items))
    return None


def parse_lenient(raw: bytes) -> Any:
    """The JSON body, or None when there is none or it is no JSON (the handler says why)."""
    try:
        return loads(raw) if raw else None
    except (NotJson, NotFinite):
        return None


def parse_json(raw: bytes) -> Json:
    """The body as a JSON object, or OpenAI's 400 for anything else."""
    try:
        data = loads(raw)
    except NotJson:
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
