"""``x-request-id`` on every answer, as OpenAI sends one (the SDKs expose it as ``_request_id``).

OpenAI's ids are random; ours are a hash of the request — its method, its path as the client
sent it (prefix and query included) and the body bytes the server read — so the same request
gets the same id on every run and every server, and a golden answer stays byte-stable. The
hash is fed as the application reads the body (nothing is buffered twice), and taken when the
answer starts: by then whatever decides the answer has been read.

An answer that already carries an ``x-request-id`` keeps it: a replayed or recorded answer is
the provider's own bytes, id included. The 500 that Starlette's outermost error layer sends
for an unexpected exception passes outside the edge; it reads the id with :func:`request_id`
from the scope.
"""

from __future__ import annotations

import hashlib
from typing import Any

from starlette.types import Message, Receive, Scope

from mockserver.wire.scope import REQUEST_ID_KEY

__all__ = ["HEADER", "Hash", "begin", "hashing", "id_of", "request_id"]

HEADER = b"x-request-id"
Hash = Any  # hashlib's sha256 object (its type is private)
PREFIX = "req_"
DIGITS = 32  # hex digits, as OpenAI's ids carry


def request_id(scope: Scope) -> str | None:
    """The id of the request in ``scope`` (what it has read of its body so far), or None
    outside the edge."""
    running = scope.get(REQUEST_ID_KEY)
    return id_of(running) if running is not None else None


def id_of(running: Hash) -> str:
    """The id a running hash stands at."""
    digits: str = running.copy().hexdigest()
    return PREFIX + digits[:DIGITS]


def begin(scope: Scope) -> Hash:
    """Start the request's hash (left in ``scope``: the error layer outside the edge reads it)
    from its method and path as sent; the edge feeds it the body as it reads it."""
    running = hashlib.sha256()
    for part in (scope["method"].encode(), scope.get("raw_path") or scope["path"].encode(), scope["query_string"]):
        # Each part with its length, so ("/a", "b=1") and ("/ab", "=1") differ.
        running.update(len(part).to_bytes(8, "big") + part)
    scope[REQUEST_ID_KEY] = running
    return running


def hashing(running: Hash, receive: Receive) -> Receive:
    """``receive`` that feeds the body it passes on to ``running``."""

    async def hashed() -> Message:
        message = await receive()
        if message["type"] == "http.request":
            running.update(message.get("body", b""))
        return message

    return hashed
