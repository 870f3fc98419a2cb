"""The records: stored responses and chat completions, behind one small interface.

:class:`Store` is everything the Responses API needs from storage: create a record (failing
if the id is taken), read it, replace its snapshot and append stream events *atomically and
only if its status is still one of those expected*, read the events after a sequence number,
and delete it. That conditional update is the whole concurrency story: a cancel racing a
run's completion is two updates expecting ``in_progress``, and exactly one of them wins.

Stored chat completions (``store: true``) live beside responses as records of another
:data:`RecordKind`; every read and delete names the kind it wants (``response`` unless told), so
neither API ever sees the other's records. They have no status, so they are changed with
:meth:`Store.rewrite` (a metadata update), never with the conditional update. :meth:`Store.find`
lists one kind in creation order, a page at a time.

One implementation per engine, beside that engine's :class:`~mockserver.state.base.State`:

* ``MemoryStore`` (:mod:`mockserver.state.memory`, the default): a bounded, expiring dict on
  the event loop.
* ``SqliteStore`` (:mod:`mockserver.state.sqlite.records`, ``--store sqlite:PATH``): one file
  that several server processes share, so a response created by one is retrieved and
  cancelled from another.
* ``RedisStore`` (:mod:`mockserver.state.redis.records`, ``--store redis://…``): the same,
  for processes on any number of hosts.

:meth:`Store.orphans` names the responses whose run is gone with the process that ran it (a
crash): only a store that outlives its processes can have any, and only ``SqliteStore`` and
``RedisStore`` do (their owners: :mod:`mockserver.state.owners`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Literal, Protocol

from mockserver.wire.json import Json

__all__ = ["Page", "Query", "Record", "RecordKind", "Store"]

RecordKind = Literal["response", "chat.completion"]


@dataclass(frozen=True, slots=True)
class Record:
    """A stored response, or (``kind="chat.completion"``) a stored chat completion.

    ``response`` is the stored object as last written: the Response (its ``status`` is the
    record's), or the ChatCompletion with its ``metadata``. ``input_items`` are the
    response's input items, or the chat request's messages as the messages list shows them.
    ``messages`` is the conversation a response continued and its own input (instructions
    left out, as ``previous_response_id`` does not carry them over); ``events`` how many
    stream events are recorded (sequence numbers ``0 … events - 1``).
    """

    id: str
    response: Json
    input_items: tuple[Json, ...]
    messages: tuple[tuple[str, str], ...]
    background: bool = False
    stream: bool = False
    events: int = 0
    kind: RecordKind = "response"

    @property
    def status(self) -> str:
        """The response's status; ``""`` for a chat completion, which has none (so no
        conditional update can ever expect it)."""
        return str(self.response["status"]) if self.kind == "response" else ""


@dataclass(frozen=True, slots=True)
class Query:
    """One page of records of one kind, in creation order (``asc``: oldest first).

    ``after`` is the id of the last record of the previous page; the page is the next
    ``limit`` records past it that have the ``model`` (if given) and every ``metadata`` pair.
    """

    kind: RecordKind
    model: str | None = None
    metadata: tuple[tuple[str, str], ...] = ()
    after: str | None = None
    limit: int = 20
    order: Literal["asc", "desc"] = "asc"

    def admits(self, record: Record) -> bool:
        if self.model is not None and record.response.get("model") != self.model:
            return False
        have = record.response.get("metadata") or {}
        return all(have.get(key) == value for key, value in self.metadata)


@dataclass(frozen=True, slots=True)
class Page:
    records: tuple[Record, ...]
    has_more: bool

    @classmethod
    def of(cls, found: Iterable[Record], limit: int) -> Page:
        """The first ``limit`` of ``found``; one more is read to know whether there are more."""
        taken = tuple(islice(found, limit + 1))
        return cls(taken[:limit], len(taken) > limit)


class Store(Protocol):
    # Other processes may run the responses it holds: the lifecycle looks for orphans.
    shared: bool

    async def create(self, record: Record) -> bool:
        """Keep ``record``; False (and nothing kept) if its id is taken."""
        ...

    async def get(self, response_id: str, kind: RecordKind = "response") -> Record | None: ...

    async def update(self, response_id: str, response: Json, events: Sequence[Json], expect: frozenset[str]) -> bool:
        """Replace the snapshot and append ``events``, if the status is in ``expect`` (else
        change nothing and return False)."""
        ...

    async def events(self, response_id: str, after: int) -> list[Json]:
        """The recorded events with ``sequence_number > after``, in order."""
        ...

    async def delete(self, response_id: str, kind: RecordKind = "response") -> bool: ...

    async def rewrite(self, record_id: str, obj: Json, kind: RecordKind) -> bool:
        """Replace the stored object, whatever the status, keeping the record's place in the
        creation order; False if there is no such record."""
        ...

    async def find(self, query: Query) -> Page | None:
        """The page ``query`` asks for; None if ``after`` names no live record of its kind."""
        ...

    async def orphans(self, ids: Sequence[str] | None = None) -> list[Record]:
        """The responses (of ``ids``, or all) left ``queued`` or ``in_progress`` by a process
        that is gone, oldest first; never one that a live process — this one or another — runs."""
        ...

    async def clear(self) -> None:
        """Forget every record and its events (``/__mockserver/reset``)."""
        ...

    async def close(self) -> None: ...
