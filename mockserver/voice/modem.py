"""The text a spoken clip carries, in its own signal: mockserver's synthetic "voice".

Speech mockserver makes must come back as exactly its text when a test transcribes it, in every
format it was saved in — raw ``pcm`` has no metadata, and lossy codecs (mp3, opus, aac, the
realtime API's G.711) rewrite every sample — so the text travels in the sound itself: each
UTF-8 byte is one *symbol*, two simultaneous tones (the high nibble picks one of 16 tones in
500–2000 Hz, the low nibble one of 16 in 2200–3700 Hz; all below 4 kHz, so telephone rates keep
them). A header of fixed 20 ms symbols (a magic pair, the payload's symbol length, its byte count,
its CRC-32) comes first; the payload's symbols last as long as the requested pace asks, so a clip's
duration follows its text and ``speed``. Decoding finds the header by its magic (searching the
offset a codec's delay and pre-echo moved it by), reads the tones with a few matrix products
(NumPy) and checks the CRC: audio that is not ours fails the check and is treated as a stranger's.

No library gives this: audio codecs carry samples, tags carry metadata only some containers have;
a text that must survive lossy re-encoding and raw PCM needs a modulation, and this is a minimal
multi-tone (MFSK) one.
"""

from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["RATE", "Spoken", "Voice", "heard", "spoken"]

RATE = 24_000  # samples per second: OpenAI's speech and realtime PCM rate
_MAGIC = b"\xa5\x5a"
_HEADER_MS = 20
_LEAD_MS = 60  # silence before the header, and after the last symbol (a codec's flush)
_HIGH = 500.0 + 100.0 * np.arange(16)  # Hz, the high nibble's tones
_LOW = 2200.0 + 100.0 * np.arange(16)  # Hz, the low nibble's
_TONES = np.concatenate([_HIGH, _LOW])
_AMPLITUDE = 0.35
_MIN_MS, _MAX_MS = 20, 255  # a payload symbol's length (one header byte holds it)
MAX_BYTES = 1 << 24  # the header's 3-byte length


@dataclass(frozen=True, slots=True)
class Voice:
    """A voice's timbre: the low hum under the tones (Hz), seeded per request for its phases."""

    hum: float


@dataclass(frozen=True, slots=True)
class Spoken:
    """A decoded clip: its text, and where each byte's symbol starts (seconds from the clip's start)."""

    text: str
    starts: tuple[float, ...]  # one per UTF-8 byte
    symbol: float  # seconds per payload symbol


def _header(payload: bytes, symbol_ms: int) -> bytes:
    return _MAGIC + bytes([symbol_ms]) + len(payload).to_bytes(3, "big") + zlib.crc32(payload).to_bytes(4, "big")


HEADER_BYTES = 10


def symbol_ms(text: str, speed: float) -> int:
    """A payload symbol's length for ``text`` spoken at ``speed``: about 60 ms per character at
    speed 1 (some 16 characters a second), never shorter than the 20 ms a symbol needs."""
    data = text.encode()
    if not data:
        return _MIN_MS
    wanted = 60.0 * len(text) / speed / len(data)
    return int(min(_MAX_MS, max(_MIN_MS, round(wanted))))


_PHASES = 8  # each tone of a symbol starts at one of these phases (k/8 of a turn), drawn by the seed


@functools.lru_cache(maxsize=4)  # up to 6 MB each (255 ms symbols)
def _table(length: int) -> NDArray[np.float32]:
    """Every tone at every phase, ``length`` samples under raised-cosine edges: (32, 8, length)."""
    t = np.arange(length) / RATE
    ramp = min(48, length // 4)
    window = np.ones(length)
    edge = 0.5 - 0.5 * np.cos(np.pi * np.arange(ramp) / ramp)
    window[:ramp], window[length - ramp :] = edge, edge[::-1]
    phase = 2 * np.pi * np.arange(_PHASES) / _PHASES
    tones = np.sin(2 * np.pi * _TONES[:, None, None] * t[None, None, :] + phase[None, :, None])
    table: NDArray[np.float32] = (_AMPLITUDE * tones * window).astype(np.float32)
    table.flags.writeable = False
    return table


def _symbols(data: bytes, length: int, voice: Voice, rng: np.random.Generator) -> NDArray[np.float32]:
    """``data``'s symbols, each ``length`` samples: its two tones (phases drawn from ``rng``) over the hum."""
    table = _table(length)
    codes = np.frombuffer(data, dtype=np.uint8).astype(np.intp)
    phases = rng.integers(0, _PHASES, size=(len(data), 2))
    wave = table[codes >> 4, phases[:, 0]] + table[16 + (codes & 15), phases[:, 1]]
    hum = (0.15 * np.sin(2 * np.pi * voice.hum * np.arange(length) / RATE)).astype(np.float32)
    out: NDArray[np.float32] = (wave + hum).reshape(-1)
    return out


def spoken(text: str, speed: float, voice: Voice, seed: int) -> NDArray[np.float32]:
    """``text`` as mono float samples at :data:`RATE` in [-1, 1]: the same text, speed, voice and
    seed give the same samples."""
    payload = text.encode()
    ms = symbol_ms(text, speed)
    rng = np.random.Generator(np.random.PCG64(seed))
    lead = np.zeros(RATE * _LEAD_MS // 1000, dtype=np.float32)
    head = _symbols(_header(payload, ms), RATE * _HEADER_MS // 1000, voice, rng)
    body = _symbols(payload, RATE * ms // 1000, voice, rng)
    return np.concatenate([lead, head, body, lead])


def duration(text: str, speed: float) -> float:
    """Seconds that :func:`spoken` lasts for ``text`` at ``speed``."""
    size = len(text.encode())
    return (2 * _LEAD_MS + HEADER_BYTES * _HEADER_MS + size * symbol_ms(text, speed)) / 1000


_ROWS = 8  # symbols per product (see _powers)


@functools.lru_cache(maxsize=64)
def _basis(rate: int, window: int) -> NDArray[np.float32]:
    """The 32 tones' cosines then sines over ``window`` samples at ``rate``: (window, 64)."""
    angle = 2 * np.pi * (np.arange(window) / rate)[:, None] * _TONES[None, :]
    basis: NDArray[np.float32] = np.concatenate([np.cos(angle), np.sin(angle)], axis=1).astype(np.float32)
    return basis


def _powers(x: NDArray[np.float32], rate: int, starts: NDArray[np.int64], length: int) -> NDArray[np.float32] | None:
    """The energy at each of the 32 tones in the middle of each symbol at ``starts``: (symbols, 32);
    None when a symbol falls outside the clip."""
    inner = length * 3 // 4
    at = starts + length // 8
    if len(at) == 0:
        return np.zeros((0, 32), dtype=np.float32)
    if at.min() < 0 or at.max() + inner > len(x):
        return None
    frames = x[at[:, None] + np.arange(inner)[None, :]]
    basis = _basis(rate, inner)
    # In blocks of rows small enough that BLAS keeps them on this thread: waking its thread pool
    # for every clip costs more than the products (10-20 ms on a loaded machine, for 1 ms of work).
    projected = np.concatenate([frames[at : at + _ROWS] @ basis for at in range(0, len(frames), _ROWS)])
    power: NDArray[np.float32] = projected[:, :32] ** 2 + projected[:, 32:] ** 2
    return power


def _bytes(power: NDArray[np.float32]) -> tuple[bytes, NDArray[np.float32]]:
    """The bytes the tones say, and how clearly each was heard (the chosen tones' share of the energy)."""
    high, low = power[:, :16].argmax(axis=1), power[:, 16:].argmax(axis=1)
    rows = np.arange(len(power))
    picked = power[rows, high] + power[rows, 16 + low]
    clarity = picked / np.maximum(power.sum(axis=1), 1e-12)
    return bytes((high << 4 | low).astype(np.uint8).tolist()), clarity


def heard(x: NDArray[np.float32], rate: int) -> Spoken | None:
    """The text a clip of mono samples at ``rate`` carries, or None when it carries none (it is
    not mockserver's speech, or too damaged to read back whole)."""
    if rate < 8000 or len(x) == 0:
        return None
    loud = np.flatnonzero(np.abs(x) > 0.05)
    if len(loud) == 0:
        return None
    head_len = rate * _HEADER_MS // 1000
    onset = int(loud[0])
    # A codec's delay and pre-echo move the onset: try offsets around it, keep the clearest magic.
    offsets = np.arange(max(0, onset - head_len), onset + head_len, max(1, rate // 2000), dtype=np.int64)
    offsets = offsets[offsets + 2 * head_len <= len(x)]
    if len(offsets) == 0:
        return None
    starts = (offsets[:, None] + head_len * np.arange(2)[None, :]).reshape(-1)
    power = _powers(x, rate, starts, head_len)
    if power is None:
        return None
    data, clarity = _bytes(power)
    magic = np.frombuffer(data, dtype=np.uint8).reshape(-1, 2)
    fits = (magic[:, 0] == _MAGIC[0]) & (magic[:, 1] == _MAGIC[1])
    if not fits.any():
        return None
    score = np.where(fits, clarity.reshape(-1, 2).sum(axis=1), -1.0)
    best_at = int(offsets[int(score.argmax())])
    power = _powers(x, rate, best_at + head_len * np.arange(HEADER_BYTES, dtype=np.int64), head_len)
    if power is None:
        return None
    header, _ = _bytes(power)
    ms, size, crc = header[2], int.from_bytes(header[3:6], "big"), int.from_bytes(header[6:10], "big")
    if header[:2] != _MAGIC or not _MIN_MS <= ms <= _MAX_MS:
        return None
    length = rate * ms // 1000
    first = best_at + HEADER_BYTES * head_len
    if first + length * size > len(x):  # a header read from a stranger's audio, or a clip cut short
        return None
    starts = first + length * np.arange(size, dtype=np.int64)
    power = _powers(x, rate, starts, length)
    if power is None:
        return None
    payload, _ = _bytes(power)
    if zlib.crc32(payload) != crc:
        return None
    try:
        text = payload.decode()
    except UnicodeDecodeError:
        return None
    return Spoken(text, tuple((starts / rate).tolist()), ms / 1000)
