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
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from mockserver.errors import APIError, NotFound
from mockserver.spine.events import Answered, Event, RecordedHead, Usage
from mockserver.spine.request import GenerationRequest, Source

__all__ = [
    "Answering",
    "Ask",
    "Backend",
    "BackendBase",
    "Chain",
    "Declined",
    "Model",
    "ModelBase",
    "ModelLink",
    "Played",
    "Role",
    "Unbuilt",
    "aclose",
]

# What a backend is, which is all the chain needs to know of it:
# * ``script``: answers generations from rules (passed by where nothing generates);
# * ``recording``: answers by the request as sent (replay, record), any endpoint;
# * ``model``: generates (and the endpoints that generate nothing answer themselves).
Role = Literal["script", "recording", "model"]


class Backend(Protocol):
    """The one backend contract: an :class:`Ask` in, an async stream of events out.

    Errors about the request (bad token ids, context overflow) must be raised before the
    first event, so the engine can still answer them with an HTTP status; so must
    :class:`Declined`. :attr:`idle`: nothing to answer with now (the chain passes by without
    building the request); :meth:`aclose`: the backend's own resources, at shutdown.
    """

    @property
    def role(self) -> Role: ...

    @property
    def idle(self) -> bool: ...

    @property
    def version(self) -> int | None:
        """How far what the backend answers from (its rules, its recordings) has moved: a
        number that grows with every change. While it stands, an ask the backend answered or
        declined with :attr:`Ask.steady` kept gets the same again (the edge remembers such
        answers: :mod:`mockserver.edge.repeats`). None: no such promise (the model)."""

    def answer(self, ask: Ask) -> AsyncIterator[Event]: ...

    async def aclose(self) -> None: ...


class BackendBase:
    """The contract's defaults: never idle, no promise of the same answer, nothing to close."""

    role: Role = "model"

    @property
    def idle(self) -> bool:
        return False

    @property
    def version(self) -> int | None:
        return None

    async def aclose(self) -> None:
        return None


class Model(Protocol):
    """The reference model as the app holds it: it generates from a built request, loads in
    the background (:meth:`warm_up`), knows its vocabulary (None: read from the shipped config)
    and is closed at shutdown."""

    @property
    def vocab_size(self) -> int | None: ...

    def generate(self, request: GenerationRequest) -> AsyncIterator[Event]: ...

    def warm_up(self) -> Future[Any] | None:
        """Start loading in the background (None: nothing to load); requests wait for it."""

    def close(self) -> None: ...


class ModelBase:
    """A :class:`Model`'s defaults (what a test's stand-in model inherits)."""

    vocab_size: int | None = None

    def warm_up(self) -> Future[Any] | None:
        return None

    def close(self) -> None:
        return None


class ModelLink(BackendBase):
    """The model as a link of the chain: it builds the request and generates."""

    role: Role = "model"

    def __init__(self, model: Model) -> None:
        self.model = model

    async def answer(self, ask: Ask) -> AsyncIterator[Event]:
        stream = self.model.generate(ask.request)
        try:
            async for event in stream:
                yield event
        finally:
            await aclose(stream)


class Declined(Exception):
    """Raised by a backend, before its first event, for a request it does not answer.
    ``error`` is what the client gets if no later backend answers either."""

    def __init__(self, error: APIError | None = None) -> None:
        super().__init__(error.message if error is not None else "declined")
        self.error = error


async def aclose(stream: AsyncIterator[object]) -> None:
    """Close an async generator now (its ``finally`` blocks run), not at garbage collection."""
    close = getattr(stream, "aclose", None)  # an async generator's; a plain iterator has none
    if close is not None:
        await close()


class Played:
    """An answer a backend makes all at once when it first answers (a scripted answer: nothing
    in it waits). It is an async iterator like any answer, so every layer may wrap it; a layer
    that does not (a non-streamed answer folded whole, the usage count) takes the rest with
    :meth:`drain`, without a wait per event.

    ``start`` makes the events — or, for an answer that does wait after all (a scripted answer
    the model scores), the stream that makes them, handed on as it comes — raising
    :class:`Declined` to decline. ``on_usage`` sees the
    :class:`~mockserver.spine.events.Usage` event as it passes, however it is taken."""

    __slots__ = ("_at", "_events", "_start", "_stream", "on_usage")

    def __init__(self, start: Callable[[], Awaitable[Sequence[Event] | AsyncIterator[Event]]]) -> None:
        self._start: Callable[[], Awaitable[Sequence[Event] | AsyncIterator[Event]]] | None = start
        self._events: Sequence[Event] = ()
        self._stream: AsyncIterator[Event] | None = None
        self._at = 0
        self.on_usage: Callable[[Usage], None] | None = None

    def __aiter__(self) -> Played:
        return self

    async def __anext__(self) -> Event:
        if self._start is not None:
            start, self._start = self._start, None
            made = await start()
            if isinstance(made, Sequence):
                self._events = made
            else:
                self._stream = made
        if self._stream is not None:
            event = await anext(self._stream)
        elif self._at < len(self._events):
            event = self._events[self._at]
            self._at += 1
        else:
            raise StopAsyncIteration
        if self.on_usage is not None and isinstance(event, Usage):
            self.on_usage(event)
        return event

    @property
    def ready(self) -> bool:
        """Made all at once and started: :meth:`drain` may take the rest."""
        return self._start is None and self._stream is None

    @property
    def made(self) -> Sequence[Event]:
        """Every event, the ones taken included (only when :attr:`ready`): the backend's own
        sequence, the same object for the same answer where the backend remembers it."""
        assert self.ready, "only an answer made all at once has its events"
        return self._events

    def drain(self) -> Sequence[Event]:
        """The events not taken yet (only when :attr:`ready`)."""
        assert self.ready, "only an answer made all at once is drained"
        rest, self._at = self._events[self._at :], len(self._events)
        if self.on_usage is not None:
            for event in rest:
                if isinstance(event, Usage):
                    self.on_usage(event)
        return rest

    async def aclose(self) -> None:
        if self._stream is not None:
            await aclose(self._stream)


Answering = tuple[str, Event | None, AsyncIterator[Event]]  # who answers, its first event (None: none), the rest


class Chain:
    """Backends tried in order; the first that does not decline answers (see the module doc).
    The chain owns every walk of its links: :meth:`start` for a generation, :meth:`recorded`
    for an endpoint that generates nothing, :meth:`aclose` at shutdown."""

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

    async def start(self, ask: Ask, at: int = 0) -> Answering | Unbuilt:
        """The backend that answers, its first event (None: it answered with nothing), and the
        rest of its stream — handed on as it is, with no layer of the chain's own around it.

        A backend that answers by the request as sent (a recording: replay, record) reads the
        source alone; one that has nothing to answer with (scripted answers with no rule) is
        passed by. Before a backend that reads the built request, an ask without one stops
        the walk there (:class:`Unbuilt`): its caller builds it and starts again at that link.
        So a replay costs no decoding, and a provider request our schemas would refuse still
        replays.
        """
        for index in range(at, len(self.links)):
            name, backend = self.links[index]
            if backend.idle:
                continue
            if ask.built is None and backend.role != "recording":
                return Unbuilt(index)
            stream = backend.answer(ask)
            try:
                first = await anext(stream)
            except Declined as declined:
                ask.refused = ask.refused or declined.error
                continue
            except StopAsyncIteration:
                first = None
            if ask.steady:
                ask.versions = self.versions(index + 1)
            return name, first, stream
        raise ask.refused or NotFound(
            f"No backend of the chain ({', '.join(self.names)}) answers this request.{self.missing}",
            code="no_answer",
            headers={"x-should-retry": "false"},
        )

    def versions(self, links: int) -> tuple[int, ...] | None:
        """The :attr:`~Backend.version` of the first ``links`` backends (the ones an answer
        passed through, idle or declining, and the one that answered); None when one of them
        makes no promise."""
        versions = []
        for _, backend in self.links[:links]:
            version = backend.version
            if version is None:
                return None
            versions.append(version)
        return tuple(versions)

    async def recorded(self, ask: Ask) -> tuple[str, RecordedHead, AsyncIterator[Event]] | None:
        """A recording's answer to a request of an endpoint that generates nothing: the
        recordings are asked in order until the model's place in the chain; None when the
        endpoint is to answer itself. With no model, a miss is raised (the closest recording)."""
        refused: APIError | None = None
        for name, backend in self.links:
            if backend.role == "model":
                return None
            if backend.role != "recording":
                continue
            events = backend.answer(ask)
            try:
                head = await anext(events)
            except Declined as declined:
                refused = refused or declined.error
                continue
            except StopAsyncIteration:
                continue
            if not isinstance(head, RecordedHead):
                await aclose(events)
                continue
            return name, head, events
        if refused is not None:
            raise refused
        return None

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Event]:
        started = await self.start(Ask.of(request))
        assert not isinstance(started, Unbuilt), "an ask of a built request never stops for it"
        name, first, stream = started
        try:
            yield Answered(name)
            if first is not None:
                yield first
                async for event in stream:
                    yield event
        finally:
            await aclose(stream)

    async def aclose(self) -> None:
        """Every link's own resources (an upstream client), at shutdown."""
        for _, backend in self.links:
            await backend.aclose()


@dataclass(frozen=True, slots=True)
class Unbuilt:
    """The chain stopped before link ``at``, a backend that reads the built request, which the
    ask has not: its caller builds it (:attr:`Ask.built`) and starts the chain again there."""

    at: int


class Ask:
    """A request as the chain sees it: where it came from, at once; the
    :class:`GenerationRequest`, once its caller has built it (building reads the body against
    the schema and raises the request's 400s: done only when a backend needs it, see
    :meth:`Chain.start`)."""

    def __init__(self, source: Source, built: GenerationRequest | None = None) -> None:
        self.source = source
        self.built = built
        # What answered within the backend, for a person reading the journal: the scripted rule
        # ("rule 3 (rules.yaml)"), the cassette and its recording ("chat.yaml #2"); None: the model.
        self.origin: str | None = None
        # The first refusal that carries an error, raised if no later backend answers.
        self.refused: APIError | None = None
        # Whether the same ask would get the same answer while the backends' versions stand:
        # a backend clears it when its choice read or moved a count (a rule's nth or times, a
        # sequence's step, a cassette's place before its last recording).
        self.steady = True
        # What a repeat of this ask must still do, though it is answered as remembered (a
        # cassette's place counted).
        self.again: list[Callable[[], Awaitable[object]]] = []
        # The versions of the backends the answer came through (see Chain.versions), set by
        # the chain when the answer was steady; None: it may not be remembered.
        self.versions: tuple[int, ...] | None = None

    @classmethod
    def of(cls, request: GenerationRequest, source: Source | None = None) -> Ask:
        """An ask whose request is built already (``source``: where it came from, when known)."""

        return cls(source or Source(surface=request.surface, session=request.session), request)

    @property
    def request(self) -> GenerationRequest:
        """The built request (a backend that reads it is asked only once it is built)."""
        assert self.built is not None, "the chain asks a backend that reads the request only once it is built"
        return self.built
