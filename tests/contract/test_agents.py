"""Agent frameworks end their loops on mockserver: each runs offline against a real server, in
the virtualenv it lives in (tests/support/venvs.py), and must return an object valid against
its caller's schema within :data:`MAX_CALLS` model calls, counted from the server's journal.

Each framework is a small script run as a subprocess. It sends ``x-mockserver-session`` (every
framework here lets a caller set default headers), so the journal of that session is exactly
its calls, and it prints one line ``RESULT {"output": …, "schema": …, "calls": …}`` at the
end of each run: the output as a JSON value, the JSON Schema the caller asked for (None where
the framework answers free text) and the session's model calls so far. A failure shows what
the framework printed and, call by call, what it sent: the tool choice, the tools offered and
the last messages (the server's answer to call *n* is the assistant turn at the end of call
*n + 1*).
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from tests.support import venvs
from tests.support.live import Live

MAX_CALLS = 5
GENERATION_PATHS = ("/v1/chat/completions", "/v1/responses", "/v1/completions")
TOOL_RESULT = "21 degrees and sunny"  # what every script's get_weather returns, with the city

# Every script reads these; the session header keeps its calls apart in the journal. ``done`` also
# prints how many model calls the session's journal holds by then (a request is journaled as it
# arrives): a script that runs its agent twice splits the journal between its runs by that count.
_PRELUDE = f"""
import json, os, urllib.parse, urllib.request
BASE_URL = os.environ["OPENAI_BASE_URL"]
HEADERS = {{"x-mockserver-session": os.environ["MOCKSERVER_SESSION"]}}

def done(output, schema=None):
    query = urllib.parse.urlencode({{"session": HEADERS["x-mockserver-session"]}})
    url = BASE_URL.removesuffix("/v1") + "/__mockserver/journal?" + query
    with urllib.request.build_opener(urllib.request.ProxyHandler({{}})).open(url, timeout=10) as journal:
        entries = json.load(journal)["entries"]  # (the standard library: not every virtualenv has httpx)
    calls = sum(e["path"] in {GENERATION_PATHS!r} for e in entries)
    print("RESULT " + json.dumps({{"output": output, "schema": schema, "calls": calls}}))
"""

PYDANTIC_AI = """
from openai import AsyncOpenAI
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import UsageLimits

class Forecast(BaseModel):
    city: str
    temperature_c: float
    summary: str

client = AsyncOpenAI(base_url=BASE_URL, api_key="sk-test", default_headers=HEADERS, max_retries=0)
model = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client))
agent = Agent(model, output_type=Forecast, instructions="Use the tools to answer.")

@agent.tool_plain
def get_weather(city: str) -> str:
    \"\"\"Get the current weather for a city.\"\"\"
    return f"It is 21 degrees and sunny in {city}."

# The limit only makes a failing loop end sooner than pydantic-ai's default of 50 requests.
result = agent.run_sync("What's the weather in Paris?", usage_limits=UsageLimits(request_limit=8))
done(result.output.model_dump(), Forecast.model_json_schema())
"""

LANGCHAIN = """
from langchain.agents import create_agent
from langchain.agents.structured_output import ToolStrategy
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

class Report(BaseModel):  # its name shares no word with the question (see LANGCHAIN_WEATHER)
    city: str
    conditions: str
    temperature_c: int

@tool
def get_weather(city: str) -> str:
    \"\"\"Get the current weather for a city.\"\"\"
    return f"It is 21 degrees and sunny in {city}."

model = ChatOpenAI(model="gpt-4o-mini", base_url=BASE_URL, api_key="sk-test", default_headers=HEADERS, max_retries=0)
agent = create_agent(model, tools=[get_weather], response_format=ToolStrategy(Report))
# The limit only makes a failing loop end sooner than LangGraph's default.
state = agent.invoke({"messages": [{"role": "user", "content": "What's the weather in Lisbon?"}]},
                     config={"recursion_limit": 12})
done(state["structured_response"].model_dump(), Report.model_json_schema())
"""

# An output class named like the question's subject: its tool (Weather) and get_weather both look
# fitting, and must still come one after the other.
LANGCHAIN_WEATHER = LANGCHAIN.replace("Report", "Weather")

_OPENAI_AGENTS = """
from agents import Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, function_tool
from agents import set_tracing_disabled
from openai import AsyncOpenAI
from pydantic import BaseModel

set_tracing_disabled(True)  # offline: no traces exported

class Forecast(BaseModel):
    city: str
    temperature_c: float
    summary: str

@function_tool
def get_weather(city: str) -> str:
    \"\"\"Get the current weather for a city.\"\"\"
    return f"It is 21 degrees and sunny in {city}."

# Run twice, each run with its own client and agent: the rerun test compares the two (one
# process, so the SDK is imported once).
for _ in range(2):
    client = AsyncOpenAI(base_url=BASE_URL, api_key="sk-test", default_headers=HEADERS, max_retries=0)
    model = MODEL(model="gpt-4o-mini", openai_client=client)
    agent = Agent(name="forecaster", instructions="Use the tools to answer.", model=model,
                  tools=[get_weather], output_type=Forecast)
    result = Runner.run_sync(agent, "What's the weather in Rome?", max_turns=6)
    done(result.final_output.model_dump(), Forecast.model_json_schema())
"""

OPENAI_AGENTS_CHAT = _OPENAI_AGENTS.replace("MODEL(", "OpenAIChatCompletionsModel(")
OPENAI_AGENTS_RESPONSES = _OPENAI_AGENTS.replace("MODEL(", "OpenAIResponsesModel(")

SMOLAGENTS = """
from smolagents import OpenAIServerModel, ToolCallingAgent, tool

@tool
def get_weather(city: str) -> str:
    \"\"\"Get the current weather for a city.

    Args:
        city: the city's name
    \"\"\"
    return f"It is 21 degrees and sunny in {city}."

model = OpenAIServerModel(model_id="gpt-4o-mini", api_base=BASE_URL, api_key="sk-test",
                          client_kwargs={"default_headers": HEADERS, "max_retries": 0})
agent = ToolCallingAgent(tools=[get_weather], model=model, max_steps=4, verbosity_level=0)
run = agent.run("What's the weather in Madrid?", return_full_result=True)
assert run.state == "success", f"the agent did not end by itself: {run.state}"
done(run.output if isinstance(run.output, (str, int, float, dict, list)) else str(run.output))
"""

DSPY = """
import dspy

def get_weather(city: str) -> str:
    \"\"\"Get the current weather for a city.\"\"\"
    return f"It is 21 degrees and sunny in {city}."

lm = dspy.LM("openai/gpt-4o-mini", api_base=BASE_URL, api_key="sk-test", extra_headers=HEADERS,
             cache=False, num_retries=0)
dspy.configure(lm=lm)
react = dspy.ReAct("question -> answer", tools=[get_weather], max_iters=4)
prediction = react(question="What's the weather in Oslo?")
done(prediction.answer)
"""

INSTRUCTOR = """
import instructor
from openai import OpenAI
from pydantic import BaseModel

class Order(BaseModel):
    customer: str
    quantity: int
    unit_price: float
    currency: str

client = instructor.from_openai(
    OpenAI(base_url=BASE_URL, api_key="sk-test", default_headers=HEADERS, max_retries=0), mode=instructor.Mode.JSON
)
order = client.chat.completions.create(
    model="gpt-4o-mini",
    response_model=Order,
    max_retries=2,  # instructor re-asks on a validation error: each re-ask is one more call
    messages=[{"role": "user", "content": "Ada Lovelace ordered 3 notebooks at 12.50 EUR each."}],
)
done(order.model_dump(), Order.model_json_schema())
"""


@dataclass(frozen=True)
class Framework:
    name: str
    venv: venvs.Venv
    script: str
    tool: bool = True  # it offers get_weather, whose result holds TOOL_RESULT


FRAMEWORKS = [
    Framework("pydantic-ai", venvs.DOCS, PYDANTIC_AI),
    Framework("langchain-create-agent", venvs.DOCS, LANGCHAIN),
    Framework("langchain-create-agent-weather", venvs.DOCS, LANGCHAIN_WEATHER),
    Framework("smolagents", venvs.DOCS, SMOLAGENTS),
    Framework("dspy-react", venvs.DOCS, DSPY),
    Framework("instructor-json", venvs.INSTRUCTOR, INSTRUCTOR, tool=False),
]
AGENTS_SDK = [
    Framework("openai-agents-chat", venvs.DOCS, OPENAI_AGENTS_CHAT),
    Framework("openai-agents-responses", venvs.DOCS, OPENAI_AGENTS_RESPONSES),
]


@dataclass(frozen=True)
class Run:
    output: Any
    schema: dict[str, Any] | None
    calls: list[dict[str, Any]]  # this run's journal entries on the generation paths


def _journal(live: Live, session: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{live.url}/__mockserver/journal", params={"session": session}, timeout=10)
    answer.raise_for_status()
    entries: list[dict[str, Any]] = answer.json()["entries"]
    return [e for e in entries if e["path"] in GENERATION_PATHS]


def _offline_env(live: Live, session: str, home: Path) -> dict[str, str]:
    """The environment of a reader's shell, with every way out of the machine closed but the server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "HTTP", "ALL_PROXY"))}
    dead = "http://127.0.0.1:9"  # the discard port: nothing listens, a request fails at once
    return {
        **env,
        "OPENAI_BASE_URL": live.base_url,
        "OPENAI_API_KEY": "sk-test",
        "MOCKSERVER_SESSION": session,
        "HTTP_PROXY": dead,
        "HTTPS_PROXY": dead,
        "NO_PROXY": "127.0.0.1,localhost",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # LiteLLM (under DSPy) would fetch its price list
        "DSPY_CACHEDIR": str(home / "dspy-cache"),
        "HOME": str(home),
    }


def _describe(calls: list[dict[str, Any]]) -> str:
    """What the framework sent, call by call: enough to see where a loop went round."""
    lines = []
    for n, call in enumerate(calls, 1):
        body = call.get("body") or {}
        tools = [
            (t.get("function") or t).get("name", t.get("type")) for t in body.get("tools", []) if isinstance(t, dict)
        ]
        fmt = body.get("response_format") or (body.get("text") or {}).get("format")
        lines.append(
            f"call {n} {call['path']} status={call['status']} tool_choice={body.get('tool_choice')!r} "
            f"tools={tools} response_format={json.dumps(fmt)[:200]}"
        )
        turns = body.get("messages") or body.get("input") or []
        for turn in turns[-3:] if isinstance(turns, list) else [turns]:
            lines.append(f"  {_turn(turn)}")
    return "\n".join(lines)


def _turn(turn: Any) -> str:
    """One message or input item, its text cut to its end (where the latest step is)."""
    if not isinstance(turn, dict):
        return json.dumps(turn)[-400:]
    kind = turn.get("role") or turn.get("type")
    rest = {k: v for k, v in turn.items() if k not in ("role", "type", "content")}
    content = turn.get("content")
    text = content if isinstance(content, str) else json.dumps(content)
    return f"{kind}: {json.dumps(rest)[:400] if rest else ''} …{text[-400:]!r}"


def _run(framework: Framework, live: Live, session: str, tmp_path: Path) -> Run:
    """The script's one run: its result, and every model call the script made."""
    (run,) = _runs(framework, live, session, tmp_path)
    return run


def _runs(framework: Framework, live: Live, session: str, tmp_path: Path) -> list[Run]:
    """Each run of the script (one per ``RESULT`` line, in order), with the model calls made
    since the one before (the last run: every call after it)."""
    python = framework.venv.python_or_skip()
    before = len(_journal(live, session))
    script = tmp_path / "agent.py"  # a file, not -c: smolagents' @tool reads its function's source
    script.write_text(_PRELUDE + framework.script)
    done = subprocess.run(
        [str(python), str(script)],
        env=_offline_env(live, session, tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    calls = _journal(live, session)[before:]
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and results, (
        f"{framework.name} failed after {len(calls)} model calls:\n{done.stderr[-4000:]}\n{done.stdout[-1500:]}\n"
        + _describe(calls)
    )
    runs, start = [], 0
    for n, line in enumerate(results, 1):
        result = json.loads(line.removeprefix("RESULT "))
        end = len(calls) if n == len(results) else result["calls"] - before
        runs.append(Run(result["output"], result["schema"], calls[start:end]))
        start = end
    return runs


def _check(framework: Framework, run: Run) -> None:
    """Ended within MAX_CALLS, after the tool's result, with what the caller asked for."""
    assert 1 <= len(run.calls) <= MAX_CALLS, (
        f"{framework.name} took {len(run.calls)} model calls (at most {MAX_CALLS}):\n" + _describe(run.calls)
    )
    assert all(call["status"] == 200 for call in run.calls), _describe(run.calls)
    if framework.tool:
        # The final answer came after the data tool's result (never in the same answer as its call).
        assert TOOL_RESULT in json.dumps(run.calls[-1]["body"]), (
            f"{framework.name} ended without sending the tool's result back:\n" + _describe(run.calls)
        )
    if run.schema is not None:
        jsonschema.validate(run.output, run.schema)
    else:  # a free-text answer, after a tool's result, uses it
        assert isinstance(run.output, str) and TOOL_RESULT in run.output, (
            f"{framework.name} answered {run.output!r}, which does not use the tool's result\n" + _describe(run.calls)
        )


@pytest.fixture
def session() -> str:
    return f"agents-{uuid.uuid4().hex[:12]}"


@pytest.mark.docs_extras
@pytest.mark.parametrize("framework", FRAMEWORKS, ids=[f.name for f in FRAMEWORKS])
def test_agent_loop_ends_with_a_valid_object(framework: Framework, live: Live, session: str, tmp_path: Path) -> None:
    _check(framework, _run(framework, live, session, tmp_path))


@pytest.mark.docs_extras
@pytest.mark.parametrize("framework", AGENTS_SDK, ids=[f.name for f in AGENTS_SDK])
def test_openai_agents_rerun_on_one_server_gives_the_same_result(
    framework: Framework, live: Live, session: str, tmp_path: Path
) -> None:
    runs = _runs(framework, live, session, tmp_path)
    assert len(runs) == 2, f"{framework.name} ran {len(runs)} times, not twice"
    first, second = runs
    _check(framework, first)
    _check(framework, second)
    assert second.output == first.output, _describe(first.calls) + "\n--- rerun ---\n" + _describe(second.calls)
