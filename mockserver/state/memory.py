"""``--state memory``: the state in this process's memory (the default; nothing is shared).

Every method completes without awaiting anything, so each is atomic on the event loop; a lock
makes them atomic against the threads a test's Python API calls from too.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence

from mockserver.clock import Clock
from mockserver.responses.store import MemoryStore, Store
from mockserver.state.base import Draw, Drawn, charge

__all__ = ["MemoryState"]


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

    async def items(self, key: str) -> list[bytes]:
        with self._lock:
            return list(self._lists.get(key, ()))

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
