"""The request journal: what the client actually did, for a test to assert on.

Every provider-path request gets an :class:`Entry` the moment it arrives — before any delay
or fault — and the entry is completed as the response goes out: status, seed, faults
applied, events and bytes sent, and how it ended. Entries live in a bounded ring buffer
(oldest dropped first). :func:`verdicts` judges a session's retries: did the client wait
out ``retry-after``, back off between attempts, and leave non-retryable 4xx alone?
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = ["Ending", "Entry", "Journal", "verdicts"]

Ending = Literal["pending", "done", "eof", "reset", "stall", "hang", "client_disconnect", "error"]

# Statuses an OpenAI SDK retries by itself; any other 4xx repeated unchanged is a client bug.
RETRYABLE = frozenset({408, 409, 429})


@dataclass(slots=True)
class Entry:
    id: int
    time: float  # wall-clock seconds when it arrived (real time even on a virtual clock:
    # the journal is about what the client did, and clients wait in real time)
    method: str
    path: str
    session: str | None
    retry_attempt: int
    body: Any  # the parsed JSON body (None when there was none or it did not parse)
    faults: list[str] = field(default_factory=list)
    status: int | None = None
    seed: int | None = None
    retry_after: float | None = None  # what the response advertised
    events: int = 0  # SSE data events sent
    bytes: int = 0  # body bytes sent
    ended: Ending = "pending"
    duration: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Journal:
    """A bounded, thread-safe ring buffer of entries."""

    def __init__(self, size: int = 10_000) -> None:
        self._entries: deque[Entry] = deque(maxlen=size)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def open(self, **fields: Any) -> Entry:
        with self._lock:
            entry = Entry(id=next(self._ids), **fields)
            self._entries.append(entry)
            return entry

    def entries(self, session: str | None = None) -> list[Entry]:
        with self._lock:
            return [e for e in self._entries if session is None or e.session == session]

    def clear(self, session: str | None = None) -> None:
        with self._lock:
            if session is None:
                self._entries.clear()
            else:
                kept = [e for e in self._entries if e.session != session]
                self._entries.clear()
                self._entries.extend(kept)


def verdicts(entries: Iterable[Entry]) -> dict[str, Any]:
    """Judge the retries in ``entries`` (one session, in arrival order). A retry is the same
    method, path and body sent again after an error answer."""
    ordered = list(entries)
    ignored_retry_after: list[int] = []
    no_backoff: list[int] = []
    retried_4xx: list[int] = []
    for earlier, later in itertools.combinations(ordered, 2):
        if (later.method, later.path, later.body) != (earlier.method, earlier.path, earlier.body):
            continue
        if earlier.status is None or earlier.status < 400:
            continue
        gap = later.time - earlier.time - (earlier.duration or 0.0)
        if earlier.retry_after is not None and gap + 1e-3 < earlier.retry_after:
            ignored_retry_after.append(later.id)
        if 400 <= earlier.status < 500 and earlier.status not in RETRYABLE:
            retried_4xx.append(later.id)
    attempts = [e for e in ordered if e.retry_attempt > 0]
    for previous, current in itertools.pairwise(attempts):
        if current.retry_attempt == previous.retry_attempt + 1:
            before = previous.time - _sent_before(ordered, previous)
            if current.time - previous.time < before - 1e-3:
                no_backoff.append(current.id)
    return {
        "requests": len(ordered),
        "honoured_retry_after": not ignored_retry_after,
        "backed_off": not no_backoff,
        "no_retry_of_non_retryable_4xx": not retried_4xx,
        "offending_entries": {
            "ignored_retry_after": ignored_retry_after,
            "no_backoff": no_backoff,
            "retried_non_retryable_4xx": retried_4xx,
        },
    }


def _sent_before(ordered: list[Entry], entry: Entry) -> float:
    """When the attempt before ``entry`` (same request, one retry earlier) arrived."""
    for candidate in reversed(ordered[: ordered.index(entry)]):
        if (candidate.method, candidate.path, candidate.body) == (entry.method, entry.path, entry.body):
            return candidate.time
    return entry.time
