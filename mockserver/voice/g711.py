"""A Realtime session's audio formats: 24 kHz PCM, and G.711 telephone audio (8 kHz μ-law, A-law).

OpenAI's GA Realtime API names three formats for ``audio.input.format`` and
``audio.output.format``: ``audio/pcm`` (24 kHz 16-bit mono, what the VAD, the hearing and the
speech of :mod:`mockserver.voice` read and write), ``audio/pcmu`` (G.711 μ-law) and
``audio/pcma`` (G.711 A-law), both at 8 kHz. The codecs are FFmpeg's (``pcm_mulaw``,
``pcm_alaw``, through PyAV, whose wheels bundle it: already the voice's Opus and AAC encoder) and
so is the rate conversion (its ``swresample``); nothing here is hand-written DSP. FFmpeg decodes
every code to the ITU-T G.711 tables' value (the tests hold it to them); Python's ``audioop``
would do as well but is deprecated and gone in 3.13.

Speech keeps its text through a telephone line: the modem's tones (:mod:`mockserver.voice.modem`)
lie between 500 and 3700 Hz, under the 4 kHz that 8 kHz sampling keeps, and their energy survives
companding, so mockserver's speech sent as G.711 transcribes back to exactly its text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:
    from av.audio.resampler import AudioResampler

__all__ = ["FORMATS", "RATE", "Listener", "chunk_bytes", "decode", "encode", "spoken_as"]

Kind = Literal["audio/pcm", "audio/pcmu", "audio/pcma"]
FORMATS: tuple[Kind, ...] = ("audio/pcm", "audio/pcmu", "audio/pcma")
_CODECS = {"audio/pcmu": "pcm_mulaw", "audio/pcma": "pcm_alaw"}
RATE = 8000  # G.711's samples per second
PCM_RATE = 24_000  # audio/pcm's


def encode(pcm8k: bytes, kind: str) -> bytes:
    """8 kHz 16-bit little-endian PCM as G.711 codes of ``kind`` (one byte a sample)."""
    import av  # FFmpeg is loaded when a G.711 session first needs it

    codec = av.CodecContext.create(_CODECS[kind], "w")
    codec.sample_rate, codec.layout, codec.format = RATE, "mono", "s16"  # type: ignore[attr-defined]
    frame = av.AudioFrame.from_ndarray(np.frombuffer(pcm8k, dtype="<i2").reshape(1, -1), format="s16", layout="mono")
    frame.sample_rate = RATE
    return b"".join(bytes(p) for p in (*codec.encode(frame), *codec.encode(None)))  # type: ignore[attr-defined]


def decode(codes: bytes, kind: str) -> bytes:
    """G.711 codes of ``kind`` as 8 kHz 16-bit little-endian PCM."""
    import av

    codec = av.CodecContext.create(_CODECS[kind], "r")
    codec.sample_rate, codec.layout = RATE, "mono"  # type: ignore[attr-defined]
    frames = codec.decode(av.Packet(codes))  # type: ignore[attr-defined]
    return b"".join(f.to_ndarray().astype("<i2").tobytes() for f in frames)


def _resampled(resampler: AudioResampler, pcm: bytes, rate: int) -> bytes:
    """``pcm`` (16-bit at ``rate``) through ``resampler``; no ``pcm``: what its filter still holds."""
    import av

    if pcm:
        frame = av.AudioFrame.from_ndarray(np.frombuffer(pcm, dtype="<i2").reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = rate
        out = resampler.resample(frame)
    else:
        out = resampler.resample(None)
    return b"".join(f.to_ndarray().astype("<i2").tobytes() for f in out)


def spoken_as(pcm24k: bytes, kind: str) -> bytes:
    """A whole clip of 24 kHz PCM (a response's speech) in the session's output format."""
    if kind not in _CODECS:
        return pcm24k
    import av

    down = av.AudioResampler(format="s16", layout="mono", rate=RATE)
    pcm8k = _resampled(down, pcm24k, PCM_RATE) + _resampled(down, b"", PCM_RATE)
    return encode(pcm8k, kind)


def chunk_bytes(kind: str) -> int:
    """Bytes of 200 ms of output audio in ``kind`` (one ``response.output_audio.delta``)."""
    return 9600 if kind not in _CODECS else RATE // 5


class Listener:
    """Input audio as it is appended, in the session's format, turned into 24 kHz PCM for the
    VAD and the hearing: G.711 is decoded and raised to 24 kHz by one resampler that lives as long
    as the buffer, so chunks appended one by one give the samples the whole clip would."""

    def __init__(self, kind: str = "audio/pcm") -> None:
        self.kind = kind
        self._up: AudioResampler | None = None

    def feed(self, data: bytes) -> bytes:
        """The 24 kHz PCM ``data`` (bytes of the session's format) adds (the resampler keeps a few
        samples back until more come, or :meth:`flush`)."""
        if self.kind not in _CODECS:
            return data
        if self._up is None:
            import av

            self._up = av.AudioResampler(format="s16", layout="mono", rate=PCM_RATE)
        return _resampled(self._up, decode(data, self.kind), RATE)

    def flush(self) -> bytes:
        """What the resampler still holds (a commit: the buffer ends here); the next append starts afresh."""
        up, self._up = self._up, None
        return _resampled(up, b"", RATE) if up is not None else b""
