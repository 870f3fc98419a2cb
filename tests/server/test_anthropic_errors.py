"""Anthropic's paths answer errors and faults in Anthropic's envelope, never OpenAI's:
``{"type": "error", "error": {"type", "message"}}`` typed by status, the message naming the
field; faults (``http.429`` with ``retry-after``, ``http.529``, an in-band ``error`` event
mid-stream), keys as ``x-api-key`` or a bearer token, and the journal and metrics naming the
family. Over a real socket, with the official SDK where it shows what a client sees."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support.live import FROZEN, Live, serve_in_thread

MODEL = "claude-sonnet-5"
GOOD = {"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": "Hello"}]}
TOOL = {"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


@pytest.fixture(scope="module")
def server() -> Iterator[Live]:
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN, api_keys=["sk-ant-good"]))) as live:
        yield live


@pytest.fixture
def live(server: Live) -> Iterator[Live]:
    assert server.app is not None
    yield server
    server.app.state.ctx.script.clear()
    server.app.state.ctx.chaos.reset()


def _post(live: Live, body: Any, path: str = "/v1/messages", **headers: str) -> httpx.Response:
    sent = {"x-api-key": "sk-ant-good", "anthropic-version": "2023-06-01", **headers}
    return httpx.post(live.url + path, json=body, headers=sent, timeout=60)


def _anthropic_error(response: httpx.Response, status: int, kind: str) -> str:
    """The error's message, after checking the envelope is Anthropic's (and nothing of OpenAI's)."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"type", "error"} and body["type"] == "error"
    assert set(body["error"]) == {"type", "message"} and body["error"]["type"] == kind
    message: str = body["error"]["message"]
    return message


BAD = [
    ({k: v for k, v in GOOD.items() if k != "max_tokens"}, "max_tokens"),
    ({**GOOD, "max_tokens": 0}, "max_tokens"),
    ({**GOOD, "temperature": 1.5}, "temperature"),
    ({**GOOD, "messages": [{"role": "system", "content": "hi"}]}, "messages.0.role"),
    ({**GOOD, "messages": []}, "messages"),
    ({**GOOD, "messages": [{"role": "user", "content": [{"type": "video", "x": 1}]}]}, "messages.0.content.0"),
    (
        {
            **GOOD,
            "messages": [
                {"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "w", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "x"}]},
            ],
        },
        "messages.2.content.0",  # "…: unexpected `tool_use_id` found in `tool_result` blocks: toolu_2…"
    ),
    ({**GOOD, "tools": [TOOL], "tool_choice": {"type": "tool", "name": "nope"}}, "tool_choice"),
    ({**GOOD, "tools": [{"name": "t"}]}, "input_schema"),
    ({**GOOD, "thinking": {"type": "enabled", "budget_tokens": 100}}, "budget_tokens"),
    ({**GOOD, "max_tokens": 2000, "thinking": {"type": "enabled", "budget_tokens": 4000}}, "max_tokens"),
    ({**GOOD, "system": 7}, "system"),
]


@pytest.mark.parametrize(("body", "field"), BAD, ids=[f"{i}-{f}" for i, (_, f) in enumerate(BAD)])
def test_bad_input_is_a_400_naming_the_field(live: Live, body: Any, field: str) -> None:
    message = _anthropic_error(_post(live, body), 400, "invalid_request_error")
    assert field in message.partition(": ")[0], message  # Anthropic's words: "<field path>: <problem>"


def test_not_json_and_unknown_routes_are_anthropic_errors(live: Live) -> None:
    sent = {"x-api-key": "sk-ant-good", "content-type": "application/json"}
    not_json = httpx.post(live.url + "/v1/messages", content=b"{nope", headers=sent)
    _anthropic_error(not_json, 400, "invalid_request_error")
    _anthropic_error(httpx.get(live.url + "/anthropic/v1/nothing", headers=sent), 404, "not_found_error")
    _anthropic_error(httpx.get(live.url + "/v1/messages", headers=sent), 405, "invalid_request_error")


def test_keys_as_x_api_key_or_bearer(live: Live) -> None:
    assert _post(live, GOOD).status_code == 200
    bearer = httpx.post(
        live.url + "/anthropic/v1/messages", json=GOOD, headers={"authorization": "Bearer sk-ant-good"}, timeout=60
    )
    assert bearer.status_code == 200
    _anthropic_error(_post(live, GOOD, **{"x-api-key": "sk-ant-bad"}), 401, "authentication_error")
    with anthropic.Anthropic(base_url=live.url, api_key="sk-ant-good", max_retries=0) as client:
        assert client.messages.create(**GOOD).type == "message"  # the 2.x SDK: a bearer token


@pytest.mark.parametrize(
    ("fault", "status", "kind", "error"),
    [
        ("http.429,retry_after=2", 429, "rate_limit_error", anthropic.RateLimitError),
        ("http.529", 529, "overloaded_error", anthropic.OverloadedError),
        ("http.500", 500, "api_error", anthropic.InternalServerError),
        ("http.404", 404, "not_found_error", anthropic.NotFoundError),
    ],
)
def test_http_faults_in_anthropics_envelope(live: Live, fault: str, status: int, kind: str, error: type) -> None:
    response = _post(live, GOOD, **{"x-mockserver-fault": fault})
    _anthropic_error(response, status, kind)
    if status == 429:
        assert response.headers["retry-after"] == "2"
    with (
        anthropic.Anthropic(
            base_url=live.url + "/anthropic",
            api_key="sk-ant-good",
            max_retries=0,
            default_headers={"x-mockserver-fault": fault},
        ) as client,
        pytest.raises(error) as raised,
    ):
        client.messages.create(**GOOD)
    assert raised.value.status_code == status


def test_an_error_mid_stream_is_an_in_band_error_event(live: Live) -> None:
    assert live.app is not None
    live.app.state.ctx.script.add(match="Hello", text="one two three four five six")
    body = {**GOOD, "stream": True}
    raw = _post(live, body, **{"x-mockserver-fault": "stream.error_at=4"})
    assert raw.status_code == 200
    events = [block.split("\n") for block in raw.text.strip().split("\n\n")]
    assert events[-1][0] == "event: error"
    assert '"type":"error"' in events[-1][1] and '"api_error"' in events[-1][1]
    with (
        anthropic.Anthropic(
            base_url=live.url,
            api_key="sk-ant-good",
            max_retries=0,
            default_headers={"x-mockserver-fault": "stream.error_at=4"},
        ) as client,
        pytest.raises(anthropic.APIStatusError),
        client.messages.stream(**GOOD) as stream,
    ):
        for _ in stream:
            pass


def test_the_journal_and_metrics_name_the_family(live: Live) -> None:
    assert live.app is not None
    live.app.state.ctx.script.add(match="Hello", text="Hi.")
    session = {"x-mockserver-session": "anthropic-journal"}
    assert _post(live, GOOD, "/anthropic/v1/messages", **session).status_code == 200
    assert _post(live, {**GOOD, "stream": True}, **session).status_code == 200
    entries = httpx.get(live.url + "/__mockserver/journal", params={"session": "anthropic-journal"}).json()["entries"]
    assert [e["path"] for e in entries] == ["/v1/messages", "/v1/messages"]
    metrics = httpx.get(live.url + "/metrics").text
    assert 'endpoint="/v1/messages"' in metrics and 'profile="anthropic"' in metrics


def test_record_by_proxy_then_replay_its_own_bytes(live: Live, tmp_path: Path) -> None:
    """A cassette of Anthropic traffic replays the recorded bytes, streams included."""
    assert live.app is not None
    live.app.state.ctx.script.add(match="Hello", text="Recorded words.")
    upstream = live.url
    directory = tmp_path / "cassettes"
    bodies: list[dict[str, Any]] = [GOOD, {**GOOD, "stream": True}]
    recorder = Settings(cassettes=str(directory), record_mode="all", upstream=upstream, frozen_time=FROZEN)
    recorded: list[bytes] = []
    with serve_in_thread(create_app(recorder)) as proxy:
        for body in bodies:
            answer = _post(proxy, body)
            assert answer.status_code == 200 and answer.headers["x-mockserver-source"] == "record"
            recorded.append(answer.content)
    replayer = Settings(cassettes=str(directory), backend="replay", frozen_time=FROZEN)
    with serve_in_thread(create_app(replayer)) as replay:
        for body, bytes_ in zip(bodies, recorded, strict=True):
            answer = _post(replay, body)
            assert answer.headers["x-mockserver-source"] == "replay"
            assert answer.content == bytes_
        with anthropic.Anthropic(base_url=replay.url, api_key="sk-ant-good", max_retries=0) as client:
            assert client.messages.create(**GOOD).content[0].text == "Recorded words."  # type: ignore[union-attr]


def test_the_rate_limiter_answers_in_anthropics_envelope(tmp_path: Path) -> None:
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN, rate_limit_rpm=1))) as limited:
        assert limited.app is not None
        limited.app.state.ctx.script.add(match="Hello", text="Hi.")
        assert _post(limited, GOOD).status_code == 200
        refused = _post(limited, GOOD)
        assert "limit" in _anthropic_error(refused, 429, "rate_limit_error")
        assert float(refused.headers["retry-after"]) > 0


def test_latency_faults_and_sessions_apply(live: Live) -> None:
    """A session's own rule answers only that session; a latency fault is applied and echoed."""
    assert live.app is not None
    live.app.state.ctx.script.add(match="Hello", text="For this session.", session="s1")
    mine = _post(live, GOOD, **{"x-mockserver-session": "s1", "x-mockserver-fault": "latency.ttft=5"})
    assert mine.json()["content"][0]["text"] == "For this session."
    assert mine.headers["x-mockserver-faults"] == "latency.ttft=5"
    other = _post(live, GOOD, **{"x-mockserver-session": "s2"})
    assert other.headers["x-mockserver-source"] == "reference"


@pytest.mark.parametrize("sampling", [{"temperature": 0.0}, {"top_k": 1}], ids=["temperature-0", "top-k-1"])
def test_sampling_parameters_are_honoured_when_sent(live: Live, sampling: dict[str, Any]) -> None:
    """Greedy decoding (a raw client's ``temperature: 0`` or ``top_k: 1``) ignores the seed;
    sampling at the default temperature does not."""
    body = {**GOOD, "max_tokens": 12, "messages": [{"role": "user", "content": "Tell me about the sea."}]}
    greedy = {_post(live, {**body, **sampling, "seed": s}).json()["content"][0]["text"] for s in (1, 2, 3)}
    sampled = {_post(live, {**body, "seed": s}).json()["content"][0]["text"] for s in (1, 2, 3)}
    assert len(greedy) == 1 and len(sampled) > 1


def test_an_error_carries_request_id_as_anthropic_names_it(live: Live) -> None:
    """Anthropic's SDKs read ``request-id`` (an error's too: ``APIStatusError.request_id``),
    the same value as ``x-request-id``, once."""
    for answer in (_post(live, {**GOOD, "messages": []}), _post(live, GOOD, **{"x-api-key": "sk-ant-wrong"})):
        assert answer.status_code in (400, 401), answer.text
        assert answer.headers.get_list("request-id") == [answer.headers["x-request-id"]]
    ok = _post(live, GOOD)
    assert ok.status_code == 200 and ok.headers.get_list("request-id") == [ok.headers["x-request-id"]]
