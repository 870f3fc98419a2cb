"""One Realtime response: the conversation asked of the engine, its events sent as the GA API does.

``response.created`` → the session's MCP calls first (:mod:`.mcp`) → per output item
``response.output_item.added`` (and the conversation's ``conversation.item.added``), a message's
``response.content_part.added``, its deltas (text, or audio transcript then audio), the ``*.done``
events, ``response.output_item.done`` and ``conversation.item.done``; a function call's argument
deltas and ``…arguments.done``; then ``response.done`` with usage, and ``rate_limits.updated``. A
cancelled response ends ``cancelled``; an engine error ends it ``failed`` after an ``error``
event. The faults it suffers are drawn when it starts, from the fleet's current rules (:mod:`.faults`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from mockserver.errors import APIError
from mockserver.faults.rules import RequestInfo
from mockserver.routes.realtime import faults as socket_faults
from mockserver.routes.realtime.faults import SocketFaults
from mockserver.routes.realtime.mcp import Tools
from mockserver.routes.realtime.output import Output
from mockserver.routes.realtime.port import Port
from mockserver.spine.events import TextDelta, ToolCallDelta, Usage
from mockserver.spine.request import GenerationRequest
from mockserver.voice import speech

__all__ = ["Turn"]


class Turn(Output):
    def __init__(
        self, rt: Port, config: dict[str, Any], asked: dict[str, Any], faults: SocketFaults, tools: Tools
    ) -> None:
        self.rt, self.config, self.faults, self.tools = rt, config, faults, tools
        self.sent = 0  # server events of this response so far (faults count them)
        self.closed = False  # ended cancelled
        self.in_conversation = asked.get("conversation", "auto") != "none"
        self.input_items = asked.get("input")
        self.id = rt.session.next_id("resp")
        self.output: list[dict[str, Any]] = []
        self.audio = "audio" in (config.get("output_modalities") or ["audio"])
        self.usage: Usage | None = None

    def send(self, event: dict[str, Any]) -> None:
        """One server event of this response, under its faults."""
        self.sent += 1
        if self.faults.error_at == self.sent:
            raise _Injected()
        self.rt.send(event)
        closes = self.faults.closes_after()
        if closes is not None and self.sent >= closes[0]:
            raise _Dropped(closes[1])

    def _response(self, status: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
        out = self.config["audio"]["output"]
        response: dict[str, Any] = {
            "object": "realtime.response",
            "id": self.id,
            "status": status,
            "status_details": details,
            "output": self.output,
            "conversation_id": "conv_" + self.rt.session.config["id"][5:] if self.in_conversation else None,
            "output_modalities": ["audio"] if self.audio else ["text"],
            "max_output_tokens": self.config.get("max_output_tokens", "inf"),
            "audio": {"output": {"format": out.get("format"), "voice": out.get("voice")}},
            "metadata": None,
            "usage": None,
        }
        if self.usage is not None and status != "in_progress":
            audio_out = 0
            if self.audio:
                text = " ".join(p.get("transcript", "") for i in self.output for p in i.get("content") or ())
                audio_out = speech.audio_tokens(speech.duration_of(text, float(out.get("speed", 1.0)))) if text else 0
            given, made = self.usage.prompt_tokens, self.usage.completion_tokens
            response["usage"] = {
                "total_tokens": given + made + audio_out,
                "input_tokens": given,
                "output_tokens": made + audio_out,
                "input_token_details": {"text_tokens": given, "audio_tokens": 0, "cached_tokens": 0},
                "output_token_details": {"text_tokens": made, "audio_tokens": audio_out},
            }
        return response

    def generation(self) -> GenerationRequest:
        ctx, session = self.rt.ctx, self.rt.session
        model = session.config["model"]
        return session.generation(
            self.config,
            self.input_items if isinstance(self.input_items, list) else None,
            global_seed=ctx.seed,
            context_window=ctx.options.models.context_window(model, ctx.profile),
            session=self.rt.session_header,
        )

    async def run(self) -> None:
        rt = self.rt
        try:
            info = RequestInfo(
                "GET",
                socket_faults.PATH,
                model=self.config.get("model"),
                stream=True,
                tools=bool(self.config.get("tools")),
                session=rt.session_header,
            )
            given = await socket_faults.ruled(
                rt.ctx.chaos.rules, rt.ctx.refresh, rt.ctx.seed, info, rt.session.config["id"], rt.responses
            )
            if given:  # --faults and rules, beside the handshake's
                self.faults = SocketFaults((*self.faults.faults, *given))
                rt.turn_faults = self.faults.faults
            self.send({"type": "response.created", "response": self._response("in_progress")})
            if rt.pending:  # audio still being heard, tools being listed: the conversation reads them
                await asyncio.gather(*rt.pending, return_exceptions=True)
            if self.faults.refused:
                self._refuse()
                return
            gen = self.generation()
            if not await self.tools.lead(self, gen.seed):  # MCP calls first; an approval asked ends it
                await self._answer(gen)
            self.send({"type": "response.done", "response": self._response("completed")})
            spent = self.usage.total_tokens if self.usage else 0
            limits = [
                {"name": "requests", "limit": 10_000, "remaining": 9_999, "reset_seconds": 0.006},
                {"name": "tokens", "limit": 1_000_000, "remaining": 1_000_000 - spent, "reset_seconds": 0.06},
            ]
            self.send({"type": "rate_limits.updated", "rate_limits": limits})
        except asyncio.CancelledError:
            self.cancelled()
            raise
        except _Injected:
            error = {"type": "server_error", "code": "server_error", "message": "Injected by stream.error_at."}
            rt.send({"type": "error", "error": {**error, "param": None, "event_id": None}})
            rt.send({"type": "response.done", "response": self._response("failed", {"type": "failed", "error": error})})
        except _Dropped as drop:
            rt.drop(drop.code)
        except APIError as exc:
            self.send(
                {
                    "type": "error",
                    "error": {
                        "type": exc.type,
                        "code": exc.code,
                        "message": exc.message,
                        "param": exc.param,
                        "event_id": None,
                    },
                }
            )
            self.send(
                {
                    "type": "response.done",
                    "response": self._response(
                        "failed", {"type": "failed", "error": {"type": exc.type, "code": exc.code}}
                    ),
                }
            )

    async def _answer(self, gen: GenerationRequest) -> None:
        """The engine's answer: a message (text or speech) and function calls."""
        rt = self.rt
        message: dict[str, Any] | None = None
        calls: dict[int, dict[str, Any]] = {}
        async for event in await rt.ctx.engine.events(gen, self.faults.engine):
            if isinstance(event, TextDelta) and event.text:
                if message is None:
                    message = self._open_message()
                self._text(message, event.text)
            elif isinstance(event, ToolCallDelta):
                call = calls.get(event.call_index)
                if call is None:
                    call = calls[event.call_index] = self._open_call(event)
                call["arguments"] += event.arguments
                self.send(
                    {
                        "type": "response.function_call_arguments.delta",
                        **self.where(call),
                        "call_id": call["call_id"],
                        "delta": event.arguments,
                    }
                )
            elif isinstance(event, Usage):
                self.usage = event
            await asyncio.sleep(0)  # a cancel lands between deltas, even of an answer made at once
        if message is not None:
            await self._close_message(message, gen.seed)
        for call in calls.values():
            call["status"] = "completed"
            self.send(
                {
                    "type": "response.function_call_arguments.done",
                    **self.where(call),
                    "call_id": call["call_id"],
                    "name": call["name"],
                    "arguments": call["arguments"],
                }
            )
            self.close_item(call)

    def cancelled(self) -> None:
        """End the response ``cancelled`` (``response.cancel``, or its client left), once — also when
        it was cancelled before it began (then its ``response.created`` goes first)."""
        if self.closed:
            return
        self.closed = True
        if not self.sent:
            self.rt.send({"type": "response.created", "response": self._response("in_progress")})
        for item in self.output:
            item["status"] = "incomplete"
        details = {"type": "cancelled", "reason": "client_cancelled"}
        self.rt.send({"type": "response.done", "response": self._response("cancelled", details)})

    def on_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            self.cancelled()

    def _refuse(self) -> None:
        rt, error = self.rt, {"type": "rate_limit_exceeded", "code": "rate_limit_exceeded"}
        message = "Rate limit reached for requests (injected by http.429). Please try again later."
        rt.send({"type": "error", "error": {**error, "message": message, "param": None, "event_id": None}})
        limits = [{"name": "requests", "limit": 10_000, "remaining": 0, "reset_seconds": 1.0}]
        rt.send({"type": "rate_limits.updated", "rate_limits": limits})
        rt.send({"type": "response.done", "response": self._response("failed", {"type": "failed", "error": error})})


class _Injected(Exception):
    """``stream.error_at`` reached: the response fails with an ``error`` event."""


class _Dropped(Exception):
    """``stream.cut_after`` / ``reset_after`` reached: the socket closes with ``code``."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code
