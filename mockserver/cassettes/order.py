"""Where each replayed request is in its recordings: the nth identical request gets the nth
recording. Counted per test session (``x-mockserver-session``) and per cassette, so parallel
workers replaying the same cassette each start at its first recording, and cleared by
``/__mockserver/reset`` like the rest of a session's state.

The places are counters in the state (``replay:s:<session>:<digest>``), so on a shared state
the processes of a fleet hand each recording out in turn, as one process does. The digest is
SHA-256 of the place's key as text (its ``repr``: built of strings, bytes, numbers and tuples,
the same in every process, where ``hash()`` is not)."""

from __future__ import annotations

import hashlib
from collections.abc import Hashable

from mockserver.state.sync import Bridge, safe

__all__ = ["ReplayOrder"]

PREFIX = "replay:s:"


class ReplayOrder:
    def __init__(self, bridge: Bridge | None = None) -> None:
        self.bridge = bridge if bridge is not None else Bridge()
        self._digests: dict[Hashable, str] = {}  # key → its digest (keying again costs a repr and a hash)
        self.changes = 0  # bumped whenever places are forgotten (a replay may start again)

    def _digest(self, key: Hashable) -> str:
        digest = self._digests.get(key)
        if digest is None:
            if len(self._digests) >= 4096:
                self._digests.clear()
            digest = self._digests[key] = hashlib.sha256(repr(key).encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return digest

    async def take(self, session: str | None, key: Hashable) -> int:
        """How many times ``key`` was replayed before in ``session`` (and count this one)."""
        return await self.bridge.state.add(f"{PREFIX}{safe(session)}:{self._digest(key)}") - 1

    def clear(self, session: str | None = None) -> None:
        self.bridge.call(self.aclear(session))

    async def aclear(self, session: str | None = None) -> None:
        """Forget every session's places (``None``), or one session's."""
        self.changes += 1
        await self.bridge.state.forget(PREFIX if session is None else f"{PREFIX}{safe(session)}:")
