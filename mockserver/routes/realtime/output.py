"""A Realtime response's output items as the GA API announces them: an item's
``response.output_item.added`` (and the conversation's ``conversation.item.added``), a message's
content part, its text or transcript deltas, its speech (in the session's output format:
:mod:`mockserver.voice.g711`), the ``*.done`` events, and a function call's item.

:class:`Output` is the half of a response (:class:`~mockserver.routes.realtime.turn.Turn`) that
shapes events; the turn decides when, and sends them under its faults.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from mockserver.routes.realtime.port import Port
from mockserver.spine.events import ToolCallDelta
from mockserver.voice import g711, speech

__all__ = ["Output"]


class Output:
    rt: Port
    id: str  # the response's
    output: list[dict[str, Any]]
    in_conversation: bool
    audio: bool  # the response speaks (else it writes text)
    config: dict[str, Any]  # the session's, with the response's own settings over it

    def send(self, event: dict[str, Any]) -> None:
        raise NotImplementedError  # the turn's: one event under its faults

    def where(self, item: dict[str, Any]) -> dict[str, Any]:
        """Where ``item`` stands, as its events say it: the response, the item and its output index."""
        return {"response_id": self.id, "item_id": item["id"], "output_index": self.output.index(item)}

    def add_item(self, item: dict[str, Any]) -> None:
        """``item`` joins the output (and the conversation, unless the response keeps out of it)."""
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

    def close_item(self, item: dict[str, Any]) -> None:
        """``item`` is finished: its ``*.done`` events."""
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
        self.add_item(item)
        self.send({"type": "response.content_part.added", **self.where(item), "content_index": 0, "part": _part(part)})
        return item

    def _text(self, item: dict[str, Any], text: str) -> None:
        part = item["content"][0]
        key, kind = (
            ("transcript", "response.output_audio_transcript.delta")
            if self.audio
            else ("text", "response.output_text.delta")
        )
        part[key] += text
        self.send({"type": kind, **self.where(item), "content_index": 0, "delta": text})

    async def _close_message(self, item: dict[str, Any], seed: int) -> None:
        part, where = item["content"][0], self.where(item)
        if self.audio:
            out = self.config["audio"]["output"]
            voice, speed = str(out.get("voice") or "alloy"), float(out.get("speed", 1.0))
            kind = str((out.get("format") or {}).get("type") or "audio/pcm")
            audio = await asyncio.to_thread(_spoken, part["transcript"], voice, speed, seed, kind)  # off the loop
            size = g711.chunk_bytes(kind)
            for at in range(0, len(audio), size):
                self.send(
                    {
                        "type": "response.output_audio.delta",
                        **where,
                        "content_index": 0,
                        "delta": base64.b64encode(audio[at : at + size]).decode(),
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
        self.close_item(item)

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
        self.add_item(item)
        return item


def _spoken(text: str, voice: str, speed: float, seed: int, kind: str) -> bytes:
    """``text`` spoken, in the session's output format."""
    return g711.spoken_as(speech.pcm(text, voice, speed, seed), kind)


def _part(content: dict[str, Any]) -> dict[str, Any]:
    """A message's content as the content-part events name it (``text`` / ``audio``, not ``output_*``)."""
    return {**content, "type": "audio" if content["type"] == "output_audio" else "text"}
