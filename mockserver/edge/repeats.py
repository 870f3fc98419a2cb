"""Answers remembered for requests asked again: the edge's shortcut for what test suites ask most.

A test suite asks the same thing again and again — the same body, path and headers, from the
same client. When the answer to such a request was made all at once from state that stands (a
scripted rule that reads no count, a cassette's last recording of it), with no fault, rate
limit or latency in play, the next identical request would be answered with the same bytes;
so the edge keeps them (the status, the headers as sent, request id included, and the body)
and sends them again, without reading the body against its schema, asking the backends or
encoding the answer again. What the answer stood on is kept beside it and checked on every
use:

* the request: method, path and query as sent, every header, the body's bytes (the key);
* the versions of the backends the answer came through (:meth:`~mockserver.spine.backend.Chain.versions`:
  a rule added, a cassette loaded, places forgotten move them), and :attr:`Repeats.generation`,
  which every write to the admin API moves;
* the clock's second the answer was created in (its ``created``): another second, another
  answer (a recording's bytes name no time of ours: they hold in any second);
* no fault rules and no rate limit at the time of asking (a rule added later stops every repeat).

A repeat is still a request like any other to everything that watches: the injector journals
it (the rule or recording that answered is named, as the first time), the metrics count it and
its tokens, and what its backend counts per call (a cassette's place) is counted. Only the
work of making the same bytes again is skipped. The store is bounded (:data:`KEPT` answers of
requests up to :data:`LARGEST` bytes, :data:`BUDGET` bytes of answers in all, none over
:data:`BIGGEST`, oldest out first) and used on
the event loop only; a shared state (another process may change what answers) or a server with
latency keeps nothing, and a recording backend promises nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.types import Message, Scope

from mockserver.context import ServerContext
from mockserver.edge.exchange import Copy, Exchange, Seen
from mockserver.faults.journal import BODY_KEPT
from mockserver.spine.repeat import Promise

__all__ = ["KEPT", "LARGEST", "Repeats", "Reply"]

KEPT = 512  # answers remembered at most
LARGEST = BODY_KEPT  # bytes of a request body whose answer is remembered (the journal keeps its bytes as they are)
BUDGET = 16 * 1024 * 1024  # bytes of remembered answers in all, the oldest out first past it
BIGGEST = 1024 * 1024  # bytes: a bigger answer is not remembered

Key = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Reply:
    """A remembered answer, what it stood on (see the module docstring), and what the edge
    learnt of its request the first time (all of it follows from the key)."""

    versions: tuple[int, ...]
    created: int | None  # None: the same in any second
    status: int
    headers: list[tuple[bytes, bytes]]
    seen: Seen  # what the edge read in the headers
    start: Message  # the messages as sent (nothing downstream changes them)
    bodies: tuple[tuple[bytes, bool, Message], ...]  # (body, last, its message)
    path: str  # as routed (its profile prefix read)
    endpoint: str  # the metrics' labels
    method: str
    profile: str
    session: str | None  # the journal's
    retry_attempt: int
    origin: str | None  # the rule or recording that answered
    events: int  # a stream's events
    promise: Promise
    size: int  # its body's bytes (the store's budget)

    async def send(self, ctx: ServerContext, send: Exchange) -> None:
        """Answer again through ``send``: what the backend counts per call, the metrics' token
        counts, the journal's origin, then the bytes."""
        for again in self.promise.again:
            await again()
        count = ctx.engine.on_usage
        if count is not None:
            for usage in self.promise.usage:
                count(usage)
        entry = send.entry
        if entry is not None:
            entry.origin = self.origin
            entry.events = self.events
        send.began(self.status, self.headers, self.seen)
        await send.out(self.start)
        for body, last, message in self.bodies:
            await send.passing(body, last)
            await send.out(message)


class Repeats:
    """The answers ``ctx``'s edge remembers (see the module docstring)."""

    def __init__(self, ctx: ServerContext, size: int = KEPT) -> None:
        self.ctx = ctx
        self.size = size
        # Moved by every admin write, which forgets every answer kept: whatever it changed,
        # nothing kept holds (and an answer made across it is not kept).
        self.generation = 0
        self._kept: dict[Key, Reply] = {}
        self._bytes = 0  # the kept answers' body bytes

    def open(self) -> bool:
        """May a request be answered from here, or its answer kept, now (no fault rule, no limit)?"""
        chaos = self.ctx.chaos
        return not chaos.rules.active and not chaos.limiter.active

    @staticmethod
    def key(scope: Scope, raw: bytes) -> Key:
        return (scope["method"], scope["raw_path"], scope["query_string"], tuple(scope["headers"]), raw)

    def get(self, key: Key) -> Reply | None:
        """The answer remembered for ``key``, when all it stood on stands."""
        reply = self._kept.get(key)
        if reply is None:
            return None
        ctx = self.ctx
        if (reply.created is not None and reply.created != int(ctx.clock.now())) or ctx.chain.versions(
            len(reply.versions)
        ) != reply.versions:
            self._drop(key)
            return None
        return reply

    def _drop(self, key: Key) -> None:
        gone = self._kept.pop(key, None)
        if gone is not None:
            self._bytes -= gone.size

    def keep(self, key: Key, promise: Promise, copy: Copy, send: Exchange, generation: int) -> None:
        """Remember an answer just sent, if it may be: the handler vouched for it, it was a
        whole 200 and nothing changed while it was made (``generation``: the store's when the
        request began; the backends' versions are checked at every use)."""
        entry = send.entry
        if (
            generation != self.generation
            or not promise.kept
            or promise.versions is None
            or copy.status != 200
            or not copy.bodies
            or copy.bodies[-1][1]
            or (entry is not None and (entry.ended != "done" or entry.faults))
            or not self.open()
        ):
            return
        size = sum(len(body) for body, _ in copy.bodies)
        if size > BIGGEST:
            return
        kept = self._kept
        self._drop(key)
        while kept and (len(kept) >= self.size or self._bytes + size > BUDGET):
            self._drop(next(iter(kept)))  # the oldest
        self._bytes += size
        bodies = tuple(
            (body, not more, {"type": "http.response.body", "body": body, "more_body": more})
            for body, more in copy.bodies
        )
        kept[key] = Reply(
            promise.versions,
            promise.created,
            copy.status,
            copy.headers,
            Seen.of(copy.headers),
            {"type": "http.response.start", "status": copy.status, "headers": copy.headers},
            bodies,
            entry.path if entry is not None else "",
            send.endpoint,
            send.method,
            send.profile,
            entry.session if entry is not None else None,
            entry.retry_attempt if entry is not None else 0,
            entry.origin if entry is not None else None,
            entry.events if entry is not None else 0,
            promise,
            size,
        )

    def moved(self) -> None:
        """Something an answer may stand on changed (an admin write): forget every answer."""
        self.generation += 1
        self._kept.clear()
        self._bytes = 0
