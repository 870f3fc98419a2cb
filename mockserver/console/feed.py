"""The console's live list: journal rows pushed as server-sent events while the page is open.

The journal has no subscribers (a request never waits on a viewer), so the feed looks at it:
every :data:`POLL` seconds (:data:`SHARED_POLL` on a shared state) it asks for the entries newer than the last it sent
(:meth:`~mockserver.faults.journal.Journal.anewer`: on a memory journal a walk back from the
newest entry, on a shared state the fleet's list), sends their rows, and sends a row again
when a request it showed pending has finished. A page of rows is the most one look sends.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from mockserver.console.view import Rows, matches
from mockserver.faults.journal import Journal

__all__ = ["POLL", "feed", "page"]

POLL = 0.2  # seconds between looks at the journal
SHARED_POLL = 1.0  # on a shared state, where a look reads the fleet's list: seconds between looks
BEAT = 15.0  # seconds of quiet before a comment keeps proxies from closing the stream
PAGE = 50  # rows a page (and one look of the feed) sends at most


async def page(
    journal: Journal, rows: Rows, want: dict[str, str], before: int | None, limit: int = PAGE
) -> dict[str, Any]:
    """The newest ``limit`` rows passing ``want`` below id ``before``, newest first; ``next``
    is the ``before`` of the page after it (None: no older rows). The journal's end is read,
    further back only while the page is not full (a filter that few entries pass, a page far back)."""
    count = 4 * (limit + 1)
    while True:
        entries, whole = await journal.alast(count, want.get("session") or None)
        found: list[dict[str, Any]] = []
        older = None
        for entry in reversed(entries):
            if before is not None and entry.id >= before:
                continue
            line = rows.of(entry)
            if matches(line, want):
                if len(found) == limit:
                    older = found[-1]["id"]
                    break
                found.append(line)
        if older is not None or whole:
            newest = entries[-1].id if entries else 0
            return {"rows": found, "next": older, "newest": newest}
        count *= 4


def _frame(name: str, data: Any) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


async def feed(journal: Journal, rows: Rows, want: dict[str, str], after: int) -> AsyncIterator[bytes]:
    """Rows of entries above ``after`` (and of pending ones when they finish), as SSE frames."""
    pending: set[int] = set()
    quiet, poll = 0.0, SHARED_POLL if journal.shared else POLL
    yield b": console feed\n\n"
    while True:
        since = min(pending) - 1 if pending else after
        fresh = await journal.anewer(since, want.get("session") or None)
        sent = 0
        for entry in fresh:
            if sent >= PAGE:
                break
            if entry.id <= after and (entry.id not in pending or entry.ended == "pending"):
                continue
            line = rows.of(entry)
            after = max(after, entry.id)
            if entry.ended == "pending":
                pending.add(entry.id)
            else:
                pending.discard(entry.id)
            if matches(line, want):
                yield _frame("row", line)
                sent += 1
        pending = {p for p in pending if p > since}  # one cleared from the journal is gone
        if sent:
            quiet = 0.0
        else:
            quiet += poll
            if quiet >= BEAT:
                quiet = 0.0
                yield b": still here\n\n"
        await asyncio.sleep(poll)
