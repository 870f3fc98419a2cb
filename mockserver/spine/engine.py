"""The engine: runs a generation through the backend and the wrappers layered on it.

``backend ▸ best_of ▸ content faults ▸ latency`` — each an async-iterator transformer, so
they apply to every backend alike (scripted rules join with their issue). The faults a
request gets are decided at the HTTP edge (:mod:`mockserver.faults.injector`) and handed in.

The engine also *primes* streams: a streaming response has sent ``200`` before it starts
iterating, so the first event is awaited here, first. Anything wrong with the request (bad
token ids, context overflow) surfaces as an HTTP status, not as a broken stream.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from dataclasses import replace

from mockserver.backends.reference.best_of import best_of
from mockserver.faults.catalogue import Fault
from mockserver.faults.latency import Timeline, paced
from mockserver.spine.backend import Backend
from mockserver.spine.events import Event, Finished, FinishReason, Refusal, TextDelta
from mockserver.spine.request import GenerationRequest
from mockserver.spine.result import Result
from mockserver.spine.seeding import digest

__all__ = ["Engine"]

_FINISH_FAULTS: dict[str, FinishReason] = {"content.length": "length", "content.filter": "content_filter"}


class Engine:
    def __init__(self, backend: Backend, timeline: Timeline | None = None, time_scale: float = 1.0) -> None:
        self.backend = backend
        self.timeline = timeline or Timeline()
        self.time_scale = time_scale

    def events(self, request: GenerationRequest, faults: tuple[Fault, ...] = ()) -> AsyncIterator[Event]:
        if request.best_of is not None and request.best_of > request.n:
            stream = best_of(self.backend.generate, request)
        else:
            stream = self.backend.generate(request)
        finish = next((_FINISH_FAULTS[f.name] for f in faults if f.name in _FINISH_FAULTS), None)
        if finish is not None:
            stream = _finishing(stream, finish)
        if any(f.name == "content.refusal" for f in faults):
            stream = _refusing(stream)
        timeline = self.timeline.with_faults(faults) if faults else self.timeline
        if not timeline.idle:
            # The request's own generator: the same request waits the same, run after run.
            rng = random.Random(int.from_bytes(digest(b"latency", request.seed, request.canonical)[:8], "big"))
            stream = paced(stream, timeline, rng, self.time_scale)
        return stream

    async def primed(self, request: GenerationRequest, faults: tuple[Fault, ...] = ()) -> AsyncIterator[Event]:
        """The event stream with its first event already computed (errors raise here)."""
        stream = self.events(request, faults)
        try:
            first = await anext(stream)
        except BaseException:
            await _aclose(stream)
            raise
        return _prepend(first, stream)

    async def complete(self, request: GenerationRequest, faults: tuple[Fault, ...] = ()) -> Result:
        """Fold the whole stream: the non-streaming answer (paced like its stream would be)."""
        result = Result()
        stream = self.events(request, faults)
        try:
            async for event in stream:
                result.apply(event)
        finally:
            await _aclose(stream)
        return result


async def _finishing(events: AsyncIterator[Event], reason: FinishReason) -> AsyncIterator[Event]:
    """Every choice finishes with ``reason`` (the ``content.*`` faults)."""
    try:
        async for event in events:
            yield replace(event, reason=reason, matched=None) if isinstance(event, Finished) else event
    finally:
        await _aclose(events)


REFUSAL = "I'm sorry, but I can't help with that."


async def _refusing(events: AsyncIterator[Event]) -> AsyncIterator[Event]:
    """Every choice refuses (the ``content.refusal`` fault): its generated text is replaced by
    one refusal; the prompt echo, usage and finish stay the model's."""
    try:
        async for event in events:
            if isinstance(event, TextDelta) and not event.echo:
                continue
            if isinstance(event, Finished):
                yield Refusal(event.index, REFUSAL)
                event = replace(event, reason="stop", matched=None)
            yield event
    finally:
        await _aclose(events)


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
