"""Record a real MCP server (here another mockserver's /mcp) into a cassette through the
proxy, then replay it with the upstream gone: the same answers, a recorded error replayed, and a
miss that names the closest recording."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support.live import FROZEN, Live, serve_in_thread

TOOL = {
    "name": "get_weather",
    "description": "The weather.",
    "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "outputSchema": {"type": "object", "properties": {"celsius": {"type": "integer"}}, "required": ["celsius"]},
}
PROMPT = {"name": "plan", "arguments": [{"name": "city"}], "messages": [{"role": "user", "content": "Plan {city}."}]}


def proxy(url: str, session: str, body: Any) -> httpx2.Response:
    return httpx2.post(f"{url}/__mockserver/mcp/proxy", params={"session": session}, json=body)


@pytest.fixture(scope="module")
def recorder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Live, Path]]:
    folder = tmp_path_factory.mktemp("mcp-cassettes")
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN, backend="script", cassettes=str(folder)))) as server:
        yield server, folder


async def test_a_recorded_server_replays_offline(recorder: tuple[Live, Path]) -> None:
    recorder_live, tmp_path = recorder
    # The upstream's block ends before the replay: it is gone then.
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN, backend="script", seed=3))) as upstream:
        catalog = {"tools": [TOOL], "prompts": [PROMPT]}
        httpx2.post(f"{upstream.url}/__mockserver/mcp", params={"session": "up"}, json=catalog).raise_for_status()
        body = {"url": f"{upstream.url}/mcp/up", "cassette": "weather.json", "mode": "record"}
        proxy(recorder_live.url, "rec", body).raise_for_status()
        async with Client(f"{recorder_live.url}/mcp/rec") as c:
            listed = (await c.list_tools()).tools
            live = await c.call_tool("get_weather", {"city": "Rome"})
            prompt = await c.get_prompt("plan", {"city": "Oslo"})
            with pytest.raises(MCPError) as upstream_error:
                await c.call_tool("get_wether", {})
    saved = json.loads((tmp_path / "weather.json").read_text())
    assert [i["method"] for i in saved["interactions"]] == ["tools/list", "tools/call", "prompts/get", "tools/call"]
    proxy(recorder_live.url, "play", {**body, "mode": "replay"}).raise_for_status()  # the upstream is gone
    async with Client(f"{recorder_live.url}/mcp/play") as c:
        assert (await c.list_tools()).tools == listed
        again = await c.call_tool("get_weather", {"city": "Rome"})
        assert again.structured_content == live.structured_content and again.content == live.content
        assert (await c.get_prompt("plan", {"city": "Oslo"})).messages == prompt.messages
        with pytest.raises(MCPError) as replayed:
            await c.call_tool("get_wether", {})
        assert (replayed.value.code, replayed.value.message) == (
            upstream_error.value.code,
            upstream_error.value.message,
        )
        with pytest.raises(MCPError) as miss:
            await c.call_tool("get_weather", {"city": "Paris"})
        assert miss.value.code == -32602 and "Rome" in miss.value.message  # the closest recording


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"url": "http://127.0.0.1:9/mcp", "cassette": "../escape.json", "mode": "record"}, "cassette"),
        ({"url": "http://10.0.0.1/mcp", "cassette": "x.json", "mode": "record"}, "url"),
        ({"url": "http://127.0.0.1:9/mcp", "cassette": "x.json", "mode": "rewind"}, "mode"),
    ],
    ids=["path-escape", "host-not-allowed", "bad-mode"],
)
def test_a_wrong_proxy_is_refused_naming_the_field(recorder: tuple[Live, Path], body: Any, param: str) -> None:
    server, folder = recorder
    answer = proxy(server.url, "bad", body)
    assert answer.status_code == 400 and answer.json()["error"]["param"] == param
    assert not (folder / "x.json").exists() and not (folder.parent / "escape.json").exists()  # nothing written
