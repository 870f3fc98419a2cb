"""The state interface: the few operations every subsystem's mutable state is made of.

Scripted rules and their call counts, fault rules, rate-limit buckets, the journal, replay
positions, the virtual clock and images served by URL are all written with these primitives —
so one implementation per storage engine (:mod:`~mockserver.state.memory`,
:mod:`~mockserver.state.sqlite`, :mod:`~mockserver.state.redis`) makes every subsystem shared.
The Responses API's records need a conditional update the primitives do not give; they live in
``records``, a :class:`~mockserver.state.records.Store` of the same engine.

The operations are chosen so that nothing is read-modify-written across processes: counters
are added to atomically (:meth:`State.exchange` reads and counts in one round trip, which is
what a request pays at its start), lists are pushed to and trimmed in one step, and a token
bucket is charged by :meth:`State.draw` all or nothing.

Keys are plain strings; the subsystems put a namespace first (``script:``, ``faults:``…) and
a session's keys under ``…:s:<session id>:`` so :meth:`State.forget` can drop one session.
An engine that cannot be reached raises :class:`StateUnavailable`: a 503 the client may retry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from mockserver.errors import APIError
from mockserver.state.records import Store

__all__ = ["Draw", "Drawn", "State", "StateUnavailable", "charge", "refill"]


class StateUnavailable(APIError):
    """The state engine cannot be reached: 503, and the client should retry (the server
    recovers by itself when the engine is back). ``where`` names it, password hidden."""

    status = 503
    type = "server_error"

    def __init__(self, where: str, why: str = "") -> None:
        detail = f" ({why})" if why else ""
        super().__init__(
            f"The mock server's shared state ({where}) is unavailable{detail}. Retry shortly.",
            code="state_unavailable",
            headers={"x-should-retry": "true", "retry-after": "1"},
        )
        self.where = where


@dataclass(frozen=True, slots=True)
class Draw:
    """Take ``amount`` from the token bucket at ``key`` that holds ``capacity`` when full and
    refills ``rate`` per second (a bucket never seen before starts full)."""

    key: str
    capacity: float
    rate: float
    amount: float


@dataclass(frozen=True, slots=True)
class Drawn:
    """What :meth:`State.draw` did: ``allowed`` (every bucket paid, else none did), each
    bucket's level after, and the seconds until the request would pass (0 when allowed)
    with the index of the bucket that decided it (-1 when allowed)."""

    allowed: bool
    levels: tuple[float, ...]
    wait: float
    short: int = -1


# A hair of tolerance: epoch seconds near 1.7e9 resolve only ~0.2 µs, and 0.6 s at 100/min
# must refill one whole request, not 0.9999996 of one.
TOLERANCE = 1e-5


def refill(level: float, at: float, now: float, capacity: float, rate: float) -> float:
    """A bucket's level at ``now``, last seen at ``level`` at ``at`` (the one rule every engine applies)."""
    return min(capacity, level + max(0.0, now - at) * rate)


def charge(draws: Sequence[Draw], seen: Mapping[str, tuple[float, float]], now: float) -> Drawn:
    """What :meth:`State.draw` decides, given each bucket's last ``(level, at)`` (a bucket not in
    ``seen`` is new: full). The engines that run Python (memory, SQLite) call this and store
    ``(level, now)`` for each bucket; Redis runs the same arithmetic in Lua."""
    levels = []
    for d in draws:
        level, at = seen.get(d.key, (d.capacity, now))
        levels.append(refill(level, at, now, d.capacity, d.rate))
    waits = [
        0.0 if level + TOLERANCE >= d.amount else (d.amount - level) / d.rate
        for d, level in zip(draws, levels, strict=True)
    ]
    wait = max(waits, default=0.0)
    allowed = wait <= 0.0
    if allowed:
        levels = [level - d.amount for d, level in zip(draws, levels, strict=True)]
    return Drawn(allowed, tuple(levels), wait, -1 if allowed else waits.index(wait))


class State(Protocol):
    """One engine's state. Every method is atomic on its own; none is a read-modify-write."""

    url: str  # what the banner and /health show: the password, if any, hidden
    shared: bool  # other processes see what this one writes (not so for memory)
    records: Store  # stored responses and chat completions

    async def get(self, key: str) -> bytes | None: ...

    async def put(self, key: str, value: bytes, ttl: float | None = None) -> None:
        """Set ``key``; ``ttl`` seconds of real time until it is gone (None: kept)."""
        ...

    async def delete(self, key: str) -> bool: ...

    async def add(self, key: str, by: int = 1) -> int:
        """Add ``by`` to the counter at ``key`` (0 if unset) and return its new value."""
        ...

    async def exchange(
        self, read: Sequence[str] = (), count: Sequence[str] = ()
    ) -> tuple[list[bytes | None], list[int]]:
        """In one round trip: the values of ``read`` (a counter reads as its decimal digits), and
        each counter of ``count`` plus one (its new value). Each count is atomic."""
        ...

    async def map_put(self, key: str, field: str, value: bytes) -> None: ...

    async def map_delete(self, key: str, field: str) -> bool: ...

    async def map_all(self, key: str) -> dict[str, bytes]:
        """Every field of the map at ``key``, in no particular order."""
        ...

    async def push(self, key: str, value: bytes, cap: int) -> None:
        """Append to the list at ``key``, keeping its newest ``cap`` items."""
        ...

    async def items(self, key: str, newest: int | None = None) -> list[bytes]:
        """The list at ``key``, oldest first; only its last ``newest`` items when given (a
        reader of a long list's end: the console's live view)."""
        ...

    async def draw(self, draws: Sequence[Draw], now: float) -> Drawn:
        """Charge every bucket, or none when any cannot pay (token buckets refilled at ``now``)."""
        ...

    async def forget(self, prefix: str) -> None:
        """Drop every key (of any kind) whose name starts with ``prefix``."""
        ...

    async def ping(self) -> None:
        """Return if the engine answers; raise :class:`StateUnavailable` if not."""
        ...

    async def close(self) -> None:
        """Let go of the engine (not of ``records``: the Responses lifecycle closes those)."""
        ...
