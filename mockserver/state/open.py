"""Which state ``--state URL`` names, and how a URL is shown (its password hidden).

``memory`` (the default), ``sqlite:PATH`` (one host, many processes) or ``redis://[:PASSWORD@]HOST[:PORT][/DB]``
(``rediss://`` for TLS), ``redis+cluster://[:PASSWORD@]HOST:PORT[,HOST:PORT…]`` (a Redis Cluster; ``rediss+cluster://``)
or ``redis+sentinel://[:PASSWORD@]HOST:PORT[,HOST:PORT…]/SERVICE[/DB]`` (the primary Sentinels name).
``--store`` names the records' engine alone, as it did before ``--state``:
with ``--state memory --store sqlite:PATH`` the responses are shared and nothing else is.
"""

from __future__ import annotations

from mockserver.clock import Clock
from mockserver.state.base import State
from mockserver.state.memory import MemoryStore
from mockserver.state.records import Store
from mockserver.state.urls import StateURLError, hidden, kind_of

__all__ = ["StateURLError", "hidden", "kind_of", "open_state"]


def _records(url: str, clock: Clock, capacity: int, ttl: float) -> Store:
    kind = kind_of(url)
    if kind == "memory":
        return MemoryStore(clock, capacity, ttl)
    if kind == "sqlite":
        from mockserver.state.sqlite.records import SqliteStore

        return SqliteStore(url.partition(":")[2], clock, ttl)
    from mockserver.state.redis.records import RedisStore

    return RedisStore(url, clock, ttl)


def open_state(
    url: str, clock: Clock, *, store: str | None = None, capacity: int = 10_000, ttl: float = 2_592_000.0
) -> State:
    """The state ``url`` names; its records in ``store``'s engine when that is given (``--store``),
    else in the state's own. Nothing is connected yet: :meth:`State.ping` does (at start-up)."""
    kind = kind_of(url)
    records = _records(store if store is not None else url, clock, capacity, ttl)
    if kind == "memory":
        from mockserver.state.memory import MemoryState

        return MemoryState(records, clock)
    if kind == "sqlite":
        from mockserver.state.sqlite.state import SqliteState

        return SqliteState(url.partition(":")[2], records)
    from mockserver.state.redis.state import RedisState

    return RedisState(url, records)
