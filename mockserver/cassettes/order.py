"""Where each replayed request is in its recordings: the nth identical request gets the nth
recording. Counted per test session (``x-mockserver-session``) and per cassette, so parallel
workers replaying the same cassette each start at its first recording, and cleared by
``/__mockserver/reset`` like the rest of a session's state."""

from __future__ import annotations

import threading
from collections.abc import Hashable

__all__ = ["ReplayOrder"]


class ReplayOrder:
    def __init__(self) -> None:
        self._played: dict[tuple[str | None, Hashable], int] = {}
        self._lock = threading.Lock()

    def take(self, session: str | None, key: Hashable) -> int:
        """How many times ``key`` was replayed before in ``session`` (and count this one)."""
        with self._lock:
            played = self._played.get((session, key), 0)
            if len(self._played) >= 100_000:  # a bound for servers that run for ever
                self._played.clear()
            self._played[(session, key)] = played + 1
            return played

    def clear(self, session: str | None = None) -> None:
        """Forget every session's places (``None``), or one session's."""
        with self._lock:
            if session is None:
                self._played.clear()
            else:
                self._played = {k: v for k, v in self._played.items() if k[0] != session}
