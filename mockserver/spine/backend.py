"""The only contract for answers: a request in, an async stream of events out; and the chain
that tries backends in order.

``--backend script,replay,reference`` is a :class:`Chain`: each backend either answers the
request or, before its first event, raises :class:`Declined` — the scripted rules when no rule
matches, a cassette when it holds no recording of the request — and the next one is tried.
The answer opens with :class:`~mockserver.spine.events.Answered`, naming who answered. When
every backend declines, the first refusal that carries an error is raised (a cassette miss
names the closest recording); with none, a 404 ``no_answer`` names the chain.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Protocol

from mockserver.errors import APIError, NotFound
from mockserver.spine.events import Answered, Event
from mockserver.spine.request import GenerationRequest, Source

__all__ = ["Ask", "Backend", "Chain", "Declined", "Recorder", "aclose"]


class Backend(Protocol):
    """The only backend contract: a request in, an async stream of events out.

    Errors about the request (bad token ids, context overflow) must be raised before the
    first event, so the engine can still answer them with an HTTP status; so must
    :class:`Declined`.
    """

    def generate(self, request: GenerationRequest) -> AsyncIterator[Event]: ...


class Declined(Exception):
    """Raised by a backend, before its first event, for a request it does not answer.
    ``error`` is what the client gets if no later backend answers either."""

    def __init__(self, error: APIError | None = None) -> None:
        super().__init__(error.message if error is not None else "declined")
        self.error = error


async def aclose(stream: AsyncIterator[object]) -> None:
    """Close an async generator now (its ``finally`` blocks run), not at garbage collection."""
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()


class Chain:
    """Backends tried in order; the first that does not decline answers (see the module doc)."""

    def __init__(self, links: Sequence[tuple[str, Backend]], missing: str = "") -> None:
        """``missing``: said after a miss of the whole chain (what would have answered, and how
        to have it)."""
        if not links:
            raise ValueError("a backend chain needs at least one backend")
        self.links = tuple(links)
        self.missing = missing

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.links)

    def get(self, name: str) -> Backend | None:
        """The backend of that name in this chain, if it is one."""
        return next((backend for link, backend in self.links if link == name), None)

    async def start(self, ask: Ask) -> tuple[str, Event | None, AsyncIterator[Event]]:
        """The backend that answers, its first event (None: it answered with nothing), and the
        rest of its stream — handed on as it is, with no layer of the chain's own around it.

        A backend that answers by the request as sent (a :class:`Recorder`: replay, record) is
        asked with the source alone; one that has nothing to answer with (scripted answers with
        no rule) is passed by. The request is built only for a backend that needs it, so a
        replay costs no decoding, and a provider request our schemas would refuse still replays.
        """
        refused: APIError | None = None
        for name, backend in self.links:
            if getattr(backend, "idle", False):
                continue
            answer = getattr(backend, "answer", None)
            stream = answer(ask.source) if answer is not None else backend.generate(await ask.request())
            try:
                return name, await anext(stream), stream
            except Declined as declined:
                refused = refused or declined.error
            except StopAsyncIteration:
                return name, None, stream
        raise refused or NotFound(
            f"No backend of the chain ({', '.join(self.names)}) answers this request.{self.missing}",
            code="no_answer",
            headers={"x-should-retry": "false"},
        )

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Event]:
        name, first, stream = await self.start(Ask.of(request))
        try:
            yield Answered(name)
            if first is not None:
                yield first
                async for event in stream:
                    yield event
        finally:
            await aclose(stream)


class Recorder(Protocol):
    """A backend that answers by the request as it was sent (replay, record): it needs no
    :class:`GenerationRequest`, and answers endpoints that generate nothing too."""

    def answer(self, source: Source) -> AsyncIterator[Event]: ...


class Ask:
    """A request as the chain sees it: where it came from, at once; the
    :class:`GenerationRequest`, when a backend first needs it (built once — building reads the
    body against the schema and raises the request's 400s)."""

    def __init__(self, source: Source, build: Callable[[], Awaitable[GenerationRequest]]) -> None:
        self.source = source
        self._build = build
        self.built: GenerationRequest | None = None

    @classmethod
    def of(cls, request: GenerationRequest) -> Ask:
        """An ask whose request is built already."""

        async def given() -> GenerationRequest:
            return request

        ask = cls(request.source, given)
        ask.built = request
        return ask

    async def request(self) -> GenerationRequest:
        if self.built is None:
            self.built = await self._build()
        return self.built
