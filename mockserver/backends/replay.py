"""The ``replay`` backend: a recorded interaction, served as the provider's own bytes.

A request some cassette recorded (matched on method, path, query and canonical body; see
:mod:`mockserver.cassettes.matching`) is answered with events that carry the recording:
:class:`~mockserver.spine.events.RecordedHead` (status and headers), the body's frames, and
how the body ended — a recorded reset replays as a reset. Refolding happens here, once: a
streamed recording serves a request that does not stream folded into one body, and a plain
one serves a streamed request unfolded into events (:mod:`mockserver.cassettes.refold`).
Frames leave at their recorded offsets × the replay pace (0: at once).

A request nothing recorded first re-scans the cassette directory (:meth:`Library.refresh`:
one ``stat`` a file when nothing changed), so a cassette copied in after start-up answers it;
else it is declined with the miss that names the closest recording, which the client gets
when no later backend answers.

Before either cassette backend does anything for a request, :func:`vetted` checks what its
headers ask: a cassette name that stays inside the directory (400 naming
``x-mockserver-cassette``), and a record mode no higher than the server's own
``--record-mode``, the ceiling, in the order ``none < once < new_episodes < all`` (403 naming
``x-mockserver-record-mode``). Who may send those headers at all is the admin rule's
(:func:`mockserver.http.auth.recording_problem`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from mockserver.cassettes.files import check_name
from mockserver.cassettes.format import Interaction
from mockserver.cassettes.library import HOP, RECORD_MODES, Library, RecordMode, decoded
from mockserver.cassettes.order import ReplayOrder
from mockserver.cassettes.refold import fold, unfold
from mockserver.errors import Forbidden, InvalidRequest
from mockserver.spine.backend import Ask, BackendBase, Declined, Played, Role
from mockserver.spine.events import Event, RecordedEnd, RecordedFrame, RecordedHead
from mockserver.spine.request import Source
from mockserver.wire import headers as h
from mockserver.wire.json import dumps

if TYPE_CHECKING:
    from mockserver.backends import Parts

__all__ = ["ReplayBackend", "from_parts", "replayed", "vetted"]

Headers = tuple[tuple[bytes, bytes], ...]
_JSON = (b"content-type", b"application/json")
_SSE = ((b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache"))


class ReplayBackend(BackendBase):
    """Recordings served as the provider's bytes (a ``recording`` link of the chain)."""

    role: Role = "recording"

    def __init__(self, library: Library, order: ReplayOrder) -> None:
        self.library = library
        self.order = order
        # A recording's events in each shape, made once: refolding parses every frame. Keyed by
        # the recording's id(), so emptied whenever a re-scan replaces recordings (an id is
        # reused once its object is gone).
        self._made: dict[tuple[int, bool, bool], tuple[Event, ...]] = {}
        self._generation = library.generation

    @property
    def version(self) -> int:
        """Moves when recordings come or go, or places are forgotten: while it stands, a request
        at its last recording gets it again (and a request that missed misses again)."""
        return self.library.changes + self.order.changes

    def answer(self, ask: Ask) -> AsyncIterator[Event]:
        return Played(lambda: self._events(ask))

    async def _events(self, ask: Ask) -> Sequence[Event] | AsyncIterator[Event]:
        """The recording of the request (any endpoint's: it needs nothing but where it came
        from): its events made once, or, paced, as they leave."""
        source = ask.source
        if vetted(self.library, source) == "all":
            ask.steady = False
            raise Declined()
        found = await self.library.next(source, self.order)
        if found is None and (await self.library.refresh()).changed:
            found = await self.library.next(source, self.order)
        if found is None:
            ask.steady = False  # a miss looks at the directory again: a cassette may come meanwhile
            raise Declined(self.library.miss(source))
        interaction, again = found
        if again is None:
            ask.steady = False  # the next ask gets the next recording
        else:
            ask.again.append(again)
        ask.origin = self.library.place_of(interaction)
        if self._generation != self.library.generation:
            self._made.clear()
            self._generation = self.library.generation
        pace = self.library.options.pace
        if pace:
            return replayed(interaction, source, pace)
        key = (id(interaction), source.stream, source.include_usage)
        made = self._made.get(key)
        if made is None:
            if len(self._made) >= 4096:
                self._made.clear()
            made = self._made[key] = tuple([event async for event in replayed(interaction, source, 0.0)])
        return made


def vetted(library: Library, source: Source) -> RecordMode:
    """The request's record mode, once its headers are known to ask nothing they may not: a
    cassette name :func:`~mockserver.cassettes.files.check_name` takes (400), a known mode
    (400), and one no higher than the server's own (403): a request may record less than the
    server would, never more."""
    if source.cassette is not None:
        try:
            check_name(source.cassette)
        except ValueError as exc:
            raise InvalidRequest(
                f"Invalid {h.name(h.CASSETTE)}: {exc}.", param=h.name(h.CASSETTE), code="invalid_cassette_name"
            ) from None
    mode = library.mode(source)
    ceiling = library.options.record_mode
    if RECORD_MODES.index(mode) > RECORD_MODES.index(ceiling):
        raise Forbidden(
            f"{h.name(h.RECORD_MODE)} '{mode}' is above this server's --record-mode '{ceiling}' "
            f"(none < once < new_episodes < all); a request may record less than the server, never more.",
            param=h.name(h.RECORD_MODE),
            code="record_mode_above_ceiling",
        )
    return mode


async def replayed(interaction: Interaction, source: Source, pace: float) -> AsyncIterator[Event]:
    """The events of one recording, in the shape ``source`` asks for."""
    recorded = interaction.response
    headers: Headers = tuple((k.lower().encode(), v.encode()) for k, v in recorded.headers if k.lower() not in HOP)
    plain = tuple(h for h in headers if h[0] != b"content-type")
    if recorded.stream is not None and not source.stream:  # fold the stream into one body
        folded = fold(e.data for e in recorded.stream.events)
        if folded is not None:
            yield RecordedHead(recorded.status, (*plain, _JSON), stream=False)
            yield RecordedFrame(dumps(folded))
            yield RecordedEnd("done")
            return
    content = decoded(recorded.body, recorded.header("content-encoding"))
    if recorded.stream is None and source.stream and recorded.status == 200:  # unfold one body
        yield RecordedHead(recorded.status, (*plain, *_SSE), stream=True)
        for frame in unfold(json.loads(content), source.include_usage):
            yield RecordedFrame(frame)
        yield RecordedEnd("done")
        return
    loop = asyncio.get_running_loop()
    start = loop.time()
    if recorded.stream is None:
        if pace and recorded.elapsed:
            await asyncio.sleep(recorded.elapsed * pace)
        yield RecordedHead(recorded.status, headers, stream=False)
        yield RecordedFrame(content)
        yield RecordedEnd("done")
        return
    yield RecordedHead(recorded.status, headers, stream=True)
    for event in recorded.stream.events:
        if pace:
            delay = start + event.offset * pace - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
        yield RecordedFrame(event.data)
    yield RecordedEnd(recorded.stream.end)


def from_parts(parts: Parts) -> ReplayBackend:
    """The registry's factory (see :mod:`mockserver.backends`)."""
    return ReplayBackend(parts.library(), parts.replay_order)
