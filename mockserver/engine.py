"""The engine: runs a generation through the backend and the wrappers layered on it.

``backend ▸ scripted rules ▸ faults ▸ latency`` — the wrappers arrive with their issues; each
is an async-iterator transformer, so they apply to every backend alike.

The engine also *primes* streams: a streaming response has sent ``200`` before it starts
iterating, so the first event is awaited here, first. Anything wrong with the request (bad
token ids, context overflow) surfaces as an HTTP status, not as a broken stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from mockserver.best_of import best_of
from mockserver.generation import Backend, Event, GenerationRequest, Result

__all__ = ["Engine"]


class Engine:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def events(self, request: GenerationRequest) -> AsyncIterator[Event]:
        if request.best_of is not None and request.best_of > request.n:
            return best_of(self.backend.generate, request)
        return self.backend.generate(request)

    async def primed(self, request: GenerationRequest) -> AsyncIterator[Event]:
        """The event stream with its first event already computed (errors raise here)."""
        stream = self.events(request)
        try:
            first = await anext(stream)
        except BaseException:
            await _aclose(stream)
            raise
        return _prepend(first, stream)

    async def complete(self, request: GenerationRequest) -> Result:
        """Fold the whole stream: the non-streaming answer."""
        result = Result()
        stream = self.events(request)
        try:
            async for event in stream:
                result.apply(event)
        finally:
            await _aclose(stream)
        return result


async def _prepend(first: Event, rest: AsyncIterator[Event]) -> AsyncIterator[Event]:
    try:
        yield first
        async for event in rest:
            yield event
    finally:
        await _aclose(rest)


async def _aclose(stream: AsyncIterator[Event]) -> None:
    """Close an async generator now (its ``finally`` blocks run), not at garbage collection."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
