"""The cassette directory as the replay and record backends share it.

Every recording is indexed twice — all together, and by cassette — so a request naming a
cassette (``x-mockserver-cassette``) replays only that cassette's recordings and others replay
from every one. A new recording is written atomically and indexed at once, so the next
identical request replays it. The record mode is per request (``x-mockserver-record-mode``,
else ``--record-mode``): each mode is the chain the two backends make of it —

* ``none``: replay; a miss names the closest recording (or falls to the next backend);
* ``once``: replay, and record everything while the target cassette does not exist yet;
* ``new_episodes``: replay, then record what was not there;
* ``all``: record everything, replay nothing.

The directory is not read once for all: a cassette written or copied into it after start-up
replays from the next request nothing recorded matched (a miss re-scans it: one ``stat`` a
file, and only new or changed files are read), or at once by ``POST
/__mockserver/cassettes/reload``. A file that is no cassette is skipped with one warning line;
a broken cassette stops start-up, and found by a later re-scan is reported (with one warning
line) while the version loaded before it, if any, keeps replaying.
"""

from __future__ import annotations

import asyncio
import errno
import gzip
import logging
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, get_args

from mockserver.cassettes.files import CassetteDir, CassetteError, NotACassette, Reservation, Signature, file_name
from mockserver.cassettes.format import Interaction
from mockserver.cassettes.matching import Index, Miss, Normal
from mockserver.cassettes.order import ReplayOrder
from mockserver.cassettes.redact import header_secrets, scrubbing
from mockserver.errors import APIError, InvalidRequest, NotFound
from mockserver.spine.request import Source
from mockserver.wire import headers as h

__all__ = [
    "HOP",
    "MISS_HEADERS",
    "RECORD_MODES",
    "CassetteOptions",
    "CassetteWriteError",
    "Library",
    "RecordMode",
    "Reloaded",
    "decoded",
]

log = logging.getLogger("mockserver")

RecordMode = Literal["none", "once", "new_episodes", "all"]
RECORD_MODES: tuple[str, ...] = get_args(RecordMode)
# Not replayed (the server sets its own) and not forwarded upstream.
HOP = frozenset(
    {"content-length", "transfer-encoding", "connection", "keep-alive", "content-encoding", "date", "server"}
)
MISS_HEADERS = {"x-should-retry": "false", h.name(h.SOURCE): "miss"}
THREAD_BYTES = 16 * 1024  # a request body past this is read for matching in a worker thread


@dataclass(frozen=True, slots=True)
class CassetteOptions:
    """What cassettes are served with (the cassette settings, read once by ``create_app``)."""

    directory: str
    record_mode: RecordMode = "none"
    cassette: str = "mockserver.yaml"  # where recordings go when a request names none
    upstream: str = ""
    upstream_key: str | None = None  # sent upstream instead of the client's; never written
    pace: float = 0.0  # replay timing: 0 instant, 1 as recorded, else the recorded gaps × pace
    ignore: tuple[str, ...] = field(default_factory=tuple)  # body fields matching leaves out


def pace_of(timing: str) -> float:
    """``instant``, ``recorded`` or ``scaled:X`` as a factor on recorded gaps."""
    kind, _, factor = timing.partition(":")
    return 0.0 if kind == "instant" else (1.0 if kind == "recorded" else float(factor))


@dataclass(frozen=True, slots=True)
class Reloaded:
    """What a re-scan of the cassette directory did."""

    loaded: tuple[str, ...] = ()  # cassettes new or changed since the last scan, now replayed
    removed: tuple[str, ...] = ()  # cassettes gone from the directory, no longer replayed
    skipped: dict[str, str] = field(default_factory=dict)  # every file that is no cassette → why
    broken: dict[str, str] = field(default_factory=dict)  # every cassette that does not load → why
    cassettes: int = 0  # cassettes replayed from now on
    interactions: int = 0  # recordings in them

    @property
    def changed(self) -> bool:
        return bool(self.loaded or self.removed)

    def to_json(self) -> dict[str, object]:
        return {
            "loaded": list(self.loaded),
            "removed": list(self.removed),
            "skipped": dict(self.skipped),
            "broken": dict(self.broken),
            "cassettes": self.cassettes,
            "interactions": self.interactions,
        }


@dataclass(slots=True)
class _Scan:
    """What a scan found that differs from what is loaded: read off the event loop, applied on it."""

    listing: dict[str, Signature]
    loaded: dict[str, tuple[Interaction, ...]]
    removed: list[str]
    skipped: dict[str, str]
    broken: dict[str, str]


Again = Callable[[], Awaitable[int]]  # a repeat's count of its place (see Library.next)


class Library:
    """The loaded cassettes: what replays, and where recordings go."""

    def __init__(self, options: CassetteOptions) -> None:
        self.options = options
        self.dir = CassetteDir(options.directory)
        self.generation = 0  # bumped whenever recordings are replaced or removed (caches key on it)
        self.changes = 0  # bumped whenever recordings come, go or are replaced (what replays may differ)
        self.index = Index(ignore=options.ignore)
        self._by_cassette: dict[str, Index] = {}  # by file name (``a`` is ``a.yaml``)
        self._files: dict[str, tuple[Interaction, ...]] = {}  # each cassette's recordings, as last read
        # Where each recording is ("chat.yaml #2"), by identity: remade when the files are (see place_of).
        self._places: dict[int, tuple[Interaction, str]] = {}
        self._places_of: tuple[int, ...] = ()
        self._seen: dict[str, Signature] = {}  # every file of the last scan, cassette or not
        self._skipped: dict[str, str] = {}
        self._broken: dict[str, str] = {}
        # (index, method, target, body, secrets) → the request as that index reads it
        self._normals: dict[tuple[int, str, str, bytes, tuple[str, ...]], Normal] = {}
        self._lock: asyncio.Lock | None = None  # made on the event loop, on first use
        self.dir.clear_reservations()
        self._apply(self._scan(strict=True))  # a broken cassette stops start-up (CassetteError)

    async def refresh(self) -> Reloaded:
        """Re-scan the directory and replay what is new or changed in it. When nothing changed
        it costs a listing with one ``stat`` a file, on the event loop (about what the miss's
        own message costs; a thread would add more than it saves); changed files are read in
        a worker thread. One scan at a time, and never during :meth:`keep`."""
        async with self._guard():
            listing = self.dir.listing()
            if listing == self._seen:
                return self._summary()
            return self._apply(await asyncio.to_thread(self._scan, strict=False, listing=listing))

    def _guard(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def _scan(self, *, strict: bool, listing: dict[str, Signature] | None = None) -> _Scan | None:
        """The files that changed since the last scan, read (None: nothing changed). Each
        signature is taken before its file is read, so a file still being copied is read
        again once the copy has changed it."""
        listing = self.dir.listing() if listing is None else listing
        if listing == self._seen:
            return None
        found = _Scan(listing, {}, [name for name in self._seen if name not in listing], {}, {})
        for name in sorted(listing):
            if self._seen.get(name) == listing[name]:
                continue
            try:
                found.loaded[name] = self.dir.read(name)
            except NotACassette as exc:
                found.skipped[name] = exc.reason
                log.warning("cassettes: skipping %s", exc)
            except CassetteError as exc:
                if strict:
                    raise
                found.broken[name] = str(exc.__cause__ or exc)
                kept = " (its version loaded before keeps replaying)" if name in self._files else ""
                log.warning("cassettes: %s does not load%s: %s", self.dir.root / name, kept, found.broken[name])
        return found

    def _apply(self, scan: _Scan | None) -> Reloaded:
        """Index what :meth:`_scan` read: new cassettes' recordings are added to the combined
        index, and a replaced or removed cassette rebuilds it."""
        if scan is None:
            return self._summary()
        self._seen = scan.listing
        dropped = [name for name in [*scan.removed, *scan.skipped] if name in self._files]
        for name in (*scan.removed, *scan.loaded, *scan.broken):
            self._skipped.pop(name, None)
        for name in (*scan.removed, *scan.loaded, *scan.skipped):
            self._broken.pop(name, None)
        self._skipped.update(scan.skipped)
        self._broken.update(scan.broken)
        replaced = [name for name in scan.loaded if name in self._files]
        if dropped or scan.loaded:
            self.changes += 1
        for name in dropped:
            del self._files[name]
            self._by_cassette.pop(name, None)
        for name, batch in scan.loaded.items():
            self._files[name] = batch
            self._by_cassette[name] = Index(batch, ignore=self.options.ignore)
        if dropped or replaced:
            self.generation += 1
            self.index = Index(
                (i for name in sorted(self._files) for i in self._files[name]), ignore=self.options.ignore
            )
        else:
            for batch in scan.loaded.values():
                for interaction in batch:
                    self.index.add(interaction)
        removed = tuple(sorted(name for name in scan.removed if name in dropped))
        return self._summary(tuple(scan.loaded), removed)

    def _summary(self, loaded: tuple[str, ...] = (), removed: tuple[str, ...] = ()) -> Reloaded:
        return Reloaded(
            loaded,
            removed,
            dict(sorted(self._skipped.items())),
            dict(sorted(self._broken.items())),
            len(self._files),
            len(self.index),
        )

    def mode(self, source: Source) -> RecordMode:
        """The request's record mode (a 400 naming the header for one that is not)."""
        mode = source.record_mode or self.options.record_mode
        if mode not in RECORD_MODES:
            raise InvalidRequest(
                f"Invalid x-mockserver-record-mode '{mode}': use one of {', '.join(RECORD_MODES)}.",
                param=h.name(h.RECORD_MODE),
                headers={h.name(h.SOURCE): "miss"},
            )
        return mode  # type: ignore[return-value]

    def cassette(self, source: Source) -> str:
        """The cassette a request's recording goes to."""
        return source.cassette or self.options.cassette

    def records(self, source: Source) -> bool:
        """Does this request's record mode record it (when replay has not answered it)?"""
        mode = self.mode(source)
        return mode in ("new_episodes", "all") or (mode == "once" and not self.dir.exists(self.cassette(source)))

    def place_of(self, interaction: Interaction) -> str | None:
        """Which cassette holds ``interaction`` and which of its recordings it is ("chat.yaml #2",
        counted from 1), for a person reading the journal; None if no file read holds it."""
        batches = tuple(map(id, self._files.values()))
        if batches != self._places_of:  # the files changed: the map is made again, once
            self._places = {
                id(i): (i, f"{name} #{n}") for name, batch in self._files.items() for n, i in enumerate(batch, 1)
            }
            self._places_of = batches
        found = self._places.get(id(interaction))
        return found[1] if found is not None and found[0] is interaction else None

    def index_of(self, cassette: str | None) -> Index:
        """The recordings a request may replay: its named cassette's, else every cassette's."""
        if cassette is None:
            return self.index
        name = file_name(cassette)
        found = self._by_cassette.get(name)
        if found is None:
            found = self._by_cassette[name] = Index(ignore=self.options.ignore)
        return found

    async def next(
        self, source: Source, order: ReplayOrder
    ) -> tuple[Interaction, Callable[[], Awaitable[int]] | None] | None:
        """The next recording of this request, in recorded order — of the same shape (stream
        or not) when there is one, so a cassette holding both twins serves each its own. Each
        (cassette, session) counts its own place in the recordings; past the last, the last
        repeats. Beside it, once the place is the last (what every next ask gets too), how a
        repeat counts its place; None before it."""
        index = self.index_of(source.cassette)
        request = (source.method, source.target, source.body)
        key = index.key_of(await self._normal(index, request, ()))
        recorded = index.recorded(key)
        secrets = _secrets(source) if not recorded else ()
        if secrets:  # recorded with this request's credential headers' values scrubbed (item 8)?
            key = index.key_of(await self._normal(index, request, secrets))
            recorded = index.recorded(key)
        if not recorded:
            return None
        same = [i for i in recorded if (i.response.stream is not None) == source.stream] or list(recorded)
        place = (source.cassette, key, source.stream)
        played = await order.take(source.session, place)
        if played < len(same) - 1:
            return same[played], None
        return same[-1], lambda: order.take(source.session, place)

    async def _normal(self, index: Index, request: tuple[str, str, bytes], secrets: tuple[str, ...]) -> Normal:
        """``request`` as ``index`` matches it, with ``secrets`` scrubbed as a recording would
        have them. Reading it redacts the whole body (linear, yet ~1 ms per 1 KB of a hostile
        one): remembered (4,096 at most, so a miss's message reuses it), and worked out in a
        thread for a body over :data:`THREAD_BYTES`, so the event loop keeps serving meanwhile."""
        remembered = (id(index), *request, secrets)
        found = self._normals.get(remembered)
        if found is None:

            def work() -> Normal:
                with scrubbing(secrets):
                    return index.normal(*request)

            found = await asyncio.to_thread(work) if len(request[2]) > THREAD_BYTES else work()
            if len(self._normals) >= 4096:
                self._normals.clear()
            self._normals[remembered] = found
        return found

    def miss(self, source: Source) -> NotFound:
        """The 404 for a request nothing recorded: it names the closest recording and how it differs."""
        index = self.index_of(source.cassette)
        request = (source.method, source.target, source.body)
        normal = self._normals.get((id(index), *request, ()))  # read by next() just before: no redaction again
        if normal is not None:
            found: Miss | object = index.closest(normal, source.target)
        else:
            with scrubbing(_secrets(source)):
                found = index.lookup(*request)
        message = found.message if isinstance(found, Miss) else "Recording is on but no --upstream is set."
        return NotFound(message, code="cassette_miss", headers=dict(MISS_HEADERS))

    async def reserve(self, cassette: str, size: int) -> Reservation:
        """Room for a recording of about ``size`` bytes in ``cassette``, taken before the
        upstream is asked; a :class:`CassetteWriteError` (507, ``x-should-retry: false``)
        naming the cassette and the OS error when it cannot be written."""
        try:
            return await self.dir.reserve_async(cassette, size)
        except OSError as exc:
            raise CassetteWriteError(cassette, exc, called=False) from None

    async def keep(self, cassette: str, interaction: Interaction) -> None:
        """Append a recording to its cassette (atomically, off the event loop) and index it.
        The file's new signature is noted when nobody else changed it meanwhile, so the next
        re-scan does not read again what was just written (a recording would cost a read of
        its whole cassette)."""
        name = file_name(cassette)
        async with self._guard():
            before = self.dir.signature(cassette)
            try:
                await self.dir.append_async(cassette, [interaction])
            except OSError as exc:
                raise CassetteWriteError(cassette, exc, called=True) from None
            self.index.add(interaction)
            self.index_of(cassette).add(interaction)
            self.changes += 1
            if before == self._seen.get(name) and name not in self._broken and name not in self._skipped:
                after = self.dir.signature(cassette)
                if after is not None:
                    self._seen[name] = after
                    self._files[name] = (*self._files.get(name, ()), interaction)


class CassetteWriteError(APIError):
    """A recording the cassette directory cannot take (a full or read-only disk, no
    permission): 507 Insufficient Storage, naming the cassette and the OS error, with
    ``x-should-retry: false`` — a retry would only ask the upstream again for the same failure."""

    status = 507
    type = "server_error"

    def __init__(self, cassette: str, error: OSError, *, called: bool) -> None:
        reason = error.strerror or str(error)
        code = errno.errorcode.get(error.errno, "") if error.errno is not None else ""
        said = f"{reason} ({code})" if code else reason
        what = (
            "the upstream answered, but its answer was not recorded"
            if called
            else "nothing was recorded and the upstream was not asked"
        )
        super().__init__(
            f"Cannot write cassette {file_name(cassette)!r}: {said}; {what}. Free space on (or make "
            "writable) the --cassettes directory, or replay without recording.",
            code="cassette_write_failed",
            headers={"x-should-retry": "false"},
        )
        self.cassette = cassette
        self.errno = error.errno


def _secrets(source: Source) -> tuple[str, ...]:
    """The values of the request's credential headers: a recording has them scrubbed from its
    body and URL (:func:`~mockserver.cassettes.redact.header_secrets`), so matching does too."""
    if not source.headers:
        return ()
    return header_secrets((k.decode("latin-1"), v.decode("latin-1")) for k, v in source.headers)


def decoded(body: bytes, encoding: str | None) -> bytes:
    """A body as the client should read it once its ``content-encoding`` is dropped."""
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    return body
