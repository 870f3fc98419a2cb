"""The fake MCP server at /mcp over a real socket, driven by the official ``mcp`` client: every
method, scripted and drawn tool results, the admin API and its bad input, the transport's MUSTs,
list-changed notifications, MCP calls in the journal beside the model's, and the mcp.* faults."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import openai
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support.live import FROZEN, Live, serve_in_thread

WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "outputSchema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "celsius": {"type": "integer", "minimum": -40, "maximum": 50}},
        "required": ["city", "celsius"],
    },
}
CATALOG = {
    "tools": [WEATHER],
    "resources": [
        {"uri": "docs://readme", "name": "readme", "mimeType": "text/markdown", "text": "# Hello"},
        {"uri": "notes://{topic}", "name": "note", "text": "A note on {topic}."},
    ],
    "prompts": [
        {
            "name": "greet",
            "description": "Say hello.",
            "arguments": [{"name": "who", "required": True}],
            "messages": [{"role": "user", "content": "Say hello to {who}."}],
        }
    ],
}
FILE_TOOL = {
    "name": "clock",
    "description": "From the --mcp file.",
    "inputSchema": {"type": "object"},
    "result": {"content": [{"type": "text", "text": "noon"}]},
}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    path = tmp_path_factory.mktemp("mcp") / "mcp.json"
    path.write_text(json.dumps({"tools": [FILE_TOOL]}))
    settings = Settings(frozen_time=FROZEN, mcp=str(path), backend="script")  # scripted: the model never loads
    with serve_in_thread(create_app(settings)) as server:
        httpx2.post(f"{server.url}/__mockserver/answers", json={"text": "Noted."}).raise_for_status()
        yield server


def admin(live: Live, method: str, session: str, body: Any = None) -> httpx2.Response:
    return httpx2.request(method, f"{live.url}/__mockserver/mcp", params={"session": session}, json=body)


def client(live: Live, session: str, **kwargs: Any) -> Client:
    return Client(f"{live.url}/mcp/{session}", **kwargs)


async def test_every_method_answers_from_the_session_catalog(live: Live) -> None:
    assert admin(live, "POST", "every", CATALOG).status_code == 200
    async with client(live, "every") as c:
        assert c.protocol_version == "2025-11-25"  # server/discover refused: the handshake
        assert c.server_capabilities.tools is not None and c.server_capabilities.tools.list_changed
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert set(tools) == {"get_weather", "clock"}  # the session's over the --mcp file's
        assert tools["get_weather"].output_schema == WEATHER["outputSchema"]
        first = await c.call_tool("get_weather", {"city": "Lisbon"})
        again = await c.call_tool("get_weather", {"city": "Lisbon"})
        assert not first.is_error and first.structured_content == again.structured_content  # seeded
        assert json.loads(first.content[0].text) == first.structured_content  # type: ignore[union-attr]
        assert set(first.structured_content or {}) == {"city", "celsius"}
        bad = await c.call_tool("get_weather", {"city": 7})
        assert bad.is_error and "'city'" in bad.content[0].text  # type: ignore[union-attr]
        assert (await c.call_tool("clock", {})).content[0].text == "noon"  # type: ignore[union-attr]
        with pytest.raises(MCPError) as unknown:
            await c.call_tool("get_wether", {})
        assert unknown.value.code == -32602 and "get_wether" in unknown.value.message
        assert [r.uri for r in (await c.list_resources()).resources] == ["docs://readme"]
        templates = (await c.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["notes://{topic}"]
        note = (await c.read_resource("notes://tides")).contents[0]
        assert note.text == "A note on tides."  # type: ignore[union-attr]
        with pytest.raises(MCPError) as missing:
            await c.read_resource("docs://nothing")
        assert missing.value.code == -32002
        assert [p.name for p in (await c.list_prompts()).prompts] == ["greet"]
        got = await c.get_prompt("greet", {"who": "Ada"})
        assert got.messages[0].content.text == "Say hello to Ada."  # type: ignore[union-attr]
        with pytest.raises(MCPError, match="'who'"):
            await c.get_prompt("greet", {})
        with pytest.warns(Warning):  # ping: deprecated in the 2026 protocol, served in ours
            await c.send_ping()


async def test_a_sequence_plays_in_order_and_a_deleted_tool_is_unknown(live: Live) -> None:
    results = [{"content": [{"type": "text", "text": t}]} for t in ("one", "two")]
    tool = {"name": "count", "description": "", "inputSchema": {"type": "object"}, "result": results}
    admin(live, "POST", "seq", {"tools": [tool]}).raise_for_status()
    async with client(live, "seq") as c:
        texts = [(await c.call_tool("count", {})).content[0].text for _ in range(3)]  # type: ignore[union-attr]
        assert texts == ["one", "two", "two"]
        assert admin(live, "DELETE", "seq").json() == {"cleared": True}
        with pytest.raises(MCPError, match="'count'"):
            await c.call_tool("count", {})
    assert [t["name"] for t in admin(live, "GET", "seq").json()["tools"]] == ["clock"]  # the file's stay


async def test_a_change_is_announced_to_open_sessions(live: Live) -> None:
    heard = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            heard.set()

    async with client(live, "announce", message_handler=on_message) as c:
        await c.list_tools()
        admin(live, "POST", "announce", {"tools": [WEATHER]}).raise_for_status()
        with anyio.fail_after(10):
            await heard.wait()
        assert "get_weather" in [t.name for t in (await c.list_tools()).tools]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"tools": [{"name": "x"}]}, "tools[0].inputSchema"),
        ({"tools": [{"name": "x", "inputSchema": {"type": "string"}}]}, "tools[0].inputSchema"),
        (
            {"tools": [{"name": "x", "inputSchema": {"type": "object"}, "result": {"content": "no"}}]},
            "tools[0].result.content",
        ),
        ({"tools": [{"name": "x", "inputSchema": {"type": "object"}, "fault": "http.500"}]}, "tools[0].fault"),
        ({"tools": [{"name": "x", "inputSchema": {"type": "object"}, "colour": 1}]}, "tools[0].colour"),
        ({"resources": [{"uri": "docs://a", "name": "a"}]}, "resources[0].text"),
        (
            {"prompts": [{"name": "p", "arguments": [], "messages": [{"role": "user", "content": "{who}"}]}]},
            "prompts[0].messages[0].content",
        ),
    ],
    ids=["no-schema", "not-object", "not-a-result", "not-mcp-fault", "unknown-field", "no-text", "no-argument"],
)
def test_bad_definitions_are_refused_naming_the_field(live: Live, body: Any, param: str) -> None:
    answer = admin(live, "POST", "bad", body)
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == param


def test_a_tool_result_over_the_size_limit_is_refused_at_definition(live: Live) -> None:
    big = {"content": [{"type": "text", "text": "x" * (1024 * 1024 + 1)}]}
    tool = {"name": "big", "inputSchema": {"type": "object"}, "result": big}
    answer = admin(live, "POST", "big", {"tools": [tool]})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "tools[0].result"
    assert httpx2.get(f"{live.url}/health").status_code == 200


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def test_the_transport_musts(live: Live) -> None:
    with httpx2.Client(base_url=live.url, headers=ACCEPT) as http:
        foreign = http.post("/mcp", json=INIT, headers={"origin": "https://evil.example"})
        assert foreign.status_code == 403
        assert http.post("/mcp", json=INIT, headers={"origin": "http://localhost:3000"}).status_code == 200
        old = http.post("/mcp", json=INIT, headers={"mcp-protocol-version": "1999-01-01"})
        assert old.status_code == 400 and "MCP-Protocol-Version" in old.json()["error"]["message"]
        discover = {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {}}
        probe = http.post("/mcp", json=discover, headers={"mcp-protocol-version": "2026-07-28"})
        assert probe.json()["error"]["code"] == -32601
        opened = http.post("/mcp", json=INIT)
        sid = opened.headers["mcp-session-id"]
        session = {"mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"}
        note = http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        assert note.status_code == 202
        broken = http.post("/mcp", content=b'{"jsonrpc": "2.0", "id": 2, "method": ', headers=session)
        assert broken.json()["error"]["code"] == -32700
        no_method = http.post("/mcp", json={"jsonrpc": "2.0", "id": 3}, headers=session)
        assert no_method.json()["error"]["code"] in (-32600, -32602)
        call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "clock", "arguments": {}}}
        first, again = (http.post("/mcp", json=call, headers=session) for _ in range(2))
        assert first.content == again.content and b"noon" in first.content  # the same message, the same bytes
        slow = http.post("/mcp", json=call, headers={**session, "x-mockserver-fault": "mcp.latency=60"})
        assert slow.elapsed.total_seconds() >= 0.06 and slow.content == first.content
        gone = http.post(
            "/mcp", json={"jsonrpc": "2.0", "id": 4, "method": "ping"}, headers={**session, "mcp-session-id": "nope"}
        )
        assert gone.status_code == 404


async def test_mcp_calls_join_the_model_calls_in_one_journal(live: Live) -> None:
    headers = {"x-mockserver-session": "timeline"}
    admin(live, "POST", "timeline", {"tools": [WEATHER]}).raise_for_status()
    model = openai.OpenAI(base_url=live.base_url, api_key="sk-test", default_headers=headers, max_retries=0)
    model.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], max_tokens=3)
    async with client(live, "timeline") as c:
        await c.call_tool("get_weather", {"city": "Porto"})
    model.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "so?"}], max_tokens=3)
    entries = httpx2.get(f"{live.url}/__mockserver/journal", params={"session": "timeline"}).json()["entries"]
    steps = [(e["kind"], e["body"].get("method") if e["kind"] == "mcp" else e["path"]) for e in entries]
    assert steps[0] == ("model", "/v1/chat/completions") and steps[-1] == ("model", "/v1/chat/completions")
    assert ("mcp", "tools/call") in steps and ("mcp", "initialize") in steps
    call = next(e for e in entries if e["kind"] == "mcp" and e["body"].get("method") == "tools/call")
    assert call["body"]["params"] == {"name": "get_weather", "arguments": {"city": "Porto"}} and call["status"] == 200


async def test_faults_by_header_and_by_rule(live: Live) -> None:
    admin(live, "POST", "faulty", {"tools": [WEATHER]}).raise_for_status()
    rule = {"faults": "mcp.error", "path": "/mcp/tools/call/get_weather", "times": 1}
    httpx2.post(f"{live.url}/__mockserver/rules", params={"session": "faulty"}, json=rule).raise_for_status()
    async with client(live, "faulty") as c:
        assert (await c.call_tool("get_weather", {"city": "Faro"})).is_error  # the rule's one time
        assert not (await c.call_tool("get_weather", {"city": "Faro"})).is_error
    broken = httpx2.AsyncClient(headers={"x-mockserver-fault": "mcp.protocol_error=32001"})
    async with Client(streamable_http_client(f"{live.url}/mcp/faulty", http_client=broken)) as c:
        with pytest.raises(MCPError) as error:
            await c.list_tools()
        assert error.value.code == -32001
    httpx2.delete(f"{live.url}/__mockserver/rules", params={"session": "faulty"}).raise_for_status()
    rule = {"faults": "mcp.drop_session", "path": "/mcp/tools/list", "times": 1}
    httpx2.post(f"{live.url}/__mockserver/rules", params={"session": "faulty"}, json=rule).raise_for_status()
    async with client(live, "faulty") as c:
        with pytest.raises(MCPError):
            await c.list_tools()  # the session is gone: 404
    entries = httpx2.get(f"{live.url}/__mockserver/journal", params={"session": "faulty"}).json()["entries"]
    applied = [f for e in entries for f in e["faults"]]
    assert applied == ["mcp.error", "mcp.protocol_error=32001", "mcp.drop_session"]


async def test_a_fleet_shares_tools_and_journal_through_the_state(tmp_path: Path) -> None:
    settings = Settings(frozen_time=FROZEN, state=f"sqlite:{tmp_path / 'state.db'}", backend="script")
    with serve_in_thread(create_app(settings)) as one, serve_in_thread(create_app(settings)) as two:
        admin(one, "POST", "fleet", {"tools": [WEATHER]}).raise_for_status()
        async with client(two, "fleet") as c:  # defined through one process, called on another
            answer = await c.call_tool("get_weather", {"city": "Oslo"})
        assert not answer.is_error and answer.structured_content is not None
        entries = httpx2.get(f"{one.url}/__mockserver/journal", params={"session": "fleet"}).json()["entries"]
        methods = [e["body"]["method"] for e in entries if e["kind"] == "mcp"]
        assert methods[0] == "initialize" and "tools/call" in methods
        assert [e["id"] for e in entries] == sorted({e["id"] for e in entries})  # one order for the fleet


async def test_a_change_made_through_another_process_is_announced(tmp_path: Path) -> None:
    """An MCP session open on one process hears list_changed when a tool is defined through
    another process of the fleet."""
    settings = Settings(frozen_time=FROZEN, state=f"sqlite:{tmp_path / 'state.db'}", backend="script")
    heard: list[Any] = []
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            heard.append(message)
            changed.set()

    with serve_in_thread(create_app(settings)) as one, serve_in_thread(create_app(settings)) as two:
        async with client(two, "far", message_handler=on_message) as c:
            assert not (await c.list_tools()).tools  # what it was given: a later change is news
            admin(one, "POST", "far", {"tools": [WEATHER]}).raise_for_status()
            with anyio.fail_after(10):
                await changed.wait()
            assert "get_weather" in [t.name for t in (await c.list_tools()).tools]
    assert heard
