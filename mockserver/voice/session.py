"""A Realtime session's state: its configuration, its conversation and its input audio buffer.

Plain data and pure steps, no socket: :mod:`mockserver.routes.realtime` reads client events,
calls these and sends what they return. ``session.update`` is partial (a deep merge of what it
names); the conversation is an ordered list of items (messages, function calls and their
outputs), which becomes the chat conversation a generation reads — so the engine, scripted rules
and tool policy answer a Realtime turn as they answer a chat completion.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Literal

from mockserver.spine import seeding
from mockserver.spine.request import ChatMessage, ForcedCall, GenerationRequest, Prompt, Sampling, Tool

__all__ = ["Session", "default_config", "merged", "update_problem", "updated"]

Item = dict[str, Any]
DEFAULT_MAX = 256  # output tokens of a response when the session says "inf"
_MODES: dict[str, Literal["none", "auto", "required"]] = {"none": "none", "auto": "auto", "required": "required"}


def default_config(model: str, session_id: str, kind: str = "realtime") -> dict[str, Any]:
    """The session OpenAI's GA Realtime API starts with (output audio, server VAD); ``kind``
    ``"transcription"``: a transcription session's (input audio only, transcribed)."""
    if kind == "transcription":
        return {
            "type": "transcription",
            "object": "realtime.transcription_session",
            "id": session_id,
            "expires_at": 0,
            "include": None,
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": 24000},
                    "transcription": {"model": "gpt-4o-transcribe", "language": None, "prompt": None},
                    "noise_reduction": None,
                    "turn_detection": {
                        "type": "server_vad",
                        "threshold": 0.5,
                        "prefix_padding_ms": 300,
                        "silence_duration_ms": 500,
                    },
                },
            },
        }
    return {
        "type": "realtime",
        "object": "realtime.session",
        "id": session_id,
        "model": model,
        "output_modalities": ["audio"],
        "instructions": "You are a helpful assistant.",
        "tools": [],
        "tool_choice": "auto",
        "max_output_tokens": "inf",
        "tracing": None,
        "truncation": "auto",
        "prompt": None,
        "expires_at": 0,
        "include": None,
        "audio": {
            "input": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "transcription": None,
                "noise_reduction": None,
                "turn_detection": {
                    "type": "server_vad",
                    "threshold": 0.5,
                    "prefix_padding_ms": 300,
                    "silence_duration_ms": 500,
                    "create_response": True,
                    "interrupt_response": True,
                    "idle_timeout_ms": None,
                },
            },
            "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "alloy", "speed": 1.0},
        },
    }


def merged(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``update`` laid over it: objects merge key by key, anything else replaces."""
    out = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def updated(config: dict[str, Any], update: dict[str, Any], model: str = "gpt-realtime") -> dict[str, Any]:
    """``config`` after a ``session.update`` (checked by :func:`update_problem`): partial, except
    that an audio format is replaced whole (a G.711 format has no ``rate``) and a change of
    ``type`` starts from that kind's defaults (the id kept; ``model``: the handshake's, which a
    transcription session's config does not name)."""
    base = config
    if update.get("type", config["type"]) != config["type"]:
        base = default_config(model, config["id"], update["type"])
    out = merged(base, {k: v for k, v in update.items() if k not in ("id", "object")})
    audio = update.get("audio") or {}
    for side in ("input", "output"):
        fmt = (audio.get(side) or {}).get("format")
        if fmt is not None and side in out["audio"]:
            out["audio"][side]["format"] = copy.deepcopy(fmt)
    return out


@dataclass
class Session:
    config: dict[str, Any]
    items: list[Item] = field(default_factory=list)
    audio: bytearray = field(default_factory=bytearray)  # the input buffer: pcm16 at 24 kHz
    counter: int = 0

    def next_id(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}_{self.config['id'][5:17]}{self.counter:06d}"

    def find(self, item_id: str) -> int | None:
        return next((i for i, item in enumerate(self.items) if item.get("id") == item_id), None)

    def add(self, item: Item, previous: str | None = None) -> str | None:
        """Add ``item`` after ``previous`` (its id; None: at the end); the id it follows."""
        at = len(self.items) if previous is None else (self.find(previous) or 0) + 1
        self.items.insert(at, item)
        return self.items[at - 1]["id"] if at > 0 else None

    def tools(self, config: dict[str, Any]) -> tuple[Tool, ...]:
        return tuple(
            Tool(t["name"], t.get("description") or "", t.get("parameters") or {"type": "object", "properties": {}})
            for t in config.get("tools") or ()
            if isinstance(t, dict) and t.get("type", "function") == "function" and t.get("name")
        )

    def generation(
        self,
        config: dict[str, Any],
        items: list[Item] | None,
        *,
        global_seed: int,
        context_window: int,
        session: str | None,
    ) -> GenerationRequest:
        """What a response asks of the engine: the conversation (or the response's own ``input``
        items) under ``config``'s instructions, tools and limit, seeded by what it asks."""
        messages = self.messages(config.get("instructions"), items)
        limit = config.get("max_output_tokens", "inf")
        canonical = seeding.digest(b"realtime", repr(messages), repr(config.get("tools")), str(limit))
        choice = config.get("tool_choice", "auto")
        mode, name = (choice, None) if isinstance(choice, str) else ("required", choice.get("name"))
        return GenerationRequest(
            endpoint="chat",
            model=self.config["model"],
            prompts=(Prompt(messages=messages),),
            n=1,
            sampling=Sampling(max_tokens=DEFAULT_MAX if limit == "inf" else int(limit)),
            seed=seeding.derive_seed(canonical, global_seed),
            context_window=context_window,
            canonical=canonical,
            stream=True,
            surface="chat",
            session=session,
            tools=self.tools(config),
            tool_choice=_MODES.get(mode, "auto"),
            tool_name=name,
        )

    def messages(self, instructions: str | None, items: list[Item] | None = None) -> tuple[ChatMessage, ...]:
        """The conversation as chat messages (a function call is an assistant's call, its output a tool result)."""
        out: list[ChatMessage] = [ChatMessage("system", instructions)] if instructions else []
        for item in self.items if items is None else items:
            kind = item.get("type")
            if kind == "message":
                out.append(ChatMessage(_role(item), text_of(item)))
            elif kind == "function_call":
                call = ForcedCall(item.get("name", ""), item.get("arguments", ""), item.get("call_id"))
                if out and out[-1].role == "assistant" and not out[-1].content:
                    last = out.pop()
                    out.append(ChatMessage("assistant", "", calls=(*last.calls, call)))
                else:
                    out.append(ChatMessage("assistant", "", calls=(call,)))
            elif kind == "function_call_output":
                out.append(ChatMessage("tool", str(item.get("output", "")), call_id=item.get("call_id")))
        return tuple(out)


def _role(item: Item) -> str:
    role = item.get("role", "user")
    return role if role in ("user", "assistant", "system") else "user"


def text_of(item: Item) -> str:
    """A message's text: its text parts and its audio's transcripts, in order."""
    parts = []
    for part in item.get("content") or ():
        if not isinstance(part, dict):
            continue
        value = part.get("text") if part.get("text") is not None else part.get("transcript")
        if isinstance(value, str):
            parts.append(value)
    return " ".join(parts)


def update_problem(update: dict[str, Any]) -> tuple[str, str] | None:
    """What is wrong with a ``session.update``'s session, and the parameter it names; None: nothing
    this server checks (the audio formats are the GA API's three: 24 kHz PCM, G.711 μ-law and A-law)."""
    kind = update.get("type")
    if kind is not None and kind not in ("realtime", "transcription"):
        return "type must be 'realtime' or 'transcription'.", "session.type"
    modalities = update.get("output_modalities")
    if modalities is not None and (not isinstance(modalities, list) or not set(modalities) <= {"text", "audio"}):
        return "output_modalities must be ['text'] or ['audio'].", "session.output_modalities"
    audio = update.get("audio")
    if audio is None:
        return None
    if not isinstance(audio, dict):
        return "audio must be an object.", "session.audio"
    for side in ("input", "output"):
        given = audio.get(side) or {}
        fmt = given.get("format") if isinstance(given, dict) else None
        if fmt is not None and not _format_ok(fmt):
            return (
                "format must be audio/pcm (rate 24000), audio/pcmu or audio/pcma.",
                f"session.audio.{side}.format",
            )
    output = audio.get("output") or {}
    speed = output.get("speed") if isinstance(output, dict) else None
    if speed is not None and (not isinstance(speed, int | float) or not 0.25 <= speed <= 1.5):
        return "speed must be between 0.25 and 1.5.", "session.audio.output.speed"
    return None


def _format_ok(fmt: Any) -> bool:
    """One of the GA API's audio formats: 24 kHz PCM, or G.711 (8 kHz, no rate given)."""
    if not isinstance(fmt, dict):
        return False
    if fmt.get("type") == "audio/pcm":
        return bool(fmt.get("rate", 24000) == 24000)
    return bool(fmt.get("type") in ("audio/pcmu", "audio/pcma") and set(fmt) <= {"type"})
