"""Matching: body-aware keys, recorded order, misses that explain themselves, O(1) lookup."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mockserver.cassettes.format import Interaction, RecordedRequest, RecordedResponse
from mockserver.cassettes.matching import Hit, Index, Miss, route_of

CHAT = "/v1/chat/completions"


def _body(content: str = "Tell me about Lisbon.", **extra: Any) -> bytes:
    return json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}], **extra}).encode()


def _recorded(body: bytes, answer: str = "ok", uri: str = "https://api.openai.com" + CHAT) -> Interaction:
    return Interaction(RecordedRequest("POST", uri, (), body), RecordedResponse(200, (), answer.encode()))


def _hit(result: Hit | Miss) -> Hit:
    assert isinstance(result, Hit), result.message if isinstance(result, Miss) else result
    return result


def test_identical_requests_replay_in_recorded_order_then_repeat_the_last() -> None:
    index = Index([_recorded(_body(), "first"), _recorded(_body("other"), "x"), _recorded(_body(), "second")])
    plays = [_hit(index.lookup("POST", CHAT, _body())) for _ in range(4)]
    assert [p.interaction.response.body for p in plays] == [b"first", b"second", b"second", b"second"]
    assert [(p.play, p.count, p.repeated) for p in plays] == [(1, 2, False), (2, 2, False), (2, 2, True), (2, 2, True)]
    assert [i.response.body for i in index.unplayed()] == [b"x"]
    index.reset()
    assert _hit(index.lookup("POST", CHAT, _body())).interaction.response.body == b"first"


def test_stream_and_non_stream_twins_share_a_key() -> None:
    streamed = _body(stream=True, stream_options={"include_usage": True})
    index = Index([_recorded(streamed, "sse")])
    assert index.key("POST", CHAT, streamed) == index.key("POST", CHAT, _body())
    assert _hit(index.lookup("post", CHAT, _body())).interaction.response.body == b"sse"


def test_key_order_and_whitespace_do_not_matter_but_values_do() -> None:
    index = Index([_recorded(b'{"b": 1, "a": [1, 2]}')])
    assert isinstance(index.lookup("POST", CHAT, b'{"a":[1,2],"b":1}'), Hit)
    assert isinstance(index.lookup("POST", CHAT, b'{"a":[2,1],"b":1}'), Miss)
    assert isinstance(index.lookup("POST", CHAT, b'{"a":[1,2],"b":1.0}'), Miss)  # 1.0 is not 1 on the wire
    assert isinstance(index.lookup("GET", CHAT, b'{"a":[1,2],"b":1}'), Miss)


def test_ignore_list_drops_fields_nested_fields_and_query_parameters() -> None:
    recorded = _body(metadata={"trace_id": "t-1", "team": "a"}, request_id="r-1")
    index = Index(
        [_recorded(recorded, uri="https://h/v1/chat/completions?attempt=1")],
        ignore=["request_id", "metadata.trace_id", "attempt"],
    )
    live = _body(metadata={"trace_id": "t-2", "team": "a"}, request_id="r-2")
    assert isinstance(index.lookup("POST", CHAT + "?attempt=7", live), Hit)
    miss = index.lookup("POST", CHAT, _body(metadata={"trace_id": "t-2", "team": "b"}, request_id="r-2"))
    assert isinstance(miss, Miss) and miss.differences == ("metadata.team",)


def test_a_miss_names_the_closest_request_and_the_fields_that_differ() -> None:
    far = _recorded(_body("Tell me about Porto.", temperature=0.5, seed=1), "far")
    near = _recorded(_body("Tell me about Porto."), "near")
    index = Index([far, near, _recorded(b"{}", uri="https://h/v1/completions")])
    miss = index.lookup("POST", CHAT, _body())
    assert isinstance(miss, Miss)
    assert miss.closest is near and miss.differences == ("messages[0].content",)
    assert "messages[0].content" in miss.message and "Porto" not in miss.message


def test_miss_differences_are_nested_paths_and_ties_go_to_the_earliest() -> None:
    first = _recorded(json.dumps({"messages": [{"role": "user", "content": "a"}], "n": 1}).encode(), "1")
    second = _recorded(json.dumps({"messages": [{"role": "user", "content": "a"}], "n": 3}).encode(), "2")
    index = Index([first, second])
    live = {"messages": [{"role": "system", "content": "a"}, {"role": "user", "content": "b"}], "n": 2, "top_p": 1}
    miss = index.lookup("POST", CHAT, json.dumps(live).encode())
    assert isinstance(miss, Miss) and miss.closest is first
    assert miss.differences == ("messages[0].role", "messages[1]", "n", "top_p")


def test_a_miss_on_an_unrecorded_route_lists_what_was_recorded() -> None:
    miss = Index([_recorded(_body())]).lookup("GET", "/v1/models", b"")
    assert isinstance(miss, Miss) and miss.closest is None
    assert "POST /v1/chat/completions" in miss.message


@pytest.mark.parametrize(
    ("uri", "route"),
    [
        pytest.param("https://api.openai.com/v1/chat/completions", CHAT, id="openai"),
        pytest.param("https://api.fireworks.ai/inference/v1/completions", "/v1/completions", id="fireworks"),
        pytest.param("https://api.together.xyz/v1/chat/completions", CHAT, id="together"),
        pytest.param("http://127.0.0.1:4010/fireworks/v1/chat/completions", CHAT, id="profile-prefix"),
        pytest.param(
            "/v1/models/accounts/fireworks/v1/models/x", "/v1/models/accounts/fireworks/v1/models/x", id="first-v1"
        ),
        pytest.param("https://h/health", "/health", id="no-v1"),
    ],
)
def test_provider_host_paths_map_to_v1(uri: str, route: str) -> None:
    assert route_of(uri) == route
    recorded = _recorded(_body(), "provider", uri=uri)
    assert _hit(Index([recorded]).lookup("POST", route, _body())).interaction is recorded


def test_secrets_redacted_in_the_cassette_still_match_the_live_request() -> None:
    key = "sk-" + "a1B2c3D4" * 4
    recorded = _recorded(_body(f"my key is {key}"), uri="https://h/v1/chat/completions?api_key=abc").redacted()
    assert key.encode() not in recorded.request.body
    index = Index([recorded])
    assert isinstance(index.lookup("POST", CHAT + "?api_key=live-key", _body(f"my key is {key}")), Hit)


def test_bodies_that_are_not_json_objects_match_by_bytes() -> None:
    index = Index([_recorded(b"[1, 2]"), _recorded(b"a=1&b=2", uri="https://h/v1/form")])
    assert isinstance(index.lookup("POST", CHAT, b"[1, 2]"), Hit)
    assert isinstance(index.lookup("POST", "/v1/form", b"a=1&b=2"), Hit)
    miss = index.lookup("POST", "/v1/form", b"a=1&b=3")
    assert isinstance(miss, Miss) and miss.differences == ("body",)


def _form(boundary: str, fields: list[tuple[str, str]], audio: bytes) -> bytes:
    """A multipart form as an SDK sends it: its fields, then one file."""
    out = b""
    for name, value in fields:
        out += f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
    out += f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n'.encode()
    out += b"Content-Type: audio/wav\r\n\r\n" + audio + f"\r\n--{boundary}--\r\n".encode()
    return out


def test_a_multipart_form_matches_whatever_its_boundary() -> None:
    """Clients draw a random boundary per upload: a recorded transcription must still match."""
    uri = "https://api.openai.com/v1/audio/transcriptions"
    path = "/v1/audio/transcriptions"
    fields = [("model", "whisper-1"), ("timestamp_granularities[]", "word"), ("timestamp_granularities[]", "segment")]
    audio = b"RIFF\x00\x01binary\r\n--not-a-boundary\r\n"
    index = Index([_recorded(_form("abc123", fields, audio), "heard", uri=uri)])
    assert _hit(index.lookup("POST", path, _form("zz-other-9", fields, audio))).interaction.response.body == b"heard"
    other_audio = index.lookup("POST", path, _form("q1", fields, audio + b"!"))
    assert isinstance(other_audio, Miss) and other_audio.differences == ("file.bytes", "file.sha256")
    other_model = index.lookup("POST", path, _form("q2", [("model", "gpt-4o-transcribe"), *fields[1:]], audio))
    assert isinstance(other_model, Miss) and other_model.differences == ("model",)
    order = index.lookup("POST", path, _form("q3", [fields[0], fields[2], fields[1]], audio))
    assert isinstance(order, Miss)  # a repeated field's values keep their order


def test_lookup_at_ten_thousand_is_one_hash_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """O(1) shown on the structure, not on a clock: every request has its own dict entry
    (a hit is one hash and one probe), keys are fixed-size digests whatever the body, and a
    hit never walks the recordings (only a miss does)."""
    interactions = [_recorded(_body(f"question {i}"), str(i)) for i in range(10_000)]
    index = Index(interactions)
    assert len(index) == 10_000 and index.key_count == 10_000
    key = index.key("POST", CHAT, _body("question 9876"))
    assert len(key[2]) == 32 and index.recorded(key) == (interactions[9876],)

    def no_scan(*args: object) -> Miss:
        raise AssertionError("a hit must not scan the recordings")

    monkeypatch.setattr(index, "_closest", no_scan)
    for i in (0, 5_000, 9_999):
        assert _hit(index.lookup("POST", CHAT, _body(f"question {i}"))).interaction is interactions[i]
