"""Which store ``--store`` names: ``memory`` (the default) or ``sqlite:PATH`` (shared by processes)."""

from __future__ import annotations

from mockserver.clock import Clock
from mockserver.responses.store import MemoryStore, Store

__all__ = ["open_store"]


def open_store(spec: str, clock: Clock, capacity: int, ttl: float) -> Store:
    """``memory`` or ``sqlite:PATH`` (ValueError for anything else)."""
    if spec == "memory":
        return MemoryStore(clock, capacity, ttl)
    kind, sep, path = spec.partition(":")
    if kind == "sqlite" and sep and path:
        from mockserver.responses.sqlite import SqliteStore

        return SqliteStore(path, clock, ttl)
    raise ValueError(f"unknown store {spec!r}: use 'memory' or 'sqlite:PATH'")
