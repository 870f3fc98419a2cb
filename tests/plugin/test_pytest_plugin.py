"""The pytest plugin, used the way a project would: pytester projects with the official SDK.

Runs in-process where it can (a subprocess pytest costs seconds), against one fake upstream.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mockserver.testing.failures import Failures, SessionLayer
from mockserver.testing.plugin import cassette_name, resolve, resolve_all, session_id
from tests.support.live import Live, serve_in_thread

pytest_plugins = ["pytester"]

INI = """
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
filterwarnings = error::pytest.PytestUnraisableExceptionWarning
"""


# ---- precedence: one function, one table ------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "marker", "fixture", "expected"),
    [
        (None, None, None, "none"),
        (None, None, "once", "once"),
        (None, "all", "once", "all"),
        ("new_episodes", "all", "once", "new_episodes"),
        ("none", "all", None, "none"),  # an explicit default on the command line still wins
        (None, False, True, False),  # falsy but given: the marker turns off the config's cassette
        (None, "", "http.503", ""),
    ],
    ids=["default", "fixture", "marker-over-fixture", "option-over-all", "explicit-none", "false-given", "empty"],
)
def test_resolve(option: Any, marker: Any, fixture: Any, expected: Any) -> None:
    assert resolve(option, marker, fixture, "none") == expected


def test_resolve_all_names_unknown_settings() -> None:
    chosen = resolve_all({"record_mode": None}, {"cassette": True}, {"profile": "fireworks", "record_mode": "all"})
    assert (chosen["cassette"], chosen["profile"], chosen["record_mode"], chosen["faults"]) == (
        True,
        "fireworks",
        "all",
        None,
    )
    with pytest.raises(ValueError, match=r"mockserver: unknown setting casette \(known: cassette,"):
        resolve_all({}, {"casette": True}, {})


def test_session_ids_travel_in_a_header() -> None:
    assert session_id("t.py::test_x[é-\n]") == "t.py::test_x[\\xe9-\\n]"


def test_importing_the_plugin_stays_cheap() -> None:
    code = "import sys, mockserver.testing.plugin; print(' '.join(sys.modules))"
    loaded = set(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    )
    heavy = {"torch", "starlette", "pydantic", "httpx2", "openai"}
    handle_and_servers = {f"mockserver.testing.{name}" for name in ("handle", "servers", "shared")}
    assert not loaded & (heavy | handle_and_servers)


def test_the_handle_is_reexported_on_demand() -> None:
    from mockserver.testing import handle as testing
    from mockserver.testing import plugin as pytest_plugin

    assert pytest_plugin.MockServer is testing.MockServer
    assert pytest_plugin.ServerFailure is testing.ServerFailure


async def test_a_request_naming_no_session_is_the_running_tests() -> None:
    seen: list[dict[bytes, bytes]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(dict(scope["headers"]))
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    layer = SessionLayer(app, Failures())
    layer.claim({"x-mockserver-session": "t", "x-mockserver-cassette": "t.yaml", "x-mockserver-record-mode": "all"})
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=layer), base_url="http://test") as client:
        await client.get("/v1/models", headers={"x-mockserver-record-mode": "none"})  # the request's own wins
        await client.get("/v1/models", headers={"x-mockserver-session": "other"})  # another test's: left alone
        await client.get("/__mockserver/journal")  # the admin API: a request without a session means all
        layer.release("t")
        await client.get("/v1/models")
    mine = {b"x-mockserver-session": b"t", b"x-mockserver-cassette": b"t.yaml", b"x-mockserver-record-mode": b"none"}
    assert [{k: v for k, v in h.items() if k.startswith(b"x-mockserver-")} for h in seen] == [
        mine,
        {b"x-mockserver-session": b"other"},
        {},
        {},
    ]


# ---- a project using the plugin --------------------------------------------------------------

CONFTEST = """
import pytest

@pytest.fixture
def mockserver_config():
    return {"upstream": "UPSTREAM"}
"""

TEST_APP = """
import openai
import pytest

MESSAGES = [{"role": "user", "content": "Say hello."}]
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
APPS = []


@pytest.mark.mockserver(cassette=True, record_mode="all")
def test_recorded(mockserver, openai_client):
    APPS.append(mockserver.app)
    answer = openai_client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert answer.choices[0].message.content == "Hello from upstream."


@pytest.mark.mockserver(cassette="test_app/test_recorded.yaml", record_mode="new_episodes")
def test_another_record_mode_shares_the_server(mockserver, openai_client):
    answer = openai_client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert answer.choices[0].message.content == "Hello from upstream."  # replayed: only misses are recorded
    assert APPS == [mockserver.app]


@pytest.mark.mockserver(cassette="test_app/test_recorded.yaml")
def test_drifted(openai_client):
    openai_client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Bye."}])


def test_scripted_tool_call(mockserver, openai_client):
    mockserver.respond(tool_calls=[{"name": "get_weather", "arguments": {"city": "Lisbon"}}], match="weather")
    answer = openai_client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "The weather in Lisbon?"}], tools=[WEATHER]
    )
    call = answer.choices[0].message.tool_calls[0]
    assert (call.function.name, call.function.arguments) == ("get_weather", '{"city":"Lisbon"}')
    assert answer.choices[0].finish_reason == "tool_calls"


@pytest.mark.mockserver(faults="http.429,retry_after=0.01@p=1", rules=[{"text": "Fine."}])
def test_rate_limited_then_retried(mockserver, openai_client):
    mockserver.faults.clear()  # the marker's fault hits every call; this test wants the first only
    mockserver.faults.add("http.429,retry_after=0.01", times=1)
    answer = openai_client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert answer.choices[0].message.content == "Fine."
    assert [(c.status, c.retry_attempt) for c in mockserver.calls] == [(429, 0), (200, 1)]
    assert mockserver.verdicts["honoured_retry_after"]


def test_sessions_do_not_leak(mockserver):
    assert mockserver.calls == [] and mockserver.faults.list() == []


@pytest.mark.mockserver(rules="answers.yaml")
def test_a_client_without_the_headers_is_still_this_tests(mockserver, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", mockserver.base_url)  # as code under test builds its client
    answer = openai.OpenAI(api_key="sk-app").chat.completions.create(model="m", messages=MESSAGES)
    assert answer.choices[0].message.content == "From the rules file."
    assert [c.path for c in mockserver.calls] == ["/v1/chat/completions"]


@pytest.mark.mockserver(inprocess=True, rules=[{"text": "In-process."}], profile="fireworks")
def test_inprocess_sync(mockserver, openai_client):
    answer = openai_client.chat.completions.create(model="m", messages=MESSAGES)
    assert answer.choices[0].message.content == "In-process."
    assert mockserver.calls[0].path == "/v1/chat/completions" and mockserver.url == "http://mockserver.invalid"


@pytest.mark.mockserver(inprocess=True, rules=[{"text": "Async."}])
async def test_inprocess_async(async_openai_client):
    answer = await async_openai_client.chat.completions.create(model="m", messages=MESSAGES)
    assert answer.choices[0].message.content == "Async."


async def test_socket_stream(mockserver, async_openai_client):
    mockserver.respond(text="One two three.")
    stream = await async_openai_client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    assert "".join([c.choices[0].delta.content or "" async for c in stream if c.choices]) == "One two three."


def test_server_failure_fails_the_test(mockserver):
    async def boom(request):
        raise RuntimeError("boom in the server")

    mockserver.app.router.add_route("/v1/boom", boom, methods=["POST"])
    assert mockserver.http_client().post("/v1/boom", json={}).status_code == 500  # passes; the plugin fails it
"""


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[Live, list[Any]]]:
    """A provider that always says hello, and the bodies it was sent."""
    seen: list[Any] = []

    async def chat(request: Request) -> JSONResponse:
        seen.append(await request.json())
        return JSONResponse(
            {
                "id": "chatcmpl-up",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt-4o-mini",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "Hello from upstream."},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
            }
        )

    with serve_in_thread(Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])) as live:
        yield live, seen


def test_a_project_records_replays_scripts_and_injects(
    pytester: pytest.Pytester, upstream: tuple[Live, list[Any]]
) -> None:
    live, seen = upstream
    pytester.makeini(INI)
    pytester.makepyfile(**{"tests/conftest": CONFTEST.replace("UPSTREAM", live.url), "tests/test_app": TEST_APP})
    (pytester.path / "tests" / "answers.yaml").write_text("- text: From the rules file.\n")

    # Recording: the marker's record mode ("all") beats the default; the config gives the upstream.
    # A test with another record mode shares the server, and replays what the first recorded.
    first = pytester.runpytest_inprocess("-k", "not drifted", "tests")
    first.assert_outcomes(passed=9, failed=1)
    first.stdout.fnmatch_lines(["*ServerFailure: the server failed during this test:*", "*raised RuntimeError: boom*"])
    assert len(seen) == 1
    cassette = pytester.path / "tests" / "cassettes" / "test_app" / "test_recorded.yaml"
    assert "chatcmpl-up" in cassette.read_text()

    # Replay: the command line ("none") beats the marker's "all"; the upstream is not asked again,
    # and a request the cassette does not hold fails its test, saying which recording was closest.
    second = pytester.runpytest_inprocess("--mockserver-record-mode=none", "-k", "recorded or drifted", "tests")
    second.assert_outcomes(passed=1, failed=1)
    second.stdout.fnmatch_lines(["*NotFoundError*", "*cassette miss on POST /v1/chat/completions*"])
    assert len(seen) == 1


def test_xdist_workers_share_one_server(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(
        test_shared="""
        import json, os, pytest

        @pytest.mark.parametrize("n", range(6))
        def test_own_session(mockserver, openai_client, n, tmp_path_factory):
            mockserver.faults.add("http.503,retry_after=0.01", times=1)
            openai_client.models.list()
            assert [(c.path, c.status) for c in mockserver.calls] == [("/v1/models", 503), ("/v1/models", 200)]
            shared = tmp_path_factory.getbasetemp().parent
            seen = {"url": mockserver.url, "worker": os.environ["PYTEST_XDIST_WORKER"]}
            (shared / f"seen-{n}.json").write_text(json.dumps(seen))
        """
    )
    base = pytester.path / "temp"  # the run's; each worker's is inside it
    # Each worker is a new interpreter: spare it this venv's heavy, unrelated plugins (~3 s of CPU).
    unrelated = [f"-pno:{name}" for name in ("hypothesispytest", "faker", "schemathesis", "anyio")]
    result = pytester.runpytest_inprocess("-n", "2", f"--basetemp={base}", *unrelated)
    result.assert_outcomes(passed=6)
    seen = [json.loads(p.read_text()) for p in base.glob("seen-*.json")]
    assert len({s["worker"] for s in seen}) == 2
    (url,) = {s["url"] for s in seen}
    # The controller stopped the server at the end of the run, and forgot it.
    assert not list(base.glob("mockserver-*.json"))
    host, port = url.removeprefix("http://").split(":")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, int(port)), timeout=5).close()


def test_a_shared_server_starts_on_a_cassette_directory_not_made_yet(pytester: pytest.Pytester) -> None:
    """``serve`` refuses a cassette directory that does not exist; the plugin's own (where its
    tests record) is made for the shared server, so a test whose cassette is not recorded yet
    gets its miss, not a server that would not start."""
    pytester.makeini(INI)
    pytester.makepyfile(
        test_unrecorded="""
        import openai, pytest

        @pytest.mark.mockserver(cassette=True)
        def test_nothing_recorded_yet(mockserver, openai_client):
            with pytest.raises(openai.NotFoundError, match="No recorded interaction"):
                openai_client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}])
        """
    )
    unrelated = [f"-pno:{name}" for name in ("hypothesispytest", "faker", "schemathesis", "anyio")]
    result = pytester.runpytest_inprocess("-n", "1", f"--basetemp={pytester.path / 'temp'}", *unrelated)
    result.assert_outcomes(passed=1)
    assert (pytester.path / "cassettes").is_dir()


def test_unused_fixtures_change_nothing(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile("def test_plain():\n    assert True\n")
    pytester.runpytest_inprocess("--markers").stdout.fnmatch_lines(["*@pytest.mark.mockserver(cassette, *"])
    pytester.runpytest_inprocess().assert_outcomes(passed=1)
    assert not list(pytester.path.rglob("mockserver-*"))


def test_cassettes_are_named_after_the_test(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    items, _ = pytester.inline_genitems(
        pytester.makepyfile(
            test_names="import pytest\nclass TestA:\n    @pytest.mark.parametrize('x', ['a b'])\n"
            "    def test_m(self, x): pass\n"
        )
    )
    assert cassette_name(items[0]) == "test_names/TestA.test_m[a_b].yaml"
