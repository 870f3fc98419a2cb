"""/v1/audio/*: speech in every format that decoders open and that transcribes back to its text,
transcripts shaped as each response_format asks, bad input named (over the session's live server)."""

from __future__ import annotations

import base64
import io
import itertools
import json
from collections.abc import Iterator

import httpx
import numpy as np
import openai
import pytest
import soundfile

from mockserver.answers.scripted import Script
from mockserver.context import ServerContext
from mockserver.voice import formats
from tests.support.live import Live

TEXT = "The quick brown fox jumps over the lazy dog. Then it sleeps!"
FILE_NAMES = {"mp3": "s.mp3", "opus": "s.ogg", "aac": "s.m4a", "flac": "s.flac", "wav": "s.wav"}


@pytest.fixture(scope="module")
def http(live: Live) -> Iterator[httpx.Client]:
    """One client for the module's raw requests (a client per call pays its TLS set-up each time)."""
    with httpx.Client(base_url=live.base_url) as c:
        yield c


@pytest.fixture
def script(live: Live) -> Iterator[Script]:
    assert live.app is not None
    ctx: ServerContext = live.app.state.ctx
    yield ctx.script
    ctx.script.clear()


def _as_wav(pcm: bytes) -> bytes:
    out = io.BytesIO()
    soundfile.write(out, np.frombuffer(pcm, "<i2"), 24_000, format="WAV", subtype="PCM_16")
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac", "flac", "wav", "pcm"])
def test_speech_in_every_format_decodes_and_transcribes_to_its_text(client: openai.OpenAI, fmt: str) -> None:
    audio = client.audio.speech.create(
        model="gpt-4o-mini-tts",
        voice="coral",
        input=TEXT,
        response_format=fmt,  # type: ignore[arg-type]
    )
    data = audio.content
    assert audio.response.headers["content-type"] == formats.CONTENT_TYPES[fmt]
    file = ("s.wav", _as_wav(data)) if fmt == "pcm" else (FILE_NAMES[fmt], data)
    samples, rate = formats.decode(file[1])  # a real decoder opens it
    if fmt == "pcm":
        assert len(data) % 2 == 0 and rate == 24_000
    seconds = len(samples) / rate
    got = client.audio.transcriptions.create(
        model="whisper-1", file=file, response_format="verbose_json", timestamp_granularities=["word", "segment"]
    )
    assert got.text == TEXT
    assert got.duration == round(seconds, 3)
    words = got.words or []
    assert [w.word for w in words] == TEXT.split()
    assert all(0 <= w.start <= w.end <= got.duration for w in words)
    assert all(a.end <= b.start for a, b in itertools.pairwise(words))
    segments = got.segments or []
    assert [s.text for s in segments] == ["The quick brown fox jumps over the lazy dog.", "Then it sleeps!"]
    assert segments[0].end <= segments[1].start <= segments[1].end <= got.duration


def test_speech_is_deterministic_per_request_and_seed(client: openai.OpenAI) -> None:
    def wav(**extra: object) -> bytes:
        return client.audio.speech.create(
            model="tts-1", voice="alloy", input=TEXT, response_format="wav", extra_body=extra
        ).content

    assert wav(seed=1) == wav(seed=1)
    assert wav(seed=1) != wav(seed=2)
    assert wav() == wav()


def test_duration_follows_the_text_and_speed(client: openai.OpenAI) -> None:
    def seconds(text: str, speed: float) -> float:
        pcm = client.audio.speech.create(model="tts-1", voice="echo", input=text, response_format="pcm", speed=speed)
        return len(pcm.content) / 2 / 24_000

    base = seconds(TEXT, 1.0)
    assert seconds(TEXT + " " + TEXT, 1.0) > 1.8 * base
    assert seconds(TEXT, 2.0) < 0.6 * base
    assert seconds(TEXT, 0.5) > 1.8 * base


def test_speech_streams_sse_deltas_and_usage(http: httpx.Client) -> None:
    body = {"model": "gpt-4o-mini-tts", "voice": "nova", "input": TEXT, "response_format": "wav"}
    whole = http.post("/audio/speech", json=body).content
    with http.stream("POST", "/audio/speech", json={**body, "stream_format": "sse"}) as r:
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    assert [e["type"] for e in events[:-1]] == ["speech.audio.delta"] * (len(events) - 1) and len(events) > 2
    assert b"".join(base64.b64decode(e["audio"]) for e in events[:-1]) == whole
    usage = events[-1]["usage"]
    assert (
        events[-1]["type"] == "speech.audio.done"
        and usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"] > 0
    )


def _noise(seconds: float = 2.0, seed: int = 0) -> bytes:
    out = io.BytesIO()
    soundfile.write(
        out,
        (np.random.default_rng(seed).normal(size=int(16_000 * seconds)) * 0.2).astype("float32"),
        16_000,
        format="WAV",
    )
    return out.getvalue()


def test_other_audio_gets_a_deterministic_transcript_of_its_length(client: openai.OpenAI) -> None:
    first = client.audio.transcriptions.create(
        model="whisper-1", file=("n.wav", _noise()), response_format="verbose_json"
    )
    again = client.audio.transcriptions.create(
        model="whisper-1", file=("n.wav", _noise()), response_format="verbose_json"
    )
    other = client.audio.transcriptions.create(
        model="whisper-1", file=("n.wav", _noise(seed=1)), response_format="verbose_json"
    )
    assert first.text and first.text == again.text != other.text
    assert first.duration == 2.0
    assert all(0 <= s.start <= s.end <= 2.0 for s in first.segments or [])
    srt = client.audio.transcriptions.create(model="whisper-1", file=("n.wav", _noise()), response_format="srt")
    vtt = client.audio.transcriptions.create(model="whisper-1", file=("n.wav", _noise()), response_format="vtt")
    segments = [s.text for s in first.segments or []]
    assert str(srt).startswith("1\n00:00:00,000 --> ") and all(f"\n{text}\n\n" in str(srt) for text in segments)
    assert str(vtt).startswith("WEBVTT\n\n00:00:00.000 --> ")


def test_gpt4o_streams_the_transcript_with_logprobs(client: openai.OpenAI) -> None:
    wav = client.audio.speech.create(model="tts-1", voice="sage", input=TEXT, response_format="wav").content
    events = list(
        client.audio.transcriptions.create(
            model="gpt-4o-transcribe", file=("s.wav", wav), stream=True, include=["logprobs"]
        )
    )
    deltas = [e for e in events if e.type == "transcript.text.delta"]
    done = events[-1]
    assert done.type == "transcript.text.done" and done.text == TEXT == "".join(d.delta for d in deltas)
    assert done.logprobs and all(p.logprob is not None and p.logprob <= 0 for p in done.logprobs)
    assert done.usage is not None and done.usage.output_tokens == len(done.logprobs)
    whole = client.audio.transcriptions.create(model="gpt-4o-transcribe", file=("s.wav", wav), include=["logprobs"])
    assert whole.text == TEXT and [p.logprob for p in whole.logprobs or []] == [p.logprob for p in done.logprobs]


def test_translation_and_a_scripted_transcript(client: openai.OpenAI, script: Script) -> None:
    wav = client.audio.speech.create(model="tts-1", voice="sage", input=TEXT, response_format="wav").content
    with pytest.deprecated_call():  # the SDK marks translations deprecated; the endpoint still answers
        assert client.audio.translations.create(model="whisper-1", file=("s.wav", wav)).text == TEXT
    script.add(model="whisper-1", match="meeting", text="Scripted minutes.")
    got = client.audio.transcriptions.create(model="whisper-1", file=("n.wav", _noise()), prompt="the meeting")
    assert got.text == "Scripted minutes."


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"voice": "nobody"}, "voice"),
        ({"speed": 4.5}, "speed"),
        ({"speed": 0.1}, "speed"),
        ({"response_format": "ogg"}, "response_format"),
        ({"input": "x" * 4097}, "input"),
        ({"input": ""}, "input"),
        ({"model": "gpt-4o"}, "model"),
        ({"stream_format": "sse"}, "stream_format"),  # not on tts-1
    ],
    ids=["voice", "fast", "slow", "format", "long", "empty", "model", "sse-tts-1"],
)
def test_bad_speech_is_a_400_naming_the_field(http: httpx.Client, body: dict[str, object], param: str) -> None:
    r = http.post("/audio/speech", json={"model": "tts-1", "voice": "alloy", "input": "hi", **body})
    assert r.status_code == 400 and r.json()["error"]["param"] == param


@pytest.mark.parametrize(
    ("name", "data", "fields", "param"),
    [
        ("a.wav", b"", {}, "file"),
        ("a.wav", b"RIFF and then nothing a decoder reads", {}, "file"),
        ("a.txt", b"hello", {}, "file"),
        ("a.wav", None, {"model": "whisper-2"}, "model"),
        ("a.wav", None, {"model": "gpt-4o-transcribe", "response_format": "srt"}, "response_format"),
        ("a.wav", None, {"timestamp_granularities[]": "word"}, "timestamp_granularities"),
        ("a.wav", None, {"temperature": "2"}, "temperature"),
        ("a.wav", None, {"include[]": "logprobs"}, "include"),  # whisper-1 has none
    ],
    ids=["empty", "not-audio", "extension", "model", "format", "granularity", "temperature", "include"],
)
def test_bad_transcription_is_a_400_naming_the_field(
    http: httpx.Client, live: Live, name: str, data: bytes | None, fields: dict[str, str], param: str
) -> None:
    files = {"file": (name, _noise(0.2) if data is None else data)}
    r = http.post("/audio/transcriptions", files=files, data={"model": "whisper-1", **fields})
    assert r.status_code == 400 and r.json()["error"]["param"] == param
    assert http.get(f"{live.base_url.removesuffix('/v1')}/health").status_code == 200  # it keeps serving
