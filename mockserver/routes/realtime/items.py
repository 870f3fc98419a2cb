"""The conversation's items on a Realtime socket: ``conversation.item.retrieve``, ``delete`` and
``truncate`` (an assistant's audio cut where the client stopped playing it: its transcript is cut
in proportion, as the audio it stands for)."""

from __future__ import annotations

from typing import Any

from mockserver.routes.realtime.port import Port
from mockserver.voice import speech

__all__ = ["delete", "retrieve", "truncate"]


def retrieve(rt: Port, event: dict[str, Any]) -> None:
    at = _item_at(rt, event)
    if at is not None:
        rt.send({"type": "conversation.item.retrieved", "item": rt.session.items[at]})


def delete(rt: Port, event: dict[str, Any]) -> None:
    at = _item_at(rt, event)
    if at is not None:
        item = rt.session.items.pop(at)
        rt.send({"type": "conversation.item.deleted", "item_id": item["id"]})


def truncate(rt: Port, event: dict[str, Any]) -> None:
    at = _item_at(rt, event)
    if at is None:
        return
    item, index, end_ms = rt.session.items[at], int(event["content_index"]), int(event["audio_end_ms"])
    content = item.get("content") or []
    if item.get("role") != "assistant" or not 0 <= index < len(content) or end_ms < 0:
        rt.error("Only an assistant message's audio content can be truncated.", event.get("event_id"), "content_index")
        return
    part = content[index]
    text = part.get("transcript") or ""
    said = speech.duration_of(text, float(rt.session.config["audio"]["output"].get("speed", 1.0)))
    if end_ms > said * 1000:
        rt.error(
            f"audio_end_ms {end_ms} is past the audio's end ({int(said * 1000)} ms).",
            event.get("event_id"),
            "audio_end_ms",
        )
        return
    part["transcript"] = text[: int(len(text) * end_ms / max(1.0, said * 1000))]
    rt.send(
        {
            "type": "conversation.item.truncated",
            "item_id": item["id"],
            "content_index": index,
            "audio_end_ms": end_ms,
        }
    )


def _item_at(rt: Port, event: dict[str, Any]) -> int | None:
    item_id = event["item_id"]
    at = rt.session.find(item_id)
    if at is None:
        rt.error(f"Item with item_id '{item_id}' not found.", event.get("event_id"), "item_id", "item_not_found")
    return at
