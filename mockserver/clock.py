"""Clocks: where ``created`` timestamps come from.

Injected into the app rather than read from ``time.time()`` at each call site, so a test can
freeze time and get byte-identical bodies, and (later) step a virtual clock through lifecycles.
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "FrozenClock", "SystemClock"]


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()


class FrozenClock:
    """Always the same instant."""

    def __init__(self, at: float) -> None:
        self.at = at

    def now(self) -> float:
        return self.at
