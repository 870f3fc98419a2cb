"""Speech: a text spoken in a voice, as a file in the asked format.

The sound is the modem's (:mod:`mockserver.voice.modem`): two tones a byte over a voice's hum,
so what mockserver says transcribes back to exactly its text. Each voice has its own hum (a
pitch between 95 and 250 Hz drawn from its name), and the request's seed draws the tones'
phases: the same request and seed give the same bytes.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterator
from dataclasses import dataclass

from mockserver.spine.seeding import digest
from mockserver.voice import formats, modem
from mockserver.voice.formats import Format

__all__ = ["AUDIO_TOKENS_PER_SECOND", "CHUNK", "Speech", "audio_tokens", "chunks", "speak", "voice"]

AUDIO_TOKENS_PER_SECOND = 10  # how audio is counted in usage (OpenAI bills audio as tokens of time)
CHUNK = 8192  # bytes per streamed chunk (of the encoded file)


@dataclass(frozen=True, slots=True)
class Speech:
    audio: bytes
    content_type: str
    seconds: float


def voice(name: str) -> modem.Voice:
    """A voice's timbre, from its name (a custom voice's id included)."""
    draw = int.from_bytes(digest(b"voice", name)[:4], "big")
    return modem.Voice(hum=95.0 + draw % 156)


def speak(text: str, voice_name: str, speed: float, fmt: Format, seed: int) -> Speech:
    """``text`` spoken by ``voice_name`` at ``speed``, encoded as ``fmt``."""
    samples = modem.spoken(text, speed, voice(voice_name), seed)
    audio = formats.encode(samples, modem.RATE, fmt)
    return Speech(audio, formats.CONTENT_TYPES[fmt], len(samples) / modem.RATE)


def audio_tokens(seconds: float) -> int:
    """Audio counted as tokens (see :data:`AUDIO_TOKENS_PER_SECOND`)."""
    return max(1, math.ceil(seconds * AUDIO_TOKENS_PER_SECOND))


def chunks(audio: bytes, size: int = CHUNK) -> Iterator[bytes]:
    """The file in pieces, as it is streamed."""
    for at in range(0, len(audio), size):
        yield audio[at : at + size]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def duration_of(text: str, speed: float) -> float:
    """Seconds ``text`` lasts spoken at ``speed``."""
    return modem.duration(text, speed)


def pcm(text: str, voice_name: str, speed: float, seed: int) -> bytes:
    """``text`` spoken as 24 kHz 16-bit mono PCM (the Realtime API's output audio)."""
    return formats.pcm16(modem.spoken(text, speed, voice(voice_name), seed))
