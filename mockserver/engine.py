"""The engine: runs a generation through the backend chain and the wrappers every answer gets.

``chain ▸ content faults ▸ latency ▸ usage count`` — each an async-iterator transformer, so
they apply to every backend alike: the model, scripted answers, replays and recordings. The
faults a request gets are decided at the HTTP edge (:mod:`mockserver.edge.injection`) and
handed in; stream faults act later, on the frames (:mod:`mockserver.http.sse`).

The engine also *primes* streams: a streaming response has sent ``200`` before it starts
iterating, so the first event is awaited here, first. Anything wrong with the request (bad
token ids, context overflow, a cassette miss) surfaces as an HTTP status, not as a broken
stream.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Iterable, Sequence

from mockserver.faults import content
from mockserver.faults.catalogue import Fault
from mockserver.faults.latency import Timeline, paced
from mockserver.spine.backend import Answering, Ask, Chain, Played, Unbuilt, aclose
from mockserver.spine.events import Answered, Event, Usage
from mockserver.spine.request import GenerationRequest
from mockserver.spine.result import Result
from mockserver.spine.seeding import digest

__all__ = ["Engine", "fold", "folded"]


class Engine:
    """``chain`` answers; ``timeline`` paces every answer (``--latency``), ``time_scale``
    multiplies its delays, and ``on_usage`` sees each answer's token counts (metrics)."""

    def __init__(
        self,
        chain: Chain,
        timeline: Timeline | None = None,
        time_scale: float = 1.0,
        on_usage: Callable[[Usage], None] | None = None,
    ) -> None:
        self.chain = chain
        self.timeline = timeline or Timeline()
        self.time_scale = time_scale
        self.on_usage = on_usage

    def timeline_of(self, faults: Sequence[Fault]) -> Timeline:
        """The latency a request with ``faults`` is paced by."""
        return self.timeline.with_faults(tuple(faults)) if faults else self.timeline

    async def open(
        self, ask: Ask | GenerationRequest, faults: Sequence[Fault] = ()
    ) -> tuple[str, Event | None, AsyncIterator[Event]]:
        """Who answers, the answer's first event (None: it is empty) and the rest, under the
        wrappers, for an ask whose request is built. Errors about the request raise here,
        before any byte is sent: the chain has found its backend and that backend's first
        event is computed (a paced one waited for)."""
        opened = await self.start(Ask.of(ask) if isinstance(ask, GenerationRequest) else ask, faults)
        assert not isinstance(opened, Unbuilt), "open() takes an ask whose request is built: start() the others"
        return opened

    async def start(self, ask: Ask, faults: Sequence[Fault] = (), at: int = 0) -> Answering | Unbuilt:
        """:meth:`open` for an ask whose request may not be built yet: where the chain needs it
        (:class:`~mockserver.spine.backend.Unbuilt`), its caller builds it and starts again there."""
        started = await self.chain.start(ask, at)
        if isinstance(started, Unbuilt):
            return started
        name, first, stream = started
        timeline = self.timeline_of(faults)
        if faults or not timeline.idle:
            stream = content.apply(_prepend(first, stream) if first is not None else stream, faults, ask.built)
            if not timeline.idle:
                # The request's own generator: the same request waits the same, run after run
                # (a recording's request, never decoded, by its body as sent).
                built = ask.built
                key = (built.seed, built.canonical) if built is not None else (ask.source.body,)
                rng = random.Random(int.from_bytes(digest(b"latency", *key)[:8], "big"))
                stream = paced(stream, timeline, rng, self.time_scale)
            try:
                first = await anext(stream)
            except StopAsyncIteration:
                first = None
            except BaseException:
                await aclose(stream)
                raise
        if self.on_usage is not None:
            if isinstance(first, Usage):
                self.on_usage(first)
            if isinstance(stream, Played):  # it counts as its events are taken, drained or not
                stream.on_usage = self.on_usage
            else:
                stream = _counted(stream, self.on_usage)
        return name, first, stream

    async def events(self, ask: Ask | GenerationRequest, faults: Sequence[Fault] = ()) -> AsyncIterator[Event]:
        """The answer's events, :class:`~mockserver.spine.events.Answered` first."""
        name, first, stream = await self.open(ask, faults)
        if first is not None:
            stream = _prepend(first, stream)
        return _prepend(Answered(name), stream)

    async def complete(self, ask: Ask | GenerationRequest, faults: Sequence[Fault] = ()) -> Result:
        """Fold the whole answer: the non-streaming one (paced like its stream would be)."""
        return await folded(*await self.open(ask, faults))


def fold(by: str, events: Iterable[Event]) -> Result:
    """``events``, all of an answer's (its first included), folded whole."""
    result = Result(answered_by=by)
    for event in events:
        result.apply(event)
    return result


async def folded(by: str, first: Event | None, rest: AsyncIterator[Event]) -> Result:
    """An opened answer (see :meth:`Engine.open`) folded whole: the non-streaming answer."""
    result = Result(answered_by=by)
    if first is not None:
        result.apply(first)
    if isinstance(rest, Played) and rest.ready:  # made at once: no wait per event
        for event in rest.drain():
            result.apply(event)
        return result
    try:
        async for event in rest:
            result.apply(event)
    finally:
        await aclose(rest)
    return result


async def _counted(events: AsyncIterator[Event], count: Callable[[Usage], None]) -> AsyncIterator[Event]:
    try:
        async for event in events:
            if isinstance(event, Usage):
                count(event)
            yield event
    finally:
        await aclose(events)


async def _prepend(first: Event, rest: AsyncIterator[Event]) -> AsyncIterator[Event]:
    try:
        yield first
        async for event in rest:
            yield event
    finally:
        await aclose(rest)
