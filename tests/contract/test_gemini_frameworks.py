"""Agent frameworks pointed at mockserver's Gemini wire: LangChain's ChatGoogleGenerativeAI
(``create_agent``) and pydantic-ai's ``GoogleModel``, each in the virtualenv it lives in
(tests/support/venvs.py), each ending its loop within three model calls (counted from the
server's journal) with an object valid against its caller's schema, after the tool's result.

Each framework is a small script run as a subprocess with every way out of the machine closed
but the server; it sends ``x-mockserver-session`` so the journal of that session is its calls, and
prints ``RESULT {"output": …, "schema": …}`` at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from tests.support import venvs
from tests.support.live import Live

MAX_CALLS = 3
TOOL_RESULT = "21 degrees and sunny"

_PRELUDE = """
import json, os
BASE_URL = os.environ["GEMINI_BASE_URL"]
HEADERS = {"x-mockserver-session": os.environ["MOCKSERVER_SESSION"]}

def done(output, schema=None):
    print("RESULT " + json.dumps({"output": output, "schema": schema}))
"""

LANGCHAIN = """
from langchain.agents import create_agent
from langchain.agents.structured_output import ToolStrategy
from langchain_core.tools import tool
from langchain_google_genai import ChatGoogleGenerativeAI
from pydantic import BaseModel

class Report(BaseModel):
    city: str
    conditions: str
    temperature_c: int

@tool
def get_weather(city: str) -> str:
    \"\"\"Get the current weather for a city.\"\"\"
    return f"It is 21 degrees and sunny in {city}."

model = ChatGoogleGenerativeAI(model="gemini-2.5-flash", google_api_key="test-key", base_url=BASE_URL,
                               additional_headers=HEADERS, max_retries=0)
agent = create_agent(model, tools=[get_weather], response_format=ToolStrategy(Report))
state = agent.invoke({"messages": [{"role": "user", "content": "What's the weather in Lisbon?"}]},
                     config={"recursion_limit": 12})
done(state["structured_response"].model_dump(), Report.model_json_schema())
"""

PYDANTIC_AI = """
from google import genai
from google.genai.types import HttpOptions
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.models.google import GoogleModel
from pydantic_ai.providers.google import GoogleProvider
from pydantic_ai.usage import UsageLimits

class Forecast(BaseModel):
    city: str
    temperature_c: float
    summary: str

client = genai.Client(api_key="test-key", http_options=HttpOptions(base_url=BASE_URL, headers=HEADERS))
model = GoogleModel("gemini-2.5-flash", provider=GoogleProvider(client=client))
agent = Agent(model, output_type=Forecast, instructions="Use the tools to answer.")

@agent.tool_plain
def get_weather(city: str) -> str:
    \"\"\"Get the current weather for a city.\"\"\"
    return f"It is 21 degrees and sunny in {city}."

result = agent.run_sync("What's the weather in Paris?", usage_limits=UsageLimits(request_limit=8))
done(result.output.model_dump(), Forecast.model_json_schema())
"""

FRAMEWORKS = {"langchain-google-genai": LANGCHAIN, "pydantic-ai-google": PYDANTIC_AI}


def _env(live: Live, session: str, home: Path) -> dict[str, str]:
    keep = ("OPENAI_", "GOOGLE_", "GEMINI_", "HTTP", "ALL_PROXY")
    env = {k: v for k, v in os.environ.items() if not k.startswith(keep)}
    dead = "http://127.0.0.1:9"  # the discard port: a request anywhere else fails at once
    return {
        **env,
        "GEMINI_BASE_URL": live.url + "/gemini",
        "MOCKSERVER_SESSION": session,
        "HTTP_PROXY": dead,
        "HTTPS_PROXY": dead,
        "NO_PROXY": "127.0.0.1,localhost",
        "HOME": str(home),
    }


def _calls(live: Live, session: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{live.url}/__mockserver/journal", params={"session": session}, timeout=10)
    answer.raise_for_status()
    return [e for e in answer.json()["entries"] if "/models/" in e["path"] and "Content" in e["path"]]


@pytest.mark.docs_extras
@pytest.mark.parametrize("name", list(FRAMEWORKS))
def test_agent_loop_on_gemini_ends_with_a_valid_object(name: str, live: Live, tmp_path: Path) -> None:
    python = venvs.DOCS.python_or_skip()
    session = f"gemini-{name}-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "agent.py"
    script.write_text(_PRELUDE + FRAMEWORKS[name])
    done = subprocess.run(
        [str(python), str(script)],
        env=_env(live, session, tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    calls = _calls(live, session)
    shown = "\n".join(f"{c['path']} {c['status']} {json.dumps(c.get('body'))[-600:]}" for c in calls)
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and results, f"{name} failed:\n{done.stderr[-4000:]}\n{shown}"
    assert 1 <= len(calls) <= MAX_CALLS, f"{name} took {len(calls)} calls:\n{shown}"
    assert all(c["status"] == 200 for c in calls), shown
    assert TOOL_RESULT in json.dumps(calls[-1]["body"]), f"{name} ended before the tool's result:\n{shown}"
    result = json.loads(results[-1].removeprefix("RESULT "))
    jsonschema.validate(result["output"], result["schema"])
