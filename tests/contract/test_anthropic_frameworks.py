"""Frameworks pointed at the Messages wire end their agent loops in at most three calls.

LangChain's ``ChatAnthropic`` (in ``create_agent``) and pydantic-ai's ``AnthropicModel`` run as
subprocesses in ``.venv-docs`` (they pin their SDKs their own way: tests/support/venvs.py),
against the default chain (scripted answers, then the model), each with a weather tool. The
calls are counted from the server's journal by the session header each script sends.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support import venvs
from tests.support.live import FROZEN, Live, serve_in_thread

MAX_CALLS = 3

_PRELUDE = """
import json, os
BASE_URL = os.environ["ANTHROPIC_BASE_URL"]
HEADERS = {"x-mockserver-session": os.environ["MOCKSERVER_SESSION"]}

def done(output, schema=None):
    print("RESULT " + json.dumps({"output": output, "schema": schema}))
"""

LANGCHAIN = """
from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.tools import tool

@tool
def get_weather(city: str) -> str:
    \"\"\"Get the current weather for a city.\"\"\"
    return f"It is 21 degrees and sunny in {city}."

model = ChatAnthropic(model="claude-sonnet-5", base_url=BASE_URL, api_key="sk-ant-test",
                      default_headers=HEADERS, max_retries=0, max_tokens=256)
agent = create_agent(model, tools=[get_weather])
state = agent.invoke({"messages": [{"role": "user", "content": "What's the weather in Paris?"}]})
done(state["messages"][-1].text)
"""

PYDANTIC_AI = """
from anthropic import AsyncAnthropic
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.usage import UsageLimits

class Forecast(BaseModel):
    city: str
    temperature_c: float
    summary: str

client = AsyncAnthropic(base_url=BASE_URL, api_key="sk-ant-test", default_headers=HEADERS, max_retries=0)
model = AnthropicModel("claude-sonnet-5", provider=AnthropicProvider(anthropic_client=client))
agent = Agent(model, output_type=Forecast, instructions="Use the tools to answer.")

@agent.tool_plain
def get_weather(city: str) -> str:
    \"\"\"Get the current weather for a city.\"\"\"
    return f"It is 21 degrees and sunny in {city}."

result = agent.run_sync("What's the weather in Paris?", usage_limits=UsageLimits(request_limit=6))
done(result.output.model_dump(), Forecast.model_json_schema())
"""

FRAMEWORKS = {"langchain": LANGCHAIN, "pydantic-ai": PYDANTIC_AI}


@pytest.fixture(scope="module")
def server() -> Iterator[Live]:
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN))) as live:
        yield live


def _calls(live: Live, session: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{live.url}/__mockserver/journal", params={"session": session}, timeout=10)
    answer.raise_for_status()
    return [e for e in answer.json()["entries"] if e["path"] == "/v1/messages"]


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_a_framework_agent_loop_ends_within_three_calls(name: str, server: Live, tmp_path: Path) -> None:
    python = venvs.DOCS.python_or_skip()
    session = f"anthropic-{name}-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "agent.py"
    script.write_text(_PRELUDE + FRAMEWORKS[name])
    dead = "http://127.0.0.1:9"  # nothing listens: any way out of the machine fails at once
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "HTTP", "ALL_PROXY"))}
    env |= {
        "ANTHROPIC_BASE_URL": server.url,
        "MOCKSERVER_SESSION": session,
        "HTTP_PROXY": dead,
        "HTTPS_PROXY": dead,
        "NO_PROXY": "127.0.0.1,localhost",
        "HOME": str(tmp_path),
    }
    done = subprocess.run(
        [str(python), str(script)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    calls = _calls(server, session)
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and results, f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    assert all(c["status"] == 200 for c in calls) and 1 <= len(calls) <= MAX_CALLS, calls
    result = json.loads(results[-1][len("RESULT ") :])
    if result["schema"] is not None:
        jsonschema.validate(result["output"], result["schema"])
    assert "21 degrees" in json.dumps(result["output"]) or result["schema"] is not None
