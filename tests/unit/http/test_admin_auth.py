"""The admin rule (loopback or --admin-remote, and the admin token compared as bytes) for the
admin API and for the privileged per-request headers."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.testclient import TestClient
from starlette.types import ASGIApp, Receive, Scope, Send

from mockserver.app import create_app
from mockserver.config import Settings
from mockserver.errors import APIError, AuthenticationError, Forbidden
from mockserver.http.auth import Admin, admin_problem, recording_problem, same_token

TOKEN = "admin-secret"
NON_ASCII = "Bearer tökén-ß-☃".encode()  # what a client sends as UTF-8 bytes


@pytest.mark.parametrize(
    ("given", "expected", "same"),
    [
        (b"admin-secret", "admin-secret", True),
        (b"admin-secret ", "admin-secret", False),
        ("tökén".encode(), "tökén", True),  # a non-ASCII token sent as UTF-8 matches
        ("tökén".encode("latin-1"), "tökén", False),
        (b"\xff\xfe", "admin-secret", False),  # not text at all: no exception
        (b"", "", False),  # no token set never matches anything
    ],
)
def test_tokens_are_compared_as_bytes(given: bytes, expected: str, same: bool) -> None:
    assert same_token(given, expected) is same


def test_the_admin_rule() -> None:
    local, remote = "127.0.0.1", "10.0.0.7"
    assert admin_problem(Admin(), local, [], "x") is None
    assert isinstance(admin_problem(Admin(), remote, [], "x", "p"), Forbidden)
    assert admin_problem(Admin(remote=True), remote, [], "x") is None
    guarded = Admin(token=TOKEN)
    assert isinstance(admin_problem(guarded, local, [], "x"), AuthenticationError)
    assert isinstance(admin_problem(guarded, local, [(b"authorization", NON_ASCII)], "x"), AuthenticationError)
    assert admin_problem(guarded, local, [(b"authorization", b"Bearer " + TOKEN.encode())], "x") is None
    assert admin_problem(guarded, local, [(b"x-mockserver-admin-token", TOKEN.encode())], "x") is None
    # a remote client with the token is still refused unless --admin-remote
    problem = admin_problem(guarded, remote, [(b"authorization", b"Bearer " + TOKEN.encode())], "x", "param")
    assert isinstance(problem, Forbidden) and problem.param == "param"


def test_a_non_ascii_bearer_on_the_admin_api_is_a_401_and_the_server_goes_on() -> None:
    app = create_app(Settings(admin_token=TOKEN))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        for value in (NON_ASCII, b"Bearer \xff\xfe", "Bearer ädmin-secret".encode("latin-1")):
            response = client.get("/__mockserver/journal", headers={b"authorization": value})
            assert response.status_code == 401
            error = response.json()["error"]
            assert error["type"] == "invalid_request_error" and error["code"] == "invalid_admin_token"
            assert set(error) == {"message", "type", "param", "code"}
        assert client.get("/__mockserver/journal", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200


def _guarded(admin: Admin) -> ASGIApp:
    async def ok(request: Request) -> Response:
        return JSONResponse({"ok": True})

    def answer(problem: APIError, scope: Scope) -> Response:
        return JSONResponse(problem.body(), status_code=problem.status)

    app = Starlette(routes=[Route("/v1/chat/completions", ok, methods=["POST"])])

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        problem = recording_problem(admin, scope) if scope["type"] == "http" else None
        await (answer(problem, scope) if problem is not None else app)(scope, receive, send)

    return guarded


@pytest.mark.parametrize("header", ["x-mockserver-record-mode", "x-mockserver-cassette"])
def test_the_guard_refuses_a_remote_client_naming_the_header(header: str) -> None:
    with TestClient(_guarded(Admin()), base_url="http://127.0.0.1", client=("10.0.0.7", 5000)) as remote:
        refused = remote.post("/v1/chat/completions", headers={header: "all"})
        assert refused.status_code == 403 and refused.json()["error"]["param"] == header
        assert remote.post("/v1/chat/completions").status_code == 200  # without the header: served
    with TestClient(_guarded(Admin()), base_url="http://127.0.0.1", client=("127.0.0.1", 5000)) as local:
        assert local.post("/v1/chat/completions", headers={header: "all"}).status_code == 200


def test_the_guard_wants_the_admin_token_when_one_is_set() -> None:
    app = _guarded(Admin(token=TOKEN, remote=True))
    with TestClient(app, base_url="http://127.0.0.1", client=("10.0.0.7", 5000)) as remote:
        head = {"x-mockserver-record-mode": "none"}
        missing = remote.post("/v1/chat/completions", headers=head)
        assert missing.status_code == 401 and missing.json()["error"]["param"] == "x-mockserver-record-mode"
        wrong_token = {b"x-mockserver-record-mode": b"none", b"x-mockserver-admin-token": NON_ASCII}
        wrong = remote.post("/v1/chat/completions", headers=wrong_token)
        assert wrong.status_code == 401
        right = remote.post("/v1/chat/completions", headers={**head, "x-mockserver-admin-token": TOKEN})
        assert right.status_code == 200
