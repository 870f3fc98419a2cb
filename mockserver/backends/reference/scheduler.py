"""Continuous batching: every live choice of every request advances in one batched model step.

A request is prefilled alone, on the backend's pool
(:class:`~mockserver.backends.reference.decoding.Decoding`: a long prompt never stalls the rows
already decoding, and prefill gets the other core), then queues for the batch (a non-streamed
one that finds the batch empty may first decode alone there: see ``ReferenceBackend._batched``). One thread
(``mockserver-batch``) owns all decoding; each turn of its loop:

1. **admits** queued requests, first come first served, while their choices fit in
   ``max_batch`` rows (a request wider than the whole batch runs when the batch is empty);
   the rest wait, in order, for rows to free up;
2. **drops** every request whose client left: its rows are free before the next step;
3. **picks**: each request advances one step (:meth:`Decoding.advance`): every live choice
   samples its next token with its own sampler, generator, processors and stop state, as it
   does alone; the model calls that makes are *deferred* (:class:`_Rows`);
4. **delivers** the events to each request's event loop, one hand-off per loop per turn;
5. **computes** one batched step for every deferred ``(choice, token)``
   (:meth:`mockserver.gpt.decoder.Decoder.step`: the kernel computes every row as it would
   alone), while the event loop encodes and sends what was delivered.

A streamed request whose client has not yet taken :data:`AHEAD` deliveries sits a turn out
(its tokens would only pile up); a non-streamed one gets its first events at once (the server
primes every answer with its first event) and the rest in one delivery, when it is done.

Nothing here can change a row's numbers: which rows share a step, in which order, and when a
request joins or leaves decide *when* a row is computed, never *what*.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from mockserver.backends.reference.decoding import Choice, Decoding
from mockserver.spine.events import Event

if TYPE_CHECKING:
    from mockserver.backends.reference.runtime import Runtime

__all__ = ["AHEAD", "Scheduler", "Ticket", "receive"]

AHEAD = 2  # deliveries a streamed request may have waiting for its client

Delivery = tuple[list[Event], bool] | BaseException  # (events, last) or the error that ended it


class Ticket:
    """One request in the scheduler, seen from both sides: the model thread fills ``inbox``
    (through ``loop``), the request's async generator empties it."""

    def __init__(self, decoding: Decoding, loop: asyncio.AbstractEventLoop, events: list[Event]) -> None:
        self.decoding = decoding
        self.loop = loop
        self.stream = decoding.request.stream
        self.rows = max(1, len(decoding.choices))
        self.inbox: asyncio.Queue[Delivery] = asyncio.Queue()
        self.left = False  # the client went away: drop at the next turn
        self.unread = 0  # deliveries not yet taken by the generator
        self.held = list(events)  # events not yet delivered (the opening ones, to begin with)
        # The first events go at once, stream or not: the server waits for one before it
        # answers (an error is a status), and listens for a hang-up only after that.
        self.primed = False


class _Rows:
    """A ticket's :class:`~mockserver.backends.reference.decoding.Stepper`: model calls wait
    for the turn's batched step; a few-token feed (a reasoning model's end of thinking) runs
    at once, on the choice's slot."""

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler

    def _slot(self, choice: Choice) -> int:
        slots = self._scheduler.slots
        if choice.slots is not slots:  # its first step: the prefilled keys move into the batch
            assert choice.slot is not None
            choice.slot = slots.copy(choice.slots, choice.slot)
            choice.slots = slots
        assert choice.slot is not None
        return choice.slot

    def step(self, choice: Choice, token_id: int) -> None:
        self._scheduler.pending.append((choice, self._slot(choice), token_id))

    def feed(self, choice: Choice, ids: list[int]) -> None:
        slot = self._slot(choice)
        choice.logits = self._scheduler.runtime.decoder.extend(self._scheduler.slots, slot, ids)[0]


class Scheduler:
    """The batching loop over one :class:`Runtime`; ``on_steps`` counts the request steps it takes."""

    def __init__(self, runtime: Runtime, max_batch: int, on_steps: Callable[[int], None] | None = None) -> None:
        self.runtime = runtime
        self.max_batch = max(1, max_batch)
        self.slots = runtime.decoder.slots(min(self.max_batch, 8))  # the batch's keys, a slot per choice
        self.pending: list[tuple[Choice, int, int]] = []  # this turn's (choice, slot, token)
        self.widest = 0  # the most rows one batched step has computed (for tests and figures)
        self._on_steps = on_steps
        self._cond = threading.Condition()
        self._waiting: deque[Ticket] = deque()
        self._active: list[Ticket] = []
        self._closed = False
        self.rows = _Rows(self)  # the stepper of every Decoding made for this scheduler
        self._thread = threading.Thread(target=self._run, name="mockserver-batch", daemon=True)
        self._thread.start()

    # ---- the event loop's side ------------------------------------------------------------

    def submit(self, ticket: Ticket) -> None:
        with self._cond:
            self._waiting.append(ticket)
            self._cond.notify()

    def taken(self, ticket: Ticket) -> None:
        """The generator took a delivery: the request may advance again."""
        with self._cond:
            ticket.unread -= 1
            if ticket.unread == AHEAD - 1:
                self._cond.notify()

    def leave(self, ticket: Ticket) -> None:
        """The generator is closed (finished, or its client left): its rows go at the next turn."""
        with self._cond:
            ticket.left = True
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def busy(self) -> bool:
        """Does anything run or wait in the batch? (Read racily: a hint for a lone request.)"""
        return bool(self._active or self._waiting)

    def queued(self) -> int:
        """Requests waiting to join the batch (read racily: for tests and metrics)."""
        return len(self._waiting)

    # ---- the model thread -------------------------------------------------------------------

    def _ready(self, ticket: Ticket) -> bool:
        return ticket.left or not ticket.stream or ticket.unread < AHEAD

    def _fits(self, used: int, ticket: Ticket) -> bool:
        return used + ticket.rows <= self.max_batch

    def _wait_for_work(self) -> list[Ticket] | None:
        """Block until something can run; returns the tickets to admit (None: closed)."""
        with self._cond:
            while not self._closed:
                used = sum(t.rows for t in self._active)
                admit: list[Ticket] = []
                while self._waiting and (self._fits(used, self._waiting[0]) or not (self._active or admit)):
                    ticket = self._waiting.popleft()
                    used += ticket.rows
                    admit.append(ticket)
                if admit or any(self._ready(t) for t in self._active):
                    return admit
                self._cond.wait()
            return None

    def _run(self) -> None:
        while True:
            admit = self._wait_for_work()
            if admit is None:
                return
            self._admit(admit)
            out: list[tuple[Ticket, Delivery]] = []
            try:
                self._turn(out)
                self._deliver(out)
                self._compute()
            except Exception as exc:  # a failing step ends the requests in the batch, not the thread
                self._fail_all(exc)

    def _fail_all(self, exc: Exception) -> None:
        out: list[tuple[Ticket, Delivery]] = []
        for ticket in self._active:
            self._release(ticket.decoding)
            out.append((ticket, exc))
        self._active, self.pending = [], []
        self._deliver(out)

    def _admit(self, tickets: list[Ticket]) -> None:
        for ticket in tickets:
            if not ticket.left:
                self._active.append(ticket)

    def _turn(self, out: list[tuple[Ticket, Delivery]]) -> None:
        """Drop the tickets whose client left, advance the others one step."""
        kept: list[Ticket] = []
        steps = 0
        for ticket in self._active:
            decoding = ticket.decoding
            if ticket.left:
                self._release(decoding)
                continue
            kept.append(ticket)
            if not self._ready(ticket):
                continue
            if not decoding.done:
                try:
                    ticket.held += decoding.advance()
                except Exception as exc:  # a bug in one request must not stop the others
                    mine = {id(c) for c in decoding.choices}
                    self.pending = [p for p in self.pending if id(p[0]) not in mine]
                    self._release(decoding)
                    kept.pop()
                    out.append((ticket, exc))
                    continue
                steps += 1
            if decoding.done:
                kept.pop()
                self._release(decoding)
                out.append((ticket, (ticket.held, True)))
                ticket.held = []
            elif ticket.held and (ticket.stream or not ticket.primed):
                out.append((ticket, (ticket.held, False)))
                ticket.held = []
                ticket.primed = True
            for choice in decoding.choices:
                if choice.done:
                    self._free(choice)
        self._active = kept
        if steps and self._on_steps is not None:
            self._on_steps(steps)

    def _release(self, decoding: Decoding) -> None:
        for choice in decoding.choices:
            self._free(choice)

    def _free(self, choice: Choice) -> None:
        if choice.slots is self.slots and choice.slot is not None:
            self.slots.free(choice.slot)
            choice.slot = None

    def _compute(self) -> None:
        """The turn's one batched step, for every choice that sampled a token this turn."""
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        self.widest = max(self.widest, len(pending))
        logits = self.runtime.decoder.step(self.slots, [(slot, token) for _, slot, token in pending])
        for (choice, _, _), row in zip(pending, logits, strict=True):
            choice.logits = row

    def _deliver(self, out: list[tuple[Ticket, Delivery]]) -> None:
        """One hand-off per event loop for the whole turn."""
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Ticket, Delivery]]] = {}
        with self._cond:
            for ticket, item in out:
                ticket.unread += 1
                by_loop.setdefault(ticket.loop, []).append((ticket, item))
        for loop, items in by_loop.items():
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is listening any more
                loop.call_soon_threadsafe(_put_all, items)


def _put_all(items: list[tuple[Ticket, Delivery]]) -> None:
    for ticket, item in items:
        ticket.inbox.put_nowait(item)


async def receive(scheduler: Scheduler, ticket: Ticket) -> AsyncIterator[Event]:
    """The ticket's events as the scheduler delivers them (raising the error that ended it)."""
    scheduler.submit(ticket)
    try:
        while True:
            item = await ticket.inbox.get()
            scheduler.taken(ticket)
            if isinstance(item, BaseException):
                raise item
            events, last = item
            for event in events:
                yield event
            if last:
                return
    finally:
        scheduler.leave(ticket)
