"""``x-request-id`` on every answer, as OpenAI sends one (the SDKs expose it as ``_request_id``).

OpenAI's ids are random; ours are a hash of the request — its method, its path as the client
sent it (prefix and query included) and the body bytes the server read — so the same request
gets the same id on every run and every server, and a golden answer stays byte-stable. The
hash is fed as the application reads the body (nothing is buffered twice), and taken when the
answer starts: by then whatever decides the answer has been read.

An answer that already carries an ``x-request-id`` keeps it: a replayed or recorded answer is
the provider's own bytes, id included. The 500 that Starlette's outermost error layer sends
for an unexpected exception passes outside this layer; it reads the id with :func:`request_id`
from the scope.
"""

from __future__ import annotations

import hashlib

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["HEADER", "REQUEST_ID_KEY", "RequestId", "request_id"]

HEADER = b"x-request-id"
REQUEST_ID_KEY = "mockserver.request_id"  # the request's running hash, left in the ASGI scope
PREFIX = "req_"
DIGITS = 32  # hex digits, as OpenAI's ids carry


def request_id(scope: Scope) -> str | None:
    """The id of the request in ``scope`` (what it has read of its body so far), or None
    outside :class:`RequestId`."""
    running = scope.get(REQUEST_ID_KEY)
    return PREFIX + running.copy().hexdigest()[:DIGITS] if running is not None else None


class RequestId:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        running = hashlib.sha256()
        for part in (scope["method"].encode(), scope.get("raw_path") or scope["path"].encode(), scope["query_string"]):
            # Each part with its length, so ("/a", "b=1") and ("/ab", "=1") differ.
            running.update(len(part).to_bytes(8, "big") + part)
        # In the scope itself (not a copy): the error layer outside sees the same dict.
        scope[REQUEST_ID_KEY] = running

        async def hashed() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                running.update(message.get("body", b""))
            return message

        async def stamped(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                if not any(key.lower() == HEADER for key, _ in headers):
                    value = request_id(scope)
                    assert value is not None
                    headers.append((HEADER, value.encode()))
                    message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, hashed, stamped)
