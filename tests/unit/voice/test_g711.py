"""G.711 for the Realtime API's audio/pcmu and audio/pcma: FFmpeg's codecs decode every code to
the ITU-T G.711 tables' value, encode the tables' decision intervals to their codes, and
mockserver's speech keeps its text through 8 kHz companding, appended in any chunks."""

from __future__ import annotations

import numpy as np
import pytest

from mockserver.voice import formats, g711, modem, speech

# ITU-T G.711 (11/88), tables 2a (μ-law) and 2b (A-law): a character as sent on the line and its
# decoder output value (μ-law's on a 0..8031 scale, times 4 to 16-bit PCM; A-law's on 0..4032
# in half-steps, times 8): the ends of the first segments, the segment edges and the extremes.
MU = [
    (0xFF, 0), (0x7F, 0), (0xFE, 4 * 2), (0xF0, 4 * 30), (0xEF, 4 * 33), (0xE0, 4 * 93),
    (0x80, 4 * 8031), (0x00, -4 * 8031), (0x70, -4 * 30),
]  # fmt: skip
A = [
    (0xD5, 8 * 1), (0x55, -8 * 1), (0xD4, 8 * 3), (0xDA, 8 * 31), (0xC5, 8 * 33), (0xAA, 8 * 4032), (0x2A, -8 * 4032),
]  # fmt: skip


def _decoded(code: int, kind: str) -> int:
    return int(np.frombuffer(g711.decode(bytes([code]), kind), dtype="<i2")[0])


@pytest.mark.parametrize(("code", "value"), MU, ids=[f"mu-{c:02x}" for c, _ in MU])
def test_mu_law_codes_decode_to_the_table(code: int, value: int) -> None:
    assert _decoded(code, "audio/pcmu") == value


@pytest.mark.parametrize(("code", "value"), A, ids=[f"a-{c:02x}" for c, _ in A])
def test_a_law_codes_decode_to_the_table(code: int, value: int) -> None:
    assert _decoded(code, "audio/pcma") == value


@pytest.mark.parametrize("kind", ["audio/pcmu", "audio/pcma"])
def test_every_decoded_value_encodes_back_to_its_code(kind: str) -> None:
    codes = bytes(range(256))
    again = g711.encode(g711.decode(codes, kind), kind)
    values = g711.decode(codes, kind)
    assert g711.decode(again, kind) == values  # μ-law's two zeros (0x7F, 0xFF) decode alike
    assert sum(a != b for a, b in zip(again, codes, strict=True)) == (1 if kind == "audio/pcmu" else 0)


@pytest.mark.parametrize("kind", ["audio/pcmu", "audio/pcma"])
@pytest.mark.parametrize("text", ["Book a table for two.", "Grüße, 東京 — 42!"])
def test_speech_keeps_its_text_through_g711_in_any_chunks(kind: str, text: str) -> None:
    pcm = speech.pcm(text, "alloy", 1.0, 7)
    line = g711.spoken_as(pcm, kind)
    assert len(line) == len(pcm) // 2 // 3  # one byte a sample at 8 kHz
    heard = modem.heard(formats.from_pcm16(g711.decode(line, kind)), g711.RATE)
    assert heard is not None and heard.text == text
    whole, chunked = g711.Listener(kind), g711.Listener(kind)
    at_once = whole.feed(line) + whole.flush()
    in_pieces = b"".join(chunked.feed(line[at : at + 333]) for at in range(0, len(line), 333)) + chunked.flush()
    assert in_pieces == at_once and len(at_once) == len(pcm)
    back = modem.heard(formats.from_pcm16(at_once), modem.RATE)
    assert back is not None and back.text == text


def test_pcm_passes_through() -> None:
    assert g711.spoken_as(b"\x01\x02", "audio/pcm") == b"\x01\x02"
    assert g711.Listener().feed(b"\x01\x02\x03") == b"\x01\x02\x03"
    assert g711.chunk_bytes("audio/pcm") == 9600 and g711.chunk_bytes("audio/pcmu") == 1600
