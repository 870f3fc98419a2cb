"""``/v1/realtime``: the GA Realtime API over a WebSocket, answered by the one engine.

The socket reads client events and dispatches them; what a response, the items, the input audio
and the MCP tools do lives beside it (:mod:`.turn`, :mod:`.items`, :mod:`.ears`, :mod:`.mcp`),
each lent the socket as a :class:`~mockserver.routes.realtime.port.Port`.

One reader (client events, in order) and one writer (a queue: events from the reader and from a
running response never interleave mid-frame). A response is a task: ``response.cancel`` and a
client that leaves cancel it, and its engine stream closes with it (its work is freed). Text
output streams ``response.output_text.delta``; audio output streams the transcript as it is
generated and then the spoken transcript as ``response.output_audio.delta`` (speech from
:mod:`mockserver.voice.speech` in the session's output format, 24 kHz PCM or G.711, so it
transcribes back to the transcript). A bad client event gets an ``error`` event naming it; the
session goes on. ``?intent=transcription`` at the handshake (or ``session.type:
"transcription"``) makes a session that only transcribes its input audio.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import Callable
from typing import Any

from starlette.routing import BaseRoute, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from mockserver.context import ServerContext
from mockserver.faults.catalogue import Fault, FaultError
from mockserver.routes.realtime import faults as socket_faults
from mockserver.routes.realtime import items, mcp
from mockserver.routes.realtime.ears import Ears
from mockserver.routes.realtime.faults import SocketFaults
from mockserver.routes.realtime.turn import Turn
from mockserver.spine import seeding
from mockserver.voice.session import Session, default_config, merged, update_problem, updated
from mockserver.wire import headers as h

__all__ = ["routes"]


_SESSIONS = itertools.count(1)


class Realtime:
    def __init__(self, ws: WebSocket, ctx: ServerContext, model: str) -> None:
        self.ws, self.ctx, self.model = ws, ctx, model
        # Numbered in the order sessions open (the server's seed mixed in): the same run, the same ids.
        sid = "sess_" + seeding.digest(b"realtime", ctx.seed, next(_SESSIONS)).hex()[:24]
        kind = "transcription" if ws.query_params.get("intent") == "transcription" else "realtime"
        self.session = Session(default_config(model, sid, kind))
        self.ears: Ears = Ears(self)
        self.mcp: mcp.Tools = mcp.Tools(self, ws.app.state.mcp.allow_hosts)
        self.outbox: asyncio.Queue[dict[str, Any] | int] = asyncio.Queue()  # an int: close with that code
        self.running: asyncio.Task[None] | None = None
        self.events = 0
        self.session_header = ws.headers.get(h.name(h.SESSION))
        self.responses = 0
        self.turn_faults: tuple[Fault, ...] = ()  # the last response's (journaled)
        self.pending: set[asyncio.Task[None]] = set()  # transcripts being made, MCP tools being listed
        self.fault_problem: str | None = None
        try:
            self.faults = socket_faults.read(ws.headers.get(h.name(h.FAULT)))
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
            for task in self.pending:
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
        servers = self.mcp.servers_of(update, event.get("event_id"))  # refused before anything changes
        if servers is None:
            return
        self.session.config = updated(self.session.config, update, self.model)
        self.ears.configure()
        self.send({"type": "session.updated", "session": self.session.config})
        if "tools" in update:
            self.mcp.list_tools(servers)

    def item_create(self, event: dict[str, Any]) -> None:
        item = dict(event["item"])
        if item.get("type") not in _ITEMS:
            self.error(f"item.type must be one of {', '.join(_ITEMS)}.", event.get("event_id"), "item.type")
            return
        problem = self.mcp.answer_problem(item) if item["type"] == "mcp_approval_response" else None
        if problem is not None:
            self.error(problem[0], event.get("event_id"), problem[1])
            return
        item.setdefault("id", self.session.next_id("item"))
        item.setdefault("object", "realtime.item")
        item["status"] = "completed"
        if item["type"] == "message":  # audio parts are heard: mockserver's speech gives its text
            self.ears.item_audio(item)
        previous = self.session.add(item, event.get("previous_item_id"))
        self.send({"type": "conversation.item.added", "previous_item_id": previous, "item": item})
        self.send({"type": "conversation.item.done", "previous_item_id": previous, "item": item})

    def respond(self, event: dict[str, Any]) -> None:
        if self.ears.transcribing_only:
            self.error(
                "A transcription session makes no responses (session.type is 'transcription'): it transcribes"
                " the input audio; update the session to type 'realtime' for responses.",
                event.get("event_id"),
                "session.type",
                "response_not_allowed",
            )
            return
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
        turn = Turn(self, merged(self.session.config, asked), asked, faults, self.mcp)
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


_ITEMS = ("message", "function_call", "function_call_output", "mcp_approval_response")

_HANDLERS: dict[str, Callable[[Realtime, dict[str, Any]], None]] = {
    "session.update": Realtime.session_update,
    "conversation.item.create": Realtime.item_create,
    "conversation.item.retrieve": items.retrieve,
    "conversation.item.delete": items.delete,
    "conversation.item.truncate": items.truncate,
    "input_audio_buffer.append": lambda rt, event: rt.ears.append(event),
    "input_audio_buffer.commit": lambda rt, event: rt.ears.commit(event),
    "input_audio_buffer.clear": lambda rt, event: rt.ears.clear(event),
    "response.create": Realtime.respond,
    "response.cancel": Realtime.cancel,
}


async def realtime(ws: WebSocket) -> None:
    ctx: ServerContext = ws.app.state.ctx
    model = ws.query_params.get("model") or "gpt-realtime"
    await Realtime(ws, ctx, model).run()


def routes() -> list[BaseRoute]:
    return [WebSocketRoute("/v1/realtime", realtime)]
