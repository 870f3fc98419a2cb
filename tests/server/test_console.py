"""The console's routes over a real socket: the admin rule, the page's own files, one request
opened on every wire (text, tool calls, usage, logprobs), secrets redacted, paging over 10,000
entries, the live feed, and bad input answered with a 400 naming the parameter."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support.live import FROZEN, ROOT, Live, serve_in_thread

CONSOLE = "/__mockserver/console"
SAID = "Sunny, 21 °C."
KEY = "sk-proj-" + "a1B2c3D4e5" * 4  # looks like an OpenAI key: redacted wherever it shows


@pytest.fixture(scope="module")
def server() -> Iterator[Live]:
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN))) as live:
        httpx.post(
            live.url + "/__mockserver/answers",
            json=[
                {"match": "weather", "text": SAID},
                {"match": "forecast", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
            ],
        ).raise_for_status()
        yield live


def opened(live: Live, response: httpx.Response, session: str) -> dict[str, Any]:
    """The console's view of the newest request of ``session``."""
    response.raise_for_status()
    rows = httpx.get(live.url + CONSOLE + "/rows", params={"session": session}).json()["rows"]
    answer = httpx.get(f"{live.url}{CONSOLE}/entries/{rows[0]['id']}")
    answer.raise_for_status()
    data: dict[str, Any] = answer.json()
    return data


CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "weather?"}]}
WIRES = [
    pytest.param("/v1/chat/completions", CHAT, {}, id="chat"),
    pytest.param("/v1/completions", {"model": "gpt-3.5-turbo-instruct", "prompt": "weather?"}, {}, id="completions"),
    pytest.param("/v1/responses", {"model": "gpt-4o-mini", "input": "weather?"}, {}, id="responses"),
    pytest.param(
        "/v1/messages",
        {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "weather?"}]},
        {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"},
        id="anthropic",
    ),
    pytest.param(
        "/v1beta/models/gemini-2.5-flash:generateContent",
        {"contents": [{"role": "user", "parts": [{"text": "weather?"}]}]},
        {"x-goog-api-key": "test"},
        id="gemini",
    ),
]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize(("path", "body", "headers"), WIRES)
def test_an_answer_opened_on_every_wire(
    server: Live, path: str, body: dict[str, Any], headers: dict[str, str], stream: bool
) -> None:
    session = f"wire-{path}-{stream}"
    url, sent = server.url + path, {**body}
    if stream and "gemini" in path:
        url = url.replace(":generateContent", ":streamGenerateContent") + "?alt=sse"
        array = httpx.post(
            url.removesuffix("?alt=sse"), json=sent, headers={**headers, "x-mockserver-session": "array"}
        )
        assert [t["text"] for t in opened(server, array, "array")["folded"]["text"]] == [SAID]  # a JSON array
    elif stream:
        sent["stream"] = True
    view = opened(server, httpx.post(url, json=sent, headers={**headers, "x-mockserver-session": session}), session)
    assert [t["text"] for t in view["folded"]["text"]] == [SAID]
    assert view["source"] == "script" and view["seed"] is not None and view["status"] == 200
    if stream:
        assert len(view["timeline"]["events"]) == view["events"] > 0
        assert view["timeline"]["complete"]
    else:
        assert view["timeline"] is None


def test_tool_calls_usage_and_logprobs(server: Live) -> None:
    call = httpx.post(
        server.url + "/v1/chat/completions",
        json={
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": "the forecast"}],
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
            "stream": True,
            "stream_options": {"include_usage": True},
        },
        headers={"x-mockserver-session": "tools"},
    )
    view = opened(server, call, "tools")
    (tool,) = view["folded"]["tool_calls"]
    assert tool["name"] == "get_weather" and json.loads(tool["arguments"]) == {"city": "Paris"}
    assert view["folded"]["usage"]["completion_tokens"] > 0
    model = httpx.post(
        server.url + "/v1/chat/completions",
        json={
            **CHAT,
            "messages": [{"role": "user", "content": "Lisbon"}],
            "max_tokens": 5,
            "logprobs": True,
            "top_logprobs": 2,
        },
        headers={"x-mockserver-session": "logprobs"},
    )
    wanted = model.json()["choices"][0]["logprobs"]["content"]
    view = opened(server, model, "logprobs")
    assert [(t["token"], t["logprob"]) for t in view["folded"]["logprobs"]] == [
        (t["token"], t["logprob"]) for t in wanted
    ]
    assert all(len(t["top"]) == 2 for t in view["folded"]["logprobs"])


def test_secrets_are_redacted_as_in_cassettes(server: Live) -> None:
    call = httpx.post(
        server.url + "/v1/chat/completions",
        json={**CHAT, "messages": [{"role": "user", "content": f"my key is {KEY}, what is the weather"}]},
        headers={"x-mockserver-session": "secret"},
    )
    view = opened(server, call, "secret")
    shown = json.dumps(view)
    assert KEY not in shown and "REDACTED" in view["body"]["messages"][0]["content"]
    rows = httpx.get(server.url + CONSOLE + "/rows", params={"session": "secret"}).json()["rows"]
    assert KEY not in rows[0]["preview"]


def test_the_admin_rule() -> None:
    local = create_app(Settings(frozen_time=FROZEN))
    with TestClient(local, base_url="http://127.0.0.1", client=("10.0.0.7", 5000)) as remote:
        for path in ("", "/static/console.js", "/rows", "/feed", "/state"):
            answer = remote.get(CONSOLE + path)
            assert answer.status_code == 403 and answer.json()["error"]["code"] == "loopback_only"
    guarded = create_app(Settings(frozen_time=FROZEN, admin_remote=True, admin_token="s3cret-token"))
    with TestClient(guarded, base_url="http://127.0.0.1", client=("10.0.0.7", 5000)) as remote:
        assert remote.get(CONSOLE).status_code == 401
        assert remote.get(CONSOLE, params={"token": "wrong"}).status_code == 401
        page = remote.get(CONSOLE, params={"token": "s3cret-token"})
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert remote.get(CONSOLE + "/rows", headers={"x-mockserver-admin-token": "s3cret-token"}).status_code == 200


def test_the_page_serves_its_own_files_and_nothing_else(server: Live) -> None:
    page = httpx.get(server.url + CONSOLE)
    assert page.status_code == 200
    assert "http://" not in page.text and "https://" not in page.text  # nothing fetched from elsewhere
    for name, media in (("console.js", "text/javascript"), ("console.css", "text/css")):
        shipped = httpx.get(f"{server.url}{CONSOLE}/static/{name}")
        assert shipped.status_code == 200 and shipped.headers["content-type"].startswith(media)
        assert "https://" not in shipped.text
    assert httpx.get(server.url + CONSOLE + "/static/..%2Fview.py").status_code == 404


@pytest.mark.parametrize(
    ("path", "param"),
    [
        ("/rows?before=abc", "before"),
        ("/rows?limit=-1", "limit"),
        ("/trajectory", "session"),
        ("/feed?after=x", "after"),
    ],
)
def test_bad_input_is_a_400_naming_the_parameter(server: Live, path: str, param: str) -> None:
    answer = httpx.get(server.url + CONSOLE + path)
    assert answer.status_code == 400 and answer.json()["error"]["param"] == param
    assert httpx.get(server.url + "/health").status_code == 200


def test_missing_entry_is_a_404(server: Live) -> None:
    assert httpx.get(server.url + CONSOLE + "/entries/999999").status_code == 404


def test_the_feed_sends_a_row_as_a_request_finishes(server: Live) -> None:
    got: list[dict[str, Any]] = []
    ready = threading.Event()

    def listen() -> None:
        with httpx.stream("GET", server.url + CONSOLE + "/feed", params={"session": "feed"}, timeout=10) as feed:
            for line in feed.iter_lines():
                ready.set()
                if line.startswith("data: "):
                    got.append(json.loads(line[6:]))
                    return

    reader = threading.Thread(target=listen, daemon=True)
    reader.start()
    assert ready.wait(5)
    httpx.post(server.url + "/v1/chat/completions", json=CHAT, headers={"x-mockserver-session": "feed"})
    reader.join(10)
    assert got and got[0]["session"] == "feed" and got[0]["status"] == 200 and got[0]["ended"] == "done"


def test_paged_and_fast_with_ten_thousand_entries() -> None:
    app = create_app(Settings(frozen_time=FROZEN, journal_size=10_000))
    journal = app.state.ctx.chaos.journal
    answer = b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}]}'
    for n in range(10_000):
        body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"call {n}"}]}).encode()
        entry = journal.open(
            time=1.0 + n, method="POST", path="/v1/chat/completions", session=f"s{n % 10}", retry_attempt=0, raw=body
        )
        entry.status, entry.ended = 200, "done"
        entry.answering([(b"content-type", b"application/json")], True)
        entry.answered(answer)
        journal.settle(entry)
    with TestClient(app, base_url="http://127.0.0.1") as local:
        started = time.perf_counter()
        first = local.get(CONSOLE + "/rows").json()
        cold = time.perf_counter() - started
        started = time.perf_counter()
        second = local.get(CONSOLE + "/rows", params={"before": first["next"]}).json()
        filtered = local.get(CONSOLE + "/rows", params={"session": "s3", "status": "2xx"}).json()
        warm = time.perf_counter() - started
    assert [r["id"] for r in first["rows"]] == list(range(10_000, 9_950, -1))
    assert [r["id"] for r in second["rows"]] == list(range(9_950, 9_900, -1))
    assert len(filtered["rows"]) == 50 and {r["session"] for r in filtered["rows"]} == {"s3"}
    assert cold < 5.0 and warm < 2.0, (cold, warm)  # generous for a loaded CI: it is ~10× less here


def test_a_cassette_miss_shows_the_closest_recording_and_what_differs() -> None:
    app = create_app(Settings(cassettes=str(ROOT / "cassettes"), frozen_time=FROZEN))
    with TestClient(app, base_url="http://127.0.0.1") as local:
        miss = local.post(
            "/v1/chat/completions",
            json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "nothing recorded this"}]},
        )
        assert miss.status_code == 404
        (row,) = local.get(CONSOLE + "/rows").json()["rows"]
        view = local.get(f"{CONSOLE}/entries/{row['id']}").json()
        library = local.get(CONSOLE + "/state").json()["cassettes"]
    assert row["source"] == "miss" and view["status"] == 404
    assert "closest recorded request" in view["folded"]["error"]["message"]
    assert "differs in" in view["folded"]["error"]["message"]
    assert library["cassettes"] >= 4  # the shipped examples, listed read-only


def test_an_entry_names_the_rule_or_the_recording_that_answered(server: Live) -> None:
    said = opened(server, httpx.post(server.base_url + "/chat/completions", json=CHAT, headers=_in("origin")), "origin")
    rules = httpx.get(server.url + "/__mockserver/answers").json()
    weather = next(rule["id"] for rule in rules["rules"] if rule.get("match") == "weather")
    assert said["source"] == "script" and said["origin"] == f"rule {weather}"
    app = create_app(Settings(cassettes=str(ROOT / "cassettes"), frozen_time=FROZEN))
    recorded = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "Tell me about Lisbon."}],
        "seed": 7,
        "max_tokens": 24,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with TestClient(app, base_url="http://127.0.0.1") as local:
        assert local.post("/v1/chat/completions", json=recorded).status_code == 200
        (row,) = local.get(CONSOLE + "/rows").json()["rows"]
    assert row["source"] == "replay" and row["origin"] == "chat-stream.yaml #1"


def _in(session: str) -> dict[str, str]:
    return {"x-mockserver-session": session}


def test_same_request_and_seed_same_answer_in_the_console(server: Live) -> None:
    body = {**CHAT, "messages": [{"role": "user", "content": "Lisbon"}], "max_tokens": 6, "seed": 11, "stream": True}
    for _ in range(2):
        httpx.post(server.url + "/v1/chat/completions", json=body, headers={"x-mockserver-session": "twice"})
    rows = httpx.get(server.url + CONSOLE + "/rows", params={"session": "twice"}).json()["rows"]
    first, second = (httpx.get(f"{server.url}{CONSOLE}/entries/{r['id']}").json() for r in rows)
    assert first["answer"] == second["answer"] and first["folded"] == second["folded"]
    assert len(first["timeline"]["events"]) == len(second["timeline"]["events"]) == first["events"]


def test_a_sessions_trajectory(server: Live) -> None:
    session = {"x-mockserver-session": "agent"}
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    asked = [{"role": "user", "content": "the forecast please"}]
    first = httpx.post(
        server.url + "/v1/chat/completions", json={**CHAT, "messages": asked, "tools": tools}, headers=session
    ).json()
    call = first["choices"][0]["message"]
    follow = [*asked, call, {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "content": "weather: sun"}]
    httpx.post(server.url + "/v1/chat/completions", json={**CHAT, "messages": follow, "tools": tools}, headers=session)
    turns = httpx.get(server.url + CONSOLE + "/trajectory", params={"session": "agent"}).json()["turns"]
    assert [t["input"][-1]["role"] for t in turns] == ["user", "tool"]
    assert turns[0]["folded"]["tool_calls"][0]["name"] == "get_weather"
    assert turns[1]["input"] == [follow[-1]]  # what came in since the model's call: its result


def test_on_a_fleet_any_process_shows_every_processs_requests(tmp_path: Any) -> None:
    url = f"sqlite:{tmp_path / 'fleet.db'}"
    one = create_app(Settings(frozen_time=FROZEN, state=url))
    two = create_app(Settings(frozen_time=FROZEN, state=url))
    with TestClient(one, base_url="http://127.0.0.1") as first, TestClient(two, base_url="http://127.0.0.1") as second:
        sent = {**CHAT, "max_tokens": 4, "stream": True, "seed": 5}
        streamed = first.post("/v1/chat/completions", json=sent, headers={"x-mockserver-session": "fleet"})
        events = streamed.text.count("data: {")
        (row,) = second.get(CONSOLE + "/rows", params={"session": "fleet"}).json()["rows"]
        view = second.get(f"{CONSOLE}/entries/{row['id']}").json()
    assert len(view["timeline"]["events"]) == events == view["events"]
    assert "".join(t["text"] for t in view["folded"]["text"]) != ""
