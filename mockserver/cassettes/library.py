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
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass, field
from typing import Literal, get_args

from mockserver.cassettes.files import CassetteDir
from mockserver.cassettes.format import Interaction
from mockserver.cassettes.matching import Index, Key, Miss
from mockserver.cassettes.order import ReplayOrder
from mockserver.errors import InvalidRequest, NotFound
from mockserver.http import headers as h
from mockserver.spine.request import Source

__all__ = ["HOP", "MISS_HEADERS", "RECORD_MODES", "CassetteOptions", "Library", "RecordMode", "decoded"]

RecordMode = Literal["none", "once", "new_episodes", "all"]
RECORD_MODES: tuple[str, ...] = get_args(RecordMode)
# Not replayed (the server sets its own) and not forwarded upstream.
HOP = frozenset(
    {"content-length", "transfer-encoding", "connection", "keep-alive", "content-encoding", "date", "server"}
)
MISS_HEADERS = {"x-should-retry": "false", h.name(h.SOURCE): "miss"}


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


class Library:
    """The loaded cassettes: what replays, and where recordings go."""

    def __init__(self, options: CassetteOptions) -> None:
        self.options = options
        self.dir = CassetteDir(options.directory)
        loaded = self.dir.load_all()
        self.index = Index((i for batch in loaded.values() for i in batch), ignore=options.ignore)
        self._by_cassette = {name: Index(batch, ignore=options.ignore) for name, batch in loaded.items()}
        self._keys: dict[tuple[str, str, bytes], Key] = {}  # request → its index key

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

    def index_of(self, cassette: str | None) -> Index:
        """The recordings a request may replay: its named cassette's, else every cassette's."""
        if cassette is None:
            return self.index
        found = self._by_cassette.get(cassette)
        if found is None:
            found = self._by_cassette[cassette] = Index(ignore=self.options.ignore)
        return found

    def next(self, source: Source, order: ReplayOrder) -> Interaction | None:
        """The next recording of this request, in recorded order — of the same shape (stream
        or not) when there is one, so a cassette holding both twins serves each its own. Each
        (cassette, session) counts its own place in the recordings; past the last, the last
        repeats."""
        index = self.index_of(source.cassette)
        request = (source.method, source.target, source.body)
        key = self._keys.get(request)
        if key is None:  # keying redacts and canonicalises the body: worth remembering
            key = index.key(*request)
            if len(self._keys) >= 4096:
                self._keys.clear()
            self._keys[request] = key
        recorded = index.recorded(key)
        if not recorded:
            return None
        same = [i for i in recorded if (i.response.stream is not None) == source.stream] or list(recorded)
        played = order.take(source.session, (source.cassette, key, source.stream))
        return same[min(played, len(same) - 1)]

    def miss(self, source: Source) -> NotFound:
        """The 404 for a request nothing recorded: it names the closest recording and how it differs."""
        found = self.index_of(source.cassette).lookup(source.method, source.target, source.body)
        message = found.message if isinstance(found, Miss) else "Recording is on but no --upstream is set."
        return NotFound(message, code="cassette_miss", headers=dict(MISS_HEADERS))

    async def keep(self, cassette: str, interaction: Interaction) -> None:
        """Append a recording to its cassette (atomically, off the event loop) and index it."""
        await self.dir.append_async(cassette, [interaction])
        self.index.add(interaction)
        self.index_of(cassette).add(interaction)


def decoded(body: bytes, encoding: str | None) -> bytes:
    """A body as the client should read it once its ``content-encoding`` is dropped."""
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    return body
