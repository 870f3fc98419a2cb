"""Which recorded interaction answers a request: an index keyed by what the request asks.

**The key** is the method, the route, the query and the body as canonical JSON:

* *route*: the path from its first ``/v1/`` on, so a cassette an application recorded
  against ``https://api.openai.com/v1/chat/completions`` or Fireworks'
  ``https://api.fireworks.ai/inference/v1/completions`` answers ``/v1/chat/completions`` and
  ``/v1/completions`` here. Profile prefixes go the same way (``/fireworks/v1/x`` is
  ``/v1/x``); a path without ``/v1/`` is used whole.
* *query*: sorted pairs, without credential-named parameters (stored ones are redacted,
  live ones are not) and without names on the ignore list.
* *body*: :func:`mockserver.spine.seeding.canonical` of the JSON object — sorted keys, and
  ``stream``, ``stream_options`` and ``user`` left out, so a streamed recording answers its
  non-streamed twin — after the ignore list's dotted paths (``metadata.trace_id``) are
  dropped. A body that is not a JSON object is keyed by its bytes. Bodies are redacted
  before keying, exactly as they were before being stored. Headers are not part of the key.

**Lookup is O(1)**: the key is hashed to a 32-byte digest and found in one dict, so its cost
depends on the request's size, never on how many interactions are loaded. Identical requests
replay their recordings in recorded order; after the last, **the last repeats** (a retry loop
or a polling client keeps getting an answer rather than a spurious miss; :meth:`Index.unplayed`
still tells a test what was never asked for).

**A miss explains itself**: the closest recorded request with the same method and route —
fewest differing top-level fields, earliest on ties — and every field that differs, nested
where practical (``messages[0].content``, ``?api-version``). Only misses pay for this scan.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from mockserver.cassettes.format import Interaction
from mockserver.cassettes.redact import redact_bytes, redact_text, secret_parameter
from mockserver.spine.seeding import canonical, digest

__all__ = ["Hit", "Index", "Key", "Miss", "Normal", "route_of"]

Key = tuple[str, str, bytes]  # method, route, digest of query + canonical body
_Query = tuple[tuple[str, str], ...]
# A request as matching reads it — method, route, query pairs, redacted canonical body — which
# costs a redaction of the body: computed once (off the event loop for a big body) and reused
# by the key and by a miss's closest-recording message.
Normal = tuple[str, str, _Query, bytes]
_TOP = re.compile(r"[.\[]")


def route_of(uri: str) -> str:
    """The path ``uri`` is matched on: from its first ``/v1/`` on, else the whole path."""
    path = urlsplit(uri).path
    at = path.find("/v1/")
    return path[at:] if at >= 0 else path


@dataclass(frozen=True, slots=True)
class Hit:
    interaction: Interaction
    play: int  # 1-based: which of the recordings of this request was served
    count: int  # how many recordings of this request there are
    repeated: bool  # all had been played already: this is the last one again


@dataclass(frozen=True, slots=True)
class Miss:
    """No recording answers. ``closest`` is None when nothing was recorded on the route."""

    method: str
    target: str
    closest: Interaction | None
    differences: tuple[str, ...]
    routes: tuple[str, ...]  # the recorded "METHOD /route"s, for when nothing is close

    @property
    def message(self) -> str:
        head = f"No recorded interaction matches {self.method} {self.target}."
        if self.closest is None:
            recorded = ", ".join(self.routes) or "none"
            return f"{head} Nothing was recorded for {self.method} {route_of(self.target)}; recorded: {recorded}."
        shown = ", ".join(self.differences[:12])
        more = f" and {len(self.differences) - 12} more" if len(self.differences) > 12 else ""
        req = self.closest.request
        return f"{head} The closest recorded request ({req.method} {req.uri}) differs in: {shown}{more}."


@dataclass(frozen=True, slots=True)
class _Shape:
    """What the key saw of a request, kept only to explain misses."""

    query: _Query
    body: Any  # the canonical JSON object parsed back, or bytes for other bodies


@dataclass(slots=True)
class _Entry:  # mutable on purpose: the cursor is the index's replay state
    recorded: list[Interaction]
    cursor: int = 0


@dataclass(slots=True)
class _Route:
    recorded: list[Interaction]
    shapes: list[_Shape] = field(default_factory=list)  # filled lazily, on the first miss


class Index:
    """Recorded interactions by request; thread-safe. ``ignore`` names body fields (dotted
    for nested ones) and query parameters that must not take part in matching."""

    def __init__(self, interactions: Iterable[Interaction] = (), *, ignore: Iterable[str] = ()) -> None:
        self.ignore = tuple(ignore)
        self._ignore_paths = tuple(tuple(name.split(".")) for name in self.ignore)
        self._entries: dict[Key, _Entry] = {}
        self._routes: dict[tuple[str, str], _Route] = {}
        self._lock = threading.Lock()
        for interaction in interactions:
            self.add(interaction)

    def __len__(self) -> int:
        return sum(len(route.recorded) for route in self._routes.values())

    @property
    def key_count(self) -> int:
        """How many distinct requests are recorded (dict entries a lookup chooses among)."""
        return len(self._entries)

    def add(self, interaction: Interaction) -> None:
        """Record one more interaction (after those already there, e.g. while recording)."""
        req = interaction.request
        key = self.key(req.method, req.uri, req.body)
        with self._lock:
            self._entries.setdefault(key, _Entry([])).recorded.append(interaction)
            self._routes.setdefault(key[:2], _Route([])).recorded.append(interaction)

    def key(self, method: str, target: str, body: bytes) -> Key:
        """The key of a request; ``target`` is a path with optional query, or a full URL."""
        return self.key_of(self._normalise(method, target, body))

    def normal(self, method: str, target: str, body: bytes) -> Normal:
        """The request as matching reads it (see :data:`Normal`); thread-safe, pure."""
        return self._normalise(method, target, body)

    @staticmethod
    def key_of(normal: Normal) -> Key:
        method, route, query, body_key = normal
        return method, route, digest(b"match", repr(query).encode(), body_key)

    def closest(self, normal: Normal, target: str) -> Miss:
        """The :class:`Miss` of a request nothing recorded, from its :meth:`normal` form (no
        redaction again): the closest recording on its route and how it differs."""
        with self._lock:
            return self._closest(self.key_of(normal), normal[0], target, _shape_of(normal))

    def recorded(self, key: Key) -> tuple[Interaction, ...]:
        entry = self._entries.get(key)
        return tuple(entry.recorded) if entry else ()

    def lookup(self, method: str, target: str, body: bytes) -> Hit | Miss:
        """The next recording of this request, or a :class:`Miss` that explains itself."""
        key = self.key(method, target, body)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                count = len(entry.recorded)
                play = min(entry.cursor, count - 1)
                entry.cursor += 1
                return Hit(entry.recorded[play], play + 1, count, entry.cursor > count)
            return self._closest(key, method, target, self._shape(method, target, body))

    def unplayed(self) -> list[Interaction]:
        """Recordings never served since loading (or :meth:`reset`)."""
        with self._lock:
            return [i for entry in self._entries.values() for i in entry.recorded[entry.cursor :]]

    def reset(self) -> None:
        """Rewind every request to its first recording."""
        with self._lock:
            for entry in self._entries.values():
                entry.cursor = 0

    def _normalise(self, method: str, target: str, body: bytes) -> tuple[str, str, _Query, bytes]:
        parts = urlsplit(target)
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        # Values redacted as a recording's URI was (idempotent on a recorded one): a key-looking
        # value, or a credential header's value echoed in the query, matches its recording.
        query = tuple(sorted((k, redact_text(v)) for k, v in pairs if not secret_parameter(k) and k not in self.ignore))
        body = redact_bytes(body)
        obj = _json_object(body)
        if obj is None:
            obj = _multipart_object(body)
        if obj is None:
            return method.upper(), route_of(target), query, b"raw:" + body
        for path in self._ignore_paths:
            obj = _without(obj, path)
        return method.upper(), route_of(target), query, b"json:" + canonical(obj)

    def _shape(self, method: str, target: str, body: bytes) -> _Shape:
        return _shape_of(self._normalise(method, target, body))

    def _closest(self, key: Key, method: str, target: str, wanted: _Shape) -> Miss:
        """Caller holds the lock. Linear in the route's recordings: misses only."""
        route = self._routes.get(key[:2])
        routes = tuple(sorted(f"{m} {r}" for m, r in self._routes))
        if route is None:
            return Miss(method.upper(), target, None, (), routes)
        for interaction in route.recorded[len(route.shapes) :]:
            req = interaction.request
            route.shapes.append(self._shape(req.method, req.uri, req.body))
        best: tuple[int, list[str], Interaction] | None = None
        for interaction, shape in zip(route.recorded, route.shapes, strict=True):
            diffs = _differences(wanted, shape)
            top = len({_TOP.split(d, maxsplit=1)[0] for d in diffs})
            if best is None or top < best[0]:
                best = (top, diffs, interaction)
        assert best is not None  # a route exists only with a recording on it
        return Miss(method.upper(), target, best[2], tuple(best[1]), routes)


def _shape_of(normal: Normal) -> _Shape:
    _, _, query, body_key = normal
    kind, _, raw = body_key.partition(b":")
    return _Shape(query, json.loads(raw) if kind == b"json" else raw)


def _json_object(body: bytes) -> dict[str, Any] | None:
    if not body.strip():
        return None
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return obj if isinstance(obj, dict) else None


_PART_HEAD = re.compile(rb"([A-Za-z-]+)\s*:\s*([^\r\n]*)")
_PARAM = re.compile(rb';\s*(name|filename)="((?:[^"\\]|\\.)*)"')


def _multipart_object(body: bytes) -> dict[str, Any] | None:
    """A ``multipart/form-data`` body (an audio upload, an image edit) as matching reads it: its
    fields by name, a file as its name, type, size and SHA-256 — so the same form matches
    whatever random boundary a client drew. None: the body is no multipart form.

    The boundary is the body's own first line (a form starts with ``--boundary``), so no header
    is needed. Written here, not with python-multipart (which the server uses to read forms as
    they stream in, through callbacks): a body already whole splits on its own delimiter in a
    few lines, and anything that is not a well-formed form is simply not matched as one."""
    if not body.startswith(b"--"):
        return None
    first, crlf, _ = body.partition(b"\r\n")
    if not crlf or len(first) < 3 or len(first) > 72 or b" " in first.strip():
        return None
    fields: dict[str, Any] = {}
    for part in (b"\r\n" + body).split(b"\r\n" + first)[1:]:
        if part.startswith(b"--"):
            return fields  # the closing delimiter
        head, blank, content = part.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        if not blank:
            return None
        headers = {k.lower(): v for k, v in _PART_HEAD.findall(head)}
        disposition = headers.get(b"content-disposition", b"")
        params = {k.decode(): v.decode("utf-8", "replace") for k, v in _PARAM.findall(disposition)}
        name = params.get("name")
        if name is None:
            return None
        if "filename" in params:
            value: Any = {
                "filename": params["filename"],
                "content_type": headers.get(b"content-type", b"").decode("latin-1"),
                "bytes": len(content),
                "sha256": hashlib.sha256(content).hexdigest(),
            }
        else:
            value = content.decode("utf-8", "replace")
        if name in fields:  # a repeated field (``timestamp_granularities[]``): its values in order
            held = fields[name]
            fields[name] = [*held, value] if isinstance(held, list) else [held, value]
        else:
            fields[name] = value
    return None  # no closing delimiter: not a whole form


def _without(obj: Mapping[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """``obj`` without the field at dotted ``path`` (copies only along the path)."""
    head, rest = path[0], path[1:]
    if head not in obj:
        return dict(obj)
    if not rest:
        return {k: v for k, v in obj.items() if k != head}
    child = obj[head]
    return {**obj, head: _without(child, rest)} if isinstance(child, dict) else dict(obj)


def _differences(a: _Shape, b: _Shape) -> list[str]:
    out: list[str] = []
    qa: dict[str, list[str]] = {}
    qb: dict[str, list[str]] = {}
    for source, into in ((a.query, qa), (b.query, qb)):
        for name, value in source:
            into.setdefault(name, []).append(value)
    out.extend(f"?{name}" for name in sorted(qa.keys() | qb.keys()) if qa.get(name) != qb.get(name))
    if isinstance(a.body, dict) and isinstance(b.body, dict):
        out.extend(_diff(a.body, b.body, ""))
    elif a.body != b.body:
        out.append("body")
    return out


def _diff(a: Any, b: Any, path: str) -> list[str]:
    """Paths (``messages[0].content``) at which two JSON values differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(a.keys() | b.keys()):
            here = f"{path}.{k}" if path else k
            out.extend([here] if k not in a or k not in b else _diff(a[k], b[k], here))
        return out
    if isinstance(a, list) and isinstance(b, list):
        out = []
        for i in range(max(len(a), len(b))):
            here = f"{path}[{i}]"
            out.extend([here] if i >= len(a) or i >= len(b) else _diff(a[i], b[i], here))
        return out
    return [] if type(a) is type(b) and a == b else [path or "body"]
