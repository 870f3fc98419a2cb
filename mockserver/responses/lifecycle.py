"""The Responses lifecycle: the status machine, and the runs that move through it.

The one table of legal moves::

    queued ──▶ in_progress ──▶ completed | incomplete | failed | cancelled
       └──────────────────────▶ cancelled | failed

Every change of status is a conditional :meth:`~mockserver.responses.store.Store.update` that expects
the status it moves *from*; so a cancel racing a run's last write is two updates expecting
``in_progress``, exactly one wins, and the loser sees it and stops. No other lock exists.

A run (:meth:`Lifecycle.run`) numbers the stream events a :class:`Narrator` makes of the
engine's events, writes them to the store *before* anyone sees them, and yields them: a
foreground stream sends them, a background task (:meth:`Lifecycle.spawn`) just drains them
while :meth:`Lifecycle.follow` serves them — from any sequence number — to pollers and to
resumed streams. Background runs wait ``queue_time`` and are paced at ``tokens_per_second``
on the server's clock; on a virtual clock (``--frozen-time``) they sleep until the admin
API moves it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, Protocol

from mockserver.clock import Clock, VirtualClock
from mockserver.errors import APIError, InvalidRequest, NotFound
from mockserver.http.body import Json
from mockserver.responses.store import Record, Store
from mockserver.spine.events import Event, TextDelta

__all__ = ["TERMINAL", "Lifecycle", "Narrator", "Run", "Status", "legal", "wait_until"]

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
    def __init__(self, store: Store, clock: Clock, queue_time: float = 0.0, tokens_per_second: float = 0.0) -> None:
        self.store = store
        self.clock = clock
        self.queue_time = queue_time
        self.tokens_per_second = tokens_per_second
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._cleanup: set[asyncio.Task[None]] = set()  # writes of abandoned foreground runs
        self._signals = _Signals()

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
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        if failure is not None:
            async for event in self._fail(job, numbered, failure):
                yield event
            return
        final = narrator.outcome()
        closing = numbered([{"type": _CLOSING[final], "response": narrator.snapshot(final)}])
        if await self._write(job, "in_progress", final, closing):
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
            async for _ in self.run(job):
                pass

        task = asyncio.create_task(drain(), name=f"response {job.id}")
        self._tasks[job.id] = task
        task.add_done_callback(lambda _: self._tasks.pop(job.id, None))

    # ---- observing and steering ---------------------------------------------------------

    async def follow(self, response_id: str, after: int) -> AsyncIterator[Json]:
        """Stored events after ``after``, then live ones until the run ends."""
        while True:
            changed = self._signals.watch(response_id)  # before reading: no write is missed
            batch = await self.store.events(response_id, after)
            for event in batch:
                yield event
            if batch:
                after = batch[-1]["sequence_number"]
                if batch[-1]["type"] in CLOSING_EVENTS:
                    return
                continue
            record = await self.store.get(response_id)
            if record is None or record.status in TERMINAL:  # deleted, or cancelled (no closing event)
                for event in await self.store.events(response_id, after):
                    yield event
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), FOLLOW_POLL)

    async def get(self, response_id: str, param: str = "response_id") -> Record:
        record = await self.store.get(response_id)
        if record is None:
            raise NotFound(f"Response with id '{response_id}' not found.", param=param)
        return record

    async def cancel(self, response_id: str) -> Record:
        """Cancel a background response; a finished one is returned unchanged."""
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

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.store.close()
