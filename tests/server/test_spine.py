"""The one spine through live servers: faults apply to replays and only applied faults are
reported, fault decisions hash the canonical body, latency stalls stall, stream.error_at fails
each family in its own shape, the backend chain (--backend) answers and names who answered,
and scripted and replayed answers never load torch."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support.live import FROZEN, ROOT, Live, serve_in_process, serve_in_thread

ADMIN = "/__mockserver"
SEA = [{"role": "user", "content": "Tell me about the sea."}]
BODY: dict[str, Any] = {"model": "m", "messages": SEA, "seed": 4, "max_tokens": 6}
STREAM: dict[str, Any] = {**BODY, "stream": True}
DONE = b"data: [DONE]\n\n"
SERVER_ERROR = "The server had an error while processing your request."


@dataclass(frozen=True)
class Recorded:
    dir: Path
    plain: bytes  # the recorded answer to BODY
    stream: bytes  # ... and to STREAM
    sources: tuple[str, str]  # x-mockserver-source of both while recording


def _post(
    live: Live, body: dict[str, Any], fault: str = "", session: str = "", path: str = "/chat/completions"
) -> httpx.Response:
    headers = {"x-mockserver-fault": fault} if fault else {}
    if session:
        headers["x-mockserver-session"] = session
    return httpx.post(live.base_url + path, json=body, headers=headers, timeout=60)


def _events(body: bytes) -> list[bytes]:
    """A stream's events, each with its blank line."""
    return [event + b"\n\n" for event in body.split(b"\n\n") if event]


def _journal(live: Live, session: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = httpx.get(live.url + ADMIN + "/journal", params={"session": session}).json()[
        "entries"
    ]
    return entries


def _script(live: Live, session: str, rule: dict[str, Any]) -> None:
    added = httpx.post(live.url + ADMIN + "/answers", json=rule, params={"session": session})
    assert added.status_code == 200, added.text


@pytest.fixture(scope="module")
def recorded(live: Live, tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """BODY and STREAM recorded from the session's reference server."""
    directory = tmp_path_factory.mktemp("spine-cassettes")
    settings = Settings(cassettes=str(directory), record_mode="all", upstream=live.url, frozen_time=FROZEN)
    with serve_in_thread(create_app(settings)) as recorder:
        plain = _post(recorder, BODY)
        stream = _post(recorder, STREAM)
    assert plain.status_code == stream.status_code == 200
    assert stream.content.endswith(DONE) and len(_events(stream.content)) >= 4
    sources = (plain.headers["x-mockserver-source"], stream.headers["x-mockserver-source"])
    return Recorded(directory, plain.content, stream.content, sources)


@pytest.fixture(scope="module")
def replay(recorded: Recorded) -> Iterator[Live]:
    """The default chain over the cassettes: script, replay, record (a miss is an error)."""
    with serve_in_thread(create_app(Settings(cassettes=str(recorded.dir), frozen_time=FROZEN))) as live:
        yield live


@pytest.fixture(scope="module")
def scripted() -> Iterator[Live]:
    with serve_in_thread(create_app(Settings(backend="script", frozen_time=FROZEN))) as live:
        yield live


@pytest.fixture(scope="module")
def script_replay(recorded: Recorded) -> Iterator[Live]:
    settings = Settings(cassettes=str(recorded.dir), backend="script,replay", frozen_time=FROZEN)
    with serve_in_thread(create_app(settings)) as live:
        yield live


# ---- 1. faults apply to replays, and the report is true ------------------------------------


@pytest.mark.parametrize("body", [BODY, STREAM], ids=["plain", "stream"])
def test_a_latency_fault_paces_a_replay(recorded: Recorded, replay: Live, body: dict[str, Any]) -> None:
    started = time.perf_counter()
    slow = _post(replay, body, fault="latency.ttft=300")
    elapsed = time.perf_counter() - started
    assert elapsed >= 0.3
    assert slow.status_code == 200
    assert slow.headers["x-mockserver-source"] == "replay"
    assert slow.headers["x-mockserver-faults"] == "latency.ttft=300"
    assert slow.content == (recorded.stream if body.get("stream") else recorded.plain)
    plain = _post(replay, body)
    assert "x-mockserver-faults" not in plain.headers and plain.content == slow.content


def test_stream_cut_after_cuts_a_replayed_stream(recorded: Recorded, replay: Live) -> None:
    session = "spine-replay-cut"
    cut = _post(replay, STREAM, fault="stream.cut_after=2", session=session)
    assert cut.status_code == 200
    assert cut.headers["x-mockserver-faults"] == "stream.cut_after=2"
    assert cut.headers["x-mockserver-source"] == "replay"
    assert cut.content == b"".join(_events(recorded.stream)[:2])
    assert len(_events(cut.content)) == 2 and b"[DONE]" not in cut.content
    (entry,) = _journal(replay, session)
    assert (entry["faults"], entry["events"], entry["ended"]) == (["stream.cut_after=2"], 2, "eof")


@pytest.mark.parametrize("body", [BODY, STREAM], ids=["plain", "stream"])
def test_a_content_fault_is_not_applied_to_a_recording_nor_reported(
    recorded: Recorded, replay: Live, body: dict[str, Any]
) -> None:
    session = f"spine-replay-refusal-{bool(body.get('stream'))}"
    refused = _post(replay, body, fault="content.refusal", session=session)
    assert refused.status_code == 200
    assert refused.content == (recorded.stream if body.get("stream") else recorded.plain)
    assert "x-mockserver-faults" not in refused.headers
    (entry,) = _journal(replay, session)
    assert entry["faults"] == []


def test_a_recordings_own_done_obeys_no_done_and_double_done(recorded: Recorded, replay: Live) -> None:
    assert recorded.stream.endswith(DONE)
    bare = _post(replay, STREAM, fault="stream.no_done")
    assert bare.headers["x-mockserver-faults"] == "stream.no_done"
    assert bare.content == recorded.stream.removesuffix(DONE)
    doubled = _post(replay, STREAM, fault="stream.double_done")
    assert doubled.headers["x-mockserver-faults"] == "stream.double_done"
    assert doubled.content == recorded.stream + DONE


# ---- 2. only applied faults are reported ---------------------------------------------------


def test_a_stream_fault_on_a_request_that_does_not_stream_is_not_reported(live: Live) -> None:
    session = "spine-unapplied-stream"
    clean = _post(live, BODY)
    faulted = _post(live, BODY, fault="stream.cut_after=1", session=session)
    assert faulted.status_code == 200
    assert faulted.content == clean.content
    assert faulted.json()["choices"][0]["finish_reason"] == "length"
    assert "x-mockserver-faults" not in faulted.headers
    (entry,) = _journal(live, session)
    assert (entry["faults"], entry["ended"]) == ([], "done")


def test_a_latency_fault_on_an_endpoint_that_generates_nothing_is_not_reported(live: Live) -> None:
    session = "spine-unapplied-latency"
    body = {"model": "text-embedding-3-small", "input": "The sea is wide."}
    embedded = _post(live, body, fault="latency.ttft=1", session=session, path="/embeddings")
    assert embedded.status_code == 200
    assert "x-mockserver-faults" not in embedded.headers
    (entry,) = _journal(live, session)
    assert entry["faults"] == []


def test_an_http_fault_is_reported(live: Live) -> None:
    session = "spine-applied-http"
    failed = _post(live, BODY, fault="http.503", session=session)
    assert failed.status_code == 503
    assert failed.headers["x-mockserver-faults"] == "http.503"
    (entry,) = _journal(live, session)
    assert (entry["faults"], entry["status"]) == (["http.503"], 503)


# ---- 3. fault decisions hash the canonical body ----------------------------------------------


def test_fault_decisions_do_not_depend_on_key_order_or_stream(scripted: Live) -> None:
    session = "spine-canonical"
    _script(scripted, session, {"text": "Scripted."})
    headers = {
        "x-mockserver-fault": "http.503@p=0.5",
        "x-mockserver-session": session,
        "content-type": "application/json",
    }
    outcomes: list[int] = []
    with httpx.Client(base_url=scripted.base_url, headers=headers) as http:
        for i in range(20):
            question = f"Question number {i}?"
            texts = [
                json.dumps({"model": "m", "messages": [{"role": "user", "content": question}], "seed": i}),
                json.dumps({"seed": i, "messages": [{"content": question, "role": "user"}], "model": "m"}),
                json.dumps(
                    {"model": "m", "messages": [{"role": "user", "content": question}], "seed": i, "stream": True}
                ),
                json.dumps(
                    {"stream": True, "seed": i, "messages": [{"content": question, "role": "user"}], "model": "m"}
                ),
            ]
            assert len(set(texts)) == 4
            statuses = [http.post("/chat/completions", content=text).status_code for text in texts]
            assert len(set(statuses)) == 1, (i, statuses)
            outcomes.append(statuses[0])
    assert set(outcomes) == {200, 503}


# ---- 4. latency stalls stall ----------------------------------------------------------------


@pytest.fixture(scope="module")
def stalling() -> Iterator[Live]:
    settings = Settings(backend="script", latency="stall_p=1; stall=fixed:100", frozen_time=FROZEN)
    with serve_in_thread(create_app(settings)) as live:
        _script(live, "spine-stall", {"text": "one two three four five six seven eight"})
        yield live


def _content_deltas(body: bytes) -> list[str]:
    chunks = [json.loads(e[6:]) for e in _events(body) if e.startswith(b"data: {")]
    return [c["choices"][0]["delta"]["content"] for c in chunks if c["choices"][0]["delta"].get("content")]


def test_latency_stalls_stall_a_stream(stalling: Live) -> None:
    started = time.perf_counter()
    streamed = _post(stalling, {"model": "m", "messages": SEA, "max_tokens": 5, "stream": True}, session="spine-stall")
    elapsed = time.perf_counter() - started
    assert streamed.headers["x-mockserver-source"] == "script"
    assert _content_deltas(streamed.content) == ["one", " two", " th", "ree", " four"]
    assert elapsed >= 0.4  # a stall of 100 ms before each token but the first


def test_a_scripted_answer_not_streamed_waits_what_its_stream_would(stalling: Live) -> None:
    started = time.perf_counter()
    plain = _post(stalling, {"model": "m", "messages": SEA, "max_tokens": 5}, session="spine-stall")
    elapsed = time.perf_counter() - started
    assert plain.json()["choices"][0]["message"]["content"] == "one two three four"
    assert elapsed >= 0.4


# ---- 5. stream.error_at in each family's shape ------------------------------------------------


def _named(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    """A Responses stream's (event name, data) pairs."""
    out = []
    for event in _events(body):
        name, data = event.split(b"\n", 1)
        assert name.startswith(b"event: ") and data.startswith(b"data: "), event
        out.append((name[7:].decode(), json.loads(data[6:])))
    return out


def test_stream_error_at_fails_a_responses_stream_in_its_own_shape(live: Live) -> None:
    body = {"model": "m", "input": "Tell me about the sea.", "stream": True, "max_output_tokens": 20}
    failed = _post(live, body, fault="stream.error_at=5", path="/responses")
    assert failed.status_code == 200
    assert failed.headers["x-mockserver-faults"] == "stream.error_at=5"
    events = _named(failed.content)
    assert [name for name, _ in events] == [data["type"] for _, data in events]
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    assert [name for name, _ in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "error",  # event 5's place
        "response.failed",
    ]
    error, closing = events[-2][1], events[-1][1]
    assert error == {
        "type": "error",
        "code": "server_error",
        "message": SERVER_ERROR,
        "param": None,
        "sequence_number": 4,
    }
    assert closing["response"]["status"] == "failed"
    assert closing["response"]["error"] == {"code": "server_error", "message": SERVER_ERROR}
    assert b"[DONE]" not in failed.content
    stored = httpx.get(live.base_url + f"/responses/{closing['response']['id']}").json()
    assert (stored["status"], stored["error"]) == ("failed", {"code": "server_error", "message": SERVER_ERROR})


def test_stream_error_at_fails_a_chat_stream_in_the_openai_envelope(live: Live) -> None:
    failed = _post(live, STREAM, fault="stream.error_at=2")
    assert failed.status_code == 200
    assert failed.headers["x-mockserver-faults"] == "stream.error_at=2"
    first, second = _events(failed.content)
    assert json.loads(first[6:])["choices"][0]["delta"]["role"] == "assistant"
    error = {"error": {"message": SERVER_ERROR, "type": "server_error", "param": None, "code": None}}
    assert second == b"data: " + json.dumps(error, separators=(",", ":")).encode() + b"\n\n"


# ---- 6. the chain -----------------------------------------------------------------------


def test_a_script_chain_without_a_rule_answers_404_no_answer(scripted: Live) -> None:
    missed = _post(scripted, BODY, session="spine-no-rule")
    assert missed.status_code == 404
    assert missed.headers["x-should-retry"] == "false"
    assert missed.json() == {
        "error": {
            "message": "No backend of the chain (script) answers this request.",
            "type": "invalid_request_error",
            "param": None,
            "code": "no_answer",
        }
    }


def test_a_script_chain_with_a_rule_answers_from_the_script(scripted: Live) -> None:
    session = "spine-rule"
    _script(scripted, session, {"text": "Hello from the script."})
    for body in (BODY, STREAM):
        answered = _post(scripted, body, session=session)
        assert answered.status_code == 200
        assert answered.headers["x-mockserver-source"] == "script"
    plain = _post(scripted, {**BODY, "max_tokens": 16}, session=session).json()["choices"][0]
    assert (plain["message"]["content"], plain["finish_reason"]) == ("Hello from the script.", "stop")
    cut = _post(scripted, {**BODY, "max_tokens": 3}, session=session).json()["choices"][0]
    assert (cut["message"]["content"], cut["finish_reason"]) == ("Hello from the", "length")


def test_script_then_replay_replays_a_recording_and_names_the_closest_on_a_miss(
    recorded: Recorded, script_replay: Live
) -> None:
    replayed = _post(script_replay, BODY)
    assert replayed.headers["x-mockserver-source"] == "replay"
    assert replayed.content == recorded.plain
    streamed = _post(script_replay, STREAM)
    assert streamed.headers["x-mockserver-source"] == "replay"
    assert streamed.content == recorded.stream
    missed = _post(script_replay, {**BODY, "max_tokens": 7})
    assert missed.status_code == 404
    assert missed.headers["x-mockserver-source"] == "miss"
    assert missed.headers["x-should-retry"] == "false"
    error = missed.json()["error"]
    assert error["code"] == "cassette_miss"
    assert "differs in: max_tokens." in error["message"]


def test_a_scripted_rule_comes_before_a_recording(recorded: Recorded, script_replay: Live) -> None:
    session = "spine-script-first"
    _script(script_replay, session, {"match": "the sea", "text": "Scripted."})
    answered = _post(script_replay, BODY, session=session)
    assert answered.headers["x-mockserver-source"] == "script"
    assert answered.json()["choices"][0]["message"]["content"] == "Scripted."
    assert _post(script_replay, BODY).content == recorded.plain  # other sessions still replay


def test_the_default_chain_without_cassettes_answers_from_the_reference_model(live: Live) -> None:
    assert _post(live, BODY).headers["x-mockserver-source"] == "reference"


def test_the_chain_settings_name(tmp_path: Path) -> None:
    assert Settings().chain() == ("script", "reference")
    assert Settings(cassettes=str(tmp_path)).chain() == ("script", "replay", "record")
    assert Settings(cassettes=str(tmp_path), on_miss="reference").chain() == ("script", "replay", "record", "reference")
    assert Settings(cassettes=str(tmp_path), backend=" script , replay ").chain() == ("script", "replay")


def test_an_unknown_backend_is_refused_with_the_choices() -> None:
    with pytest.raises(ValidationError) as raised:
        Settings(backend="foo")
    assert "unknown backend 'foo'; choose from script, replay, record, reference" in str(raised.value)


def test_replay_without_cassettes_is_refused_naming_the_flag() -> None:
    with pytest.raises(ValidationError) as raised:
        Settings(backend="replay")
    assert "backend 'replay' needs a cassette directory (--cassettes DIR)" in str(raised.value)


def test_serve_with_an_unknown_backend_says_one_line_and_exits_2() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mockserver", "serve", "--backend", "foo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("mockserver: invalid --backend: unknown backend 'foo'")


# ---- 7. torch stays out of scripted and replayed answers ------------------------------------

IN_PROCESS = """
import asyncio, sys
import httpx
from mockserver import Settings, create_app

app = create_app(Settings(backend="script", frozen_time=1700000000))
body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

async def main():
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://mockserver") as client:
        added = await client.post("/__mockserver/answers", json={"text": "Scripted, no model."})
        assert added.status_code == 200, added.text
        plain = await client.post("/v1/chat/completions", json=body)
        streamed = await client.post("/v1/chat/completions", json={**body, "stream": True})
        print(plain.status_code, plain.headers["x-mockserver-source"], plain.json()["choices"][0]["message"]["content"])
        ended = streamed.text.endswith("data: [DONE]\\n\\n")
        print(streamed.status_code, streamed.headers["x-mockserver-source"], ended)
        print("torch" in sys.modules)
        scored = await client.post("/v1/chat/completions", json={**body, "logprobs": True}, timeout=120)
        print(scored.status_code, scored.json()["choices"][0]["logprobs"] is not None, "torch" in sys.modules)

asyncio.run(main())
"""


def test_scripted_answers_in_process_never_import_torch() -> None:
    done = subprocess.run(
        [sys.executable, "-c", IN_PROCESS], cwd=ROOT, capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "200 script Scripted, no model.",
        "200 script True",
        "False",  # torch was never imported ...
        "200 True False",  # ... nor when an answer asks for logprobs (the model scores it, with NumPy)
    ]


def _libtorch(server: Live) -> list[str]:
    """The lines of the server process's memory map that map libtorch."""
    return [line for line in Path(f"/proc/{server.pid}/maps").read_text().splitlines() if "libtorch" in line]


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/<pid>/maps")
def test_a_script_and_replay_server_never_maps_libtorch(recorded: Recorded) -> None:
    args = ["--backend", "script,replay", "--cassettes", str(recorded.dir), "--frozen-time", str(FROZEN)]
    with serve_in_process(args) as server:
        _script(server, "spine-torch", {"match": "scripted", "text": "Scripted, no model."})
        said = [{"role": "user", "content": "Say something scripted."}]
        scripted = _post(server, {"model": "m", "messages": said}, session="spine-torch")
        assert (scripted.status_code, scripted.headers["x-mockserver-source"]) == (200, "script")
        assert scripted.json()["choices"][0]["message"]["content"] == "Scripted, no model."
        replayed = _post(server, BODY, session="spine-torch")
        assert replayed.headers["x-mockserver-source"] == "replay"
        assert replayed.content == recorded.plain
        assert _libtorch(server) == []
        # Nor once an answer asks for logprobs: the model scores it without torch.
        scored = _post(server, {"model": "m", "messages": said, "logprobs": True}, session="spine-torch")
        assert scored.headers["x-mockserver-source"] == "script"
        assert scored.json()["choices"][0]["logprobs"] is not None
        assert _libtorch(server) == []


# ---- 9. x-mockserver-source names the backend on every answer --------------------------------


def test_every_answer_names_the_backend_that_answered(
    live: Live, recorded: Recorded, replay: Live, scripted: Live
) -> None:
    session = "spine-sources"
    _script(scripted, session, {"text": "Scripted."})
    seen = {
        "reference": [_post(live, body).headers["x-mockserver-source"] for body in (BODY, STREAM)],
        "script": [_post(scripted, body, session=session).headers["x-mockserver-source"] for body in (BODY, STREAM)],
        "replay": [_post(replay, body).headers["x-mockserver-source"] for body in (BODY, STREAM)],
        "record": list(recorded.sources),
        "miss": [_post(replay, {**body, "seed": 5}).headers["x-mockserver-source"] for body in (BODY, STREAM)],
    }
    assert seen == {name: [name, name] for name in ("reference", "script", "replay", "record", "miss")}
