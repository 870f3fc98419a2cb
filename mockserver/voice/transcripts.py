"""A transcript's shapes: words and segments timed within the audio, SRT and WebVTT.

Speech mockserver made says where each byte was spoken (:class:`~mockserver.voice.modem.Spoken`),
so its words are timed exactly; any other text is laid evenly over the audio's duration, by
character. Segments are sentences (a ``.``, ``!`` or ``?`` and a space end one).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from mockserver.gpt.tokenizer import Tokenizer
from mockserver.voice.modem import Spoken

__all__ = ["Segment", "Word", "segments", "srt", "vtt", "words"]

_WORD = re.compile(r"\S+")
_SENTENCE = re.compile(r"[^.!?]+(?:[.!?]+|$)\s*")


@dataclass(frozen=True, slots=True)
class Word:
    word: str
    start: float
    end: float
    first: int  # character offsets into the text
    last: int


@dataclass(frozen=True, slots=True)
class Segment:
    id: int
    text: str
    start: float
    end: float
    tokens: tuple[int, ...]


def _timer(text: str, duration: float, spoken: Spoken | None) -> tuple[list[float], float]:
    """Each character's start (seconds) and a character's length."""
    if spoken is not None and spoken.text == text:
        starts: list[float] = []
        at = 0
        for ch in text:
            starts.append(spoken.starts[at])
            at += len(ch.encode())
        return starts, spoken.symbol * max(1, len(text.encode()) // max(1, len(text)))
    step = duration / max(1, len(text))
    return [i * step for i in range(len(text))], step


def words(text: str, duration: float, spoken: Spoken | None) -> list[Word]:
    """The text's words, in order, each within ``[0, duration]``."""
    starts, step = _timer(text, duration, spoken)
    found = []
    for m in _WORD.finditer(text):
        start = starts[m.start()]
        end = min(duration, starts[m.end() - 1] + step)
        found.append(Word(m.group(), round(start, 3), round(max(start, end), 3), m.start(), m.end()))
    return found


def segments(text: str, duration: float, spoken: Spoken | None) -> list[Segment]:
    """The text's sentences, in order, each within ``[0, duration]``."""
    if not text.strip():
        return []
    starts, step = _timer(text, duration, spoken)
    tokenizer = Tokenizer.shipped()
    found: list[Segment] = []
    for m in _SENTENCE.finditer(text):
        piece = m.group()
        if not piece.strip():
            continue
        first, last = m.start() + (len(piece) - len(piece.lstrip())), m.end() - (len(piece) - len(piece.rstrip()))
        start = starts[first]
        end = min(duration, starts[last - 1] + step)
        found.append(
            Segment(
                len(found), piece.rstrip(), round(start, 3), round(max(start, end), 3), tuple(tokenizer.encode(piece))
            )
        )
    return found


def compression_ratio(text: str) -> float:
    """Whisper's measure of repetition: the text's bytes over its zlib-compressed bytes."""
    data = text.encode()
    return round(len(data) / max(1, len(zlib.compress(data))), 4)


def _clock(seconds: float, comma: bool) -> str:
    ms = round(seconds * 1000)
    h, ms = divmod(ms, 3_600_000)
    m, ms = divmod(ms, 60_000)
    s, ms = divmod(ms, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{',' if comma else '.'}{ms:03d}"


def srt(found: Sequence[Segment]) -> str:
    return "".join(
        f"{s.id + 1}\n{_clock(s.start, True)} --> {_clock(s.end, True)}\n{s.text.strip()}\n\n" for s in found
    )


def vtt(found: Sequence[Segment]) -> str:
    return "WEBVTT\n\n" + "".join(
        f"{_clock(s.start, False)} --> {_clock(s.end, False)}\n{s.text.strip()}\n\n" for s in found
    )
