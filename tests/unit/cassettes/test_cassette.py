"""Cassettes: vcrpy's format both ways, streams with their timing, atomic and confined files."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import vcr  # type: ignore[import-untyped]
from starlette.applications import Starlette
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse, StreamingResponse
from starlette.responses import Response as StarletteResponse
from starlette.routing import Route

from mockserver.cassettes.files import CassetteDir, CassetteError, resolve_name
from mockserver.cassettes.format import (
    EXTRA_KEY,
    EndKind,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    Stream,
    StreamCapture,
    StreamEvent,
    dumps,
    loads,
    split_events,
)
from tests.support.live import ROOT, serve_in_thread

URL = "https://api.openai.com/v1/chat/completions"
SSE = (b'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n', b'data: {"choices":[{"delta":{"content":"lo"}}]}\n\n')


def _request(content: str = "hi", stream: bool = False) -> RecordedRequest:
    body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}], "stream": stream})
    return RecordedRequest("POST", URL, (("content-type", "application/json"),), body.encode())


def _streamed(end: EndKind = "done") -> Interaction:
    events = [StreamEvent(0.25, SSE[0]), StreamEvent(0.5, SSE[1])]
    if end == "done":
        events.append(StreamEvent(0.75, b"data: [DONE]\n\n"))
    headers = (("content-type", "text/event-stream"), ("x-request-id", "req_1"))
    return Interaction(
        _request(stream=True), RecordedResponse.streamed(200, headers, Stream(tuple(events), end), "OK", 0.8)
    )


def _plain(content: str = "hi", body: bytes = b'{"id":"chatcmpl-1"}') -> Interaction:
    headers = (("content-type", "application/json"), ("x-multi", "a"), ("x-multi", "b"))
    return Interaction(_request(content), RecordedResponse(200, headers, body, "OK", None, 0.3))


@pytest.mark.parametrize("end", ["done", "eof", "reset"])
@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_round_trip_preserves_bytes_offsets_and_end(end: EndKind, fmt: str) -> None:
    interactions: tuple[Interaction, ...] = (_streamed(end), _plain(), _plain("bye", body=b"\xff\xfe not utf-8 \x00"))
    if fmt == "json":  # vcrpy's JSON serializer cannot hold bytes that are not UTF-8
        interactions = interactions[:2]
    back = loads(dumps(interactions, fmt), fmt)
    assert back == interactions
    stream = back[0].response.stream
    assert stream is not None and stream.end == end
    assert [e.offset for e in stream.events] == [0.25, 0.5, 0.75][: len(stream.events)]
    assert back[1].response.headers[-2:] == (("x-multi", "a"), ("x-multi", "b"))


def test_streamed_body_is_the_events_joined() -> None:
    with pytest.raises(ValueError, match="events' bytes"):
        RecordedResponse(200, (), b"other", "", Stream((StreamEvent(0.0, b"data: x\n\n"),)))


def test_capture_cuts_events_as_loading_does() -> None:
    capture = StreamCapture()
    capture.feed(b'data: {"a":1}\n\ndata: {"b"', 0.1)
    capture.feed(b":2}\r\n\r", 0.2)  # the CRLF of this event's blank line straddles two chunks
    capture.feed(b"\ndata: [DONE]\n\ndata: tail", 0.3)
    stream = capture.finish("reset")
    assert [e.data for e in stream.events] == split_events(b"".join(e.data for e in stream.events))
    assert [(e.offset, e.data) for e in stream.events] == [
        (0.1, b'data: {"a":1}\n\n'),
        (0.3, b'data: {"b":2}\r\n\r\n'),
        (0.3, b"data: [DONE]\n\n"),
        (0.3, b"data: tail"),
    ]


def test_extra_key_sits_in_vcrpys_response_dict() -> None:
    text = dumps([_streamed()])
    assert f"    {EXTRA_KEY}:\n" in text and "version: 1" in text
    assert SSE[0].decode() in json.loads(dumps([_streamed()], "json"))["interactions"][0]["response"]["body"]["string"]


def test_vcrpy_replays_a_cassette_we_wrote(tmp_path: Path) -> None:
    store = CassetteDir(tmp_path)
    store.save("ours", [_streamed(), _plain()])
    with vcr.VCR().use_cassette(str(store.resolve("ours")), record_mode="none"), httpx.Client() as client:
        with client.stream("POST", URL, json={"stream": True}) as streamed:
            assert streamed.status_code == 200
            assert streamed.headers["content-type"] == "text/event-stream"
            lines = [line for line in streamed.iter_lines() if line]
        plain = client.post(URL, json={"anything": "vcrpy matches method and URL only"})
    assert lines == [SSE[0].decode().strip(), SSE[1].decode().strip(), "data: [DONE]"]
    assert plain.json() == {"id": "chatcmpl-1"}
    assert plain.headers.get_list("x-multi") == ["a", "b"]


async def _chat(request: StarletteRequest) -> StarletteResponse:
    body = await request.json()
    if not body.get("stream"):
        return JSONResponse({"id": "chatcmpl-1", "choices": [{"message": {"content": "Hello"}}]})

    async def events() -> AsyncIterator[bytes]:
        for part in SSE:
            yield part
        yield b"data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


def test_we_load_what_vcrpy_recorded(tmp_path: Path) -> None:
    path = tmp_path / "theirs.yaml"
    app = Starlette(routes=[Route("/v1/chat/completions", _chat, methods=["POST"])])
    secret = "sk-live" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    with serve_in_thread(app) as live, vcr.VCR().use_cassette(str(path), record_mode="all"):
        headers = {"authorization": f"Bearer {secret}"}
        with httpx.Client(base_url=live.base_url, headers=headers) as client:
            client.post("/chat/completions", json={"model": "m", "messages": []})
            with client.stream("POST", "/chat/completions", json={"model": "m", "stream": True}) as r:
                r.read()
    assert secret in path.read_text()  # vcrpy itself writes the key ...
    plain, streamed = CassetteDir(tmp_path).load("theirs")
    assert secret not in repr((plain, streamed))  # ... we redact it as we read
    assert plain.request.header("authorization") == "REDACTED"
    assert plain.response.status == 200 and json.loads(plain.response.body)["id"] == "chatcmpl-1"
    assert streamed.response.stream is not None  # text/event-stream read as a stream
    assert streamed.response.stream.end == "done"
    assert [e.data for e in streamed.response.stream.events] == [*SSE, b"data: [DONE]\n\n"]
    assert {e.offset for e in streamed.response.stream.events} == {0.0}  # vcrpy kept no timing


def test_foreign_stream_without_done_ends_with_eof() -> None:
    text = (
        "interactions:\n- request: {body: null, headers: {}, method: GET, uri: 'http://h/v1/x'}\n"
        '  response:\n    body: {string: "data: 1\\n\\ndata: 2"}\n'
        "    headers: {Content-Type: [text/event-stream; charset=utf-8]}\n"
        "    status: {code: 200, message: OK}\nversion: 1\n"
    )
    (interaction,) = loads(text)
    assert interaction.request.body == b""
    stream = interaction.response.stream
    assert stream is not None and stream.end == "eof"
    assert [e.data for e in stream.events] == [b"data: 1\n\n", b"data: 2"]


def test_a_recording_stores_no_secret(tmp_path: Path) -> None:
    key, token = "sk-proj-" + "Zq9" * 10, "eyJhbGciOiJIUzI1NiJ9" + ".abc123def456"
    body = json.dumps({"messages": [{"role": "user", "content": f"use {key} and Bearer {token}"}]}).encode()
    request = RecordedRequest(
        "POST", f"{URL}?api_key=k3y&api-version=2024", (("Authorization", f"Bearer {token}"),), body
    )
    response = RecordedResponse(
        200, (("set-cookie", "session=abc"), ("openai-organization", "org-x")), f'"{key}"'.encode()
    )
    store = CassetteDir(tmp_path)
    store.save("secret", [Interaction(request, response)])
    raw = store.resolve("secret").read_text()
    for secret in (key, token, "k3y", "session=abc", "org-x"):
        assert secret not in raw
    assert "api-version=2024" in raw and "REDACTED" in raw
    from mockserver.cassettes.redact import scan

    assert scan(tmp_path) == []


@pytest.mark.parametrize(
    "name", ["../outside", "a/../../outside", "/etc/passwd", "C:\\x", "..\\x", "", "a\x00b", "link/escape"]
)
def test_names_cannot_leave_the_directory(tmp_path: Path, name: str) -> None:
    root, outside = tmp_path / "cassettes", tmp_path / "elsewhere"
    root.mkdir()
    outside.mkdir()
    (root / "link").symlink_to(outside)
    with pytest.raises(ValueError, match="cassette name"):
        CassetteDir(root).save(name, [_plain()])
    assert list(outside.iterdir()) == []


def test_names_resolve_inside_with_a_suffix(tmp_path: Path) -> None:
    assert resolve_name(tmp_path, "chat/stream") == tmp_path.resolve() / "chat" / "stream.yaml"
    assert resolve_name(tmp_path, "a.json") == tmp_path.resolve() / "a.json"


def test_unsafe_or_broken_files_are_refused_by_name(tmp_path: Path) -> None:
    store = CassetteDir(tmp_path)
    (tmp_path / "evil.yaml").write_text("interactions: !!python/object/apply:os.system ['true']\nversion: 1\n")
    (tmp_path / "broken.yaml").write_text("interactions: [\n")
    (tmp_path / "empty.yaml").write_text("")
    for name in ("evil", "broken"):
        with pytest.raises(CassetteError, match=f"{name}.yaml"):
            store.load(name)
    assert store.load("empty") == ()


def test_concurrent_appends_lose_nothing(tmp_path: Path) -> None:
    store = CassetteDir(tmp_path)

    def record(worker: int) -> None:
        for i in range(4):
            store.append("shared", [_plain(f"thread {worker}-{i}")])

    async def record_async() -> None:
        await asyncio.gather(*(store.append_async("shared", [_plain(f"task {i}")]) for i in range(6)))

    threads = [threading.Thread(target=record, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    asyncio.run(record_async())
    for thread in threads:
        thread.join()
    contents = [json.loads(i.request.body)["messages"][0]["content"] for i in store.load("shared")]
    assert sorted(contents) == sorted(
        [f"thread {w}-{i}" for w in range(4) for i in range(4)] + [f"task {i}" for i in range(6)]
    )


APPENDER = """
import sys
from mockserver.cassettes.format import Interaction, RecordedRequest, RecordedResponse
from mockserver.cassettes.files import CassetteDir

store = CassetteDir(sys.argv[1])
for i in range(5):
    body = b'{"prompt": "%s-%d"}' % (sys.argv[2].encode(), i)
    request = RecordedRequest("POST", "http://h/v1/completions", (), body)
    store.append("shared", [Interaction(request, RecordedResponse(200))])
"""


def test_processes_appending_to_one_cassette_are_serialised(tmp_path: Path) -> None:
    children = [
        subprocess.Popen([sys.executable, "-c", APPENDER, str(tmp_path), name], cwd=ROOT) for name in ("a", "b")
    ]
    assert [child.wait(timeout=30) for child in children] == [0, 0]
    prompts = sorted(json.loads(i.request.body)["prompt"] for i in CassetteDir(tmp_path).load("shared"))
    assert prompts == sorted(f"{name}-{i}" for name in "ab" for i in range(5))


CHILD = """
import os, sys, time
from mockserver.cassettes.format import Interaction, RecordedRequest, RecordedResponse
from mockserver.cassettes.files import CassetteDir

store = CassetteDir(sys.argv[1])
def one(i, size=16):
    request = RecordedRequest("POST", "http://h/v1/completions", (), b'{"prompt": "%d"}' % i)
    return Interaction(request, RecordedResponse(200, (), b"x" * size))
for i in range(3):
    store.save(f"early-{i}", [one(i)])
store.save("big", [one(-1)])
if sys.argv[2] == "stalled":  # stop inside the write: temp file full, not yet renamed
    def stall(fd):
        print("writing", flush=True)
        time.sleep(60)
    os.fsync = stall
    store.save("big", [one(i, 2000) for i in range(300)])
else:  # rewrite the big cassette over and over; the kill lands wherever it lands
    print("writing", flush=True)
    n = 0
    while True:
        n += 1
        store.save("big", [one(i, 2000) for i in range(100 + n % 5)])
"""


@pytest.mark.parametrize("mode", ["stalled", "looping"])
def test_sigkill_mid_write_leaves_every_cassette_whole(tmp_path: Path, mode: str) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path), mode], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "writing\n"
        if mode == "looping":
            threading.Event().wait(0.15)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    store = CassetteDir(tmp_path)
    assert store.names() == ["big.yaml", "early-0.yaml", "early-1.yaml", "early-2.yaml"]
    loaded = store.load_all()  # every file under a final name is a whole cassette
    assert [json.loads(loaded[f"early-{i}.yaml"][0].request.body) for i in range(3)] == [
        {"prompt": str(i)} for i in range(3)
    ]
    if mode == "stalled":
        assert len(loaded["big.yaml"]) == 1  # the old version, untouched
        (temp,) = tmp_path.glob(".big.yaml.*.tmp")
        assert temp.stat().st_size > 300 * 2000
        store.save("big", [_plain()])  # the next write of the name sweeps the leftover away
        assert list(tmp_path.glob(".*.tmp")) == []
    else:
        assert len(loaded["big.yaml"]) == 1 or 100 <= len(loaded["big.yaml"]) < 105


def test_importing_the_cassette_modules_loads_neither_torch_nor_vcrpy() -> None:
    code = (
        "import sys, mockserver.cassettes.format, mockserver.cassettes.files, mockserver.cassettes.matching, "
        "mockserver.cassettes.redact;"
        "print(sorted(m for m in ('torch', 'vcr') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
