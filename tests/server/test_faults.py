"""Each fault, asserted by the exact symptom the official SDK (or httpx) shows a client."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support.live import FROZEN, Live, serve_in_thread

MSGS = [{"role": "user", "content": "Tell me about the sea."}]
ADMIN = "/__mockserver"


@pytest.fixture(scope="module")
def server() -> Iterator[Live]:
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN))) as live:
        yield live


def _client(live: Live, fault: str = "", retries: int = 0, session: str = "", **kw: Any) -> openai.OpenAI:
    headers = {"x-mockserver-fault": fault} if fault else {}
    if session:
        headers["x-mockserver-session"] = session
    return openai.OpenAI(base_url=live.base_url, api_key="k", max_retries=retries, default_headers=headers, **kw)


def _chat(client: openai.OpenAI, **kw: Any) -> Any:
    return client.chat.completions.create(model="m", messages=MSGS, seed=1, max_tokens=12, **kw)  # type: ignore[arg-type]


def _journal(live: Live, session: str | None = None) -> dict[str, Any]:
    params = {"session": session} if session else {}
    body: dict[str, Any] = httpx.get(live.url + ADMIN + "/journal", params=params).json()
    return body


# ---- HTTP faults ---------------------------------------------------------------------------

HTTP: list[Any] = [
    ("http.400", openai.BadRequestError, 400, "context_length_exceeded"),
    ("http.401", openai.AuthenticationError, 401, "invalid_api_key"),
    ("http.403", openai.PermissionDeniedError, 403, "unsupported_country_region_territory"),
    ("http.404", openai.NotFoundError, 404, "model_not_found"),
    ("http.408", openai.APIStatusError, 408, None),
    ("http.409", openai.ConflictError, 409, None),
    ("http.429", openai.RateLimitError, 429, "rate_limit_exceeded"),
    ("http.quota", openai.RateLimitError, 429, "insufficient_quota"),
    ("http.500", openai.InternalServerError, 500, None),
    ("http.502", openai.InternalServerError, 502, None),
    ("http.503", openai.InternalServerError, 503, None),
    ("http.504", openai.InternalServerError, 504, None),
]


@pytest.mark.parametrize(("fault", "error", "status", "code"), HTTP, ids=[h[0] for h in HTTP])
def test_http_faults_raise_the_sdks_error(server: Live, fault: str, error: type, status: int, code: str | None) -> None:
    with pytest.raises(error) as raised:
        _chat(_client(server, fault))
    assert raised.value.status_code == status
    assert raised.value.response.headers["x-mockserver-faults"] == fault
    if code is not None:
        assert raised.value.code == code
    if fault == "http.502":
        assert raised.value.response.headers["content-type"] == "text/html"
        assert b"502 Bad Gateway" in raised.value.response.content


def test_429_carries_openais_rate_limit_headers(server: Live) -> None:
    with pytest.raises(openai.RateLimitError) as raised:
        _chat(_client(server, "http.429,retry_after=1.5"))
    headers = raised.value.response.headers
    assert headers["retry-after"] == "1.5" and headers["retry-after-ms"] == "1500"
    assert headers["x-ratelimit-remaining-requests"] == "0"
    assert {"x-ratelimit-limit-requests", "x-ratelimit-reset-requests"} <= set(headers)


def test_the_sdk_retries_after_the_advertised_delay(server: Live) -> None:
    """A rule fails the first attempt with a 429 asking 0.3 s; the SDK waits it out and succeeds."""
    session = "retry-after"
    rule = {"faults": "http.429,retry_after=0.3", "times": 1, "session": session}
    assert httpx.post(server.url + ADMIN + "/rules", json=rule).status_code == 200
    client = _client(server, retries=2, session=session)
    done = _chat(client)
    assert done.choices[0].message.content
    entries = _journal(server, session)["entries"]
    assert [e["status"] for e in entries] == [429, 200]
    assert [e["retry_attempt"] for e in entries] == [0, 1]
    assert entries[1]["faults"] == []
    assert entries[1]["time"] - entries[0]["time"] >= 0.3  # journal times are wall-clock, even here
    assert _journal(server, session)["verdicts"]["honoured_retry_after"] is True


def test_x_should_retry_false_stops_the_sdks_retries(server: Live) -> None:
    session = "no-retry"
    client = _client(server, "http.500; http.should_retry=0", retries=3, session=session)
    with pytest.raises(openai.InternalServerError) as raised:
        _chat(client)
    assert raised.value.response.headers["x-should-retry"] == "false"
    assert len(_journal(server, session)["entries"]) == 1


# ---- transport faults ----------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["transport.reset", "transport.empty", "transport.garbage", "transport.truncated"])
def test_transport_faults_are_connection_errors(server: Live, fault: str) -> None:
    with pytest.raises(openai.APIConnectionError):
        _chat(_client(server, fault))
    assert httpx.get(server.url + "/health").status_code == 200  # and the server goes on


def test_transport_reset_is_a_reset_to_httpx(server: Live) -> None:
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        httpx.post(server.base_url + "/models", headers={"x-mockserver-fault": "transport.reset"})


def test_hang_is_a_timeout(server: Live) -> None:
    with pytest.raises(openai.APITimeoutError):
        _chat(_client(server, "transport.hang", timeout=0.3))


# ---- stream faults -------------------------------------------------------------------------


def _stream(live: Live, fault: str, **kw: Any) -> list[Any]:
    return list(_chat(_client(live, fault, **kw), stream=True, stream_options={"include_usage": True}))


def _raw_stream(live: Live, fault: str) -> list[bytes]:
    body = {"model": "m", "messages": MSGS, "seed": 1, "max_tokens": 12, "stream": True}
    with httpx.stream(
        "POST", live.base_url + "/chat/completions", json=body, headers={"x-mockserver-fault": fault}
    ) as r:
        return list(r.iter_raw())


def _text(chunks: list[Any]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def test_cut_after_n_ends_cleanly_without_done(server: Live) -> None:
    full = _stream(server, "")
    cut = _stream(server, "stream.cut_after=3")
    assert len(cut) == 3 and [c.model_dump() for c in cut] == [c.model_dump() for c in full[:3]]
    assert b"[DONE]" not in b"".join(_raw_stream(server, "stream.cut_after=3"))


def test_reset_after_n_is_a_connection_error_mid_stream(server: Live) -> None:
    seen = []
    with pytest.raises(openai.APIConnectionError):
        for chunk in _chat(_client(server, "stream.reset_after=2"), stream=True):
            seen.append(chunk)
    assert len(seen) == 2


def test_stall_forever_is_a_read_timeout_and_a_finite_stall_resumes(server: Live) -> None:
    seen = []
    with pytest.raises(openai.APITimeoutError):
        for chunk in _chat(_client(server, "stream.stall_after=2", timeout=0.4), stream=True):
            seen.append(chunk)
    assert len(seen) == 2
    assert _text(_stream(server, "stream.stall_after=2,for=0.2")) == _text(_stream(server, ""))
    raw = b"".join(_raw_stream(server, "stream.stall_after=1,for=0.35,keepalive=0.1"))
    assert raw.count(b": keep-alive\n\n") >= 2


def test_malformed_event_breaks_json_parsing(server: Live) -> None:
    with pytest.raises(json.JSONDecodeError):
        _stream(server, "stream.malformed_at=2")


def test_in_band_error_event_raises_api_error_mid_stream(server: Live) -> None:
    seen = []
    with pytest.raises(openai.APIError, match="server had an error"):
        for chunk in _chat(_client(server, "stream.error_at=3"), stream=True):
            seen.append(chunk)
    assert len(seen) == 2


@pytest.mark.parametrize("fault", ["stream.split_utf8", "stream.bytewise"])
def test_awkward_writes_do_not_change_what_a_correct_client_reads(server: Live, fault: str) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "Say something in French, é à ü."}], "seed": 3}
    plain = httpx.post(server.base_url + "/chat/completions", json=body).json()["choices"][0]["message"]["content"]
    if fault == "stream.bytewise":
        assert len(_raw_stream(server, fault)) > 500  # many one-byte writes reached the client
    client = _client(server, fault)
    streamed = client.chat.completions.create(stream=True, **body)  # type: ignore[call-overload]
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == plain


def test_split_utf8_splits_inside_characters(server: Live) -> None:
    body = {"model": "m", "prompt": "é", "max_tokens": 1, "echo": True, "stream": True}
    with httpx.stream(
        "POST", server.base_url + "/completions", json=body, headers={"x-mockserver-fault": "stream.split_utf8"}
    ) as r:
        pieces = list(r.iter_raw())
    assert any(p.endswith(b"\xc3") for p in pieces)  # a write ends between the two bytes of "é"


def test_missing_and_duplicated_done(server: Live) -> None:
    assert b"".join(_raw_stream(server, "stream.no_done")).count(b"data: [DONE]") == 0
    assert b"".join(_raw_stream(server, "stream.double_done")).count(b"data: [DONE]") == 2
    assert _text(_stream(server, "stream.no_done")) == _text(_stream(server, ""))


def test_no_finish_reason_and_no_usage(server: Live) -> None:
    chunks = _stream(server, "stream.no_finish_reason")
    assert all(c.choices[0].finish_reason is None for c in chunks if c.choices)
    assert _stream(server, "")[-1].usage is not None
    assert all(c.usage is None for c in _stream(server, "stream.no_usage"))


# ---- content and latency faults ------------------------------------------------------------


@pytest.mark.parametrize(("fault", "reason"), [("content.length", "length"), ("content.filter", "content_filter")])
def test_content_faults_set_the_finish_reason(server: Live, fault: str, reason: str) -> None:
    assert _chat(_client(server, fault)).choices[0].finish_reason == reason
    assert _stream(server, fault)[-2].choices[0].finish_reason == reason


def test_refusal_uses_chats_refusal_field(server: Live) -> None:
    from tests.support.spec import validate

    done = _chat(_client(server, "content.refusal"))
    message = done.choices[0].message
    assert message.content is None and message.refusal == "I'm sorry, but I can't help with that."
    assert done.choices[0].finish_reason == "stop"
    validate("CreateChatCompletionResponse", done.model_dump(mode="json", exclude_unset=True))
    chunks = _stream(server, "content.refusal")
    assert "".join(c.choices[0].delta.refusal or "" for c in chunks if c.choices) == message.refusal
    assert _text(chunks) == ""


def test_latency_ttft_delays_the_first_token(server: Live) -> None:
    client = _client(server, "latency.ttft=300")
    response = client.chat.completions.with_raw_response.create(model="m", messages=MSGS, seed=1, max_tokens=4)  # type: ignore[arg-type]
    assert response.elapsed.total_seconds() >= 0.3  # a non-stream waits what its stream would
    entry = _journal(server)["entries"][-1]
    assert entry["faults"] == ["latency.ttft=300"] and entry["duration"] >= 0.3


# ---- choosing faults -----------------------------------------------------------------------


def test_probabilities_are_seeded_per_request(server: Live) -> None:
    def decisions() -> list[int]:
        header = {"x-mockserver-fault": "http.500@p=0.5"}
        with httpx.Client(base_url=server.base_url) as client:
            return [client.get(f"/models/m-{i}", headers=header).status_code for i in range(60)]

    first = decisions()
    assert first == decisions()
    assert 10 < first.count(500) < 50


def test_bad_fault_specs_are_400s_naming_the_header(server: Live) -> None:
    for spec in ("http.999", "stream.cut_after=x", "http.500@p=2", "http.500,foo=1"):
        response = httpx.get(server.base_url + "/models", headers={"x-mockserver-fault": spec})
        assert response.status_code == 400, spec
        assert response.json()["error"]["param"] == "x-mockserver-fault"


def test_rules_match_on_model_and_nth_call_per_session(server: Live) -> None:
    session = "nth"
    rule = {"faults": "http.503", "model": "m", "nth": [2, 3], "session": session}
    created = httpx.post(server.url + ADMIN + "/rules", json=rule).json()
    client = _client(server, session=session)
    other = _client(server, session="elsewhere")
    outcomes = []
    for _ in range(4):
        try:
            _chat(client)
            outcomes.append("ok")
        except openai.InternalServerError:
            outcomes.append("503")
        _chat(other)  # another session's calls neither count nor fail
    assert outcomes == ["ok", "503", "503", "ok"]
    assert httpx.delete(f"{server.url}{ADMIN}/rules/{created['id']}").status_code == 200
    assert httpx.post(server.url + ADMIN + "/rules", json={"faults": "nope"}).status_code == 400


def test_changing_rules_under_streaming_load_loses_no_events(server: Live) -> None:
    body = {"model": "m", "messages": MSGS, "seed": 5, "max_tokens": 40, "temperature": 1.0}
    expected = httpx.post(server.base_url + "/chat/completions", json=body).json()["choices"][0]["message"]["content"]
    results: list[str] = []
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            httpx.post(server.url + ADMIN + "/rules", json={"faults": "http.500", "session": "chaos"})
            httpx.delete(server.url + ADMIN + "/rules", params={"session": "chaos"})

    def stream() -> None:
        streamed = _client(server).chat.completions.create(stream=True, **body)
        results.append("".join(c.choices[0].delta.content or "" for c in streamed if c.choices))

    churner = threading.Thread(target=churn)
    churner.start()
    workers = [threading.Thread(target=stream) for _ in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    stop.set()
    churner.join(timeout=10)
    assert results == [expected] * 8
