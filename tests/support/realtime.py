"""What the Realtime tests share: reading a session's events up to one kind."""

from __future__ import annotations

from typing import Any

from openai.resources.realtime.realtime import RealtimeConnection


def until(conn: RealtimeConnection, kind: str) -> list[Any]:
    """The events received up to and including the first of ``kind``."""
    seen = []
    while True:
        event = conn.recv()
        seen.append(event)
        if event.type == kind:
            return seen
