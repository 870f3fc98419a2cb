"""A request in the batch scheduler, and the hand-over of its events to the event loop.

The model thread fills a :class:`Ticket`'s ``inbox`` (through the request's event loop, one
hand-off per loop per turn: :func:`deliver`); the request's async generator, :func:`receive`,
empties it. Counters written by one thread each (``delivered`` by the model thread, ``taken``
by the event loop) say how many deliveries are still on their way, without a lock.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Protocol

from mockserver.spine.events import Event

if TYPE_CHECKING:
    from mockserver.backends.reference.decoding import Decoding

__all__ = ["HOLD", "Delivery", "Ticket", "deliver", "receive"]

HOLD = 16  # events a stream may have made and not yet handed over (its client is behind)

Delivery = tuple[list[Event], bool] | BaseException  # (events, last) or the error that ended it


class Ticket:
    """One request in the scheduler, seen from both sides."""

    def __init__(self, decoding: Decoding, loop: asyncio.AbstractEventLoop, events: list[Event]) -> None:
        self.decoding = decoding
        self.loop = loop
        self.stream = decoding.request.stream
        self.rows = max(1, len(decoding.choices))
        self.inbox: asyncio.Queue[Delivery] = asyncio.Queue()
        self.left = False  # the client went away: drop at the next turn
        self.delivered = 0  # deliveries handed to the event loop (the model thread counts)
        self.taken = 0  # ... and handed on by the generator (the event loop counts)
        self.held = list(events)  # events not yet delivered (the opening ones, to begin with)
        # The first events go at once, stream or not: the server waits for one before it
        # answers (an error is a status), and listens for a hang-up only after that.
        self.primed = False

    @property
    def unread(self) -> int:
        """Deliveries not yet handed on by the generator."""
        return self.delivered - self.taken

    def ready(self) -> bool:
        """May it advance a step? A stream not while it holds HOLD events (its client is behind)."""
        return self.left or not self.stream or len(self.held) < HOLD

    def due(self) -> bool:
        """May what it holds be delivered now? A non-streamed request's opening events only; a
        stream's when its last delivery has been handed on (a lagging event loop then gets the
        events made meanwhile together)."""
        if not self.held:
            return False
        if not self.primed:
            return True
        return self.stream and self.unread == 0


def deliver(out: Iterable[tuple[Ticket, Delivery]]) -> None:
    """One hand-off per event loop for the whole turn (from the model thread)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Ticket, Delivery]]] = {}
    for ticket, item in out:
        ticket.delivered += 1
        by_loop.setdefault(ticket.loop, []).append((ticket, item))
    for loop, items in by_loop.items():
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is listening any more
            loop.call_soon_threadsafe(_put_all, items)


def _put_all(items: list[tuple[Ticket, Delivery]]) -> None:
    for ticket, item in items:
        ticket.inbox.put_nowait(item)


class Exchange(Protocol):
    """The scheduler, as :func:`receive` sees it."""

    def submit(self, ticket: Ticket) -> None: ...

    def taken(self, ticket: Ticket) -> None: ...

    def leave(self, ticket: Ticket) -> None: ...


async def receive(scheduler: Exchange, ticket: Ticket) -> AsyncIterator[Event]:
    """The ticket's events as the scheduler delivers them (raising the error that ended it).

    A delivery counts as taken once its last event has been handed on (encoded, by the time
    the server asks for more), not when it leaves the inbox: until then the scheduler holds the
    stream's next events, so a busy event loop gets several tokens in one write."""
    scheduler.submit(ticket)
    try:
        while True:
            item = await ticket.inbox.get()
            if isinstance(item, BaseException):
                scheduler.taken(ticket)
                raise item
            events, last = item
            for event in events:
                yield event
            scheduler.taken(ticket)
            if last:
                return
    finally:
        scheduler.leave(ticket)
