"""``--state memory``: the state and the records in this process's memory (the default; nothing is shared).

:class:`MemoryState` is the :class:`~mockserver.state.base.State`; :class:`MemoryStore` the
records' :class:`~mockserver.state.records.Store` (``--store memory``). Every method of either
completes without awaiting anything, so each is atomic on the event loop; in MemoryState a lock
makes them atomic against the threads a test's Python API calls from too.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import islice

from mockserver.clock import Clock
from mockserver.state.base import Draw, Drawn, charge
from mockserver.state.records import Page, Query, Record, RecordKind, Store
from mockserver.wire.json import Json

__all__ = ["MemoryState", "MemoryStore"]


class MemoryState:
    url = "memory"
    shared = False

    def __init__(self, records: Store | None = None, clock: Clock | None = None) -> None:
        self.records: Store = records if records is not None else MemoryStore(clock or _Wall())
        self._values: dict[str, bytes | int] = {}
        self._expiry: dict[str, float] = {}  # key → time.monotonic() it goes
        self._maps: dict[str, dict[str, bytes]] = {}
        self._lists: dict[str, deque[bytes]] = {}
        self._buckets: dict[str, tuple[float, float]] = {}  # key → (level, at)
        self._lock = threading.Lock()

    def _value(self, key: str) -> bytes | int | None:
        value = self._values.get(key)
        if value is not None and key in self._expiry and self._expiry[key] <= time.monotonic():
            del self._values[key], self._expiry[key]
            return None
        return value

    async def get(self, key: str) -> bytes | None:
        with self._lock:
            value = self._value(key)
        return str(value).encode() if isinstance(value, int) else value

    async def put(self, key: str, value: bytes, ttl: float | None = None) -> None:
        with self._lock:
            self._values[key] = value
            if ttl is None:
                self._expiry.pop(key, None)
            else:
                self._expiry[key] = time.monotonic() + ttl

    async def delete(self, key: str) -> bool:
        with self._lock:
            found = self._value(key) is not None
            self._values.pop(key, None)
            self._expiry.pop(key, None)
            return found

    def _add(self, key: str, by: int) -> int:
        value = self._value(key)
        number = (int(value) if value is not None else 0) + by
        self._values[key] = number
        return number

    async def add(self, key: str, by: int = 1) -> int:
        with self._lock:
            return self._add(key, by)

    async def exchange(
        self, read: Sequence[str] = (), count: Sequence[str] = ()
    ) -> tuple[list[bytes | None], list[int]]:
        with self._lock:
            values = [self._value(key) for key in read]
            counted = [self._add(key, 1) for key in count]
        return [str(v).encode() if isinstance(v, int) else v for v in values], counted

    async def map_put(self, key: str, field: str, value: bytes) -> None:
        with self._lock:
            self._maps.setdefault(key, {})[field] = value

    async def map_delete(self, key: str, field: str) -> bool:
        with self._lock:
            return self._maps.get(key, {}).pop(field, None) is not None

    async def map_all(self, key: str) -> dict[str, bytes]:
        with self._lock:
            return dict(self._maps.get(key, {}))

    async def push(self, key: str, value: bytes, cap: int) -> None:
        with self._lock:
            items = self._lists.get(key)
            if items is None or items.maxlen != cap:
                items = self._lists[key] = deque(items or (), maxlen=cap)
            items.append(value)

    async def items(self, key: str, newest: int | None = None) -> list[bytes]:
        with self._lock:
            found = self._lists.get(key, ())
            if newest is None or newest >= len(found):
                return list(found)
            return list(islice(found, len(found) - newest, None)) if newest > 0 else []

    async def draw(self, draws: Sequence[Draw], now: float) -> Drawn:
        with self._lock:
            drawn = charge(draws, self._buckets, now)
            for d, level in zip(draws, drawn.levels, strict=True):
                self._buckets[d.key] = (level, now)
            return drawn

    async def forget(self, prefix: str) -> None:
        with self._lock:
            for table in (self._values, self._expiry, self._maps, self._lists, self._buckets):
                for key in [k for k in table if k.startswith(prefix)]:
                    del table[key]

    async def ping(self) -> None:
        return None

    async def close(self) -> None:
        return None  # the records are closed by the Lifecycle that runs on them


class _Wall:
    def now(self) -> float:
        return time.time()


@dataclass(slots=True)
class _Entry:
    record: Record
    expires: float
    events: list[Json] = field(default_factory=list)


class MemoryStore:
    """Records in insertion order; past ``capacity`` the oldest go, and a record is gone once
    the clock passes its expiry. Every method completes without awaiting anything, so each
    is atomic on the event loop."""

    shared = False  # one process's own: no run of another process to find

    def __init__(self, clock: Clock, capacity: int = 10_000, ttl: float = 2_592_000.0) -> None:
        self._clock = clock
        self._capacity = capacity
        self._ttl = ttl
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def _live(self, response_id: str, kind: RecordKind | None = None) -> _Entry | None:
        """The unexpired entry (of ``kind``, if given)."""
        entry = self._entries.get(response_id)
        if entry is not None and entry.expires <= self._clock.now():
            del self._entries[response_id]
            return None
        if entry is not None and kind is not None and entry.record.kind != kind:
            return None
        return entry

    async def create(self, record: Record) -> bool:
        if self._live(record.id) is not None:
            return False
        self._entries[record.id] = _Entry(record, self._clock.now() + self._ttl)
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)
        return True

    async def get(self, response_id: str, kind: RecordKind = "response") -> Record | None:
        entry = self._live(response_id, kind)
        return entry.record if entry is not None else None

    async def update(self, response_id: str, response: Json, events: Sequence[Json], expect: frozenset[str]) -> bool:
        entry = self._live(response_id, "response")
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

    async def delete(self, response_id: str, kind: RecordKind = "response") -> bool:
        if self._live(response_id, kind) is None:
            return False
        del self._entries[response_id]
        return True

    async def rewrite(self, record_id: str, obj: Json, kind: RecordKind) -> bool:
        entry = self._live(record_id, kind)
        if entry is None:
            return False
        entry.record = replace(entry.record, response=obj)  # the entry stays where it is: same order
        return True

    async def find(self, query: Query) -> Page | None:
        now = self._clock.now()
        # Insertion order is creation order (a re-created id moves to the end, as it should).
        ids = [i for i, e in self._entries.items() if e.record.kind == query.kind and e.expires > now]
        if query.order == "desc":
            ids.reverse()
        if query.after is not None:
            if query.after not in ids:
                return None
            ids = ids[ids.index(query.after) + 1 :]
        records = (self._entries[i].record for i in ids)
        return Page.of((r for r in records if query.admits(r)), query.limit)

    async def orphans(self, ids: Sequence[str] | None = None) -> list[Record]:
        return []  # it lives and dies with the one process that runs its responses

    async def clear(self) -> None:
        self._entries.clear()

    async def close(self) -> None:
        self._entries.clear()
