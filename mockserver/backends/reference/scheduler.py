"""Continuous batching: every live choice of every request advances in one batched model step.

A request is prefilled alone, on the backend's pool
(:class:`~mockserver.backends.reference.decoding.Decoding`: a long prompt never stalls the rows
already decoding, and prefill gets the other core), then queues for the batch (a non-streamed
one that finds the batch empty may first decode alone there: see ``ReferenceBackend._batched``).
One thread (``mockserver-batch``) owns all decoding; each turn of its loop:

1. **admits** queued requests, first come first served, while their choices fit in
   ``max_batch`` rows (a request wider than the whole batch runs when the batch is empty);
   the rest wait, in order, for rows to free up;
2. **drops** every request whose client left: its rows are free before the next step;
3. **picks**: each request advances one step (:meth:`Decoding.advance`): every live choice
   samples its next token with its own sampler, generator, processors and stop state, as it
   does alone; the model calls that makes are *deferred* (:class:`_Rows`);
4. **delivers** the events to each request's event loop, one hand-off per loop per turn
   (:func:`~mockserver.backends.reference.tickets.deliver`); a stream's events wait while its
   last delivery is still being handed on, and then go together;
5. **computes** one batched step for every deferred ``(choice, token)``
   (:meth:`mockserver.gpt.decoder.Decoder.step`: the kernel computes each row as it would
   alone, with the interpreter lock released), while the event loop encodes and sends what
   was delivered.

A streamed request holding :data:`~mockserver.backends.reference.tickets.HOLD` undelivered
events sits a turn out (its client is not keeping up: its tokens would only pile up); a
non-streamed one gets its first events at once (the server primes every answer with its first
event) and the rest in one delivery, when it is done.

Why one thread and one step, not two halves of the batch overlapping one's step with the
other's sampling: the event loop, the batch's Python and the step's Python share one
interpreter lock, and the hand-offs between threads cost more than the overlap gave
(measured: 32 streams 11.5k tokens/s in halves, 14.6k as one).

Nothing here can change a row's numbers: which rows share a step, in which order, and when a
request joins or leaves decide *when* a row is computed, never *what*.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from mockserver.backends.reference.decoding import Choice, Decoding
from mockserver.backends.reference.tickets import HOLD, Delivery, Ticket, deliver, receive

if TYPE_CHECKING:
    from mockserver.backends.reference.runtime import Runtime

__all__ = ["HOLD", "Scheduler", "Ticket", "receive"]

Out = list[tuple[Ticket, Delivery]]


class _Rows:
    """The batch's :class:`~mockserver.backends.reference.decoding.Stepper`: model calls wait for
    the turn's batched step; a few-token feed (a reasoning model's end of thinking) runs at
    once, on the choice's slot."""

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
        self.active: list[Ticket] = []  # the requests in the batch
        self._on_steps = on_steps
        self._cond = threading.Condition()
        self._idle = False  # the batch thread waits for work (read without the lock: see taken)
        self._waiting: deque[Ticket] = deque()
        self._closed = False
        self.rows = _Rows(self)  # the stepper of every request in the batch
        self._thread = threading.Thread(target=self._run, name="mockserver-batch", daemon=True)
        self._thread.start()

    # ---- the event loop's side ------------------------------------------------------------

    def submit(self, ticket: Ticket) -> None:
        with self._cond:
            self._waiting.append(ticket)
            self._cond.notify()

    def taken(self, ticket: Ticket) -> None:
        """The generator handed a delivery's events on: what the request holds may go. Once
        per delivery, so without the lock unless the batch thread sleeps (it marks itself idle
        before it looks for work, under the lock it waits with: no wake-up is lost). A lock
        here, on every token of every stream, cost a sixth of the throughput."""
        ticket.taken += 1
        if self._idle and ticket.unread == 0:
            with self._cond:
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
        return bool(self.active or self._waiting)

    def queued(self) -> int:
        """Requests waiting to join the batch (read racily: for tests and metrics)."""
        return len(self._waiting)

    # ---- the batch thread -------------------------------------------------------------------

    def _wait_for_work(self) -> list[Ticket] | None:
        """Block until something can run; returns the tickets to admit (None: closed)."""
        with self._cond:
            while not self._closed:
                self._idle = True
                used = sum(t.rows for t in self.active)
                admit: list[Ticket] = []
                while self._waiting and (used + self._waiting[0].rows <= self.max_batch or not (self.active or admit)):
                    ticket = self._waiting.popleft()
                    used += ticket.rows
                    admit.append(ticket)
                if admit or any(t.ready() or t.due() for t in self.active):
                    self._idle = False
                    return admit
                self._cond.wait()
            return None

    def _run(self) -> None:
        while True:
            admit = self._wait_for_work()
            if admit is None:
                return
            self._admit(admit)
            out: Out = []
            try:
                self._turn(out)
                deliver(out)
                out = []
                self._compute()
            except Exception as exc:  # a failing step ends the requests in the batch, not the thread
                for ticket in self.active:
                    self._release(ticket.decoding)
                    out.append((ticket, exc))
                self.active, self.pending = [], []
                deliver(out)

    def _admit(self, tickets: list[Ticket]) -> None:
        for ticket in tickets:
            if not ticket.left:
                ticket.decoding.stepper = self.rows
                self.active.append(ticket)

    def _turn(self, out: Out) -> None:
        """Drop the tickets whose client left, advance the others one step."""
        kept: list[Ticket] = []
        steps = 0
        for ticket in self.active:
            decoding = ticket.decoding
            if ticket.left:
                self._release(decoding)
                continue
            kept.append(ticket)
            if ticket.ready() and not decoding.done:
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
            elif ticket.due():
                out.append((ticket, (ticket.held, False)))
                ticket.held = []
                ticket.primed = True
            for choice in decoding.choices:
                if choice.done:
                    self._free(choice)
        self.active = kept
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
