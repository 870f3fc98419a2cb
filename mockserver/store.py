"""Where responses are kept: one small interface, two implementations.

:class:`Store` is everything the Responses API needs from storage: create a record (failing
if the id is taken), read it, replace its snapshot and append stream events *atomically and
only if its status is still one of those expected*, read the events after a sequence number,
and delete it. That conditional update is the whole concurrency story: a cancel racing a
run's completion is two updates expecting ``in_progress``, and exactly one of them wins.

* :class:`MemoryStore` (the default): a bounded, expiring dict on the event loop.
* ``SqliteStore`` (:mod:`mockserver.store_sqlite`, ``--store sqlite:PATH``): one file
  that several server processes share, so a response created by one is retrieved and
  cancelled from another.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from mockserver.clock import Clock

__all__ = ["MemoryStore", "Record", "Store", "open_store"]

Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Record:
    """A stored response.

    ``response`` is the Response object as last written (its ``status`` is the record's);
    ``messages`` the conversation it continued and its own input (instructions left out, as
    ``previous_response_id`` does not carry them over); ``events`` how many stream events
    are recorded (sequence numbers ``0 … events - 1``).
    """

    id: str
    response: Json
    input_items: tuple[Json, ...]
    messages: tuple[tuple[str, str], ...]
    background: bool = False
    stream: bool = False
    events: int = 0

    @property
    def status(self) -> str:
        return str(self.response["status"])


class Store(Protocol):
    async def create(self, record: Record) -> bool:
        """Keep ``record``; False (and nothing kept) if its id is taken."""
        ...

    async def get(self, response_id: str) -> Record | None: ...

    async def update(self, response_id: str, response: Json, events: Sequence[Json], expect: frozenset[str]) -> bool:
        """Replace the snapshot and append ``events``, if the status is in ``expect`` (else
        change nothing and return False)."""
        ...

    async def events(self, response_id: str, after: int) -> list[Json]:
        """The recorded events with ``sequence_number > after``, in order."""
        ...

    async def delete(self, response_id: str) -> bool: ...

    async def close(self) -> None: ...


@dataclass(slots=True)
class _Entry:
    record: Record
    expires: float
    events: list[Json] = field(default_factory=list)


class MemoryStore:
    """Records in insertion order; past ``capacity`` the oldest go, and a record is gone once
    the clock passes its expiry. Every method completes without awaiting anything, so each
    is atomic on the event loop."""

    def __init__(self, clock: Clock, capacity: int = 10_000, ttl: float = 2_592_000.0) -> None:
        self._clock = clock
        self._capacity = capacity
        self._ttl = ttl
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def _live(self, response_id: str) -> _Entry | None:
        entry = self._entries.get(response_id)
        if entry is not None and entry.expires <= self._clock.now():
            del self._entries[response_id]
            return None
        return entry

    async def create(self, record: Record) -> bool:
        if self._live(record.id) is not None:
            return False
        self._entries[record.id] = _Entry(record, self._clock.now() + self._ttl)
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)
        return True

    async def get(self, response_id: str) -> Record | None:
        entry = self._live(response_id)
        return entry.record if entry is not None else None

    async def update(self, response_id: str, response: Json, events: Sequence[Json], expect: frozenset[str]) -> bool:
        entry = self._live(response_id)
        if entry is None or entry.record.status not in expect:
            return False
        entry.events.extend(events)
        entry.record = replace(entry.record, response=response, events=len(entry.events))
        return True

    async def events(self, response_id: str, after: int) -> list[Json]:
        entry = self._live(response_id)
        if entry is None:
            return []
        # Sequence numbers are list positions, so "after N" is a slice.
        return entry.events[max(0, after + 1) :]

    async def delete(self, response_id: str) -> bool:
        return self._entries.pop(response_id, None) is not None

    async def close(self) -> None:
        self._entries.clear()


def open_store(spec: str, clock: Clock, capacity: int, ttl: float) -> Store:
    """``memory`` or ``sqlite:PATH`` (ValueError for anything else)."""
    if spec == "memory":
        return MemoryStore(clock, capacity, ttl)
    kind, sep, path = spec.partition(":")
    if kind == "sqlite" and sep and path:
        from mockserver.store_sqlite import SqliteStore

        return SqliteStore(path, clock, ttl)
    raise ValueError(f"unknown store {spec!r}: use 'memory' or 'sqlite:PATH'")
