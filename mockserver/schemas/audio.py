"""Wire models of ``/v1/audio/*``: the speech body (JSON) and the transcription form (multipart).

Limits are OpenAI's (its API reference): ``input`` up to 4096 characters, ``speed`` 0.25–4.0,
the voices it lists; a transcription's ``temperature`` 0–1.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mockserver.schemas.common import WireModel

__all__ = [
    "SPEECH_MODELS",
    "SPEECH_RESPONSES",
    "TRANSCRIBE_MODELS",
    "TRANSCRIPTION_FORM",
    "TRANSCRIPT_RESPONSES",
    "SpeechRequest",
    "TranscriptionForm",
]

SPEECH_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")
TRANSCRIBE_MODELS = ("whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe")
MAX_INPUT = 4096  # characters of speech input

Voice = Literal[
    "alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse", "marin", "cedar"
]


class SpeechRequest(WireModel):
    model: str
    input: str = Field(min_length=1, max_length=MAX_INPUT)
    voice: Voice | dict[str, str]  # a name, or a custom voice ``{"id": …}``
    response_format: Literal["mp3", "opus", "aac", "flac", "wav", "pcm"] = "mp3"
    speed: float = Field(1.0, ge=0.25, le=4.0)
    instructions: str | None = Field(None, max_length=MAX_INPUT)
    stream_format: Literal["audio", "sse"] = "audio"
    seed: int | None = None  # mockserver's: the synthetic voice's draws (derived from the body when absent)


class TranscriptionForm(BaseModel):
    """The form's text fields (a multipart form carries strings: read laxly). ``include`` and
    ``timestamp_granularities`` come from their ``[]`` keys, listed."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    model: str
    language: str | None = Field(None, pattern=r"^[a-z]{2,3}$")
    prompt: str | None = None
    response_format: Literal["json", "text", "srt", "verbose_json", "vtt"] = "json"
    temperature: float = Field(0.0, ge=0.0, le=1.0)
    timestamp_granularities: tuple[Literal["word", "segment"], ...] = ()
    include: tuple[Literal["logprobs"], ...] = ()
    stream: bool = False
    seed: int | None = None


# /openapi.json's description of the answers (the routes' bodies are not pydantic models).
_ERROR: dict[str, Any] = {
    "description": "Error",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}},
}
_BINARY: dict[str, Any] = {"schema": {"type": "string", "format": "binary"}}
SPEECH_RESPONSES: dict[str, Any] = {
    "200": {
        "description": "The audio (its content type names its format), or SSE speech.audio.delta / .done events",
        "content": {
            **{kind: _BINARY for kind in ("audio/mpeg", "audio/ogg", "audio/aac", "audio/flac", "audio/wav")},
            "audio/pcm": _BINARY,
            "text/event-stream": {"schema": {"type": "string"}},
        },
    },
    **{str(status): _ERROR for status in (400, 401, 429, 500)},
}
TRANSCRIPT_RESPONSES: dict[str, Any] = {
    "200": {
        "description": "The transcript: json / verbose_json, text / srt / vtt, or SSE transcript.text.* events",
        "content": {
            "application/json": {"schema": {"type": "object"}},
            "text/plain": {"schema": {"type": "string"}},
            "text/event-stream": {"schema": {"type": "string"}},
        },
    },
    **{str(status): _ERROR for status in (400, 401, 429, 500)},
}
TRANSCRIPTION_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "file": {"type": "string", "format": "binary"},
        "model": {"type": "string", "enum": list(TRANSCRIBE_MODELS)},
        "language": {"type": "string"},
        "prompt": {"type": "string"},
        "response_format": {"type": "string", "enum": ["json", "text", "srt", "verbose_json", "vtt"]},
        "temperature": {"type": "number", "minimum": 0, "maximum": 1},
        "timestamp_granularities[]": {"type": "array", "items": {"type": "string", "enum": ["word", "segment"]}},
        "include[]": {"type": "array", "items": {"type": "string", "enum": ["logprobs"]}},
        "stream": {"type": "boolean"},
    },
    "required": ["file", "model"],
}
