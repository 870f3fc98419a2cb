"""Clocks: where ``created`` timestamps and rate-limit windows get their time.

Injected into the app rather than read from ``time.time()`` at each call site, so a test can
freeze time and get byte-identical bodies, and step a virtual clock (``--frozen-time``, then
``POST /__mockserver/clock``) through rate-limit windows and lifecycles without sleeping.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["Clock", "FrozenClock", "SystemClock", "VirtualClock"]


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()


class VirtualClock:
    r"""Stands still until told to move: :meth:`advance` (the admin API's ``clock``).

    Whoever waits for a moment of virtual time (a background response, queued or paced)
    :meth:`subscribe`\ s to hear each move, instead of polling: nothing else would wake it.

    On a shared state the clock's truth is the state's ``clock:ns``, the nanoseconds it moved
    past ``origin`` (the admin API adds to it, atomically, so two processes' advances both count):
    each request's first look brings this copy there (:meth:`follow`), and ``on_listen`` —
    called when someone subscribes — lets the state follow it while anyone waits, since
    another process may move it (:meth:`mockserver.state.sync.Refresh.watch`).
    """

    def __init__(self, at: float) -> None:
        self.origin = at  # where it started (a shared clock is kept as the time moved since)
        self._at = at
        self._listeners: list[Callable[[], None]] = []
        self.on_listen: Callable[[Callable[[], bool]], None] | None = None

    @property
    def at(self) -> float:
        return self._at

    @at.setter
    def at(self, value: float) -> None:
        self._at = value
        for listener in tuple(self._listeners):  # a copy: listeners may unsubscribe meanwhile
            listener()

    def now(self) -> float:
        return self._at

    def advance(self, seconds: float) -> float:
        self.at = self._at + seconds
        return self._at

    def follow(self, at: float) -> None:
        """Where the shared clock stands: a move (listeners hear it) when it differs."""
        if at != self._at:
            self.at = at

    @property
    def listening(self) -> bool:
        return bool(self._listeners)

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` (from whichever thread moves the clock) after every move; the
        returned function unsubscribes it."""
        self._listeners.append(listener)
        if self.on_listen is not None:
            self.on_listen(lambda: self.listening)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(listener)

        return unsubscribe


FrozenClock = VirtualClock  # a virtual clock nobody advances
