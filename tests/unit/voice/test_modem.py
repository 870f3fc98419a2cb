"""The modem: text in the signal, back out of every codec; strangers' audio carries none."""

from __future__ import annotations

import numpy as np
import pytest

from mockserver.voice import formats, modem
from mockserver.voice.session import Session, default_config, merged
from mockserver.voice.transcripts import segments, srt, vtt, words
from mockserver.voice.vad import Detector

VOICE = modem.Voice(hum=140.0)


@pytest.mark.parametrize(
    "text", ["Hello.", "déjà vu — 東京, 2 × 3 = 6 🙂", "x" * 300], ids=["ascii", "unicode", "long"]
)
def test_what_is_spoken_is_heard_exactly(text: str) -> None:
    heard = modem.heard(modem.spoken(text, 1.0, VOICE, 5), modem.RATE)
    assert heard is not None and heard.text == text
    assert len(heard.starts) == len(text.encode()) and list(heard.starts) == sorted(heard.starts)


def test_same_seed_same_samples_other_seed_other_samples() -> None:
    a, b, c = (modem.spoken("Seeded.", 1.0, VOICE, s) for s in (1, 1, 2))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_duration_follows_text_and_speed() -> None:
    text = "A sentence of some length."
    assert len(modem.spoken(text, 1.0, VOICE, 0)) / modem.RATE == modem.duration(text, 1.0)
    assert modem.duration(text, 2.0) < modem.duration(text, 1.0) < modem.duration(text, 0.5)
    assert modem.duration(text * 2, 1.0) > 1.9 * modem.duration(text, 1.0) - 0.5


def test_resampled_and_offset_audio_is_still_heard() -> None:
    x = modem.spoken("Moved and resampled.", 1.2, VOICE, 3)
    y = np.interp(np.arange(0, len(x), 1.5), np.arange(len(x)), x).astype(np.float32)  # 24 kHz → 16 kHz
    y = np.concatenate([np.zeros(777, np.float32), y])
    heard = modem.heard(y, 16_000)
    assert heard is not None and heard.text == "Moved and resampled."


def test_other_audio_and_damaged_speech_carry_nothing() -> None:
    rng = np.random.default_rng(0)
    assert modem.heard((rng.normal(size=48_000) * 0.3).astype(np.float32), 24_000) is None
    assert modem.heard(np.zeros(24_000, np.float32), 24_000) is None
    x = modem.spoken("Cut short.", 1.0, VOICE, 0)
    assert modem.heard(x[: len(x) // 2], modem.RATE) is None  # the CRC and length refuse it


def test_decoders_refuse_what_is_not_audio() -> None:
    with pytest.raises(formats.NotAudio):
        formats.decode(b"")
    with pytest.raises(formats.NotAudio):
        formats.decode(b"\x00\x01 plainly not audio" * 10)


def test_transcript_shapes_are_timed_within_the_audio() -> None:
    text = "One two. Three!"
    heard = modem.heard(modem.spoken(text, 1.0, VOICE, 0), modem.RATE)
    seconds = modem.duration(text, 1.0)
    found = words(text, seconds, heard)
    assert [w.word for w in found] == ["One", "two.", "Three!"]
    assert all(0 <= w.start < w.end <= seconds for w in found)
    parts = segments(text, seconds, heard)
    assert [p.text for p in parts] == ["One two.", "Three!"]
    assert srt(parts).startswith("1\n00:00:00,") and "\n\n2\n" in srt(parts)
    assert vtt(parts).startswith("WEBVTT\n\n00:00:00.")


def test_session_update_is_a_deep_partial_merge() -> None:
    base = default_config("gpt-realtime", "sess_x")
    after = merged(base, {"audio": {"output": {"voice": "cedar"}}, "output_modalities": ["text"]})
    assert after["audio"]["output"] == {**base["audio"]["output"], "voice": "cedar"}
    assert after["audio"]["input"] == base["audio"]["input"] and after["output_modalities"] == ["text"]
    assert base["audio"]["output"]["voice"] == "alloy"  # the base is not changed


def test_items_become_the_chat_conversation() -> None:
    session = Session(default_config("gpt-realtime", "sess_abcdefghijklmnop"))
    session.add({"id": "a", "type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]})
    session.add({"id": "b", "type": "function_call", "name": "f", "arguments": "{}", "call_id": "c1"})
    session.add({"id": "c", "type": "function_call_output", "call_id": "c1", "output": "42"})
    roles = [(m.role, m.content, m.call_id) for m in session.messages("Be brief.")]
    assert roles == [("system", "Be brief.", None), ("user", "Hi", None), ("assistant", "", None), ("tool", "42", "c1")]


def test_vad_finds_a_turn_and_its_end() -> None:
    speech = formats.pcm16(modem.spoken("Turn.", 1.0, VOICE, 0))
    silence = bytes(2 * 24_000)
    detector = Detector(silence_ms=500)
    changes = detector.feed(speech[:10_000]) + detector.feed(speech[10_000:]) + detector.feed(silence)
    assert [c for c, _ in changes] == ["started", "stopped"]
    assert changes[0][1] < changes[1][1]
