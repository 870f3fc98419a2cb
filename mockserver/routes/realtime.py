"""``/v1/realtime``: the GA Realtime API over a WebSocket, answered by the one engine.

One reader (client events, in order) and one writer (a queue: events from the reader and from a
running response never interleave mid-frame). A response is a task: ``response.cancel`` and a
client that leaves cancel it, and its engine stream closes with it (its work is freed). Text
output streams ``response.output_text.delta``; audio output streams the transcript as it is
generated and then the spoken transcript as ``response.output_audio.delta`` (24 kHz PCM from
:mod:`mockserver.voice.speech`, so it transcribes back to the transcript). A bad client event
gets an ``error`` event naming it; the session goes on.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import time
from typing import Any

from starlette.routing import BaseRoute, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from mockserver.context import ServerContext
from mockserver.faults.catalogue import Fault, FaultError
from mockserver.routes import realtime_faults, realtime_hearing, realtime_items
from mockserver.routes.realtime_faults import SocketFaults
from mockserver.routes.realtime_response import Turn
from mockserver.spine import seeding
from mockserver.voice import formats, modem
from mockserver.voice.session import Session, default_config, merged, update_problem
from mockserver.voice.transcribe import Heard, hear, heard_part
from mockserver.voice.vad import Detector
from mockserver.wire import headers as h

__all__ = ["routes"]

AUDIO_CHUNK = 9600  # bytes of output PCM per delta (200 ms)


_SESSIONS = itertools.count(1)


class Realtime:
    def __init__(self, ws: WebSocket, ctx: ServerContext, model: str) -> None:
        self.ws, self.ctx = ws, ctx
        # Numbered in the order sessions open (the server's seed mixed in): the same run, the same ids.
        sid = "sess_" + seeding.digest(b"realtime", ctx.seed, next(_SESSIONS)).hex()[:24]
        self.session = Session(default_config(model, sid))
        self.outbox: asyncio.Queue[dict[str, Any] | int] = asyncio.Queue()  # an int: close with that code
        self.running: asyncio.Task[None] | None = None
        self.detector = Detector()
        self.events = 0
        self.session_header = ws.headers.get(h.name(h.SESSION))
        self.responses = 0
        self.turn_faults: tuple[Fault, ...] = ()  # the last response's (journaled)
        self.hearing: set[asyncio.Task[None]] = set()  # transcripts being made (realtime_hearing)
        self.fault_problem: str | None = None
        try:
            self.faults = realtime_faults.read(ws.headers.get(h.name(h.FAULT)))
        except FaultError as exc:
            self.faults, self.fault_problem = (), str(exc)

    def send(self, event: dict[str, Any]) -> None:
        self.events += 1
        self.outbox.put_nowait({"event_id": f"event_{self.events:08d}", **event})

    def error(self, message: str, client_event: str | None, param: str | None = None, code: str | None = None) -> None:
        self.send(
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "code": code,
                    "message": message,
                    "param": param,
                    "event_id": client_event,
                },
            }
        )

    def drop(self, code: int) -> None:
        """Close the socket with ``code`` once the events queued before are sent (a fault)."""
        self.outbox.put_nowait(code)

    async def writer(self) -> None:
        while not isinstance(event := await self.outbox.get(), int):
            await self.ws.send_text(json.dumps(event))
        await self.ws.close(event)

    async def run(self) -> None:
        await self.ws.accept()
        writing = asyncio.create_task(self.writer())
        self.send({"type": "session.created", "session": self.session.config})
        if self.fault_problem is not None:
            self.error(f"Invalid x-mockserver-fault: {self.fault_problem}", None, h.name(h.FAULT), "invalid_fault")
        try:
            while True:
                raw = await self.ws.receive_text()
                await self.journaled(raw)
        except WebSocketDisconnect:
            pass
        finally:
            if self.running is not None:
                self.running.cancel()  # a client that left frees its work
            for task in self.hearing:
                task.cancel()
            writing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writing

    async def journaled(self, raw: str) -> None:
        """Handle a client event, journaled as one entry (``WS /v1/realtime``, kind ``realtime``):
        its body, the faults its response drew, and the server events it caused at once."""
        ctx = self.ctx
        journal = ctx.chaos.journal
        refresh = ctx.refresh
        entry_id = await refresh.begin(True) if refresh is not None and journal.shared else 0
        entry = journal.open(
            time=ctx.clock.now(),
            method="WS",
            path="/v1/realtime",
            session=self.session_header,
            retry_attempt=0,
            raw=raw.encode("utf-8", "surrogatepass"),
            entry_id=entry_id,
            kind="realtime",
        )
        before, responses, started = self.events, self.responses, time.monotonic()
        try:
            self.handle(raw)
        finally:
            entry.status = 101  # the socket's: switched protocols
            entry.events = self.events - before
            entry.ended = "done"
            if self.responses != responses and self.turn_faults:
                entry.faults.extend(f.render() for f in self.turn_faults)
            entry.duration = time.monotonic() - started
            journal.settle(entry)
            await asyncio.shield(journal.close(entry))

    def handle(self, raw: str) -> None:
        try:
            event = json.loads(raw)
        except ValueError:
            self.error("The event is not valid JSON.", None, code="invalid_json")
            return
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            self.error("The event has no 'type'.", None, param="type", code="invalid_event")
            return
        kind, eid = event["type"], event.get("event_id")
        handler = _HANDLERS.get(kind)
        if handler is None:
            self.error(f"Invalid value: '{kind}' is not a client event type.", eid, param="type", code="invalid_value")
            return
        try:
            handler(self, event)
        except (KeyError, TypeError, ValueError) as exc:
            self.error(f"Invalid '{kind}' event: {exc}", eid, code="invalid_value")

    # -- client events

    def session_update(self, event: dict[str, Any]) -> None:
        update = event["session"]
        if not isinstance(update, dict):
            raise TypeError("'session' must be an object")
        problem = update_problem(update)
        if problem is not None:
            self.error(problem[0], event.get("event_id"), problem[1])
            return
        self.session.config = merged(
            self.session.config, {k: v for k, v in update.items() if k not in ("id", "object")}
        )
        detection = self.session.config["audio"]["input"].get("turn_detection") or {}
        self.detector.threshold = float(detection.get("threshold", 0.5))
        self.detector.silence_ms = int(detection.get("silence_duration_ms", 500))
        self.send({"type": "session.updated", "session": self.session.config})

    def item_create(self, event: dict[str, Any]) -> None:
        item = dict(event["item"])
        if item.get("type") not in ("message", "function_call", "function_call_output"):
            self.error(
                "item.type must be message, function_call or function_call_output.", event.get("event_id"), "item.type"
            )
            return
        item.setdefault("id", self.session.next_id("item"))
        item.setdefault("object", "realtime.item")
        item["status"] = "completed"
        if item["type"] == "message":  # audio parts are heard: mockserver's speech gives its text
            item["content"] = [heard_part(part) for part in item.get("content") or ()]
            for index, part in enumerate(item["content"]):
                if isinstance(part, dict) and part.get("type") == "input_audio" and part.get("transcript") is None:
                    pcm = base64.b64decode(part.get("audio") or "")
                    if pcm:  # other audio: the engine hears it
                        self.listen(item, pcm, hear(formats.from_pcm16(pcm), modem.RATE), index)
        previous = self.session.add(item, event.get("previous_item_id"))
        self.send({"type": "conversation.item.added", "previous_item_id": previous, "item": item})
        self.send({"type": "conversation.item.done", "previous_item_id": previous, "item": item})

    def audio_append(self, event: dict[str, Any]) -> None:
        pcm = base64.b64decode(event["audio"], validate=True)
        self.session.audio += pcm
        detection = self.session.config["audio"]["input"].get("turn_detection")
        if not detection:
            return
        for change, ms in self.detector.feed(pcm):
            if change == "started":
                self.send(
                    {"type": "input_audio_buffer.speech_started", "audio_start_ms": ms, "item_id": self._pending_id()}
                )
            else:
                self.send(
                    {"type": "input_audio_buffer.speech_stopped", "audio_end_ms": ms, "item_id": self._pending_id()}
                )
                self.commit(None)
                if detection.get("create_response", True):
                    self.respond({})

    def _pending_id(self) -> str:
        return f"item_{self.session.config['id'][5:17]}{self.session.counter + 1:06d}"

    def commit(self, event: dict[str, Any] | None) -> None:
        if not self.session.audio:
            self.error(
                "Error committing input audio buffer: the buffer is empty.",
                (event or {}).get("event_id"),
                code="input_audio_buffer_commit_empty",
            )
            return
        pcm = bytes(self.session.audio)
        self.session.audio.clear()
        self.detector.reset()
        heard = hear(formats.from_pcm16(pcm), modem.RATE)
        transcript = heard.spoken.text if heard.spoken is not None else None
        item = {
            "id": self.session.next_id("item"),
            "object": "realtime.item",
            "type": "message",
            "role": "user",
            "status": "completed",
            "content": [{"type": "input_audio", "transcript": transcript}],
        }
        previous = self.session.add(item)
        self.send({"type": "input_audio_buffer.committed", "item_id": item["id"], "previous_item_id": previous})
        self.send({"type": "conversation.item.added", "previous_item_id": previous, "item": item})
        if transcript is not None:
            self.transcribed(item, transcript, heard)
        else:  # audio mockserver did not speak: the engine hears it (a response waits for it)
            self.listen(item, pcm, heard, 0)
        self.send({"type": "conversation.item.done", "previous_item_id": previous, "item": item})

    def listen(self, item: dict[str, Any], pcm: bytes, heard: Heard, index: int) -> None:
        task = asyncio.ensure_future(self.hear(item, pcm, heard, index))
        self.hearing.add(task)
        task.add_done_callback(self.hearing.discard)

    async def hear(self, item: dict[str, Any], pcm: bytes, heard: Heard, index: int) -> None:
        asked = self.session.config["audio"]["input"].get("transcription") or {}
        model = asked.get("model") if isinstance(asked, dict) else None
        text = await realtime_hearing.transcript(
            self.ctx, pcm, heard, model or realtime_hearing.MODEL, self.session_header
        )
        item["content"][index]["transcript"] = text
        self.transcribed(item, text, heard, index)

    def transcribed(self, item: dict[str, Any], transcript: str, heard: Heard, index: int = 0) -> None:
        """The item's audio is heard: said, when the session asked for its transcription."""
        if self.session.config["audio"]["input"].get("transcription"):
            self.send(
                {
                    "type": "conversation.item.input_audio_transcription.completed",
                    "item_id": item["id"],
                    "content_index": index,
                    "transcript": transcript,
                    "usage": {"type": "duration", "seconds": heard.seconds},
                }
            )

    def clear(self, event: dict[str, Any]) -> None:
        self.session.audio.clear()
        self.detector.reset()
        self.send({"type": "input_audio_buffer.cleared"})

    def respond(self, event: dict[str, Any]) -> None:
        if self.running is not None and not self.running.done():
            self.error(
                "Conversation already has an active response in progress.",
                event.get("event_id"),
                code="conversation_already_has_active_response",
            )
            return
        asked = event.get("response") or {}
        if not isinstance(asked, dict):
            raise TypeError("'response' must be an object")
        self.responses += 1
        faults = SocketFaults.drawn(self.faults, self.ctx.seed, self.session.config["id"], self.responses)
        self.turn_faults = faults.faults
        turn = Turn(self, merged(self.session.config, asked), asked, faults)
        self.running = asyncio.create_task(turn.run())
        self.running.add_done_callback(turn.on_done)  # cancelled before it ran: still ends "cancelled"

    def cancel(self, event: dict[str, Any]) -> None:
        if self.running is None or self.running.done():
            self.error(
                "Cancellation failed: no active response found.",
                event.get("event_id"),
                code="response_cancel_not_active",
            )
            return
        self.running.cancel()


_HANDLERS = {
    "session.update": Realtime.session_update,
    "conversation.item.create": Realtime.item_create,
    "conversation.item.retrieve": realtime_items.retrieve,
    "conversation.item.delete": realtime_items.delete,
    "conversation.item.truncate": realtime_items.truncate,
    "input_audio_buffer.append": Realtime.audio_append,
    "input_audio_buffer.commit": Realtime.commit,
    "input_audio_buffer.clear": Realtime.clear,
    "response.create": Realtime.respond,
    "response.cancel": Realtime.cancel,
}


async def realtime(ws: WebSocket) -> None:
    ctx: ServerContext = ws.app.state.ctx
    model = ws.query_params.get("model") or "gpt-realtime"
    await Realtime(ws, ctx, model).run()


def routes() -> list[BaseRoute]:
    return [WebSocketRoute("/v1/realtime", realtime)]
