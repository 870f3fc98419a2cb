"""Cassettes: recorded HTTP interactions, in vcrpy's format, read and written by vcrpy.

A cassette is vcrpy's YAML (or JSON) document, produced and parsed by vcrpy's own
``vcr.serialize`` with its safe-YAML serializer, so vcrpy and pytest-recording replay ours
and we serve theirs. What vcrpy has no place for lives under one more key of each response
dict, :data:`EXTRA_KEY` (``mockserver``), which vcrpy carries along and never reads::

    response:
      status: {code: 200, message: OK}
      headers: {content-type: [text/event-stream]}
      body: {string: "data: {...}\\n\\ndata: [DONE]\\n\\n"}   # the full raw body: vcrpy replays it
      mockserver:
        format: 1
        elapsed: 0.84                  # seconds from sending the request to the last byte
        stream: {end: done, offsets: [0.21, 0.25, ...]}

A stream's events are not stored twice: they are the body split at SSE event boundaries
(:func:`split_events`), and ``offsets`` gives the second, counted from the request, at
which each one had fully arrived. A hand-edited body keeps the recorded offsets for as many
events as it still has; extra events come at the last offset. A foreign ``text/event-stream``
recording (vcrpy buffers streams whole) is read as a stream with every offset 0 and end
``done`` if a ``data: [DONE]`` event is present, else ``eof``.

Redaction (:mod:`mockserver.cassettes.redact`) happens inside :func:`dumps`, :func:`dump_items`
and :func:`loads`, so no write can skip it and a cassette from elsewhere is cleaned as it is read.
Files, locks and names are :mod:`mockserver.cassettes.files`'s job.

**The appendable layout.** Recording adds one interaction at a time, and rewriting the whole
document for each costs time in proportion to the cassette. So a YAML cassette we append to is
the same vcrpy document with its keys the other way round — ``version: 1`` first, the
``interactions`` list last — after a first comment line naming the layout
(:data:`APPEND_HEADER`), and each interaction closed by a ``# end`` comment line
(:data:`APPEND_END`)::

    # mockserver cassette, appended in place: ...
    version: 1
    interactions:
    - request: ...
      response: ...
    # end
    - request: ...
    # end

A new interaction is then written at the end of the file (:func:`dump_items`, the same
serializer and redaction as :func:`dumps`). vcrpy reads it as any other cassette (key order and
comments mean nothing to YAML). An append cut short by a crash leaves a torn item after the last
``# end``: :func:`loads` ignores it, with a warning (:func:`complete`), and the next append cuts it
off before writing.
"""

from __future__ import annotations

import bisect
import functools
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from io import BytesIO
from types import ModuleType
from typing import Any, Literal, cast, get_args
from urllib.parse import urlsplit

from mockserver.cassettes import redact

__all__ = [
    "APPEND_END",
    "APPEND_HEADER",
    "EXTRA_KEY",
    "EndKind",
    "Headers",
    "Interaction",
    "RecordedRequest",
    "RecordedResponse",
    "Stream",
    "StreamCapture",
    "StreamEvent",
    "complete",
    "dump_items",
    "dumps",
    "dumps_appendable",
    "loads",
    "split_events",
]

EXTRA_KEY = "mockserver"
FORMAT = 1

log = logging.getLogger("mockserver")

# The appendable YAML layout (see the module's docstring). No line of a dumped interaction starts
# in column 0 but its "- " (everything else is indented), so the END line cannot occur inside one.
APPEND_HEADER = (
    "# mockserver cassette, appended in place: each interaction ends with a '# end' line; anything after "
    "the last one is an append cut short, and is ignored.\nversion: 1\ninteractions:\n"
)
APPEND_END = "# end\n"
_END_LINE = "\n" + APPEND_END

EndKind = Literal["done", "eof", "reset"]  # [DONE] seen · the body just ended · connection reset
Headers = tuple[tuple[str, str], ...]  # in order, repeated names kept (set-cookie)

# An SSE event ends at a blank line; a line ends at CRLF, LF or CR. The atomic groups stop
# a lone CRLF from being read as CR + LF, i.e. as two line ends.
_BOUNDARY = re.compile(rb"(?>\r\n|\r|\n)(?>\r\n|\r|\n)")
_DONE = re.compile(rb"^data: ?\[DONE\][ \t\r]*$", re.MULTILINE)


def _header(headers: Headers, name: str) -> str | None:
    lowered = name.lower()
    return next((value for key, value in headers if key.lower() == lowered), None)


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """What was sent. ``uri`` is absolute as recorded (vcrpy needs scheme and host)."""

    method: str
    uri: str
    headers: Headers = ()
    body: bytes = b""

    @property
    def path(self) -> str:
        return urlsplit(self.uri).path

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive)."""
        return _header(self.headers, name)


@dataclass(frozen=True, slots=True)
class StreamEvent:
    offset: float  # seconds from sending the request until this event had fully arrived
    data: bytes  # its raw bytes, blank line included (a final event cut short has none)


@dataclass(frozen=True, slots=True)
class Stream:
    events: tuple[StreamEvent, ...]
    end: EndKind = "done"


@dataclass(frozen=True, slots=True)
class RecordedResponse:
    """What came back. For a stream, ``body`` is exactly its events' bytes joined: that is
    what vcrpy replays, and what a non-stream replay folds."""

    status: int
    headers: Headers = ()
    body: bytes = b""
    reason: str = ""
    stream: Stream | None = None
    elapsed: float | None = None  # seconds until the last byte, when it was measured

    def __post_init__(self) -> None:
        if self.stream is not None and self.body != b"".join(e.data for e in self.stream.events):
            raise ValueError("a streamed response's body must be its events' bytes joined (use Response.streamed)")

    @classmethod
    def streamed(
        cls, status: int, headers: Headers, stream: Stream, reason: str = "", elapsed: float | None = None
    ) -> RecordedResponse:
        body = b"".join(event.data for event in stream.events)
        return cls(status, headers, body, reason, stream, elapsed)

    def header(self, name: str) -> str | None:
        return _header(self.headers, name)


@dataclass(frozen=True, slots=True)
class Interaction:
    request: RecordedRequest
    response: RecordedResponse

    def redacted(self) -> Interaction:
        """This interaction with every credential gone (see :mod:`mockserver.cassettes.redact`)."""
        req, resp = self.request, self.response
        # A secret seen once by name (a credential header, either way) goes wherever it appears.
        with redact.scrubbing(redact.header_secrets((*req.headers, *resp.headers))):
            return self._redacted()

    def _redacted(self) -> Interaction:
        req, resp = self.request, self.response
        request = replace(
            req,
            uri=redact.redact_uri(req.uri),
            headers=redact.redact_headers(req.headers),
            body=redact.redact_bytes(req.body),
        )
        headers = redact.redact_headers(resp.headers)
        if resp.stream is None:
            response = replace(resp, headers=headers, body=redact.redact_bytes(resp.body))
        else:
            # Together: a secret streamed a few characters per event is only seen joined.
            clean = redact.redact_events([e.data for e in resp.stream.events])
            events = tuple(replace(e, data=data) for e, data in zip(resp.stream.events, clean, strict=True))
            stream = replace(resp.stream, events=events)
            response = RecordedResponse.streamed(resp.status, headers, stream, resp.reason, resp.elapsed)
        return Interaction(request, response)


def split_events(body: bytes) -> list[bytes]:
    """``body`` cut after each SSE event's blank line; the pieces join back to ``body``."""
    pieces: list[bytes] = []
    start = 0
    for match in _BOUNDARY.finditer(body):
        pieces.append(body[start : match.end()])
        start = match.end()
    if start < len(body):
        pieces.append(body[start:])
    return pieces


class StreamCapture:
    """Collects a stream as its chunks arrive (the record tee): ``feed`` each chunk with its
    offset, forward it unchanged, then ``finish``. Events are cut with :func:`split_events`
    over the whole body — the same cut :func:`loads` makes — so offsets always line up, even
    when an event (or a CRLF) straddles two chunks. Not thread-safe: one per stream."""

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._ends: list[int] = []  # byte position after each chunk
        self._offsets: list[float] = []
        self._size = 0

    def feed(self, chunk: bytes, offset: float) -> None:
        if chunk:
            self._chunks.append(chunk)
            self._size += len(chunk)
            self._ends.append(self._size)
            self._offsets.append(offset)

    def finish(self, end: EndKind) -> Stream:
        """The stream, each event stamped with the arrival of the chunk holding its last byte."""
        events: list[StreamEvent] = []
        position = 0
        for piece in split_events(b"".join(self._chunks)):
            position += len(piece)
            events.append(StreamEvent(self._offsets[bisect.bisect_left(self._ends, position)], piece))
        return Stream(tuple(events), end)


@functools.cache
def _vcr() -> Any:
    # Imported on first use: vcrpy pulls in its HTTP-library patches (~0.3 s).
    import vcr.request  # type: ignore[import-untyped]
    import vcr.serialize  # type: ignore[import-untyped]
    import vcr.serializers.compat  # type: ignore[import-untyped]
    import vcr.serializers.jsonserializer  # type: ignore[import-untyped]
    import vcr.serializers.yamlserializer  # type: ignore[import-untyped]

    return vcr


def _serializer(fmt: str) -> ModuleType:
    if fmt not in ("yaml", "json"):
        raise ValueError(f"unknown cassette format {fmt!r} (yaml or json)")
    serializer: ModuleType = getattr(_vcr().serializers, f"{fmt}serializer")
    return serializer


def _grouped(headers: Headers) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for name, value in headers:
        grouped.setdefault(name, []).append(value)
    return grouped


def _vcr_pairs(interactions: Iterable[Interaction]) -> tuple[list[Any], list[dict[str, Any]]]:
    """vcrpy's requests and response dicts for ``interactions``, redacted."""
    vcr = _vcr()
    requests: list[Any] = []
    responses: list[dict[str, Any]] = []
    for interaction in interactions:
        clean = interaction.redacted()
        req = clean.request
        # vcrpy keeps one value per request header: repeated ones are joined, as HTTP allows.
        headers = {name: ", ".join(values) for name, values in _grouped(req.headers).items()}
        requests.append(vcr.request.Request(req.method, req.uri, req.body, headers))
        responses.append(_response_dict(clean.response))
    return requests, responses


def dumps(interactions: Iterable[Interaction], fmt: str = "yaml") -> str:
    """The cassette text for ``interactions``, redacted, in vcrpy's format ``fmt``. Bodies
    that are not UTF-8 need ``yaml`` (vcrpy's JSON serializer refuses them)."""
    requests, responses = _vcr_pairs(interactions)
    text: str = _vcr().serialize.serialize({"requests": requests, "responses": responses}, _serializer(fmt))
    return text


def dump_items(interactions: Iterable[Interaction]) -> str:
    """``interactions`` as items of the appendable layout's list, each closed by its END line:
    what an append writes at the end of the file. Each is the dict vcrpy's ``serialize`` makes
    of an interaction, dumped by vcrpy's YAML serializer, redacted as :func:`dumps` does."""
    vcr = _vcr()
    serializer = _serializer("yaml")
    pieces: list[str] = []
    for request, response in zip(*_vcr_pairs(interactions), strict=True):
        item = {
            "request": vcr.serializers.compat.convert_to_unicode(request._to_dict()),
            "response": vcr.serializers.compat.convert_to_unicode(response),
        }
        text: str = serializer.serialize([item])
        pieces.append(text if text.endswith("\n") else text + "\n")
        pieces.append(APPEND_END)
    return "".join(pieces)


def dumps_appendable(interactions: Iterable[Interaction]) -> str:
    """The whole cassette in the appendable layout (YAML)."""
    return APPEND_HEADER + dump_items(interactions)


def complete(text: str) -> tuple[str, int]:
    """``text`` without a torn last item, and how many characters were cut (0 if none): in the
    appendable layout, whatever follows the last END line (or the header, if none has one)."""
    if not text.startswith(APPEND_HEADER):
        return text, 0
    end = text.rfind(_END_LINE, len(APPEND_HEADER) - 1)
    whole = len(APPEND_HEADER) if end < 0 else end + len(_END_LINE)
    return text[:whole], len(text) - whole


def _response_dict(resp: RecordedResponse) -> dict[str, Any]:
    extra: dict[str, Any] = {"format": FORMAT}
    if resp.elapsed is not None:
        extra["elapsed"] = resp.elapsed
    if resp.stream is not None:
        extra["stream"] = {"end": resp.stream.end, "offsets": [e.offset for e in resp.stream.events]}
    return {
        "status": {"code": resp.status, "message": resp.reason},
        "headers": _grouped(resp.headers),
        "body": {"string": resp.body},
        EXTRA_KEY: extra,
    }


def loads(text: str, fmt: str = "yaml") -> tuple[Interaction, ...]:
    """The interactions of a cassette in vcrpy's format (safe YAML only), redacted. In the
    appendable layout, a torn last item (an append cut short) is left out, with a warning."""
    if not text.strip():
        return ()  # vcrpy treats an empty file as no cassette yet; so do we
    if fmt == "yaml":
        text, torn = complete(text)
        if torn:
            log.warning("a cassette ends with %d characters of an append cut short: ignored", torn)
        if text == APPEND_HEADER:
            return ()  # the layout's header, and no interaction yet
    requests, responses, *_ = _vcr().serialize.deserialize(text, _serializer(fmt))
    return tuple(
        Interaction(_request(req), _response(resp)).redacted() for req, resp in zip(requests, responses, strict=True)
    )


def _bytes(value: object) -> bytes:
    """A body as vcrpy may hand it back: str, bytes, None, BytesIO or a list of chunks."""
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, BytesIO):
        return value.getvalue()
    if isinstance(value, list | tuple):
        return b"".join(_bytes(part) for part in value)
    if hasattr(value, "__next__"):  # vcrpy rebuilds iterator bodies as iterators
        return b"".join(_bytes(part) for part in cast(Iterable[object], value))
    raise ValueError(f"unreadable body of type {type(value).__name__}")


def _headers(raw: object) -> Headers:
    if not isinstance(raw, dict):
        return ()
    pairs: list[tuple[str, str]] = []
    for name, values in raw.items():
        for value in values if isinstance(values, list | tuple) else [values]:
            pairs.append((str(name), str(value)))
    return tuple(pairs)


def _request(vcr_request: Any) -> RecordedRequest:
    return RecordedRequest(
        str(vcr_request.method), str(vcr_request.uri), _headers(dict(vcr_request.headers)), _bytes(vcr_request.body)
    )


def _response(raw: dict[str, Any]) -> RecordedResponse:
    if "status_code" in raw:  # the layout older vcrpy versions wrote for httpx
        raw = {
            "status": {"code": raw["status_code"]},
            "headers": raw.get("headers"),
            "body": {"string": raw.get("content")},
        }
    status = raw.get("status") or {}
    body_field = raw.get("body")
    body = _bytes(body_field.get("string") if isinstance(body_field, dict) else body_field)
    headers = _headers(raw.get("headers"))
    reason = str(status.get("message") or "")
    extra = raw.get(EXTRA_KEY)
    extra = extra if isinstance(extra, dict) else {}
    elapsed = float(extra["elapsed"]) if extra.get("elapsed") is not None else None
    recorded = extra.get("stream")
    if isinstance(recorded, dict):
        end = recorded.get("end", "eof")
        if end not in get_args(EndKind):
            raise ValueError(f"unknown stream end {end!r}")
        offsets = [float(x) for x in recorded.get("offsets") or []]
        return RecordedResponse.streamed(int(status["code"]), headers, _stream(body, offsets, end), reason, elapsed)
    if not extra and "text/event-stream" in (_header(headers, "content-type") or ""):
        inferred: EndKind = "done" if _DONE.search(body) else "eof"
        return RecordedResponse.streamed(int(status["code"]), headers, _stream(body, [], inferred), reason, elapsed)
    return RecordedResponse(int(status["code"]), headers, body, reason, None, elapsed)


def _stream(body: bytes, offsets: Sequence[float], end: EndKind) -> Stream:
    pieces = split_events(body)
    last = offsets[-1] if offsets else 0.0
    return Stream(tuple(StreamEvent(offsets[i] if i < len(offsets) else last, p) for i, p in enumerate(pieces)), end)
