"""Recording is privileged: the record-mode and cassette headers never raise the mode above the
server's own --record-mode, a cassette name is checked before the upstream is asked, and (the
admin rule) only loopback clients, or those with --admin-remote and the admin token, send them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.testclient import TestClient

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support.live import FROZEN, Live, serve_in_thread

BODY: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "seed": 1}
ANSWER = {
    "id": "chatcmpl-up",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "up"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
MODE, CASSETTE = "x-mockserver-record-mode", "x-mockserver-cassette"


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[Live, list[str]]]:
    """A provider that counts its calls (and the key it got): nothing here may reach it by accident."""
    calls: list[str] = []

    async def chat(request: Request) -> Response:
        calls.append(request.headers.get("authorization", ""))
        return JSONResponse(ANSWER)

    with serve_in_thread(Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])) as live:
        yield live, calls


def _server(directory: Path, upstream: Live, mode: str) -> Any:
    settings = Settings(cassettes=str(directory), upstream=upstream.url, record_mode=mode, frozen_time=FROZEN)
    return serve_in_thread(create_app(settings))


def _error(response: httpx.Response, status: int, param: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["param"] == param
    return error


def _files(directory: Path) -> list[str]:
    return sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file())


def test_a_request_cannot_raise_the_mode_of_a_replay_only_server(
    upstream: tuple[Live, list[str]], tmp_path: Path
) -> None:
    live, calls = upstream
    before = len(calls)
    cassettes = tmp_path / "cassettes"
    with _server(cassettes, live, "none") as server:
        url = server.base_url + "/chat/completions"
        for stream in (False, True):
            asked = httpx.post(url, json={**BODY, "stream": stream}, headers={MODE: "all", CASSETTE: "planted/x.yaml"})
            error = _error(asked, 403, MODE)
            assert error["code"] == "record_mode_above_ceiling" and "'none'" in error["message"]
        for mode in ("once", "new_episodes"):
            _error(httpx.post(url, json=BODY, headers={MODE: mode}), 403, MODE)
        # What the server allows still works: a miss, not a 5xx
        assert httpx.post(url, json=BODY, headers={MODE: "none"}).status_code == 404
    assert len(calls) == before and _files(tmp_path) == []


def test_a_request_may_record_less_than_the_server_never_more(upstream: tuple[Live, list[str]], tmp_path: Path) -> None:
    live, calls = upstream
    with _server(tmp_path, live, "once") as server:
        url = server.base_url + "/chat/completions"
        _error(httpx.post(url, json=BODY, headers={MODE: "all", CASSETTE: "a.yaml"}), 403, MODE)
        assert httpx.post(url, json=BODY, headers={MODE: "none", CASSETTE: "a.yaml"}).status_code == 404
        before = len(calls)
        recorded = httpx.post(url, json=BODY, headers={MODE: "once", CASSETTE: "a.yaml"})
        assert recorded.status_code == 200 and recorded.headers["x-mockserver-source"] == "record"
        assert len(calls) == before + 1 and _files(tmp_path) == ["a.yaml"]


BAD_NAMES = {
    "dotdot": "../escaped.yaml",
    "deeper": "a/../../escaped",
    "absolute": "/tmp/escaped.yaml",
    "long": "n" * 256,
}


@pytest.mark.parametrize("mode", ["once", "all"])
@pytest.mark.parametrize("name", list(BAD_NAMES.values()), ids=list(BAD_NAMES))
def test_a_bad_cassette_name_is_a_400_before_the_upstream_is_asked(
    upstream: tuple[Live, list[str]], tmp_path: Path, mode: str, name: str
) -> None:
    live, calls = upstream
    before = len(calls)
    cassettes = tmp_path / "cassettes"
    with _server(cassettes, live, "all") as server:
        url = server.base_url + "/chat/completions"
        for stream in (False, True):  # a stream too is refused by its status, not cut after a 200
            response = httpx.post(url, json={**BODY, "stream": stream}, headers={MODE: mode, CASSETTE: name})
            assert _error(response, 400, CASSETTE)["code"] == "invalid_cassette_name"
        assert len(calls) == before and _files(tmp_path) == []
        # and the server goes on recording good names
        good = httpx.post(url, json=BODY, headers={MODE: mode, CASSETTE: "good"})
        assert good.status_code == 200 and _files(cassettes) == ["good.yaml"]


def test_a_cassette_name_through_a_symlink_out_is_refused(upstream: tuple[Live, list[str]], tmp_path: Path) -> None:
    live, calls = upstream
    cassettes, outside = tmp_path / "cassettes", tmp_path / "outside"
    cassettes.mkdir()
    outside.mkdir()
    (cassettes / "link").symlink_to(outside)
    before = len(calls)
    with _server(cassettes, live, "all") as server:
        response = httpx.post(server.base_url + "/chat/completions", json=BODY, headers={CASSETTE: "link/x"})
        _error(response, 400, CASSETTE)
    assert len(calls) == before and list(outside.iterdir()) == []


@pytest.mark.parametrize("header", [MODE, CASSETTE])
def test_a_remote_client_may_not_send_the_recording_headers(
    upstream: tuple[Live, list[str]], tmp_path: Path, header: str
) -> None:
    live, calls = upstream
    before = len(calls)
    settings = Settings(cassettes=str(tmp_path), upstream=live.url, record_mode="all", frozen_time=FROZEN)
    app = create_app(settings)
    with TestClient(app, base_url="http://127.0.0.1", client=("10.0.0.7", 5000)) as remote:
        value = "all" if header == MODE else "planted/x.yaml"
        response = remote.post("/v1/chat/completions", json=BODY, headers={header: value})
        error = response.json()["error"]
        assert response.status_code == 403 and error["param"] == header
        assert remote.get("/health").status_code == 200  # still serving
    assert len(calls) == before and _files(tmp_path) == []
