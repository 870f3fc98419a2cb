"""The request journal: what the client actually did, for a test to assert on.

Every provider-path request gets an :class:`Entry` the moment it arrives — before any delay
or fault — and the entry is completed as the response goes out: status, seed, faults
applied, events and bytes sent, and how it ended. Entries live in a bounded ring buffer
(oldest dropped first) — on a shared state (``--state``), in one bounded list every process
pushes to, so the journal read on any process holds every request (see :class:`Journal`).
:func:`verdicts` judges a session's retries: did the client wait out ``retry-after``, back
off between attempts, and leave non-retryable 4xx alone?

An entry keeps a *bounded* copy of the body: the parsed body when it is small
(:data:`BODY_KEPT` bytes or less) and shallow (:data:`BODY_DEPTH` levels or less), else a
summary — its top-level scalar fields (``model``, ``stream``…) and ``body_truncated`` set.
Either way ``body_bytes`` is the body's size and ``body_sha256`` a digest that identical
requests share: the raw bytes' when the caller passes them (``raw=``), else the canonical
JSON's. Verdicts compare that digest, so a 1 MB body costs a few hundred bytes per entry and
its retries are still recognised.
"""

from __future__ import annotations

import asyncio
import builtins
import hashlib
import itertools
import json
import threading
from array import array
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from time import time as _now
from typing import Any, Literal

from mockserver.state.sync import JOURNAL_IDS, Bridge, safe
from mockserver.wire.json import parse_lenient

__all__ = [
    "ANSWER_BYTES",
    "ANSWER_KEPT",
    "BODY_DEPTH",
    "BODY_KEPT",
    "JOURNAL_BYTES",
    "UNREAD",
    "Ending",
    "Entry",
    "Journal",
    "bounded",
    "verdicts",
]

# The state's keys (a shared state only): the finished entries, the global clear's mark, and
# each session's marks under journal:s:<session>: (the ids, journal:ids, are counted by sync).
LIST = "journal:list"
CLEARED = "journal:cleared"
SESSIONS = "journal:s:"

Ending = Literal["pending", "done", "eof", "reset", "stall", "hang", "client_disconnect", "error"]

# Statuses an OpenAI SDK retries by itself; any other 4xx repeated unchanged is a client bug.
RETRYABLE = frozenset({408, 409, 429})

BODY_KEPT = 16 * 1024  # bytes: a body this size or smaller is kept whole
# Bytes of kept bodies a memory journal holds at most (then the oldest entries go, whatever
# --journal-size says): 10,000 entries of 16 KiB would otherwise hold 160 MB.
JOURNAL_BYTES = 32 * 1024 * 1024
# Bytes of kept answers a memory journal holds at most, apart from the bodies: past it the oldest
# entries lose their answer's bytes (the console shows them without), never their place.
ANSWER_BYTES = 32 * 1024 * 1024
ANSWER_KEPT = 16 * 1024  # bytes of an answer's body an entry keeps (the console shows them)
MARKS_KEPT = 4096  # body messages whose times an entry keeps (a stream's timeline)
BODY_DEPTH = 100  # levels of nesting a kept body may have (deeper ones are summarised)
_SUMMARY_FIELDS = 32  # top-level scalar fields a summary keeps
_SUMMARY_TEXT = 256  # characters: longer strings are left out of a summary


bytes_ = builtins.bytes  # ``bytes`` is a field of Entry: the type, under a name of its own
UNREAD: Any = object()  # no parsed body given: the journal keeps a small body's bytes, read later


@dataclass(slots=True, init=False, eq=False)
class Entry:
    """One request as the journal knows it. ``body``, ``body_sha256`` and ``body_truncated``
    are read from the body's bytes the first time they are asked for: the journal keeps the
    bytes of a small body (no parsing, no digest, no object graph for the garbage collector to
    walk) and most entries are never read."""

    id: int
    time: float  # wall-clock seconds when it arrived (real time even on a virtual clock:
    # the journal is about what the client did, and clients wait in real time)
    method: str
    path: str
    session: str | None
    retry_attempt: int
    faults: list[str]
    status: int | None
    seed: int | None
    retry_after: float | None  # what the response advertised
    events: int  # SSE data events sent
    bytes: int  # body bytes sent
    ended: Ending
    duration: float | None
    body_bytes: int  # the request body's size
    _body: Any  # the parsed JSON body, or its summary (body_truncated); None when there was none
    _digest: str | None  # what identical requests share (None: no body)
    _truncated: bool  # ``body`` is a summary of a body too big or too deep to keep
    _raw: builtins.bytes | None  # the body's bytes, until they are read (then None)
    kind: str  # "model" (a provider path's request) or "mcp" (a JSON-RPC message to /mcp)
    # What went back (the console shows it): the status line's headers, the first ANSWER_KEPT
    # bytes of a text body, and per body message (seconds since ``time``, bytes sent by then).
    # Kept in shapes the garbage collector does not walk (a tuple of tuples of bytes, arrays of
    # numbers, a bytearray): a journal of 10,000 entries must not slow every collection.
    _head: tuple[tuple[Any, Any], ...] | None  # the answer's headers
    _answer: bytearray | bytes_ | None  # the kept bytes (None: not kept, or read back from JSON)
    _answer_text: str | None  # an entry read back from JSON: the answer as it was kept
    _sent_at: array[float]  # per body message: its wall-clock time …
    _sent_bytes: array[int]  # … and the bytes sent by then
    _charged: int  # the request bytes the memory journal's budget counts for it (-1: out of the ring)
    _answer_charged: int  # the answer bytes its answers' budget counts for it
    batch: dict[str, Any] | None  # a batch line's batch: {"id", "custom_id", "line"} (None: a request)
    origin: str | None  # the rule or the cassette's recording that answered (None: neither)

    def __init__(
        self,
        id: int,
        time: float,
        method: str,
        path: str,
        session: str | None,
        retry_attempt: int,
        body: Any,
        faults: list[str] | None = None,
        status: int | None = None,
        seed: int | None = None,
        retry_after: float | None = None,
        events: int = 0,
        bytes: int = 0,
        ended: Ending = "pending",
        duration: float | None = None,
        body_bytes: int = 0,
        body_sha256: str | None = None,
        body_truncated: bool = False,
        raw: builtins.bytes | None = None,
        answer: str | bytes_ | bytearray | None = None,
        answer_headers: list[tuple[Any, Any]] | None = None,
        marks: list[tuple[float, int]] | None = None,
        kind: str = "model",
        batch: dict[str, Any] | None = None,
        origin: str | None = None,
    ) -> None:
        self.id, self.time, self.method, self.path = id, time, method, path
        self.batch = batch
        self.origin = origin
        self.kind = kind
        self.session, self.retry_attempt = session, retry_attempt
        self.faults = faults if faults is not None else []
        self.status, self.seed, self.retry_after = status, seed, retry_after
        self.events, self.bytes, self.ended, self.duration = events, bytes, ended, duration
        self.body_bytes = body_bytes
        self._body, self._digest, self._truncated, self._raw = body, body_sha256, body_truncated, raw
        self._head = tuple((k, v) for k, v in answer_headers) if answer_headers is not None else None
        self._answer, self._answer_text = (None, answer) if isinstance(answer, str) else (answer, None)
        self._sent_at = array("d", [time + m[0] for m in marks] if marks else ())
        self._sent_bytes = array("q", [m[1] for m in marks] if marks else ())
        self._charged = self._answer_charged = 0

    @property
    def answer_headers(self) -> list[tuple[Any, Any]] | None:
        """The answer's headers as they went out (None: no answer began)."""
        return list(self._head) if self._head is not None else None

    def answering(self, headers: list[tuple[bytes_, bytes_]], text: bool) -> None:
        """The status line went out with ``headers``: keep them, and the body from here when
        ``text`` (JSON, SSE, text; an audio or image body is not kept)."""
        self._head = tuple(headers)
        self._answer = bytearray() if text else None

    def answered(self, chunk: bytes_) -> None:
        """A body message went out (``bytes`` already counts it): its time, and its first bytes
        while fewer than :data:`ANSWER_KEPT` are kept. A list append and a bounded copy."""
        kept = self._answer
        if isinstance(kept, bytearray):
            room = ANSWER_KEPT - len(kept)
            if room > 0:
                kept += chunk if len(chunk) <= room else chunk[:room]
        sent = self._sent_at
        if len(sent) < MARKS_KEPT:
            sent.append(_now())
            self._sent_bytes.append(self.bytes)

    @property
    def marks(self) -> list[tuple[float, int]]:
        """Per body message sent: (seconds after the request arrived, bytes sent by then)."""
        return [(at - self.time, count) for at, count in zip(self._sent_at, self._sent_bytes, strict=True)]

    @property
    def answer(self) -> str | None:
        """The answer's kept bytes as text (None: none kept)."""
        if self._answer is not None:
            return self._answer.decode("utf-8", "replace")
        return self._answer_text

    def _read(self) -> None:
        raw = self._raw
        if raw is None:
            return
        self._body, size, self._digest, self._truncated = bounded(_parsed(raw), raw)
        self.body_bytes = size
        self._raw = None

    @property
    def body(self) -> Any:
        self._read()
        return self._body

    @property
    def body_sha256(self) -> str | None:
        self._read()
        return self._digest

    @property
    def body_truncated(self) -> bool:
        self._read()
        return self._truncated

    def read(self) -> Entry:
        """This entry as it stands (a copy: what the request writes on from here is not in
        it); its body is read from the bytes when first asked for, in the copy."""
        copy = Entry(
            self.id,
            self.time,
            self.method,
            self.path,
            self.session,
            self.retry_attempt,
            self._body,
            list(self.faults),
            self.status,
            self.seed,
            self.retry_after,
            self.events,
            self.bytes,
            self.ended,
            self.duration,
            self.body_bytes,
            self._digest,
            self._truncated,
            raw=self._raw,
            answer=self._answer_text if self._answer is None else self._kept_answer(),
            answer_headers=list(self.answer_headers) if self.answer_headers is not None else None,
            kind=self.kind,
            batch=self.batch,
            origin=self.origin,
        )
        copy._sent_at, copy._sent_bytes = array("d", self._sent_at), array("q", self._sent_bytes)
        return copy

    def _kept_answer(self) -> bytes_ | bytearray:
        """The kept answer for a copy: a finished one's bytes no longer change, so they are
        shared (and decoded only if the copy is shown); a running one's, copied as they stand."""
        kept = self._answer
        assert kept is not None
        return kept if self.ended != "pending" else bytes(kept)

    def kept_bytes(self) -> int:
        """What this entry holds of its body, in bytes (the journal's budget counts it)."""
        return len(self._raw) if self._raw is not None else 0

    def to_json(self) -> dict[str, Any]:
        """The entry as a JSON object (shallow: the body kept is bounded in size and depth)."""
        self._read()
        return {
            "id": self.id,
            "kind": self.kind,
            "time": self.time,
            "method": self.method,
            "path": self.path,
            "session": self.session,
            "retry_attempt": self.retry_attempt,
            "body": self._body,
            "faults": list(self.faults),
            "status": self.status,
            "seed": self.seed,
            "retry_after": self.retry_after,
            "events": self.events,
            "bytes": self.bytes,
            "ended": self.ended,
            "duration": self.duration,
            "body_bytes": self.body_bytes,
            "body_sha256": self._digest,
            "body_truncated": self._truncated,
            "answer": self.answer,
            "answer_headers": _header_pairs(self.answer_headers),
            "marks": [[round(at, 6), n] for at, n in self.marks],
            "batch": self.batch,
            "origin": self.origin,
        }

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Entry) and self.to_json() == other.to_json()

    def __repr__(self) -> str:
        return f"Entry({self.to_json()!r})"


def _header_pairs(headers: list[tuple[Any, Any]] | None) -> list[list[str]] | None:
    """ASGI's header pairs (bytes, latin-1 as HTTP has them) as JSON's ``[name, value]`` pairs."""
    if headers is None:
        return None
    return [[_latin(k), _latin(v)] for k, v in headers]


def _latin(value: Any) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


def _parsed(raw: bytes) -> Any:
    """A kept body's JSON (None: it is no JSON; the handler said why when it came)."""
    return parse_lenient(raw)


class Journal:
    """A bounded, thread-safe journal of entries.

    With ``memory`` state it is a ring buffer here. On a shared state an entry is kept here
    while its request runs (this process's reads see it, pending), then pushed whole to the
    state's list ``journal:list`` (its newest ``size`` entries kept): a read on any process
    holds every finished request. Ids come from the state's counter ``journal:ids`` (counted
    by the request's first look, :class:`mockserver.state.sync.Refresh`), so they are unique
    and ordered across processes. A session's entries go to its own list too
    (``journal:s:<session>:list``, as bounded): a session reads only its own, and a busy
    session cannot push a quiet one's out. Clearing one session leaves the shared list alone: a mark
    ``journal:s:<session>:cleared`` (the last id handed out then) hides what came before.
    """

    def __init__(self, size: int = 10_000, bridge: Bridge | None = None) -> None:
        self.size = size
        self.bridge = bridge if bridge is not None else Bridge()
        self._entries: deque[Entry] = deque()  # memory: the journal (at most size entries)
        self._bytes = 0  # the kept bodies' bytes in _entries
        self._answers: deque[Entry] = deque()  # entries holding a counted answer, oldest first
        self._answer_bytes = 0  # their answers' bytes
        self._pending: dict[int, Entry] = {}  # shared: this process's requests still running
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    @property
    def shared(self) -> bool:
        return self.bridge.state.shared

    def open(
        self,
        *,
        time: float,
        method: str,
        path: str,
        session: str | None,
        retry_attempt: int,
        body: Any = UNREAD,
        raw: bytes | None = None,
        entry_id: int = 0,
        kind: str = "model",
        batch: dict[str, Any] | None = None,
    ) -> Entry:
        """Journal a request as it arrives. ``body`` is the parsed body (None if none or not
        JSON); ``raw``, its bytes, makes the size and the digest exact (and cheap). Given ``raw``
        alone, a small body's bytes are kept as they are and read when the entry is (see
        :class:`Entry`): what the edge does. On a shared state ``entry_id`` is the one the state
        counted (else this process counts its own)."""
        if body is UNREAD and raw is not None and len(raw) <= BODY_KEPT:
            kept, size, digest, truncated, unread = None, len(raw), None, False, raw
        else:
            if body is UNREAD:
                body = parse_lenient(raw) if raw else None
            (kept, size, digest, truncated), unread = bounded(body, raw), None
        entry = Entry(
            entry_id,
            time,
            method,
            path,
            session,
            retry_attempt,
            kept,
            body_bytes=size,
            body_sha256=digest,
            body_truncated=truncated,
            raw=unread,
            kind=kind,
            batch=batch,
        )
        with self._lock:
            if not entry_id:
                entry.id = next(self._ids)
            if self.shared:
                self._pending[entry.id] = entry
            else:
                self._keep(entry)
            return entry

    def _keep(self, entry: Entry) -> None:
        """Into the ring (the lock held): past ``size`` entries or :data:`JOURNAL_BYTES` of kept
        bodies, the oldest go."""
        entries = self._entries
        if len(entries) >= self.size:
            self._drop()
        entries.append(entry)
        entry._charged = entry.kept_bytes()
        self._bytes += entry._charged
        self._trim()

    def _drop(self) -> None:
        """The oldest entry out of the ring (the lock held)."""
        gone = self._entries.popleft()
        self._bytes -= gone._charged
        self._answer_bytes -= gone._answer_charged
        gone._charged, gone._answer_charged, gone._answer = -1, 0, None  # it leaves _answers when it comes up there

    def _trim(self) -> None:
        while self._bytes > JOURNAL_BYTES and len(self._entries) > 1:
            self._drop()

    def settle(self, entry: Entry) -> None:
        """The request is over (memory journal): its kept answer counts in the answers' budget
        (:data:`ANSWER_BYTES`); past it, the oldest entries' answers go."""
        kept = entry._answer
        if self.shared or not isinstance(kept, bytearray) or not kept:
            return
        with self._lock:
            if entry._charged < 0 or entry._answer_charged:
                return  # out of the ring already, or counted
            entry._answer_charged = len(kept)
            self._answer_bytes += entry._answer_charged
            self._answers.append(entry)
            answers = self._answers
            while answers and (not answers[0]._answer_charged or self._answer_bytes > ANSWER_BYTES):
                old = answers.popleft()  # out of the ring already (counted nothing), or the oldest
                self._answer_bytes -= old._answer_charged
                old._answer_charged, old._answer = 0, None

    async def close(self, entry: Entry) -> None:
        """The request is over: on a shared state, its entry goes to the state's list (one push)."""
        if not self.shared:
            return
        try:
            data = json.dumps(entry.to_json(), separators=(",", ":"), allow_nan=False, default=str).encode()
            state = self.bridge.state
            if entry.session is None:
                await state.push(LIST, data, self.size)
            else:
                # Also in the session's own list, so a session's read (the plugin's, every test)
                # fetches its entries alone. Issued together: Redis sends both in one write.
                await asyncio.gather(
                    state.push(LIST, data, self.size), state.push(_list(entry.session), data, self.size)
                )
        finally:
            with self._lock:  # after the push: a read between the two finds it here or there
                self._pending.pop(entry.id, None)

    def entries(self, session: str | None = None) -> list[Entry]:
        if self.shared:
            return self.bridge.call(self.aentries(session))
        with self._lock:
            return [e.read() for e in self._entries if session is None or e.session == session]

    async def aentries(self, session: str | None = None) -> list[Entry]:
        """The entries (of ``session``), oldest first: every process's finished ones and this
        one's pending ones."""
        if not self.shared:
            return self.entries(session)
        return (await self._fleet(session, None))[0]

    async def alast(self, count: int, session: str | None = None) -> tuple[list[Entry], bool]:
        """About the newest ``count`` entries (of ``session``), oldest first, and whether they
        are all there are: what a view of the journal's end reads (a page, the live feed),
        never the whole list."""
        if self.shared:
            return await self._fleet(session, count)
        found: list[Entry] = []
        with self._lock:
            for entry in reversed(self._entries):
                if session is None or entry.session == session:
                    if len(found) == count:
                        found.reverse()
                        return found, False
                    found.append(entry.read())
        found.reverse()
        return found, True

    async def _fleet(self, session: str | None, newest: int | None) -> tuple[list[Entry], bool]:
        """The shared list's entries (its ``newest`` only, when given) and this process's
        pending ones; and whether the list was read whole."""
        state = self.bridge.state
        marks, _ = await state.exchange([CLEARED, *([_mark(session)] if session is not None else [])])
        after = max((int(m) for m in marks if m is not None), default=0)
        found: dict[int, Entry] = {}
        listed = await state.items(LIST if session is None else _list(session), newest)
        whole = newest is None or len(listed) < newest
        oldest = None if whole else json.loads(listed[0])["id"]
        for raw in listed:
            data = json.loads(raw)
            if data["id"] > after and (session is None or data["session"] == session):
                found[data["id"]] = Entry(**data)
        with self._lock:
            for entry in self._pending.values():
                newer = entry.id > after and (oldest is None or entry.id > oldest)
                if newer and (session is None or entry.session == session):
                    found.setdefault(entry.id, entry.read())
        return [found[key] for key in sorted(found)], whole

    async def anewer(self, after: int, session: str | None = None) -> list[Entry]:
        """The entries (of ``session``) with ids above ``after``, oldest first: what a live view
        polls for. A memory journal walks back from its newest entry only as far as ``after``."""
        if self.shared:
            count = 64
            while True:  # the list's end, read further back only while all of it is newer
                entries, whole = await self._fleet(session, count)
                if whole or (entries and entries[0].id <= after):
                    return [e for e in entries if e.id > after]
                count *= 4
        found: list[Entry] = []
        with self._lock:
            for entry in reversed(self._entries):
                if entry.id <= after:
                    break
                if session is None or entry.session == session:
                    found.append(entry.read())
        found.reverse()
        return found

    def clear(self, session: str | None = None) -> None:
        if self.shared:
            self.bridge.call(self.aclear(session))
            return
        with self._lock:
            kept = [] if session is None else [e for e in self._entries if e.session != session]
            for gone in self._entries:
                if session is None or gone.session == session:
                    gone._charged, gone._answer_charged = -1, 0  # a request still running settles nothing
            self._entries.clear()
            self._entries.extend(kept)
            self._bytes = sum(e._charged for e in self._entries)
            self._answers = deque(e for e in self._answers if e._answer_charged)
            self._answer_bytes = sum(e._answer_charged for e in self._answers)

    async def aclear(self, session: str | None = None) -> None:
        """Forget every entry (``session=None``: the shared list goes), or one session's (a mark)."""
        if not self.shared:
            self.clear(session)
            return
        state = self.bridge.state
        last = await state.get(JOURNAL_IDS)  # every entry up to this id came before the clear
        mark = last if last is not None else b"0"
        if session is None:
            await state.put(CLEARED, mark)  # pending elsewhere now, pushed later: still cleared
            await state.forget(LIST)
            await state.forget(SESSIONS)
        else:
            await state.put(_mark(session), mark)  # hides what is pushed late (pending elsewhere now)
            await state.forget(_list(session))


def _mark(session: str) -> str:
    return f"{SESSIONS}{safe(session)}:cleared"


def _list(session: str) -> str:
    """A session's own list: its newest entries, which the shared list may have dropped already."""
    return f"{SESSIONS}{safe(session)}:list"


# ---- bounded bodies -------------------------------------------------------------------------


def bounded(body: Any, raw: bytes | None = None) -> tuple[Any, int, str | None, bool]:
    """What an entry keeps of a body: ``(body or summary, size, sha256, truncated)``."""
    if raw is not None:
        if not raw and body is None:
            return None, 0, None, False
        size, digest = len(raw), hashlib.sha256(raw).hexdigest()
    elif body is None:
        return None, 0, None, False
    else:
        size, digest = _canonical_digest(body)
    if size <= BODY_KEPT and not _deeper_than(body, BODY_DEPTH):
        return body, size, digest, False
    return _summary(body), size, digest, True


def _canonical_digest(body: Any) -> tuple[int, str]:
    """Size and SHA-256 of ``body`` as canonical JSON (sorted keys, no spaces, ASCII), at any depth."""
    try:
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    except (RecursionError, ValueError, TypeError):  # too deep for the C encoder: walk it
        digest, size = hashlib.sha256(), 0
        for piece in _pieces(body):
            data = piece.encode()
            digest.update(data)
            size += len(data)
        return size, digest.hexdigest()
    data = text.encode()
    return len(data), hashlib.sha256(data).hexdigest()


def _pieces(value: Any) -> Iterator[str]:
    """``value`` as canonical JSON, piece by piece, without recursion (any depth)."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Text):
            yield item.text
        elif isinstance(item, dict):
            keys = sorted(item, key=str)
            todo: list[Any] = [_Text("{")]
            for n, key in enumerate(keys):
                todo.append(_Text(("," if n else "") + json.dumps(str(key)) + ":"))
                todo.append(item[key])
            todo.append(_Text("}"))
            stack.extend(reversed(todo))
        elif isinstance(item, list | tuple):
            todo = [_Text("[")]
            for n, element in enumerate(item):
                if n:
                    todo.append(_Text(","))
                todo.append(element)
            todo.append(_Text("]"))
            stack.extend(reversed(todo))
        else:
            try:
                yield json.dumps(item, default=str)
            except ValueError:
                yield json.dumps(str(item))


@dataclass(frozen=True, slots=True)
class _Text:
    text: str


def _deeper_than(value: Any, limit: int) -> bool:
    """Is ``value`` nested more than ``limit`` levels deep? (Without recursion.)"""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _summary(body: Any) -> dict[str, Any] | None:
    """A big or deep body's top-level scalar fields (``model``, ``stream``, ``n``…)."""
    if not isinstance(body, dict):
        return None
    kept: dict[str, Any] = {}
    for key, value in body.items():
        if len(kept) >= _SUMMARY_FIELDS:
            break
        if not isinstance(key, str) or len(key) > _SUMMARY_TEXT:
            continue
        if (
            value is None
            or isinstance(value, bool | int | float)
            or (isinstance(value, str) and len(value) <= _SUMMARY_TEXT)
        ):
            kept[key] = value
    return kept


# ---- verdicts -------------------------------------------------------------------------------


def _same_request(entry: Entry) -> tuple[str, str, str | None]:
    """What retries of one request share: method, path and the body's digest."""
    digest = entry.body_sha256
    if digest is None and entry.body is not None:  # an entry made by hand, not by the journal
        digest = _canonical_digest(entry.body)[1]
    return entry.method, entry.path, digest


@dataclass(slots=True)
class _Request:
    """What the verdicts know of one request (method, path, body) so far."""

    last: float  # when it last arrived
    wait_until: float = float("-inf")  # the latest end of a retry-after it was answered with
    refused: bool = False  # answered a non-retryable 4xx


_SLACK = 1e-3  # seconds: clock granularity a wait may fall short by and still count


def _retry_after_end(entry: Entry) -> float | None:
    """When the ``retry-after`` an error answer advertised runs out (None: it advertised none,
    or ``0``, which asks for no wait): from the end of the answer, when the client got it."""
    if entry.status is None or entry.status < 400 or not entry.retry_after:
        return None
    return entry.time + (entry.duration or 0.0) + entry.retry_after


def verdicts(entries: Iterable[Entry]) -> dict[str, Any]:
    """Judge the retries in ``entries`` (one session, in arrival order). A retry is the same
    method, path and body sent again after an error answer. One pass, grouped by request:
    linear in the entries.

    * ``honoured_retry_after``: no retry came before the ``retry-after`` its request was last
      answered with had run out.
    * ``backed_off``: no retry came sooner after its previous attempt than that attempt after
      the one before. A retry that waited out a positive ``retry-after`` its previous attempt
      advertised backed off, whatever the gaps: the server named the wait, and a constant
      ``retry-after`` asks for equal gaps (an SDK honouring it is doing right).
    * ``no_retry_of_non_retryable_4xx``: no request answered with a 4xx other than 408, 409
      or 429 was sent again unchanged."""
    ordered = list(entries)
    ignored_retry_after: list[int] = []
    no_backoff: list[int] = []
    retried_4xx: list[int] = []
    seen: dict[tuple[str, str, str | None], _Request] = {}
    before: list[float] = []  # per entry: when the same request last arrived before it (else its own time)
    for entry in ordered:
        key = _same_request(entry)
        request = seen.get(key)
        if request is None:
            request = seen[key] = _Request(entry.time)
            before.append(entry.time)
        else:
            if entry.time + _SLACK < request.wait_until:
                ignored_retry_after.append(entry.id)
            if request.refused:
                retried_4xx.append(entry.id)
            before.append(request.last)
            request.last = entry.time
        end = _retry_after_end(entry)
        if end is not None:
            request.wait_until = max(request.wait_until, end)
        if entry.status is not None and 400 <= entry.status < 500 and entry.status not in RETRYABLE:
            request.refused = True
    attempts = [n for n, e in enumerate(ordered) if e.retry_attempt > 0]
    for previous, current in itertools.pairwise(attempts):
        earlier, later = ordered[previous], ordered[current]
        if later.retry_attempt == earlier.retry_attempt + 1:
            advertised = _retry_after_end(earlier)
            if advertised is not None and later.time + _SLACK >= advertised:
                continue  # it waited what the server asked for: that is backing off
            waited_before = earlier.time - before[previous]
            if later.time - earlier.time < waited_before - _SLACK:
                no_backoff.append(later.id)
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
