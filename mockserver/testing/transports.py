"""How the pytest plugin's clients reach a server from whatever thread or event loop a test runs on.

A test's clients are made by plain fixtures, outside any event loop, and used from the test's
loop (an async test's, which pytest-asyncio makes per test) or from none. The server's app
and the clients' connections therefore live on a :class:`Loop` of their own, in a thread,
and the transports here hand each request over to it:

* :class:`SyncHop`: a sync client's requests answered by an async transport on the loop —
  the only way a sync client can reach an app through ASGI; bodies come back whole.
* :class:`AsyncHop`: an async client's requests, chunk by chunk, so a stream still arrives
  as it is sent (over a socket; ``httpx2.ASGITransport`` buffers bodies anyway), and the
  client closes from a fixture's teardown, where there is no loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

import httpx2

__all__ = ["AsyncHop", "Loop", "SyncHop"]

_T = TypeVar("_T")


class Loop:
    """An event loop running in a daemon thread; coroutines are handed to it from outside."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    @property
    def closed(self) -> bool:
        return self.loop.is_closed()

    def run(self, coro: Coroutine[Any, Any, _T], timeout: float | None = None) -> _T:
        """Run ``coro`` on this loop and wait for it (from a thread without a running loop)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run ``coro`` on this loop, awaited from another loop (cancelling it cancels it here)."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def close(self) -> None:
        if self.closed:
            return
        self.run(_cancel_others(), timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


async def _cancel_others() -> None:
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _copy(request: httpx2.Request, body: bytes) -> httpx2.Request:
    """The request with its body read, so the other loop (or ASGI) can read it again."""
    return httpx2.Request(request.method, request.url, headers=request.headers, content=body)


class SyncHop(httpx2.BaseTransport):
    """A sync client's requests, answered by an async transport on a loop thread; bodies whole."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, loop: Loop) -> None:
        self._inner = inner
        self._loop = loop

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        status, headers, content = self._loop.run(self._send(_copy(request, request.read())))
        return httpx2.Response(status, headers=headers, content=content)

    async def _send(self, request: httpx2.Request) -> tuple[int, httpx2.Headers, bytes]:
        response = await self._inner.handle_async_request(request)
        try:
            return response.status_code, response.headers, b"".join([c async for c in response.stream])  # type: ignore[union-attr]
        finally:
            await response.aclose()


class AsyncHop(httpx2.AsyncBaseTransport):
    """An async client's requests, answered by another async transport on a loop thread,
    chunk by chunk: the client may live on any event loop, the connections on this one."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, loop: Loop) -> None:
        self._inner = inner
        self._loop = loop

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        copied = _copy(request, await request.aread())
        response = await self._loop.call(self._inner.handle_async_request(copied))
        return httpx2.Response(response.status_code, headers=response.headers, stream=_HopStream(response, self._loop))

    async def aclose(self) -> None:
        if not self._loop.closed:
            await self._loop.call(self._inner.aclose())

    def close_now(self) -> None:
        """Close from outside any event loop (a fixture's teardown)."""
        if not self._loop.closed:
            self._loop.run(self._inner.aclose(), timeout=10)


class _HopStream(httpx2.AsyncByteStream):
    def __init__(self, response: httpx2.Response, loop: Loop) -> None:
        self._chunks: AsyncIterator[bytes] = response.stream.__aiter__()  # type: ignore[union-attr]
        self._response = response
        self._loop = loop

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            more, chunk = await self._loop.call(self._next())
            if not more:
                return
            yield chunk

    async def _next(self) -> tuple[bool, bytes]:
        # StopAsyncIteration must not escape a task: it says "the end" as a value instead.
        try:
            return True, await self._chunks.__anext__()
        except StopAsyncIteration:
            return False, b""

    async def aclose(self) -> None:
        if not self._loop.closed:
            await self._loop.call(self._response.aclose())
