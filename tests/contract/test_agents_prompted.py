"""Agent frameworks whose *prompt* carries the protocol end their loops on mockserver too.

* AutoGen AgentChat's ``AssistantAgent`` says "Reply with TERMINATE when the task has been
  completed." in its system message; its team ends on ``TextMentionTermination("TERMINATE")``.
* LlamaIndex's ``ReActAgent`` describes the tools and a Thought / Action / Action Input /
  Observation format in its system prompt and parses the answer's text.
* CrewAI with a model that has no native function calling does the same (``Final Answer:``), and
  appends the tool's observation to the model's own step.

Each runs in the ``.venv-prompted`` virtualenv (tests/support/venvs.py) as a subprocess against
the session's server, the way tests/contract/test_agents.py runs the others, and must end within
:data:`MAX_CALLS` calls, having called ``get_weather`` with the city the question names and
answered with what the tool returned. A fourth, LlamaIndex's ``AgentWorkflow``, hands off to an
agent that the ``handoff`` tool's description lists, which then calls its own tool and answers.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.contract.test_agents import TOOL_RESULT, Framework, Run, _describe, _run
from tests.support import venvs
from tests.support.live import Live

MAX_CALLS = 3  # the question, then the answer after the tool's result (one more is slack)

AUTOGEN_TEAM = """
import asyncio
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_ext.models.openai import OpenAIChatCompletionClient

async def get_weather(city: str) -> str:
    \"\"\"Get the current weather for a city.\"\"\"
    return f"It is 21 degrees and sunny in {city}."

async def main():
    client = OpenAIChatCompletionClient(model="gpt-4o-mini", base_url=BASE_URL, api_key="sk-test",
                                        default_headers=HEADERS, max_retries=0)
    agent = AssistantAgent("assistant", model_client=client, tools=[get_weather])
    # The message cap only ends a failing chat: the stop word is to end it first.
    stop = TextMentionTermination("TERMINATE") | MaxMessageTermination(12)
    result = await RoundRobinGroupChat([agent], termination_condition=stop).run(task="What's the weather in Paris?")
    await client.close()
    assert "TERMINATE" in (result.stop_reason or ""), f"the chat did not end on the stop word: {result.stop_reason}"
    done(result.messages[-1].to_text())

asyncio.run(main())
"""

LLAMAINDEX_REACT = """
import asyncio
from llama_index.core.agent.workflow import ReActAgent
from llama_index.core.tools import FunctionTool
from llama_index.llms.openai import OpenAI

def get_weather(city: str) -> str:
    \"\"\"Get the current weather for a city.\"\"\"
    return f"It is 21 degrees and sunny in {city}."

async def main():
    llm = OpenAI(model="gpt-4o-mini", api_base=BASE_URL, api_key="sk-test", default_headers=HEADERS, max_retries=0)
    agent = ReActAgent(tools=[FunctionTool.from_defaults(get_weather)], llm=llm)
    done(str(await agent.run("What's the weather in Paris?", max_iterations=6)))

asyncio.run(main())
"""

CREWAI_TEXT = """
os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"  # offline: no telemetry export
os.environ["OTEL_SDK_DISABLED"] = "true"
from crewai import Agent, Crew, Task
from crewai.llms.providers.openai.completion import OpenAICompletion
from crewai.tools import tool

@tool("get_weather")
def get_weather(city: str) -> str:
    \"\"\"Get the current weather for a city.\"\"\"
    return f"It is 21 degrees and sunny in {city}."

class TextOnly(OpenAICompletion):
    def supports_function_calling(self) -> bool:  # CrewAI then describes the tools in text (ReAct)
        return False

llm = TextOnly(model="gpt-4o-mini", base_url=BASE_URL, api_key="sk-test", default_headers=HEADERS, max_retries=0)
agent = Agent(role="Weather reporter", goal="Report the weather", backstory="You report the weather.",
              tools=[get_weather], llm=llm, max_iter=4, verbose=False)
task = Task(description="What's the weather in Paris?", expected_output="The weather in Paris", agent=agent)
done(str(Crew(agents=[agent], tasks=[task], verbose=False).kickoff().raw))
"""

# A handoff whose valid agents only the tool's description lists: the agent handed to must exist,
# and then answers with its own tool.
LLAMAINDEX_HANDOFF = """
import asyncio
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent
from llama_index.llms.openai import OpenAI

def get_weather(city: str) -> str:
    \"\"\"Get the current weather for a city.\"\"\"
    return f"It is 21 degrees and sunny in {city}."

def book_hotel(city: str) -> str:
    \"\"\"Book a hotel room in a city.\"\"\"
    return f"Booked a room in {city}."

async def main():
    llm = OpenAI(model="gpt-4o-mini", api_base=BASE_URL, api_key="sk-test", default_headers=HEADERS, max_retries=0)
    concierge = FunctionAgent(name="Concierge", description="Books hotels.", tools=[book_hotel], llm=llm,
                              system_prompt="You book hotels. Hand off anything else.", can_handoff_to=["WeatherAgent"])
    weather = FunctionAgent(name="WeatherAgent", description="Looks up the weather.", tools=[get_weather], llm=llm,
                            system_prompt="You look up the weather.")
    flow = AgentWorkflow(agents=[concierge, weather], root_agent="Concierge")
    done(str(await flow.run(user_msg="What's the weather in Paris?")))

asyncio.run(main())
"""

FRAMEWORKS = [
    Framework("autogen-agentchat-terminate", venvs.PROMPTED, AUTOGEN_TEAM),
    Framework("llamaindex-react", venvs.PROMPTED, LLAMAINDEX_REACT),
    Framework("crewai-text", venvs.PROMPTED, CREWAI_TEXT),
    Framework("llamaindex-handoff", venvs.PROMPTED, LLAMAINDEX_HANDOFF),
]
# The handoff, the handed-to agent's call, its answer; the others: the call, the answer.
EXPECTED_CALLS = {"llamaindex-handoff": 3}


def _called_for_paris(run: Run) -> bool:
    """Did the run call get_weather for Paris? A chat tool call, or a ReAct ``Action Input``."""
    for call in run.calls:
        for message in (call.get("body") or {}).get("messages", []):
            for tool_call in message.get("tool_calls") or []:
                function = tool_call.get("function") or {}
                if function.get("name") == "get_weather" and json.loads(function.get("arguments") or "{}") == {
                    "city": "Paris"
                }:
                    return True
            text = message.get("content") if isinstance(message.get("content"), str) else ""
            if message.get("role") == "assistant" and "Action: get_weather" in text and "Paris" in text:
                return True
    return False


@pytest.mark.docs_extras
@pytest.mark.parametrize("framework", FRAMEWORKS, ids=[f.name for f in FRAMEWORKS])
def test_prompted_agent_calls_the_tool_for_the_question_and_ends(
    framework: Framework, live: Live, tmp_path: Path
) -> None:
    run = _run(framework, live, f"prompted-{uuid.uuid4().hex[:12]}", tmp_path)
    most = EXPECTED_CALLS.get(framework.name, MAX_CALLS)
    assert 1 <= len(run.calls) <= most, (
        f"{framework.name} took {len(run.calls)} model calls (at most {most}):\n" + _describe(run.calls)
    )
    assert all(call["status"] == 200 for call in run.calls), _describe(run.calls)
    assert _called_for_paris(run), f"{framework.name} never called get_weather(city='Paris'):\n" + _describe(run.calls)
    assert isinstance(run.output, str) and TOOL_RESULT in run.output, (
        f"{framework.name} answered {run.output!r}, which does not use the tool's result\n" + _describe(run.calls)
    )
