"""One Realtime response: the conversation asked of the engine, its events sent as the GA API does.

``response.created`` → per output item ``response.output_item.added`` (and the conversation's
``conversation.item.added``), a message's ``response.content_part.added``, its deltas (text, or
audio transcript then audio), the ``*.done`` events, ``response.output_item.done`` and
``conversation.item.done``; a function call's argument deltas and ``…arguments.done``; then
``response.done`` with usage, and ``rate_limits.updated``. A cancelled response ends
``cancelled``; an engine error ends it ``failed`` after an ``error`` event.
"""

from __future__ import annotations

import asyncio
import base64
from typing import TYPE_CHECKING, Any

from mockserver.errors import APIError
from mockserver.faults.rules import RequestInfo
from mockserver.routes import realtime_faults
from mockserver.routes.realtime_faults import SocketFaults
from mockserver.spine.events import TextDelta, ToolCallDelta, Usage
from mockserver.spine.request import GenerationRequest
from mockserver.voice import speech

if TYPE_CHECKING:
    from mockserver.routes.realtime import Realtime

__all__ = ["Turn"]

AUDIO_CHUNK = 9600  # bytes of output PCM per delta (200 ms)


class Turn:
    def __init__(self, rt: Realtime, config: dict[str, Any], asked: dict[str, Any], faults: SocketFaults) -> None:
        self.rt, self.config, self.faults = rt, config, faults
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
        message: dict[str, Any] | None = None
        calls: dict[int, dict[str, Any]] = {}
        try:
            info = RequestInfo(
                "GET",
                realtime_faults.PATH,
                model=self.config.get("model"),
                stream=True,
                tools=bool(self.config.get("tools")),
                session=rt.session_header,
            )
            given = await realtime_faults.ruled(
                rt.ctx.chaos.rules, rt.ctx.seed, info, rt.session.config["id"], rt.responses
            )
            if given:  # --faults and rules, beside the handshake's
                self.faults = SocketFaults((*self.faults.faults, *given))
                rt.turn_faults = self.faults.faults
            self.send({"type": "response.created", "response": self._response("in_progress")})
            if rt.hearing:  # committed audio still being heard: the conversation reads its words
                await asyncio.gather(*rt.hearing, return_exceptions=True)
            if self.faults.refused:
                self._refuse()
                return
            gen = self.generation()
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
                            **self._where(call),
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
                        **self._where(call),
                        "call_id": call["call_id"],
                        "name": call["name"],
                        "arguments": call["arguments"],
                    }
                )
                self._close_item(call)
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

    def _where(self, item: dict[str, Any]) -> dict[str, Any]:
        return {"response_id": self.id, "item_id": item["id"], "output_index": self.output.index(item)}

    def _add_item(self, item: dict[str, Any]) -> None:
        self.output.append(item)
        self.send(
            {
                "type": "response.output_item.added",
                "response_id": self.id,
                "output_index": len(self.output) - 1,
                "item": item,
            }
        )
        if self.in_conversation:
            previous = self.rt.session.add(item)
            self.send({"type": "conversation.item.added", "previous_item_id": previous, "item": item})

    def _close_item(self, item: dict[str, Any]) -> None:
        self.send(
            {
                "type": "response.output_item.done",
                "response_id": self.id,
                "output_index": self.output.index(item),
                "item": item,
            }
        )
        if self.in_conversation:
            self.send({"type": "conversation.item.done", "item": item})

    def _open_message(self) -> dict[str, Any]:
        part: dict[str, Any] = (
            {"type": "output_audio", "transcript": ""} if self.audio else {"type": "output_text", "text": ""}
        )
        item = {
            "id": self.rt.session.next_id("item"),
            "object": "realtime.item",
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [part],
        }
        self._add_item(item)
        self.send({"type": "response.content_part.added", **self._where(item), "content_index": 0, "part": _part(part)})
        return item

    def _text(self, item: dict[str, Any], text: str) -> None:
        part = item["content"][0]
        key, kind = (
            ("transcript", "response.output_audio_transcript.delta")
            if self.audio
            else ("text", "response.output_text.delta")
        )
        part[key] += text
        self.send({"type": kind, **self._where(item), "content_index": 0, "delta": text})

    async def _close_message(self, item: dict[str, Any], seed: int) -> None:
        part, where = item["content"][0], self._where(item)
        if self.audio:
            out = self.config["audio"]["output"]
            voice, speed = str(out.get("voice") or "alloy"), float(out.get("speed", 1.0))
            pcm = await asyncio.to_thread(speech.pcm, part["transcript"], voice, speed, seed)  # off the loop
            for at in range(0, len(pcm), AUDIO_CHUNK):
                self.send(
                    {
                        "type": "response.output_audio.delta",
                        **where,
                        "content_index": 0,
                        "delta": base64.b64encode(pcm[at : at + AUDIO_CHUNK]).decode(),
                    }
                )
            self.send({"type": "response.output_audio.done", **where, "content_index": 0})
            self.send(
                {
                    "type": "response.output_audio_transcript.done",
                    **where,
                    "content_index": 0,
                    "transcript": part["transcript"],
                }
            )
        else:
            self.send({"type": "response.output_text.done", **where, "content_index": 0, "text": part["text"]})
        self.send({"type": "response.content_part.done", **where, "content_index": 0, "part": _part(part)})
        item["status"] = "completed"
        self._close_item(item)

    def _open_call(self, event: ToolCallDelta) -> dict[str, Any]:
        call_id = event.id or f"call_{self.id[5:]}{event.call_index}"
        item = {
            "id": self.rt.session.next_id("item"),
            "object": "realtime.item",
            "type": "function_call",
            "status": "in_progress",
            "call_id": call_id,
            "name": event.name or "",
            "arguments": "",
        }
        self._add_item(item)
        return item


class _Injected(Exception):
    """``stream.error_at`` reached: the response fails with an ``error`` event."""


class _Dropped(Exception):
    """``stream.cut_after`` / ``reset_after`` reached: the socket closes with ``code``."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _part(content: dict[str, Any]) -> dict[str, Any]:
    """A message's content as the content-part events name it (``text`` / ``audio``, not ``output_*``)."""
    return {**content, "type": "audio" if content["type"] == "output_audio" else "text"}
