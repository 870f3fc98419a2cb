"""Audio files in and out: samples encoded as each ``response_format`` asks, and files decoded back.

Every codec is a well-kept library's: libsndfile (through ``soundfile``) writes WAV and FLAC and
reads those, Ogg (Vorbis, Opus) and MP3; LAME (through ``lameenc``) writes MP3; FFmpeg (through
PyAV, whose wheels bundle it) writes Ogg Opus (libopus) and ADTS AAC (its native encoder) and
reads what libsndfile cannot (MP4/M4A, WebM, AAC). Raw ``pcm`` is OpenAI's: 24 kHz, 16-bit little-endian, mono.
"""

from __future__ import annotations

import io
from typing import Literal

import numpy as np
from numpy.typing import NDArray

__all__ = ["CONTENT_TYPES", "Format", "NotAudio", "decode", "encode"]

Format = Literal["mp3", "opus", "aac", "flac", "wav", "pcm"]

CONTENT_TYPES: dict[str, str] = {
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}


class NotAudio(ValueError):
    """Bytes no decoder reads as audio."""


def pcm16(samples: NDArray[np.float32]) -> bytes:
    """Float samples in [-1, 1] as 16-bit little-endian PCM."""
    return (np.clip(samples, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()


def from_pcm16(data: bytes) -> NDArray[np.float32]:
    """16-bit little-endian PCM as float samples (a trailing odd byte is dropped)."""
    usable = len(data) - len(data) % 2
    return np.frombuffer(data[:usable], dtype="<i2").astype(np.float32) / 32768.0


def encode(samples: NDArray[np.float32], rate: int, fmt: Format) -> bytes:
    """Mono ``samples`` at ``rate`` as a whole file (or raw stream) in ``fmt``."""
    if fmt == "pcm":
        return pcm16(samples)
    if fmt == "mp3":
        import lameenc  # each codec library is loaded when its format is first asked for

        encoder = lameenc.Encoder()
        encoder.set_bit_rate(64)
        encoder.set_in_sample_rate(rate)
        encoder.set_channels(1)
        encoder.set_quality(7)  # fast: the tones survive any quality
        return bytes(encoder.encode(pcm16(samples))) + bytes(encoder.flush())
    if fmt == "aac":  # ADTS; the fast coder is 4x quicker and keeps the tones
        return _ffmpeg(samples, rate, "adts", "aac", {"aac_coder": "fast"})
    if fmt == "opus":  # Ogg Opus by libopus at its quickest (libsndfile's takes 6x as long)
        return _ffmpeg(samples, rate, "ogg", "libopus", {"compression_level": "0"})
    import soundfile

    out = io.BytesIO()
    container, subtype = {"wav": ("WAV", "PCM_16"), "flac": ("FLAC", "PCM_16")}[fmt]
    soundfile.write(out, samples, rate, format=container, subtype=subtype)
    return out.getvalue()


def _ffmpeg(samples: NDArray[np.float32], rate: int, container: str, codec: str, options: dict[str, str]) -> bytes:
    import av  # FFmpeg is loaded only when a format needs it

    out = io.BytesIO()
    with av.open(out, mode="w", format=container) as muxer:
        stream = muxer.add_stream(codec, rate=rate, layout="mono", options=options)
        assert isinstance(stream, av.audio.stream.AudioStream)
        stream.bit_rate = 64_000
        plane = "flt" if codec == "libopus" else "fltp"  # each encoder's own sample format (mono: the same bytes)
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format=plane, layout="mono")
        frame.sample_rate = rate
        for packet in stream.encode(frame):
            muxer.mux(packet)
        for packet in stream.encode(None):
            muxer.mux(packet)
    return out.getvalue()


def decode(data: bytes) -> tuple[NDArray[np.float32], int]:
    """A file's samples (channels averaged to mono) and its sample rate; :class:`NotAudio` if
    neither libsndfile nor FFmpeg reads it."""
    if not data:
        raise NotAudio("empty")
    import soundfile

    try:
        samples, rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except (soundfile.LibsndfileError, RuntimeError, TypeError, ValueError):
        return _decoded_by_ffmpeg(data)
    return samples.mean(axis=1).astype(np.float32), int(rate)


def _decoded_by_ffmpeg(data: bytes) -> tuple[NDArray[np.float32], int]:
    import av

    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            if not container.streams.audio:
                raise NotAudio("no audio stream")
            stream = container.streams.audio[0]
            resampler = av.AudioResampler(format="flt", layout="mono")
            parts: list[NDArray[np.float32]] = []
            rate = 0
            for frame in container.decode(stream):
                for out in resampler.resample(frame):
                    rate = out.sample_rate
                    parts.append(out.to_ndarray().reshape(-1).astype(np.float32))
            for out in resampler.resample(None):
                parts.append(out.to_ndarray().reshape(-1).astype(np.float32))
    except av.FFmpegError as exc:
        raise NotAudio(str(exc)) from None
    if not parts or rate <= 0:
        raise NotAudio("no audio frames")
    return np.concatenate(parts), rate
