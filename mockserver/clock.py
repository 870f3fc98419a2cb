"""Clocks: where ``created`` timestamps and rate-limit windows get their time.

Injected into the app rather than read from ``time.time()`` at each call site, so a test can
freeze time and get byte-identical bodies, and step a virtual clock (``--frozen-time``, then
``POST /__mockserver/clock``) through rate-limit windows and lifecycles without sleeping.
"""

from __future__ import annotations

import time
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
    """Stands still until told to move: :meth:`advance` (the admin API's ``clock``)."""

    def __init__(self, at: float) -> None:
        self.at = at

    def now(self) -> float:
        return self.at

    def advance(self, seconds: float) -> float:
        self.at += seconds
        return self.at


FrozenClock = VirtualClock  # a virtual clock nobody advances
