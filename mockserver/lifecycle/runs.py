"""The Responses lifecycle: the status machine, and the runs that move through it.

The one table of legal moves::

    queued ──▶ in_progress ──▶ completed | incomplete | failed | cancelled
       └──────────────────────▶ cancelled | failed

Every change of status is a conditional :meth:`~mockserver.state.records.Store.update` that expects
the status it moves *from*; so a cancel racing a run's last write is two updates expecting
``in_progress``, exactly one wins, and the loser sees it and stops. No other lock exists.

A run (:meth:`Lifecycle.run`) numbers the stream events a :class:`Narrator` makes of the
engine's events, writes them to the store *before* anyone sees them, and yields them: a
foreground stream sends them, a background task (:meth:`Lifecycle.spawn`) just drains them
while :meth:`Lifecycle.follow` serves them — from any sequence number — to pollers and to
resumed streams. Background runs wait ``queue_time`` and are paced at ``tokens_per_second``
on the server's clock; on a virtual clock (``--frozen-time``) they sleep until the admin
API moves it.

**Runs whose process is gone.** A run lives in the process that created it; with a store
shared by processes (SQLite, Redis), that process may die — SIGKILL, a crash — and leave its
response ``queued`` or ``in_progress`` for ever. :meth:`Lifecycle.recover` (called at start-up, and by
the first use of the lifecycle anyway) fails every such orphan — those whose owner process is
gone, never one a live process still runs (:meth:`~mockserver.state.records.Store.orphans`) —
and then looks again every ``sweep`` seconds. Failing one is what a run's own failure writes:
the conditional update, with a numbered ``error`` event and ``response.failed`` after the stored
events, so a resumed stream ends with its terminator. A follower that waits on a run of another
process asks the same question every :data:`ORPHAN_CHECK` seconds, and a shutdown fails the
runs it stops (:data:`SHUT_DOWN`). :meth:`Lifecycle.follow` always ends: after the closing
event, or once the record is terminal or gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, Protocol

from mockserver.clock import Clock, VirtualClock
from mockserver.errors import APIError, InvalidRequest, NotFound
from mockserver.spine.backend import aclose
from mockserver.spine.events import Event, TextDelta
from mockserver.state.records import Record, Store
from mockserver.wire.json import Json

__all__ = ["RESTARTED", "SHUT_DOWN", "TERMINAL", "Lifecycle", "Narrator", "Run", "Status", "legal", "wait_until"]

log = logging.getLogger("mockserver")

Status = Literal["queued", "in_progress", "completed", "failed", "cancelled", "incomplete"]

_MOVES: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "queued": frozenset({"in_progress", "cancelled", "failed"}),
        "in_progress": frozenset({"in_progress", "completed", "incomplete", "failed", "cancelled"}),
        "completed": frozenset(),
        "incomplete": frozenset(),
        "failed": frozenset(),
        "cancelled": frozenset(),
    }
)
TERMINAL = frozenset(s for s, moves in _MOVES.items() if not moves)
# The event that closes a stream in each terminal status (a cancelled stream just ends).
_CLOSING: Mapping[str, str] = MappingProxyType(
    {"completed": "response.completed", "incomplete": "response.incomplete", "failed": "response.failed"}
)
CLOSING_EVENTS = frozenset(_CLOSING.values())
FOLLOW_POLL = 0.25  # seconds: how often a follower looks for writes by another process
ORPHAN_CHECK = 1.0  # seconds a follower waits on another process's run before asking if it is gone
SWEEP = 5.0  # seconds between looks for runs whose process is gone (shared stores only)
# What a run that never finished is failed with.
RESTARTED = "The server restarted while this response was running; it was not finished."
SHUT_DOWN = "The server shut down while this response was running; it was not finished."
BROKE = "The server had an error while processing your request."


def legal(current: str, new: str) -> bool:
    """May a response in status ``current`` move to ``new``? (``in_progress`` → itself is
    progress within the status.)"""
    return new in _MOVES.get(current, frozenset())


async def wait_until(clock: Clock, deadline: float) -> None:
    """Sleep until ``clock`` reads ``deadline``: on a virtual clock, until it is moved there."""
    if not isinstance(clock, VirtualClock):
        delay = deadline - clock.now()
        if delay > 0:
            await asyncio.sleep(delay)
        return
    loop = asyncio.get_running_loop()
    moved = asyncio.Event()

    def wake() -> None:  # the clock may be moved from another thread (a test's)
        loop.call_soon_threadsafe(moved.set)

    unsubscribe = clock.subscribe(wake)  # before the first look, so no move is missed
    try:
        while clock.now() < deadline:
            await moved.wait()
            moved.clear()
    finally:
        unsubscribe()


class Narrator(Protocol):
    """What a run needs from an endpoint's codec: the response object now, and the stream
    events one engine event makes (unnumbered)."""

    def snapshot(self, status: Status, error: Json | None = None) -> Json: ...

    def narrate(self, event: Event) -> list[Json]: ...

    def outcome(self) -> Status:
        """``completed`` or ``incomplete``, once every engine event has been narrated."""
        ...


@dataclass(frozen=True, slots=True)
class Run:
    """One run: the stored record's id, its narrator, and how to start the engine's events
    (errors raised there fail the run)."""

    id: str
    narrator: Narrator
    source: Callable[[], Awaitable[AsyncIterator[Event]]]
    background: bool
    stored: bool
    # When it was asked for, on the server clock: the queue and the token pace count from
    # here, not from whenever the task happens to start, so a test's clock moves land alike.
    created: float = 0.0
    # Called with the final Response once it is stored completed or incomplete, before its
    # closing event goes out (a conversation takes the response's items here).
    on_end: Callable[[Json], Awaitable[None]] | None = None


class _Signals:
    """Wakes followers of a response when its run writes (in this process)."""

    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}

    def watch(self, response_id: str) -> asyncio.Event:
        return self._events.setdefault(response_id, asyncio.Event())

    def notify(self, response_id: str) -> None:
        event = self._events.pop(response_id, None)
        if event is not None:
            event.set()


class Lifecycle:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        queue_time: float = 0.0,
        tokens_per_second: float = 0.0,
        *,
        sweep: float = SWEEP,
    ) -> None:
        self.store = store
        self.clock = clock
        self.queue_time = queue_time
        self.tokens_per_second = tokens_per_second
        self.sweep = sweep
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._cleanup: set[asyncio.Task[None]] = set()  # writes of abandoned foreground runs
        self._signals = _Signals()
        self._recovery: asyncio.Task[int] | None = None  # the first look for orphans
        self._sweeper: asyncio.Task[None] | None = None  # the looks after it

    # ---- running ------------------------------------------------------------------------

    async def run(self, job: Run) -> AsyncIterator[Json]:
        """The run's numbered stream events, each stored before it is yielded.

        A stored foreground stream whose client goes away before its end is stopped, and its
        record is written ``cancelled`` with the output so far — not left ``in_progress``
        for ever. (The write runs as its own task: the closing generator may be cancelled.)
        An error thrown in while it streams (the ``stream.error_at`` fault) fails the run, in
        its own shape: an ``error`` event, then ``response.failed``.
        """
        ended = False
        inner = self._run(job)
        try:
            event = await anext(inner)
            while True:
                try:
                    yield event
                except Exception as exc:  # thrown in by whoever streams it: the run answers
                    event = await inner.athrow(exc)
                    continue
                event = await anext(inner)
        except StopAsyncIteration:
            ended = True
        finally:
            await inner.aclose()
            if not ended and job.stored and not job.background:
                task = asyncio.get_running_loop().create_task(self._abandoned(job))
                self._cleanup.add(task)
                task.add_done_callback(self._cleanup.discard)

    async def _abandoned(self, job: Run) -> None:
        await self._write(job, "in_progress", "cancelled", [])

    async def _run(self, job: Run) -> AsyncGenerator[Json, None]:
        numbers = [0]  # the next sequence number
        narrator = job.narrator

        def numbered(events: list[Json]) -> list[Json]:
            for event in events:
                event["sequence_number"] = numbers[0]
                numbers[0] += 1
            return events

        status: Status = "queued" if job.background else "in_progress"
        opening = [{"type": "response.created", "response": narrator.snapshot(status)}]
        if job.background:
            opening.append({"type": "response.queued", "response": narrator.snapshot(status)})
        if not await self._write(job, status, status, numbered(opening)):
            return
        for event in opening:
            yield event
        if job.background and self.queue_time > 0:
            await wait_until(self.clock, job.created + self.queue_time)
        moving = numbered([{"type": "response.in_progress", "response": narrator.snapshot("in_progress")}])
        if not await self._write(job, status, "in_progress", moving):
            return
        for event in moving:
            yield event
        try:
            stream = await job.source()
        except Exception as exc:  # the request could not start: the run fails, in-band
            async for event in self._fail(job, numbered, exc):
                yield event
            return
        failure: Exception | None = None
        try:
            async for update in self._paced(job, stream):
                batch = narrator.narrate(update)
                if not batch:
                    continue
                if not await self._write(job, "in_progress", "in_progress", numbered(batch)):
                    return  # cancelled: not one more event
                for item in batch:
                    try:
                        yield item
                    except Exception:
                        if not job.background:  # nothing of the batch after ``item`` was sent or kept
                            numbers[0] = item["sequence_number"] + 1
                        raise
        except Exception as exc:
            failure = exc
        finally:
            await aclose(stream)
        if failure is not None:
            async for event in self._fail(job, numbered, failure):
                yield event
            return
        final = narrator.outcome()
        closing = numbered([{"type": _CLOSING[final], "response": narrator.snapshot(final)}])
        if await self._write(job, "in_progress", final, closing):
            if job.on_end is not None:
                await job.on_end(closing[-1]["response"])
            for event in closing:
                yield event

    async def _fail(
        self, job: Run, numbered: Callable[[list[Json]], list[Json]], exc: Exception
    ) -> AsyncIterator[Json]:
        if isinstance(exc, APIError):
            code = "invalid_prompt" if exc.status == 400 else "server_error"
            message = exc.message
        else:
            log.exception("a response run failed", exc_info=exc)
            code, message = "server_error", "The server had an error while processing your request."
        snapshot = job.narrator.snapshot("failed", {"code": code, "message": message})
        error: Json = {"type": "error", "code": code, "message": message, "param": None}
        closing = numbered([error, {"type": "response.failed", "response": snapshot}])
        if await self._write(job, "in_progress", "failed", closing):
            for event in closing:
                yield event

    async def _paced(self, job: Run, stream: AsyncIterator[Event]) -> AsyncIterator[Event]:
        """Background text at ``tokens_per_second`` on the server clock."""
        if not job.background or self.tokens_per_second <= 0:
            async for event in stream:
                yield event
            return
        start, tokens = job.created + self.queue_time, 0
        async for event in stream:
            if isinstance(event, TextDelta):
                tokens += max(1, len(event.tokens))
                await wait_until(self.clock, start + tokens / self.tokens_per_second)
            yield event

    async def _write(self, job: Run, current: Status, new: Status, events: Sequence[Json]) -> bool:
        """Move ``current`` → ``new`` in the store with ``events``; False if the stored status
        is no longer ``current`` (the run was cancelled, or its record deleted or expired)."""
        if not legal(current, new) and current != new:
            raise RuntimeError(f"illegal response status change {current} → {new}")
        if not job.stored or not (job.background or new in TERMINAL):
            return True  # a foreground run is stored once, when it ends; nobody can cancel it
        snapshot = events[-1]["response"] if events and "response" in events[-1] else job.narrator.snapshot(new)
        # Foreground runs keep no events: only background streams can be resumed.
        written = await self.store.update(job.id, snapshot, events if job.background else (), frozenset({current}))
        self._signals.notify(job.id)
        return written

    def spawn(self, job: Run) -> None:
        """Run ``job`` in the background; its events go only to the store."""

        async def drain() -> None:
            try:
                async for _ in self.run(job):
                    pass
            except Exception:  # the store failed under the run: fail it, if the store lets us
                log.exception("a background response run broke")
                with contextlib.suppress(Exception):
                    record = await self.store.get(job.id)
                    if record is not None and record.status not in TERMINAL:
                        await self._settle(record, BROKE)

        task = asyncio.create_task(drain(), name=f"response {job.id}")
        self._tasks[job.id] = task
        task.add_done_callback(lambda _: self._tasks.pop(job.id, None))

    # ---- observing and steering ---------------------------------------------------------

    async def follow(self, response_id: str, after: int) -> AsyncIterator[Json]:
        """Stored events after ``after``, then live ones until the run ends. It always ends:
        after a closing event; once the record is terminal (a cancelled run has no closing
        event) or gone; and a run whose process died is failed (:meth:`recover`) — its
        ``error`` and ``response.failed`` then end the stream."""
        await self._recovered()
        quiet = time.monotonic()  # since when nothing new came
        while True:
            changed = self._signals.watch(response_id)  # before reading: no write is missed
            batch = await self.store.events(response_id, after)
            for event in batch:
                yield event
            if batch:
                after = batch[-1]["sequence_number"]
                if batch[-1]["type"] in CLOSING_EVENTS:
                    return
                quiet = time.monotonic()
                continue
            record = await self.store.get(response_id)
            if record is None or record.status in TERMINAL:  # deleted, or cancelled (no closing event)
                for event in await self.store.events(response_id, after):
                    yield event
                return
            if response_id not in self._tasks and time.monotonic() - quiet >= ORPHAN_CHECK:
                quiet = time.monotonic()  # another process's run, silent a while: is it still there?
                if await self._fail_orphans([response_id]):
                    continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), FOLLOW_POLL)

    async def get(self, response_id: str, param: str = "response_id") -> Record:
        await self._recovered()
        record = await self.store.get(response_id)
        if record is None:
            raise NotFound(f"Response with id '{response_id}' not found.", param=param)
        return record

    async def cancel(self, response_id: str) -> Record:
        """Cancel a background response; a finished one is returned unchanged."""
        await self._recovered()
        while True:
            record = await self.get(response_id)
            if not record.background:
                raise InvalidRequest(
                    "Only responses created with background=true can be cancelled.", param="response_id"
                )
            if record.status in TERMINAL:
                return record
            snapshot = {**record.response, "status": "cancelled"}
            if legal(record.status, "cancelled") and await self.store.update(
                response_id, snapshot, (), frozenset({record.status})
            ):
                break
            # The run moved meanwhile (queued → in_progress, or it finished): look again.
        task = self._tasks.pop(response_id, None)
        if task is not None:
            task.cancel()  # it may be asleep on the clock; its next write would fail anyway
        self._signals.notify(response_id)
        return await self.get(response_id)

    async def delete(self, response_id: str) -> None:
        if not await self.store.delete(response_id):
            raise NotFound(f"Response with id '{response_id}' not found.", param="response_id")
        task = self._tasks.pop(response_id, None)
        if task is not None:
            task.cancel()
        self._signals.notify(response_id)

    # ---- runs whose process is gone ------------------------------------------------------

    async def recover(self) -> int:
        """Fail the responses left ``queued`` / ``in_progress`` by a process that is gone (see
        the module's docstring), and from now on look again every ``sweep`` seconds (if the
        store is shared). For the app's start-up; the first :meth:`get`, :meth:`follow` or
        :meth:`cancel` does it too. Returns how many it failed (0 the second time)."""
        return await self._recovered()

    async def _recovered(self) -> int:
        """The first look for orphans, run once (awaited by whoever comes first or meanwhile)."""
        task = self._recovery
        if task is None or task.get_loop() is not asyncio.get_running_loop():
            task = self._recovery = asyncio.get_running_loop().create_task(self._first_look())
        if not task.done():
            return await asyncio.shield(task)
        return 0

    async def _first_look(self) -> int:
        failed = await self._fail_orphans(None)
        loop = asyncio.get_running_loop()
        sweeping = self._sweeper is not None and self._sweeper.get_loop() is loop and not self._sweeper.done()
        if self.store.shared and self.sweep > 0 and not sweeping:
            self._sweeper = loop.create_task(self._sweep(), name="responses sweeper")
        if failed:
            log.warning("failed %d response(s) left running by a server that is gone", failed)
        return failed

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self.sweep)  # real time: processes die in real time
            await self._fail_orphans(None)

    async def _fail_orphans(self, ids: Sequence[str] | None) -> int:
        """Fail the orphans (of ``ids``, or all); how many this call failed."""
        try:
            orphans = await self.store.orphans(ids)
        except Exception:  # a store that cannot answer now: the next look will
            log.exception("could not look for responses left running by a server that is gone")
            return 0
        failed = 0
        for record in orphans:
            if record.id not in self._tasks:  # (never ours: our own runs are alive)
                failed += await self._settle(record, RESTARTED)
        return failed

    async def _settle(self, record: Record, message: str) -> bool:
        """Fail ``record`` (``queued`` / ``in_progress``, its run gone) with ``message``, as a
        run's own failure would: the conditional update from the status read, and for a
        background response an ``error`` and ``response.failed`` numbered after the stored
        events. False if it moved meanwhile (another process settled or finished it)."""
        if record.status in TERMINAL:
            return False
        error: Json = {"code": "server_error", "message": message}
        snapshot: Json = {**record.response, "status": "failed", "error": error}
        events: list[Json] = []
        if record.background:
            last = await self.store.events(record.id, record.events - 2)
            number = max([record.events, *(e["sequence_number"] + 1 for e in last)])
            events = [
                {"type": "error", **error, "param": None, "sequence_number": number},
                {"type": "response.failed", "response": snapshot, "sequence_number": number + 1},
            ]
        written = await self.store.update(record.id, snapshot, events, frozenset({record.status}))
        self._signals.notify(record.id)
        return written

    async def clear(self) -> None:
        """Forget every stored response and chat completion (``/__mockserver/reset`` without a
        session): background runs of this process stop first, so none writes after. Ids are the
        first free of a request's deterministic ids (:mod:`mockserver.routes.responses.endpoints`),
        so after a reset a rerun gets the ids a fresh server gives."""
        running = list(self._tasks.values())
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        await self.store.clear()

    async def close(self) -> None:
        """Stop the background runs — failing each, so none is left running for ever — and
        close the store."""
        for task in (self._sweeper, self._recovery):
            if task is not None and not task.done():
                task.cancel()
        self._sweeper = None
        stopped = list(self._tasks.items())
        for _, task in stopped:
            task.cancel()
        await asyncio.gather(*(task for _, task in stopped), return_exceptions=True)
        for response_id, _ in stopped:
            try:
                record = await self.store.get(response_id)
                if record is not None:
                    await self._settle(record, SHUT_DOWN)
            except Exception:
                log.exception("could not fail response %s as the server shut down", response_id)
        await self.store.close()
