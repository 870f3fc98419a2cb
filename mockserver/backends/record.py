"""The ``record`` backend: the upstream answers, and its answer is written to a cassette.

It proxies the request to ``--upstream`` and tees the response: every chunk goes on (as a
:class:`~mockserver.spine.events.RecordedFrame`) the moment it arrives and is captured with
its time offset; when the body ends — however it ends, the client gone included — the
interaction is redacted and appended to the cassette atomically, off the event loop, and
indexed so the next identical request replays it. It takes part only when the request's record
mode records it (see :mod:`mockserver.cassettes.library`); the upstream key comes from the
environment, never from a file, and is never written.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import TYPE_CHECKING

import httpx

from mockserver.backends.replay import vetted
from mockserver.cassettes.format import Interaction, RecordedRequest, RecordedResponse, StreamCapture
from mockserver.cassettes.library import HOP, MISS_HEADERS, CassetteWriteError, Library
from mockserver.errors import APIError, InvalidRequest, NotFound
from mockserver.spine.backend import Ask, BackendBase, Declined, Role
from mockserver.spine.events import Event, RecordedEnd, RecordedFrame, RecordedHead
from mockserver.spine.request import Source
from mockserver.wire import headers as h
from mockserver.wire.headers import PREFIX

if TYPE_CHECKING:
    from mockserver.backends import Parts

__all__ = ["RecordBackend", "UpstreamError", "from_parts"]

log = logging.getLogger("mockserver")

# Bytes reserved for a recording before its upstream is asked, besides twice the request body
# (the cassette writes the request and the answer, escaped): a disk with less room than this
# refuses the recording up front. A bigger answer is still written when the room is there.
RESERVE_BYTES = 256 * 1024

# What ends a stream (chat and completions, Responses): from the chunk holding one, the rest
# waits for the recording's write.
_TERMINATORS = (
    b"data: [DONE]",
    b"event: response.completed",
    b"event: response.incomplete",
    b"event: response.failed",
)

_NOT_UPSTREAM = frozenset({"host", "content-length", "connection", "accept-encoding", "authorization"})


class UpstreamError(APIError):
    status = 502
    type = "upstream_error"


class RecordBackend(BackendBase):
    """A tee to the upstream that writes the cassette as it streams (a ``recording`` link)."""

    role: Role = "recording"

    def __init__(self, library: Library) -> None:
        self.library = library
        self._client: httpx.AsyncClient | None = None

    def answer(self, ask: Ask) -> AsyncIterator[Event]:
        return self._answer(ask.source)

    async def _answer(self, source: Source) -> AsyncIterator[Event]:
        library, options = self.library, self.library.options
        vetted(library, source)  # the cassette name and the mode ceiling, before anything is fetched
        cassette = library.cassette(source)
        try:
            library.dir.resolve(cassette)  # a symlink that leads out: refused before the upstream is asked
        except ValueError as exc:
            raise InvalidRequest(
                f"Invalid {h.name(h.CASSETTE)}: {exc}.", param=h.name(h.CASSETTE), code="invalid_cassette_name"
            ) from None
        if not library.records(source):
            raise Declined()
        if not options.upstream:
            raise Declined(
                NotFound("Recording is on but no --upstream is set.", code="cassette_miss", headers=dict(MISS_HEADERS))
            )
        url = options.upstream.rstrip("/") + source.target
        headers = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in source.headers
            if k.decode("latin-1") not in _NOT_UPSTREAM and not k.startswith(PREFIX)
        ]
        auth = next((v.decode("latin-1") for k, v in source.headers if k == b"authorization"), None)
        if options.upstream_key is not None:
            headers.append(("authorization", f"Bearer {options.upstream_key}"))
        elif auth:
            headers.append(("authorization", auth))
        # Room for the recording first: a full or read-only cassette directory is the client's
        # 507 now, before the upstream is asked (and before any byte of an answer).
        reservation = await library.reserve(cassette, RESERVE_BYTES + 2 * len(source.body))
        try:
            client = self._client = self._client or httpx.AsyncClient(timeout=httpx.Timeout(600.0, connect=10.0))
            started = time.perf_counter()
            try:
                upstream = client.build_request(source.method, url, headers=headers, content=source.body)
                response = await client.send(upstream, stream=True)
            except httpx.HTTPError as exc:
                raise UpstreamError(
                    f"The upstream {options.upstream} could not be reached: {type(exc).__name__}.",
                    headers={h.name(h.SOURCE): "record"},
                ) from None
        except BaseException:
            reservation.release()
            raise
        kept = tuple((k, v) for k, v in response.headers.multi_items() if k.lower() not in HOP)
        streaming = response.headers.get("content-type", "").startswith("text/event-stream")
        capture = StreamCapture()
        end = "done"
        written = False  # the recording's write was tried (in the body, or else in the finally)

        async def write() -> None:
            nonlocal written
            written = True
            await response.aclose()
            elapsed = time.perf_counter() - started
            stream = capture.finish("done")
            if streaming:
                ended = bool(stream.events) and b"[DONE]" in stream.events[-1].data
                stream = replace(stream, end="reset" if end == "reset" else ("done" if ended else "eof"))
                recorded = RecordedResponse.streamed(
                    response.status_code, kept, stream, response.reason_phrase, elapsed
                )
            else:
                body = b"".join(e.data for e in stream.events)
                recorded = RecordedResponse(response.status_code, kept, body, response.reason_phrase, None, elapsed)
            interaction = Interaction(
                RecordedRequest(source.method, url, tuple(headers), source.body), recorded
            ).redacted()
            reservation.release()  # the room goes back just before the recording takes it
            await library.keep(cassette, interaction)

        try:
            yield RecordedHead(
                response.status_code, tuple((k.lower().encode(), v.encode()) for k, v in kept), streaming
            )
            # The stream's end is held back until the recording is written: a write that fails
            # is then an in-band error *before* the terminator (``[DONE]``,
            # ``response.completed``), which SDKs do read, and a whole body a 507, not a 200.
            # Chunks before it go on the moment they arrive, as a tee must.
            held: list[bytes] = []
            try:
                async for chunk in response.aiter_bytes():  # decoded: the cassette keeps plain bodies
                    capture.feed(chunk, time.perf_counter() - started)
                    if held or not streaming or any(t in chunk for t in _TERMINATORS):
                        held.append(chunk)
                    else:
                        yield RecordedFrame(chunk)
            except httpx.HTTPError:
                end = "reset"  # written as the recording's end; this client's body just ends
            try:
                await write()
            except CassetteWriteError:
                if streaming and held:
                    rest = b"".join(held)
                    cut = min((at for t in _TERMINATORS if (at := rest.find(t)) >= 0), default=len(rest))
                    if cut:
                        yield RecordedFrame(rest[:cut])  # what came before the terminator
                raise
            if held:
                yield RecordedFrame(b"".join(held))
            yield RecordedEnd("done")
        finally:
            try:
                if not written:  # the client left first: the recording is still kept
                    try:
                        await write()
                    except CassetteWriteError as exc:
                        log.warning("record: %s", exc.message)
            finally:
                reservation.release()
                await response.aclose()

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


def from_parts(parts: Parts) -> RecordBackend:
    """The registry's factory (see :mod:`mockserver.backends`)."""
    return RecordBackend(parts.library())
