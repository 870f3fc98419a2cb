"""Two interchangeable HTTP/1.1 keep-alive clients for the load generator.

``RawConnection`` speaks just enough HTTP/1.1 over an asyncio stream (one prebuilt request,
``Content-Length`` or chunked replies) to cost the client as little CPU as possible: on two
cores the load generator and the server compete for the same CPUs, so every microsecond the
client spends is taken from the server. ``HttpxConnection`` does the same through
``httpx.AsyncClient``, to show how much a real client library costs (see the report's
client check).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import httpx

__all__ = ["Connection", "HttpxConnection", "OnChunk", "RawConnection", "Reply", "Request", "open_connection"]


@dataclass(frozen=True, slots=True)
class Request:
    """One request, reused for every call of a cell."""

    method: str
    path: str
    body: bytes = b""


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes  # the whole body (for SSE: every frame, concatenated)
    first_chunk: float  # perf_counter() when the first body bytes arrived
    first_token: float = 0.0  # perf_counter() when the first generated text arrived (streams; 0: none)


# Called with perf_counter() as each body chunk arrives (for SSE: one event batch).
OnChunk = Callable[[float], None] | None

# A chunk carrying generated text: a non-empty chat `content`, completions `text` or Responses
# `delta` string. The role frame (`"content":""`) that opens a chat stream does not count, so
# the first match is the time to the first token, not to the first frame.
_TOKEN = re.compile(rb'"(?:content|text|delta)":"[^"]')


def _has_token(chunk: bytes) -> bool:
    return _TOKEN.search(chunk) is not None


class Connection(Protocol):
    async def send(self, request: Request, on_chunk: OnChunk = None) -> Reply: ...

    async def close(self) -> None: ...


class RawConnection:
    """A single keep-alive connection; requests on it are strictly sequential."""

    def __init__(self, host: str, port: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._host = f"{host}:{port}"
        self._reader = reader
        self._writer = writer
        self._wire: dict[Request, bytes] = {}  # request → its bytes, built once

    @classmethod
    async def connect(cls, host: str, port: int) -> RawConnection:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(host, port, reader, writer)

    def _bytes(self, request: Request) -> bytes:
        wire = self._wire.get(request)
        if wire is None:
            head = f"{request.method} {request.path} HTTP/1.1\r\nHost: {self._host}\r\n"
            if request.method == "POST":
                head += f"Content-Type: application/json\r\nContent-Length: {len(request.body)}\r\n"
            wire = self._wire[request] = head.encode() + b"\r\n" + request.body
        return wire

    async def send(self, request: Request, on_chunk: OnChunk = None) -> Reply:
        self._writer.write(self._bytes(request))
        reader = self._reader
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        lower = head.lower()
        if b"transfer-encoding: chunked" in lower:
            parts: list[bytes] = []
            first = token = 0.0
            while True:
                size = int((await reader.readuntil(b"\r\n"))[:-2].split(b";")[0], 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")  # no trailers: just the final CRLF
                    break
                chunk = (await reader.readexactly(size + 2))[:-2]
                parts.append(chunk)
                now = time.perf_counter()
                first = first or now
                if not token and _has_token(chunk):
                    token = now
                if on_chunk is not None:
                    on_chunk(now)
            return Reply(status, b"".join(parts), first, token)
        at = lower.find(b"content-length:")
        length = int(lower[at + 15 : lower.find(b"\r\n", at)]) if at >= 0 else 0
        body = await reader.readexactly(length) if length else b""
        now = time.perf_counter()
        return Reply(status, body, now, now)

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(OSError):  # the peer may have gone already
            await self._writer.wait_closed()


class HttpxConnection:
    """The same contract through a shared ``httpx.AsyncClient`` (its pool holds the connections)."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    @staticmethod
    def shared_client(host: str, port: int, connections: int) -> httpx.AsyncClient:
        """One client for all workers, with a connection per worker so none queues."""
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        return httpx.AsyncClient(base_url=f"http://{host}:{port}", limits=limits, timeout=60)

    async def send(self, request: Request, on_chunk: OnChunk = None) -> Reply:
        headers = {"content-type": "application/json"} if request.method == "POST" else None
        built = self._client.build_request(request.method, request.path, content=request.body or None, headers=headers)
        response = await self._client.send(built, stream=True)
        try:
            parts: list[bytes] = []
            first = token = 0.0
            async for chunk in response.aiter_raw():
                now = time.perf_counter()
                first = first or now
                if not token and _has_token(chunk):
                    token = now
                if on_chunk is not None:
                    on_chunk(now)
                parts.append(chunk)
            end = time.perf_counter()
            return Reply(response.status_code, b"".join(parts), first or end, token or end)
        finally:
            await response.aclose()

    async def close(self) -> None:
        """The shared client is closed by its owner."""


async def open_connection(kind: str, host: str, port: int, shared: httpx.AsyncClient | None = None) -> Connection:
    """A connected client of ``kind``: "raw", or "httpx" over the ``shared`` client."""
    if kind == "raw":
        return await RawConnection.connect(host, port)
    if kind == "httpx" and shared is not None:
        return HttpxConnection(shared)
    raise ValueError(f"unknown client {kind!r} (httpx needs a shared client)")
