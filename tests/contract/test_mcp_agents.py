"""Agent frameworks reach their tools on mockserver's fake MCP server (/mcp) while their model runs
on its chat endpoint: each runs in the virtualenv it lives in (tests/support/venvs.py), calls the
scripted tool once through its own MCP adapter, and ends within :data:`MAX_MODEL_CALLS` model calls
— the whole trajectory (model → tool → model) read from one journal."""

from __future__ import annotations

import json
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import venvs
from tests.support.live import Live

MAX_MODEL_CALLS = 3
TOOL_TEXT = "It is 21 degrees and sunny in Rome."

_PRELUDE = """
import asyncio, json, os
BASE_URL = os.environ["OPENAI_BASE_URL"]
MCP_URL = os.environ["MCP_URL"]
HEADERS = {"x-mockserver-session": os.environ["MOCKSERVER_SESSION"]}

def done(output):
    print("RESULT " + json.dumps({"output": output}))
"""

OPENAI_AGENTS = """
from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.mcp import MCPServerStreamableHttp
from openai import AsyncOpenAI

set_tracing_disabled(True)  # offline: no traces exported

async def main():
    client = AsyncOpenAI(base_url=BASE_URL, api_key="sk-test", default_headers=HEADERS, max_retries=0)
    model = OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)
    async with MCPServerStreamableHttp(name="weather", params={"url": MCP_URL, "headers": HEADERS}) as server:
        agent = Agent(name="forecaster", instructions="Use the tools to answer.", model=model, mcp_servers=[server])
        result = await Runner.run(agent, "What's the weather in Rome?", max_turns=4)
    done(result.final_output)

asyncio.run(main())
"""


# AutoGen's MCP adapter on the mcp 1.x client (.venv-prompted): a client without the 2.x probe.
AUTOGEN = """
from autogen_agentchat.agents import AssistantAgent
from autogen_ext.models.openai import OpenAIChatCompletionClient
from autogen_ext.tools.mcp import StreamableHttpServerParams, mcp_server_tools

async def main():
    client = OpenAIChatCompletionClient(model="gpt-4o-mini", base_url=BASE_URL, api_key="sk-test",
                                        default_headers=HEADERS, max_retries=0)
    tools = await mcp_server_tools(StreamableHttpServerParams(url=MCP_URL, headers=HEADERS))
    agent = AssistantAgent("assistant", model_client=client, tools=tools, reflect_on_tool_use=True)
    result = await agent.run(task="What's the weather in Rome?")
    await client.close()
    done(result.messages[-1].to_text())

asyncio.run(main())
"""


@dataclass(frozen=True)
class Framework:
    name: str
    script: str
    venv: venvs.Venv = venvs.DOCS


# pydantic-ai's MCPToolset needs fastmcp, which .venv-docs does not hold (tests/support/venvs.py builds it).
FRAMEWORKS = [Framework("openai-agents", OPENAI_AGENTS), Framework("autogen-mcp", AUTOGEN, venvs.PROMPTED)]

WEATHER = {
    "name": "get_weather",
    "description": "Get the current weather for a city.",
    "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "result": {"content": [{"type": "text", "text": TOOL_TEXT}]},
}


def _journal(live: Live, session: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{live.url}/__mockserver/journal", params={"session": session}, timeout=10)
    answer.raise_for_status()
    entries: list[dict[str, Any]] = answer.json()["entries"]
    return entries


@pytest.mark.docs_extras
@pytest.mark.parametrize("framework", FRAMEWORKS, ids=[f.name for f in FRAMEWORKS])
def test_an_agent_calls_the_mcp_tool_once_and_ends(framework: Framework, live: Live, tmp_path: Path) -> None:
    python = framework.venv.python_or_skip()
    session = f"mcp-{framework.name}-{uuid.uuid4().hex[:8]}"
    httpx.post(
        f"{live.url}/__mockserver/mcp", params={"session": session}, json={"tools": [WEATHER]}
    ).raise_for_status()
    script = tmp_path / "agent.py"
    script.write_text(_PRELUDE + framework.script)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "OPENAI_BASE_URL": live.base_url,
        "OPENAI_API_KEY": "sk-test",
        "MCP_URL": f"{live.url}/mcp/{session}",
        "MOCKSERVER_SESSION": session,
        "HTTP_PROXY": "http://127.0.0.1:9",  # nothing but the server is reachable
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    done = subprocess.run(
        [str(python), str(script)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    entries = _journal(live, session)
    steps = [("mcp", e["body"].get("method")) if e["kind"] == "mcp" else ("model", e["path"]) for e in entries]
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and results, f"{done.stderr[-4000:]}\n{done.stdout[-1000:]}\n{steps}"
    model_calls = [s for s in steps if s[0] == "model"]
    tool_calls = [e for e in entries if e["kind"] == "mcp" and e["body"].get("method") == "tools/call"]
    assert 1 <= len(model_calls) <= MAX_MODEL_CALLS, steps
    assert len(tool_calls) == 1 and tool_calls[0]["body"]["params"]["name"] == "get_weather", steps
    # model → tool → model: the call sits between model calls, and the last model call carries its result.
    first_call = steps.index(("mcp", "tools/call"))
    assert ("model", "/v1/chat/completions") in steps[:first_call] and steps[-1][0] == "model", steps
    assert TOOL_TEXT in json.dumps(entries[-1]["body"]), steps
    output = json.loads(results[-1].removeprefix("RESULT "))["output"]
    assert isinstance(output, str) and output, output
