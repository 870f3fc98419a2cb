"""Record from a real upstream (a second mockserver), replay faithfully, miss loudly."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from mockserver.app import create_app
from mockserver.cassettes.files import CassetteDir
from mockserver.cassettes.redact import scan
from mockserver.config import Settings
from tests.support.live import FROZEN, Live, serve_in_thread

MSGS = [{"role": "user", "content": "Tell me about the sea."}]
BODY: dict[str, Any] = {"model": "m", "messages": MSGS, "seed": 4, "max_tokens": 10}
KEY = "sk-live1234567890abcdefghijklmnop"


@pytest.fixture(scope="module")
def upstream() -> Iterator[Live]:
    """The provider: a mockserver with frozen time, paced so recorded timing means something."""
    settings = Settings(frozen_time=FROZEN, latency="ttft=40; itl=25")
    with serve_in_thread(create_app(settings)) as live:
        yield live


def _server(directory: Path, **kw: Any) -> Any:
    return serve_in_thread(create_app(Settings(cassettes=str(directory), frozen_time=FROZEN, **kw)))


def _stream(live: Live, body: dict[str, Any], **headers: str) -> tuple[list[bytes], float]:
    started = time.perf_counter()
    with httpx.stream("POST", live.base_url + "/chat/completions", json={**body, "stream": True}, headers=headers) as r:
        assert r.status_code == 200, r.read()
        chunks = list(r.iter_raw())
    return chunks, time.perf_counter() - started


def _events(chunks: list[bytes]) -> list[bytes]:
    return [e + b"\n\n" for e in b"".join(chunks).split(b"\n\n") if e]


@pytest.fixture(scope="module")
def recorded(upstream: Live, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One non-stream and one stream interaction, recorded with record_mode=all."""
    directory = tmp_path_factory.mktemp("cassettes")
    with _server(directory, record_mode="all", upstream=upstream.url) as recorder:
        plain = httpx.post(
            recorder.base_url + "/chat/completions", json=BODY, headers={"authorization": f"Bearer {KEY}"}
        )
        assert plain.headers["x-mockserver-source"] == "record"
        chunks, seconds = _stream(recorder, {**BODY, "stream_options": {"include_usage": True}})
    direct = httpx.post(upstream.base_url + "/chat/completions", json=BODY)
    return {"dir": directory, "plain": plain, "direct": direct, "stream": _events(chunks), "seconds": seconds}


def test_recording_tees_the_upstream_unchanged(recorded: dict[str, Any]) -> None:
    assert recorded["plain"].content == recorded["direct"].content
    assert recorded["stream"][-1] == b"data: [DONE]\n\n"


def test_replay_gives_identical_bodies_and_the_same_events(recorded: dict[str, Any]) -> None:
    with _server(recorded["dir"]) as replay:
        again = httpx.post(replay.base_url + "/chat/completions", json=BODY)
        assert again.headers["x-mockserver-source"] == "replay"
        assert again.content == recorded["plain"].content
        assert len(again.headers.get_list("server")) == 1  # the recorded `server` is not sent beside ours
        chunks, _ = _stream(replay, {**BODY, "stream_options": {"include_usage": True}})
        assert _events(chunks) == recorded["stream"]


def test_no_secret_lands_in_the_cassette(recorded: dict[str, Any]) -> None:
    files = list(Path(recorded["dir"]).rglob("*.yaml"))
    assert files and all(KEY not in f.read_text() for f in files)
    assert scan(Path(recorded["dir"])) == []


def test_a_streamed_recording_serves_a_non_stream_request(upstream: Live, tmp_path: Path) -> None:
    with _server(tmp_path, record_mode="all", upstream=upstream.url) as recorder:
        _stream(recorder, {**BODY, "stream_options": {"include_usage": True}})
    with _server(tmp_path) as replay:
        folded = httpx.post(replay.base_url + "/chat/completions", json=BODY).json()
    direct = httpx.post(upstream.base_url + "/chat/completions", json=BODY).json()
    assert folded["id"] == direct["id"] and folded["object"] == "chat.completion"
    assert folded["choices"][0]["message"]["content"] == direct["choices"][0]["message"]["content"]
    assert folded["choices"][0]["finish_reason"] == direct["choices"][0]["finish_reason"]
    assert folded["usage"] == direct["usage"]


def test_a_non_stream_recording_serves_a_stream_request(recorded: dict[str, Any], upstream: Live) -> None:
    fresh = Path(recorded["dir"]).parent / "plain-only"
    fresh.mkdir(exist_ok=True)
    with _server(fresh, record_mode="all", upstream=upstream.url) as recorder:
        httpx.post(recorder.base_url + "/chat/completions", json=BODY)
    with _server(fresh) as replay, openai.OpenAI(base_url=replay.base_url, api_key="x", max_retries=0) as client:
        chunks = list(client.chat.completions.create(stream=True, **BODY))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == recorded["direct"].json()["choices"][0]["message"]["content"]


def test_recorded_timing_replays_the_gaps(recorded: dict[str, Any]) -> None:
    with _server(recorded["dir"], replay_timing="recorded") as replay:
        paced_chunks, paced = _stream(replay, {**BODY, "stream_options": {"include_usage": True}})
    with _server(recorded["dir"]) as replay:
        instant_chunks, _ = _stream(replay, {**BODY, "stream_options": {"include_usage": True}})
    # Compared with the recorded offsets, not with wall-clock figures of another run: a
    # paced replay can be late on a busy machine, never early. (No upper bound on the
    # instant replay: a test must not fail because the machine is busy.)
    streamed = [i for batch in CassetteDir(str(recorded["dir"])).load_all().values() for i in batch]
    last = max(e.offset for i in streamed if i.response.stream for e in i.response.stream.events)
    assert last >= 0.2  # ttft 40 ms + 9 × 25 ms, as recorded
    assert paced >= last * 0.95
    assert _events(paced_chunks) == _events(instant_chunks) == recorded["stream"]  # pacing changes only time


def test_a_changed_prompt_is_a_miss_the_sdk_does_not_retry(recorded: dict[str, Any]) -> None:
    with _server(recorded["dir"]) as replay:
        with openai.OpenAI(base_url=replay.base_url, api_key="x", max_retries=3) as client:
            changed = {**BODY, "messages": [{"role": "user", "content": "Tell me about the hills."}]}
            with pytest.raises(openai.NotFoundError) as raised:
                client.chat.completions.create(**changed)
        assert raised.value.code == "cassette_miss"
        assert "messages[0].content" in str(raised.value.message)
        assert raised.value.response.headers["x-should-retry"] == "false"
        journal = httpx.get(replay.url + "/__mockserver/journal").json()["entries"]
        assert len(journal) == 1  # no retries


def test_identical_requests_replay_in_recorded_order(upstream: Live, tmp_path: Path) -> None:
    # The upstream answers the second identical call differently (our x-mockserver-* headers are
    # not forwarded upstream, so the rule is the upstream's own, removed right after).
    rule = httpx.post(upstream.url + "/__mockserver/rules", json={"faults": "content.filter", "nth": [2]}).json()
    try:
        with _server(tmp_path, record_mode="all", upstream=upstream.url) as recorder:
            for _ in range(2):
                httpx.post(recorder.base_url + "/chat/completions", json=BODY)
    finally:
        httpx.delete(f"{upstream.url}/__mockserver/rules/{rule['id']}")
    with _server(tmp_path) as replay:
        reasons = [
            httpx.post(replay.base_url + "/chat/completions", json=BODY).json()["choices"][0]["finish_reason"]
            for _ in range(3)
        ]
    assert reasons[1] == "content_filter" and reasons[0] != "content_filter"
    assert reasons[2] == "content_filter"  # past the last recording, the last one repeats


def test_faults_and_profile_prefixes_apply_to_replays(recorded: dict[str, Any]) -> None:
    with _server(recorded["dir"]) as replay:
        cut, _ = _stream(
            replay, {**BODY, "stream_options": {"include_usage": True}}, **{"x-mockserver-fault": "stream.cut_after=2"}
        )
        assert len(_events(cut)) == 2
        prefixed = httpx.post(replay.url + "/fireworks/v1/chat/completions", json=BODY)
        assert prefixed.content == recorded["plain"].content


def test_on_miss_reference_answers_with_the_model(recorded: dict[str, Any]) -> None:
    with _server(recorded["dir"], on_miss="reference") as replay:
        changed = {**BODY, "seed": 99}
        answer = httpx.post(replay.base_url + "/chat/completions", json=changed)
        assert answer.status_code == 200 and answer.headers["x-mockserver-source"] == "reference"


def test_once_records_only_a_new_cassette(upstream: Live, tmp_path: Path) -> None:
    with _server(tmp_path, record_mode="once", upstream=upstream.url) as first:
        assert httpx.post(first.base_url + "/chat/completions", json=BODY).headers["x-mockserver-source"] == "record"
    with _server(tmp_path, record_mode="once", upstream=upstream.url) as second:
        other = httpx.post(second.base_url + "/chat/completions", json={**BODY, "seed": 5})
        assert other.status_code == 404  # the cassette exists: once means replay only
    assert len(CassetteDir(tmp_path).load("mockserver.yaml")) == 1


def test_a_transcription_records_and_replays_whatever_the_forms_boundary(upstream: Live, tmp_path: Path) -> None:
    """A multipart upload (audio) is recorded as sent and matched by its fields and its file's
    bytes: the SDK draws a new boundary for every request, and the replay still answers."""
    with openai.OpenAI(base_url=upstream.base_url, api_key="sk-test", max_retries=0) as direct:
        audio = direct.audio.speech.create(model="tts-1", voice="alloy", input="Hello from the cassette.").read()
        heard = direct.audio.transcriptions.create(model="whisper-1", file=("said.mp3", audio)).text
    with _server(tmp_path, record_mode="all", upstream=upstream.url) as recorder:
        with openai.OpenAI(base_url=recorder.base_url, api_key="sk-test", max_retries=0) as client:
            raw = client.audio.transcriptions.with_raw_response.create(model="whisper-1", file=("said.mp3", audio))
        assert raw.headers["x-mockserver-source"] == "record" and raw.parse().text == heard
    with (
        _server(tmp_path, record_mode="none", backend="replay") as player,
        openai.OpenAI(base_url=player.base_url, api_key="sk-test", max_retries=0) as client,
    ):
        again = client.audio.transcriptions.with_raw_response.create(model="whisper-1", file=("said.mp3", audio))
        assert again.headers["x-mockserver-source"] == "replay" and again.parse().text == heard
        with pytest.raises(openai.NotFoundError):  # other audio: a miss, not another recording's text
            client.audio.transcriptions.create(model="whisper-1", file=("said.mp3", audio + b"\0"))


def test_an_unreachable_upstream_is_a_502(tmp_path: Path) -> None:
    with _server(tmp_path, record_mode="all", upstream="http://127.0.0.1:9") as recorder:
        response = httpx.post(recorder.base_url + "/chat/completions", json=BODY)
        assert response.status_code == 502 and response.json()["error"]["type"] == "upstream_error"


def test_shipped_cassettes_replay(tmp_path: Path) -> None:
    from tests.support.live import ROOT

    shipped = ROOT / "cassettes"
    assert scan(shipped) == []  # what `mockserver cassettes check cassettes` runs in CI
    with _server(shipped) as replay:
        for name in CassetteDir(shipped).names():
            for interaction in CassetteDir(shipped).load(name):
                request = interaction.request
                body = json.loads(request.body)
                path = "/v1/" + request.path.split("/v1/", 1)[1]
                answer = httpx.post(replay.url + path, json=body)
                assert answer.status_code == interaction.response.status, name
                assert answer.headers["x-mockserver-source"] == "replay"


def test_a_recorded_reset_replays_as_a_reset(tmp_path: Path) -> None:
    from mockserver.cassettes.format import Interaction, RecordedRequest, RecordedResponse, Stream, StreamEvent

    chunk = b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[]}\n\n'
    request = RecordedRequest("POST", "https://api.openai.com/v1/chat/completions", (), json.dumps(BODY).encode())
    stream = Stream((StreamEvent(0.0, chunk), StreamEvent(0.0, chunk)), end="reset")
    headers = (("content-type", "text/event-stream"),)
    CassetteDir(tmp_path).save("broken.yaml", [Interaction(request, RecordedResponse.streamed(200, headers, stream))])
    with _server(tmp_path) as replay:
        received = b""
        url, body = replay.base_url + "/chat/completions", {**BODY, "stream": True}
        with pytest.raises(httpx.HTTPError), httpx.stream("POST", url, json=body) as r:  # dies where it did
            for piece in r.iter_raw():
                received += piece
        assert received == chunk * 2


def test_a_named_cassette_replays_only_its_own_and_sessions_keep_their_own_place(
    upstream: Live, tmp_path: Path
) -> None:
    """What one server shared by many tests needs: per-request record mode and cassette, and
    replay positions per session that a reset starts again."""
    seeds = [{**BODY, "seed": s} for s in (1, 2)]
    # --record-mode all: the ceiling; each request asks its own mode (none: replay only)
    with _server(tmp_path, upstream=upstream.url, record_mode="all") as server:
        url = server.base_url + "/chat/completions"
        for body in seeds:  # recorded into a.yaml only, because the request asked to record
            head = {"x-mockserver-cassette": "a.yaml", "x-mockserver-record-mode": "new_episodes"}
            assert httpx.post(url, json=body, headers=head).headers["x-mockserver-source"] == "record"
        first = {"x-mockserver-cassette": "a.yaml", "x-mockserver-record-mode": "none"}
        assert httpx.post(url, json=seeds[0], headers=first).headers["x-mockserver-source"] == "replay"
        other = httpx.post(url, json=seeds[0], headers={**first, "x-mockserver-cassette": "b.yaml"})
        assert other.status_code == 404 and other.json()["error"]["code"] == "cassette_miss"
        bad = httpx.post(url, json=seeds[0], headers={"x-mockserver-record-mode": "sometimes"})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "x-mockserver-record-mode"
        # Record one request twice more, the upstream's second answer cut by a content filter
        # (our x-mockserver-* headers are not forwarded, so the rule is the upstream's own).
        rule = httpx.post(upstream.url + "/__mockserver/rules", json={"faults": "content.filter", "nth": [2]}).json()
        try:
            head = {"x-mockserver-cassette": "twice.yaml", "x-mockserver-record-mode": "all"}
            made = [httpx.post(url, json=BODY, headers=head).json()["choices"][0]["finish_reason"] for _ in range(2)]
        finally:
            httpx.delete(f"{upstream.url}/__mockserver/rules/{rule['id']}")
        assert made[1] == "content_filter" != made[0]

        def replayed(session: str) -> str:
            head = {
                "x-mockserver-cassette": "twice.yaml",
                "x-mockserver-record-mode": "none",
                "x-mockserver-session": session,
            }
            reply = httpx.post(url, json=BODY, headers=head)
            assert reply.headers["x-mockserver-source"] == "replay"
            return str(reply.json()["choices"][0]["finish_reason"])

        assert [replayed("w1"), replayed("w2"), replayed("w1"), replayed("w2")] == [made[0], made[0], made[1], made[1]]
        httpx.post(server.url + "/__mockserver/reset", params={"session": "w1"})
        assert replayed("w1") == made[0]  # w1 starts again; w2 does not
        assert replayed("w2") == made[1]
