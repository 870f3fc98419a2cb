"""A Realtime session's config: what ``session.update`` may say (the GA API's three audio formats,
its two session types), and how an update lands (partial; a format replaced whole; a new type
starting from that type's defaults)."""

from __future__ import annotations

from typing import Any

import pytest

from mockserver.voice.session import default_config, update_problem, updated

FINE: list[dict[str, Any]] = [
    {"audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000}}}},
    {"audio": {"input": {"format": {"type": "audio/pcmu"}}, "output": {"format": {"type": "audio/pcma"}}}},
    {"type": "transcription"},
    {"output_modalities": ["text"]},
]
BAD: list[tuple[dict[str, Any], str]] = [
    ({"audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}}}}, "session.audio.input.format"),
    ({"audio": {"output": {"format": {"type": "audio/pcmu", "rate": 8000}}}}, "session.audio.output.format"),
    ({"audio": {"output": {"format": {"type": "audio/g729"}}}}, "session.audio.output.format"),
    ({"audio": {"input": {"format": "audio/pcmu"}}}, "session.audio.input.format"),
    ({"type": "translation"}, "session.type"),
    ({"output_modalities": ["video"]}, "session.output_modalities"),
    ({"audio": {"output": {"speed": 3}}}, "session.audio.output.speed"),
]


@pytest.mark.parametrize("update", FINE, ids=range(len(FINE)))
def test_what_the_api_allows_passes(update: dict[str, Any]) -> None:
    assert update_problem(update) is None


@pytest.mark.parametrize(("update", "param"), BAD, ids=[p for _, p in BAD])
def test_what_it_does_not_is_named(update: dict[str, Any], param: str) -> None:
    problem = update_problem(update)
    assert problem is not None and problem[1] == param


def test_an_update_is_partial_and_a_format_is_replaced_whole() -> None:
    config = default_config("gpt-realtime", "sess_1")
    after = updated(config, {"audio": {"output": {"format": {"type": "audio/pcmu"}}}, "instructions": "Be brief."})
    assert after["audio"]["output"] == {"format": {"type": "audio/pcmu"}, "voice": "alloy", "speed": 1.0}
    assert after["instructions"] == "Be brief." and after["audio"]["input"] == config["audio"]["input"]
    assert config["audio"]["output"]["format"] == {"type": "audio/pcm", "rate": 24000}  # not changed in place


def test_a_new_type_starts_from_its_defaults_keeping_the_id() -> None:
    config = updated(default_config("gpt-realtime", "sess_1"), {"instructions": "x"})
    listening = updated(config, {"type": "transcription", "include": ["item.input_audio_transcription.logprobs"]})
    assert listening["object"] == "realtime.transcription_session" and listening["id"] == "sess_1"
    assert "instructions" not in listening and "output" not in listening["audio"]
    assert listening["audio"]["input"]["transcription"]["model"] == "gpt-4o-transcribe"
    back = updated(listening, {"type": "realtime"}, "gpt-realtime-mini")
    assert back["object"] == "realtime.session" and back["output_modalities"] == ["audio"]
    assert back["model"] == "gpt-realtime-mini"  # the handshake's, kept by the socket
