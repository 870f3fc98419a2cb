"""/v1/realtime over a real WebSocket with the official SDK: sessions, items, audio turns by
the server's VAD, cancel, bad events answered with an error event (the session goes on)."""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Iterator
from typing import Any, cast

import httpx
import openai
import pytest
from openai.resources.realtime.realtime import RealtimeConnection

from mockserver.backends.reference.backend import ReferenceBackend
from mockserver.voice import formats, modem, speech
from tests.support.live import Live


@pytest.fixture
def conn(client: openai.OpenAI) -> Iterator[RealtimeConnection]:
    with client.realtime.connect(model="gpt-realtime") as c:
        assert _next(c).type == "session.created"
        yield c


def _next(conn: RealtimeConnection) -> Any:
    """The next server event, as the SDK parsed it (read loosely: a union of 46 types)."""
    return conn.recv()


def _until(conn: RealtimeConnection, kind: str) -> list[Any]:
    seen = []
    while True:
        event = _next(conn)
        seen.append(event)
        if event.type == kind:
            return seen


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def test_a_text_turn_streams_text_and_ends_with_usage(conn: RealtimeConnection) -> None:
    conn.session.update(session={"type": "realtime", "output_modalities": ["text"]})
    updated = _until(conn, "session.updated")[-1]
    assert updated.session.output_modalities == ["text"]
    assert updated.session.audio.output.voice == "alloy"  # partial: the rest stays
    conn.conversation.item.create(item=_user("Tell me about Lisbon."))  # type: ignore[arg-type]
    assert [e.type for e in _until(conn, "conversation.item.done")] == [
        "conversation.item.added",
        "conversation.item.done",
    ]
    conn.response.create()
    events = _until(conn, "response.done")
    kinds = [e.type for e in events]
    assert kinds[:4] == [
        "response.created",
        "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added",
    ]
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text and [e.text for e in events if e.type == "response.output_text.done"] == [text]
    done = events[-1].response
    assert done.status == "completed" and done.output[0].content[0].text == text
    assert done.usage.total_tokens == done.usage.input_tokens + done.usage.output_tokens > 0
    conn.conversation.item.retrieve(item_id=done.output[0].id)
    got = _until(conn, "conversation.item.retrieved")[-1]
    assert got.item.content[0].text == text


def test_speech_appended_is_heard_committed_by_vad_and_answered_in_audio(conn: RealtimeConnection) -> None:
    said = "Book a table for two."
    pcm = speech.pcm(said, "alloy", 1.0, 3) + bytes(2 * 24_000)  # then a second of silence
    for at in range(0, len(pcm), 9600):
        conn.input_audio_buffer.append(audio=base64.b64encode(pcm[at : at + 9600]).decode())
    events = _until(conn, "response.done")
    kinds = [e.type for e in events]
    assert kinds.index("input_audio_buffer.speech_started") < kinds.index("input_audio_buffer.speech_stopped")
    assert kinds.index("input_audio_buffer.committed") < kinds.index("response.created")
    user = next(e.item for e in events if e.type == "conversation.item.done")
    assert user.role == "user" and user.content[0].transcript == said
    audio = b"".join(base64.b64decode(e.delta) for e in events if e.type == "response.output_audio.delta")
    transcript = next(e.transcript for e in events if e.type == "response.output_audio_transcript.done")
    heard = modem.heard(formats.from_pcm16(audio), modem.RATE)
    assert heard is not None and heard.text == transcript


def test_an_audio_item_is_heard_as_its_text(conn: RealtimeConnection) -> None:
    audio = base64.b64encode(speech.pcm("Two coffees, please.", "verse", 1.0, 9)).decode()
    content = [{"type": "input_audio", "audio": audio}]
    conn.conversation.item.create(item={"type": "message", "role": "user", "content": content})  # type: ignore[arg-type,misc]
    item = _until(conn, "conversation.item.done")[-1].item
    assert item.content[0].transcript == "Two coffees, please."


def _tone(seconds: float, hz: float) -> bytes:
    """Audio mockserver did not speak: a plain tone, 24 kHz 16-bit mono."""
    import numpy as np

    t = np.arange(int(24_000 * seconds)) / 24_000
    return (np.sin(2 * np.pi * hz * t) * 8000).astype("<i2").tobytes()


def _heard(client: openai.OpenAI, pcm: bytes) -> tuple[str, str]:
    """A session commits ``pcm`` and asks for a text answer: its transcript and the answer."""
    with client.realtime.connect(model="gpt-realtime") as conn:
        update = {"turn_detection": None, "transcription": {"model": "gpt-4o-transcribe"}}
        conn.session.update(session={"type": "realtime", "output_modalities": ["text"], "audio": {"input": update}})
        _until(conn, "session.updated")
        conn.input_audio_buffer.append(audio=base64.b64encode(pcm).decode())
        conn.input_audio_buffer.commit()
        conn.response.create()
        events = _until(conn, "response.done")
    heard = next(e for e in events if e.type == "conversation.item.input_audio_transcription.completed")
    answer = next(e for e in events if e.type == "response.output_text.done")
    return heard.transcript, answer.text


def test_audio_mockserver_did_not_speak_is_heard_by_the_engine(client: openai.OpenAI) -> None:
    """Other audio is transcribed as /v1/audio/transcriptions would (seeded by the audio): the
    same audio is the same words in every session, other audio other words, and the response
    waits for them."""
    first, answered = _heard(client, _tone(1.5, 440.0))
    assert first.strip() and (first, answered) == _heard(client, _tone(1.5, 440.0))
    other, answered_other = _heard(client, _tone(1.5, 660.0))
    assert other != first and answered_other != answered  # the answer read what was heard


def test_a_commit_alone_starts_no_response(conn: RealtimeConnection) -> None:
    conn.session.update(session={"type": "realtime", "audio": {"input": {"turn_detection": None}}})
    _until(conn, "session.updated")
    conn.input_audio_buffer.append(audio=base64.b64encode(speech.pcm("Hi.", "ash", 1.0, 1)).decode())
    conn.input_audio_buffer.commit()
    events = _until(conn, "conversation.item.done")
    assert [e.type for e in events] == [
        "input_audio_buffer.committed",
        "conversation.item.added",
        "conversation.item.done",
    ]
    conn.input_audio_buffer.clear()
    assert _next(conn).type == "input_audio_buffer.cleared"  # nothing else came between: no response


def test_bad_events_get_an_error_naming_them_and_the_session_goes_on(conn: RealtimeConnection) -> None:
    conn.send(cast(Any, {"type": "no.such.event", "event_id": "evt_bad"}))
    error = _next(conn)
    assert error.type == "error" and error.error.event_id == "evt_bad" and error.error.param == "type"
    conn.send({"type": "conversation.item.delete", "event_id": "evt_gone", "item_id": "item_nope"})
    error = _next(conn)
    assert error.type == "error" and error.error.event_id == "evt_gone" and error.error.code == "item_not_found"
    pcm16k = {"audio": {"output": {"format": {"type": "audio/pcm", "rate": 16000}}}, "type": "realtime"}
    conn.send(cast(Any, {"type": "session.update", "event_id": "evt_fmt", "session": pcm16k}))
    error = _next(conn)
    assert error.error.event_id == "evt_fmt" and error.error.param == "session.audio.output.format"
    conn.send({"type": "input_audio_buffer.append", "event_id": "evt_b64", "audio": "%%%"})
    assert _next(conn).error.event_id == "evt_b64"
    conn.response.cancel(event_id="evt_cancel")
    assert _next(conn).error.code == "response_cancel_not_active"
    conn.conversation.item.create(item=_user("Still there?"))  # type: ignore[arg-type]
    assert _until(conn, "conversation.item.done")[-1].item.content[0].text == "Still there?"


def test_cancel_ends_the_response_cancelled(client: openai.OpenAI) -> None:
    with _faulted(client, "latency.itl=50") as conn:  # paced: it is still running when the cancel lands
        _until(conn, "session.created")
        _text_turn(conn)
        conn.response.cancel()
        events = _until(conn, "response.done")
        done = events[-1].response
        assert done.status == "cancelled" and done.status_details.reason == "client_cancelled"
        assert [e.type for e in events].count("response.created") == 1
        assert all(item.status == "incomplete" for item in done.output or [])
        conn.conversation.item.create(item=_user("And now?"))
        assert _until(conn, "conversation.item.done")[-1].item.role == "user"  # the session goes on


def test_truncate_cuts_an_assistant_audio_where_playback_stopped(conn: RealtimeConnection) -> None:
    conn.conversation.item.create(item=_user("Say something."))  # type: ignore[arg-type]
    conn.response.create()
    done = _until(conn, "response.done")[-1].response
    item = done.output[0]
    transcript = item.content[0].transcript
    conn.conversation.item.truncate(item_id=item.id, content_index=0, audio_end_ms=100_000)
    assert _until(conn, "error")[-1].error.param == "audio_end_ms"  # past its end
    conn.conversation.item.truncate(item_id=item.id, content_index=0, audio_end_ms=200)
    assert _next(conn).type == "conversation.item.truncated"
    conn.conversation.item.retrieve(item_id=item.id)
    cut = _until(conn, "conversation.item.retrieved")[-1].item.content[0].transcript
    assert transcript.startswith(cut) and len(cut) < len(transcript)
    conn.conversation.item.delete(item_id=item.id)
    assert _until(conn, "conversation.item.deleted")[-1].item_id == item.id


def _faulted(client: openai.OpenAI, spec: str) -> Any:
    return client.realtime.connect(model="gpt-realtime", extra_headers={"x-mockserver-fault": spec})


def _text_turn(conn: RealtimeConnection) -> None:
    conn.session.update(session={"type": "realtime", "output_modalities": ["text"]})
    conn.conversation.item.create(item=_user("Hello there."))  # type: ignore[arg-type]
    conn.response.create()


def test_an_injected_error_event_fails_the_response_and_the_session_goes_on(client: openai.OpenAI) -> None:
    with _faulted(client, "stream.error_at=3") as conn:
        _text_turn(conn)
        events = _until(conn, "response.done")
        kinds = [e.type for e in events]
        after = kinds[kinds.index("response.created") :]
        assert after[:3] == ["response.created", "response.output_item.added", "error"]
        assert events[-1].response.status == "failed"


def test_a_rate_limited_response_and_a_dropped_socket(client: openai.OpenAI) -> None:
    with _faulted(client, "http.429") as conn:
        _text_turn(conn)
        events = _until(conn, "response.done")
        error = next(e for e in events if e.type == "error")
        limits = next(e for e in events if e.type == "rate_limits.updated")
        assert error.error.code == "rate_limit_exceeded" and limits.rate_limits[0].remaining == 0
    with _faulted(client, "stream.reset_after=2") as conn:
        _text_turn(conn)
        with pytest.raises(Exception, match="1011"):
            _until(conn, "response.done")


def test_a_fault_rule_reaches_a_sockets_responses(live: Live, client: openai.OpenAI) -> None:
    """A rule on /v1/realtime (a session's) fails its nth response: each response is one call."""
    session = "realtime-rule"
    rule = {"path": "/v1/realtime", "faults": "http.429", "nth": [2], "session": session}
    httpx.post(live.url + "/__mockserver/rules", json=rule).raise_for_status()
    with client.realtime.connect(model="gpt-realtime", extra_headers={"x-mockserver-session": session}) as conn:
        _text_turn(conn)
        first = _until(conn, "response.done")
        conn.response.create()
        second = _until(conn, "response.done")
    assert not [e for e in first if e.type == "error"]
    assert next(e for e in second if e.type == "error").error.code == "rate_limit_exceeded"


def test_client_events_are_journaled(live: Live, client: openai.OpenAI) -> None:
    assert live.app is not None
    journal = live.app.state.ctx.chaos.journal
    session = "realtime-journal"
    headers = {"x-mockserver-session": session}
    with client.realtime.connect(model="gpt-realtime", extra_headers=headers) as conn:
        _next(conn)
        conn.conversation.item.create(item=_user("Journal me."))  # type: ignore[arg-type]
        _until(conn, "conversation.item.done")
    entries = journal.entries(session)
    assert [(e.method, e.path, e.kind, e.events) for e in entries] == [("WS", "/v1/realtime", "realtime", 2)]
    assert entries[0].body["item"]["content"][0]["text"] == "Journal me."


def test_a_client_that_leaves_mid_response_frees_its_work(live: Live, client: openai.OpenAI) -> None:
    assert live.app is not None
    backend, metrics = live.app.state.ctx.model, live.app.state.metrics
    assert isinstance(backend, ReferenceBackend)

    def completed_tokens() -> int:  # every answer that finishes counts its usage here
        return sum(count for (_, _, kind), count in metrics.tokens.items() if kind == "completion")

    _quiet(backend)
    before = completed_tokens()
    with _faulted(client, "latency.itl=20") as conn:  # paced: still generating when the client leaves
        conn.session.update(session={"type": "realtime", "output_modalities": ["text"], "max_output_tokens": 3000})
        conn.conversation.item.create(item=_user("Tell a long story."))
        conn.response.create()
        deltas = 0
        while deltas < 3:
            deltas += _next(conn).type == "response.output_text.delta"
    _quiet(backend)  # the socket closed: its response is cancelled and the model stops stepping it
    assert completed_tokens() == before  # it never finished: its work went with its client


def _quiet(backend: ReferenceBackend, timeout: float = 30.0) -> None:
    """Wait until nothing steps the model for a moment (as tests/server/test_disconnect.py does)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = backend.steps
        time.sleep(0.3)
        if backend.steps == seen:
            return


def test_the_same_turn_gets_the_same_answer_in_every_session(client: openai.OpenAI) -> None:
    def answer() -> tuple[str, str]:
        with client.realtime.connect(model="gpt-realtime") as conn:
            conn.session.update(session={"type": "realtime", "output_modalities": ["audio"]})
            conn.conversation.item.create(item=_user("What is the plan for today?"))  # type: ignore[arg-type]
            conn.response.create()
            events = _until(conn, "response.done")
            audio = b"".join(base64.b64decode(e.delta) for e in events if e.type == "response.output_audio.delta")
            return events[-1].response.output[0].content[0].transcript, hashlib.sha256(audio).hexdigest()

    assert answer() == answer()
