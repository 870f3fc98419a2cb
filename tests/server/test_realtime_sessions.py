"""/v1/realtime's other sessions, over a real WebSocket with the official SDK: G.711 audio in and
out (μ-law and A-law at 8 kHz, heard and spoken so the text survives), and a transcription-only
session (``session.type: "transcription"``: deltas then the completed transcript, no responses)."""

from __future__ import annotations

import base64

import openai
import pytest
from openai.resources.realtime.realtime import RealtimeConnection

from mockserver.voice import formats, g711, modem, speech
from tests.support.realtime import until


def _append(conn: RealtimeConnection, audio: bytes, size: int) -> None:
    for at in range(0, len(audio), size):
        conn.input_audio_buffer.append(audio=base64.b64encode(audio[at : at + size]).decode())


@pytest.mark.parametrize("kind", ["audio/pcmu", "audio/pcma"])
def test_a_g711_session_hears_and_speaks_telephone_audio(client: openai.OpenAI, kind: str) -> None:
    said = "Book a table for two."
    audio = {"input": {"format": {"type": kind}, "transcription": {"model": "gpt-4o-transcribe"}}}
    audio["output"] = {"format": {"type": kind}}
    with client.realtime.connect(model="gpt-realtime") as conn:
        until(conn, "session.created")
        conn.session.update(session={"type": "realtime", "audio": audio})  # type: ignore[typeddict-item]
        updated = until(conn, "session.updated")[-1].session
        assert updated.audio.input.format.type == kind and updated.audio.output.format.type == kind
        assert updated.audio.input.format.model_dump(exclude_none=True) == {"type": kind}  # replaced, not merged
        line = g711.spoken_as(speech.pcm(said, "alloy", 1.0, 3) + bytes(2 * 24_000), kind)  # then 1 s of silence
        _append(conn, line, 1600)  # 200 ms a chunk at 8 kHz
        events = until(conn, "response.done")
    heard = [e.transcript for e in events if e.type == "conversation.item.input_audio_transcription.completed"]
    assert heard == [said]
    transcript = next(e.transcript for e in events if e.type == "response.output_audio_transcript.done")
    deltas = [base64.b64decode(e.delta) for e in events if e.type == "response.output_audio.delta"]
    assert deltas and all(len(d) == 1600 for d in deltas[:-1])  # 200 ms of 8-bit codes
    spoken = modem.heard(formats.from_pcm16(g711.decode(b"".join(deltas), kind)), g711.RATE)
    assert spoken is not None and spoken.text == transcript


def test_a_g711_audio_item_is_heard_as_its_text(client: openai.OpenAI) -> None:
    said = "Is the pharmacy open?"
    line = base64.b64encode(g711.spoken_as(speech.pcm(said, "sage", 1.0, 9), "audio/pcma")).decode()
    with client.realtime.connect(model="gpt-realtime") as conn:
        until(conn, "session.created")
        conn.session.update(session={"type": "realtime", "audio": {"input": {"format": {"type": "audio/pcma"}}}})
        until(conn, "session.updated")
        item = {"type": "message", "role": "user", "content": [{"type": "input_audio", "audio": line}]}
        conn.conversation.item.create(item=item)  # type: ignore[arg-type]
        done = until(conn, "conversation.item.done")[-1]
    assert done.item.content[0].transcript == said


def test_a_format_that_is_not_the_apis_is_refused_naming_it(client: openai.OpenAI) -> None:
    with client.realtime.connect(model="gpt-realtime") as conn:
        until(conn, "session.created")
        bad = {"type": "realtime", "audio": {"input": {"format": {"type": "audio/pcmu", "rate": 16000}}}}
        conn.send({"type": "session.update", "event_id": "evt_fmt", "session": bad})  # type: ignore[arg-type]
        error = until(conn, "error")[-1].error
    assert error.event_id == "evt_fmt" and error.param == "session.audio.input.format"


def test_a_transcription_session_streams_transcripts_and_makes_no_responses(client: openai.OpenAI) -> None:
    said = "Two coffees, please."
    with client.realtime.connect(model="gpt-realtime") as conn:
        until(conn, "session.created")
        conn.session.update(session={"type": "transcription"})
        session = until(conn, "session.updated")[-1].session
        assert session.type == "transcription" and session.audio.input.transcription.model == "gpt-4o-transcribe"
        _append(conn, speech.pcm(said, "verse", 1.0, 5) + bytes(2 * 24_000), 9600)
        events = until(conn, "conversation.item.input_audio_transcription.completed")
        kinds = [e.type for e in events]
        assert kinds.index("input_audio_buffer.speech_stopped") < kinds.index("input_audio_buffer.committed")
        deltas = [e.delta for e in events if e.type == "conversation.item.input_audio_transcription.delta"]
        assert len(deltas) > 1 and "".join(deltas) == events[-1].transcript == said
        assert not any(k.startswith("response.") for k in kinds)  # the VAD's turn makes no response
        conn.response.create(event_id="evt_resp")
        error = until(conn, "error")[-1].error
        assert error.event_id == "evt_resp" and error.param == "session.type" and "transcription" in error.message
        conn.session.update(session={"type": "realtime", "output_modalities": ["text"]})  # back to responses
        assert until(conn, "session.updated")[-1].session.type == "realtime"
        conn.response.create()
        assert until(conn, "response.done")[-1].response.status == "completed"


def test_a_transcription_session_from_the_handshake_gives_logprobs(client: openai.OpenAI) -> None:
    said = "Call me at noon."
    with client.realtime.connect(model="gpt-realtime", extra_query={"intent": "transcription"}) as conn:
        created = until(conn, "session.created")[-1].session
        assert created.type == "transcription" and created.object == "realtime.transcription_session"
        conn.session.update(session={"type": "transcription", "include": ["item.input_audio_transcription.logprobs"]})
        until(conn, "session.updated")
        _append(conn, speech.pcm(said, "alloy", 1.0, 2) + bytes(2 * 24_000), 9600)
        events = until(conn, "conversation.item.input_audio_transcription.completed")
    deltas = [e for e in events if e.type == "conversation.item.input_audio_transcription.delta"]
    assert "".join(d.delta for d in deltas) == events[-1].transcript == said
    scores = [p for d in deltas for p in d.logprobs]
    assert scores and all(p.logprob <= 0 for p in scores) and all(d.logprobs for d in deltas)
    assert [p.model_dump() for p in events[-1].logprobs] == [p.model_dump() for p in scores]
    assert "".join(p.token for p in scores).strip() == said
