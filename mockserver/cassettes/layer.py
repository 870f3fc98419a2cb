"""The cassette layer: replay a recording, else record from the upstream, else answer a miss.

ASGI middleware in front of the routes, inside the fault injector (so replays get faults
too). Replay has to hand back the provider's own bytes — its ids, its fields, its event
boundaries — which re-encoding events through a codec would lose; that is why recordings
are served here, at the HTTP layer, rather than as a backend under the codecs. The chain per
request, by ``--record-mode``:

* ``none`` — replay; a miss is a 404 naming the closest recording and the fields that differ,
  with ``x-should-retry: false`` (or, with ``--on-miss reference``, the reference model's
  answer, marked ``x-mockserver-source: reference``);
* ``once`` — as ``none`` when the target cassette exists, else record everything;
* ``new_episodes`` — replay, and record misses;
* ``all`` — record everything, replay nothing.

Recording tees: each upstream chunk is forwarded the moment it arrives and captured with its
time offset; the interaction is appended to the cassette (atomically, off the event loop)
when the response ends, however it ends. Replay timing is ``instant``, ``recorded`` (the
captured offsets) or ``scaled:X``. A streamed recording serves a non-stream request folded
into one body, and a non-stream recording a stream request unfolded (:mod:`mockserver.cassettes.refold`).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import time
import zlib
from dataclasses import replace
from typing import Any

import httpx
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mockserver.cassettes.files import CassetteDir
from mockserver.cassettes.format import Interaction, Request, Response, StreamCapture
from mockserver.cassettes.matching import Index, Key, Miss
from mockserver.cassettes.order import ReplayOrder
from mockserver.cassettes.refold import fold, unfold
from mockserver.config import Settings
from mockserver.errors import APIError, InvalidRequest, NotFound
from mockserver.faults.injector import BODY_KEY, buffered, find_transport, parse_body, send_raw
from mockserver.faults.stream import reset
from mockserver.http.sse import dumps

__all__ = ["CassetteLayer"]

SOURCE = b"x-mockserver-source"
CASSETTE_HEADER = b"x-mockserver-cassette"
RECORD_MODE_HEADER = b"x-mockserver-record-mode"
SESSION_HEADER = b"x-mockserver-session"
RECORD_MODES = ("none", "once", "new_episodes", "all")
# Not replayed (the server sets its own) and not forwarded upstream.
_HOP = frozenset(
    {"content-length", "transfer-encoding", "connection", "keep-alive", "content-encoding", "date", "server"}
)
_NOT_UPSTREAM = frozenset({"host", "content-length", "connection", "accept-encoding", "authorization"})


class UpstreamError(APIError):
    status = 502
    type = "upstream_error"


class CassetteLayer:
    """Requests naming a cassette (``x-mockserver-cassette``) replay from that cassette only;
    others from every cassette in the directory. ``x-mockserver-record-mode`` overrides
    ``--record-mode`` for one request, so tests with different modes share one server."""

    def __init__(self, app: ASGIApp, settings: Settings, replay: ReplayOrder | None = None) -> None:
        self.app = app
        self.settings = settings
        self.dir = CassetteDir(settings.cassettes)
        loaded = self.dir.load_all()
        self.index = Index((i for batch in loaded.values() for i in batch), ignore=settings.match_ignore)
        self._by_cassette = {name: Index(batch, ignore=settings.match_ignore) for name, batch in loaded.items()}
        kind, _, factor = settings.replay_timing.partition(":")
        self.pace = 0.0 if kind == "instant" else (1.0 if kind == "recorded" else float(factor))
        self._client: httpx.AsyncClient | None = None
        self.replay = replay or ReplayOrder()
        self._keys: dict[tuple[str, str, bytes], Key] = {}  # request → its index key
        self._plain: dict[int, tuple[list[tuple[bytes, bytes]], bytes]] = {}  # id(recording) → headers, body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        parsed = scope.get(BODY_KEY)
        if parsed is None:
            raw, receive = await buffered(receive)
            body = parse_body(raw)
        else:
            raw, body = parsed
        query = scope.get("query_string", b"").decode("latin-1")
        target = scope["path"] + (f"?{query}" if query else "")
        mode = _header(scope, RECORD_MODE_HEADER) or self.settings.record_mode
        if mode not in RECORD_MODES:
            bad = InvalidRequest(
                f"Invalid x-mockserver-record-mode '{mode}': use one of {', '.join(RECORD_MODES)}.",
                param="x-mockserver-record-mode",
            )
            await _json_response(send, bad.status, bad.body(), {"x-mockserver-source": "miss"})
            return
        named = _header(scope, CASSETTE_HEADER)
        cassette = named or self.settings.cassette
        index = self._index(named)
        session = _header(scope, SESSION_HEADER)
        wants_stream = isinstance(body, dict) and body.get("stream") is True
        found = None
        if mode != "all":
            interaction = self._next(index, (named, session), scope["method"], target, raw, wants_stream)
            if interaction is not None:
                await self._replay(interaction, body, send)
                return
            found = index.lookup(scope["method"], target, raw)
        records = mode in ("new_episodes", "all") or (mode == "once" and not self.dir.exists(cassette))
        if records and self.settings.upstream:
            await self._record(scope, target, raw, cassette, send)
            return
        if self.settings.on_miss == "reference":
            await self.app(scope, receive, _marking(send, b"reference"))
            return
        message = found.message if isinstance(found, Miss) else "Recording is on but no --upstream is set."
        miss = NotFound(message, code="cassette_miss", headers={"x-should-retry": "false"})
        await _json_response(send, miss.status, miss.body(), {**miss.headers, "x-mockserver-source": "miss"})

    # ---- replay ---------------------------------------------------------------------------

    def _index(self, cassette: str | None) -> Index:
        """The recordings a request may replay: its named cassette's, else every cassette's."""
        if cassette is None:
            return self.index
        found = self._by_cassette.get(cassette)
        if found is None:
            found = self._by_cassette[cassette] = Index(ignore=self.settings.match_ignore)
        return found

    def _next(
        self, index: Index, scope: tuple[str | None, str | None], method: str, target: str, raw: bytes, stream: bool
    ) -> Interaction | None:
        """The next recording of this request, in recorded order — of the same shape (stream
        or not) when there is one, so a cassette holding both twins serves each its own.
        ``scope`` is (cassette, session): each counts its own place in the recordings."""
        key = self._keys.get((method, target, raw))
        if key is None:  # keying redacts and canonicalises the body: worth remembering
            key = index.key(method, target, raw)
            if len(self._keys) >= 4096:
                self._keys.clear()
            self._keys[(method, target, raw)] = key
        recorded = index.recorded(key)
        if not recorded:
            return None
        same = [i for i in recorded if (i.response.stream is not None) == stream] or list(recorded)
        played = self.replay.take(scope[1], (scope[0], key, stream))
        return same[min(played, len(same) - 1)]  # past the last, the last repeats

    async def _replay(self, interaction: Interaction, body: Any, send: Send) -> None:
        recorded = interaction.response
        wants_stream = isinstance(body, dict) and body.get("stream") is True
        if recorded.stream is None and not wants_stream and not self.pace:  # the common case, cached
            ready = self._plain.get(id(interaction))
            if ready is None:
                ready = self._plain[id(interaction)] = self._prepared(recorded)
            headers, content = ready
            await send({"type": "http.response.start", "status": recorded.status, "headers": headers})
            await send({"type": "http.response.body", "body": content, "more_body": False})
            return
        headers = [(k.lower().encode(), v.encode()) for k, v in recorded.headers if k.lower() not in _HOP]
        headers.append((SOURCE, b"replay"))
        content = _decoded(recorded.body, recorded.header("content-encoding"))
        if recorded.stream is not None and not wants_stream:  # fold the stream into one body
            folded = fold(e.data for e in recorded.stream.events)
            if folded is not None:
                headers = [(k, v) for k, v in headers if k != b"content-type"]
                await _json_response(send, recorded.status, folded, dict(_text(headers)))
                return
        if recorded.stream is None and wants_stream and recorded.status == 200:  # unfold one body
            options = body.get("stream_options") if isinstance(body, dict) else None
            frames = unfold(json.loads(content), bool(isinstance(options, dict) and options.get("include_usage")))
            await _stream(send, recorded.status, _sse(headers), [(0.0, f) for f in frames], 0.0)
            return
        if recorded.stream is not None:
            events = [(e.offset, e.data) for e in recorded.stream.events]
            ending = recorded.stream.end
            await _stream(send, recorded.status, headers, events, self.pace, finish=ending != "reset")
            if ending == "reset":  # the recording ended in a reset: so does its replay
                reset(find_transport(send))
            return
        if self.pace and recorded.elapsed:
            await asyncio.sleep(recorded.elapsed * self.pace)
        headers.append((b"content-length", str(len(content)).encode()))
        await send({"type": "http.response.start", "status": recorded.status, "headers": headers})
        await send({"type": "http.response.body", "body": content, "more_body": False})

    @staticmethod
    def _prepared(recorded: Response) -> tuple[list[tuple[bytes, bytes]], bytes]:
        content = _decoded(recorded.body, recorded.header("content-encoding"))
        headers = [(k.lower().encode(), v.encode()) for k, v in recorded.headers if k.lower() not in _HOP]
        return [*headers, (SOURCE, b"replay"), (b"content-length", str(len(content)).encode())], content

    # ---- record ---------------------------------------------------------------------------

    async def _record(self, scope: Scope, target: str, raw: bytes, cassette: str, send: Send) -> None:
        url = self.settings.upstream.rstrip("/") + target
        headers = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in scope["headers"]
            if k.decode("latin-1") not in _NOT_UPSTREAM and not k.startswith(b"x-mockserver-")
        ]
        key = self.settings.upstream_api_key
        auth = _header(scope, b"authorization")
        if key is not None:
            headers.append(("authorization", f"Bearer {key.get_secret_value()}"))
        elif auth:
            headers.append(("authorization", auth))
        client = self._client = self._client or httpx.AsyncClient(timeout=httpx.Timeout(600.0, connect=10.0))
        started = time.perf_counter()
        capture = StreamCapture()
        try:
            upstream = client.build_request(scope["method"], url, headers=headers, content=raw)
            response = await client.send(upstream, stream=True)
        except httpx.HTTPError as exc:
            error = UpstreamError(f"The upstream {self.settings.upstream} could not be reached: {type(exc).__name__}.")
            await _json_response(send, error.status, error.body(), {"x-mockserver-source": "record"})
            return
        kept = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _HOP]
        streaming = response.headers.get("content-type", "").startswith("text/event-stream")
        out = [(k.lower().encode(), v.encode()) for k, v in kept] + [(SOURCE, b"record")]
        await send({"type": "http.response.start", "status": response.status_code, "headers": out})
        end = "done"
        try:
            async for chunk in response.aiter_bytes():  # decoded: the cassette keeps plain bodies
                capture.feed(chunk, time.perf_counter() - started)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except httpx.HTTPError:
            end = "reset"
        finally:
            await response.aclose()
            elapsed = time.perf_counter() - started
            stream = capture.finish("done")
            if streaming:
                ended = bool(stream.events) and b"[DONE]" in stream.events[-1].data
                stream = replace(stream, end="reset" if end == "reset" else ("done" if ended else "eof"))
                recorded = Response.streamed(response.status_code, tuple(kept), stream, response.reason_phrase, elapsed)
            else:
                body = b"".join(e.data for e in stream.events)
                recorded = Response(response.status_code, tuple(kept), body, response.reason_phrase, None, elapsed)
            interaction = Interaction(Request(scope["method"], url, tuple(headers), raw), recorded).redacted()
            await self.dir.append_async(cassette, [interaction])
            self.index.add(interaction)
            self._index(cassette).add(interaction)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


async def _stream(
    send: Send,
    status: int,
    headers: list[tuple[bytes, bytes]],
    events: list[tuple[float, bytes]],
    pace: float,
    finish: bool = True,
) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    await send({"type": "http.response.start", "status": status, "headers": headers})
    for offset, data in events:
        if pace:
            delay = start + offset * pace - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
        await send({"type": "http.response.body", "body": data, "more_body": True})
    if finish:
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _sse(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    kept = [(k, v) for k, v in headers if k != b"content-type"]
    return [*kept, (b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]


def _text(headers: list[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers]


async def _json_response(send: Send, status: int, body: Any, headers: dict[str, str]) -> None:
    await send_raw(send, status, dumps(body), "application/json", headers)


def _marking(send: Send, source: bytes) -> Send:
    async def marked(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), (SOURCE, source)]}
        await send(message)

    return marked


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


def _decoded(body: bytes, encoding: str | None) -> bytes:
    """A body as the client should read it once its ``content-encoding`` is dropped."""
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    return body
