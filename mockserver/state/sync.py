"""How the subsystems meet the state: sync calls into it, safe keys, and the request's first look.

Three things every subsystem on :class:`~mockserver.state.base.State` needs:

* :class:`Bridge` — the state, and the way a *sync* caller (a test's Python API, from its own
  thread) reaches it. With ``memory`` nothing ever waits, so the coroutine is driven right
  here; with a shared engine it runs on the server's event loop (its connections belong to
  that loop), or on a loop of its own before the server has started.
* :func:`safe` — a session id as it goes into a key: hex, so a ``:`` or a glob character in a
  session's name can never reach another session's keys (``forget`` goes by prefix).
* :class:`Refresh` — what a provider request pays at its start when the state is shared: one
  :meth:`~State.exchange` that reads the rule books' versions and the virtual clock and counts
  the journal's next id; a rule book reloads only when its version moved. With ``memory``
  the caches are the writers' own and nothing is read.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import random
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

from mockserver.state.base import State, StateUnavailable
from mockserver.state.memory import MemoryState

__all__ = ["Bridge", "Cached", "Refresh", "Synced", "drive", "safe", "shared_time", "version_step"]

T = TypeVar("T")

# The shared virtual clock: nanoseconds it was moved past its start (--frozen-time, the same on
# every process), a counter, so advances from two processes at once both count (an atomic add).
CLOCK_KEY = "clock:ns"
JOURNAL_IDS = "journal:ids"
_POLL = 0.03  # seconds between looks at a shared virtual clock while someone waits on it


def safe(session: str | None) -> str:
    """``session`` fit for a key: ``_`` for none, else ``x`` and its UTF-8 bytes in hex."""
    return "_" if session is None else "x" + session.encode("utf-8", "surrogatepass").hex()


def version_step() -> int:
    """How far a write moves a rule book's version: a random step, so that a state that lost
    its data (a Redis restarted without persistence) and counts again does not come back to a
    version some process's copy already has — which would keep that copy's old rules."""
    return random.randrange(1, 1 << 31)


def drive(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (every memory operation) to its end, here."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a memory-state operation suspended: it cannot be driven synchronously")


class Bridge:
    """The state, and how sync code reaches it (see the module's docs)."""

    def __init__(self, state: State | None = None) -> None:
        self.state: State = state if state is not None else MemoryState()
        self.loop: asyncio.AbstractEventLoop | None = None  # the server's, once it runs

    @property
    def shared(self) -> bool:
        return self.state.shared

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """The coroutine's result, from sync code."""
        if not self.state.shared:
            return drive(coro)
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        loop = self.loop
        if loop is not None and loop.is_running() and running is not loop:
            future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, loop)
            return future.result(timeout)
        if running is None:
            return asyncio.run(coro)  # the server is not running: nothing else uses the engine
        coro.close()
        raise RuntimeError(
            "a sync state call on the server's own event loop would block it: await the async method (a...) instead"
        )


class Cached:
    """A rule book whose local copy follows a version counter in the state: ``version_key``
    counts its writes, :meth:`reload` (the subclass's) reads the rules again. A subclass sets
    ``state`` and keeps ``_version`` as the version its copy reflects."""

    version_key: str
    state: State
    _version: int = 0

    @property
    def version(self) -> int:
        return self._version

    def stale(self) -> None:
        """Read the rules again at the next look, whatever the version says."""
        self._version = -1  # no version the state gives

    async def reload(self, version: int) -> None:
        raise NotImplementedError

    async def refresh(self) -> None:
        """Bring the copy up to date (an admin read on a shared state: one look at the version)."""
        if self.state.shared:
            value = await self.state.get(self.version_key)
            version = int(value) if value is not None else 0
            if version != self._version:
                await self.reload(version)


class Synced(Protocol):
    """A virtual clock that can be told where the shared clock stands (see :mod:`mockserver.clock`)."""

    origin: float  # where it started: the shared clock is an offset from it

    def follow(self, at: float) -> None: ...


def shared_time(origin: float, moved: bytes | int) -> float:
    """The shared virtual clock's time: ``origin`` plus the nanoseconds it was moved (``CLOCK_KEY``)."""
    return origin + int(moved) / 1e9


class Refresh:
    """The first look of a provider request at a shared state (a no-op with ``memory``)."""

    def __init__(self, bridge: Bridge, books: tuple[Cached, ...], clock: Synced | None) -> None:
        self.bridge = bridge
        self.books = books
        self.clock = clock
        self._read = [b.version_key for b in books] + ([CLOCK_KEY] if clock is not None else [])
        self._watching: asyncio.Task[None] | None = None

    async def begin(self, journal: bool) -> int:
        """Bring the caches and the clock up to date; the journal's next id when ``journal``
        (0 otherwise, or with ``memory``, whose journal counts its own)."""
        state = self.bridge.state
        if not state.shared:
            return 0
        try:
            values, counted = await state.exchange(self._read, [JOURNAL_IDS] if journal else [])
        except StateUnavailable:
            # The engine may come back empty (a Redis restarted without persistence), its
            # versions counting again from 0 to numbers this copy has seen: read it all again.
            for book in self.books:
                book.stale()
            raise
        await self.apply(values)
        return counted[0] if counted else 0

    async def apply(self, values: list[bytes | None]) -> None:
        for book, value in zip(self.books, values, strict=False):
            version = int(value) if value is not None else 0
            if version != book.version:
                await book.reload(version)
        if self.clock is not None:
            moved = values[len(self.books)]
            if moved is not None:
                self.clock.follow(shared_time(self.clock.origin, moved))

    async def sync(self) -> None:
        """The same look, for an admin read (nothing counted)."""
        await self.begin(False)

    # -- a shared virtual clock, followed while someone waits on it

    def watch(self, listening: Callable[[], bool]) -> None:
        """Someone waits on the virtual clock: look at the shared one every few ms until
        ``listening()`` says nobody does (another process may move it)."""
        if not self.bridge.state.shared or self.clock is None:
            return
        if self._watching is not None and not self._watching.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # subscribed from another thread: the next request's look moves it
        self._watching = loop.create_task(self._poll(listening))

    async def _poll(self, listening: Callable[[], bool]) -> None:
        clock = self.clock
        assert clock is not None
        while listening():
            await asyncio.sleep(_POLL)
            try:
                value = await self.bridge.state.get(CLOCK_KEY)
            except StateUnavailable:
                continue  # the engine is down: look again later
            if value is not None:
                clock.follow(shared_time(clock.origin, value))

    async def close(self) -> None:
        task = self._watching
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
