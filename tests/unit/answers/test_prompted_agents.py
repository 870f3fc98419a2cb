"""Agents whose prompt carries the protocol, as tables: stop words, ReAct text, the values the
question names, the choices the prompt lists, loop-ending tools under ``auto``, and recall that
parses rather than scrapes. Each row is a conversation the director answers."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from mockserver.answers.choices import listed
from mockserver.answers.director import decide
from mockserver.answers.question import named_values
from mockserver.answers.react import react_prompt
from mockserver.answers.recall import recalled
from mockserver.answers.stop_word import stop_word
from mockserver.answers.transcript import PastResult, Transcript
from mockserver.spine.request import Answer, ChatMessage, ForcedCall, GenerationRequest, Prompt, Sampling, Tool

WEATHER = Tool(
    "get_weather",
    "Get the current weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
AUTOGEN = ChatMessage(
    "system",
    "You are a helpful AI assistant. Solve tasks using your tools. "
    "Reply with TERMINATE when the task has been completed.",
)
QUESTION = ChatMessage("user", "What's the weather in Paris?")

# LlamaIndex's ReActAgent system prompt, cut to what it says about tools and format.
LLAMA_REACT = ChatMessage(
    "system",
    """## Tools
You have access to the following tools:
> Tool Name: get_weather
Tool Description: get_weather(city: str) -> str
Get the current weather for a city.
Tool Args: {"properties": {"city": {"title": "City", "type": "string"}}, "required": ["city"], "type": "object"}

> Tool Name: search_flights
Tool Description: search_flights(origin: str) -> str
Search flights between two airports.
Tool Args: {"properties": {"origin": {"title": "Origin", "type": "string"}}, "required": ["origin"], "type": "object"}

## Output Format
Please answer in the same language as the question and use the following format:
```
Thought: The current language of the user is: (user's language). I need to use a tool to help me answer the question.
Action: tool name (one of get_weather, search_flights) if using a tool.
Action Input: the input to the tool, in a JSON format representing the kwargs (e.g. {"input": "hello world"})
```
If this format is used, the tool will respond in the following format:
```
Observation: tool response
```
At that point, you MUST respond in one of the following two formats:
```
Thought: I can answer without using any more tools. I'll use the user's language to answer
Answer: [your answer here (In the same language as the user's question)]
```
""",
)
# CrewAI without native function calling (its older argument listing).
CREW_REACT = ChatMessage(
    "system",
    """You are Weather reporter. You report the weather.
You ONLY have access to the following tools, and should NEVER make up tools that are not listed here:

Tool Name: get_weather
Tool Arguments: {'city': {'description': None, 'type': 'str'}}
Tool Description: Get the current weather for a city.

IMPORTANT: Use the following format in your response:

```
Thought: you should always think about what to do
Action: the action to take, only one name of [get_weather], just the name, exactly as it's written.
Action Input: the input to the action, just a simple JSON object, enclosed in curly braces.
Observation: the result of the action
```

Once all necessary information is gathered, return the following format:

```
Thought: I now know the final answer
Final Answer: the final answer to the original input question
```""",
)
CREW_TASK = ChatMessage(
    "user", "\nCurrent Task: What's the weather in Lisbon?\n\nBegin! This is VERY important to you.\n\nThought:"
)
# LangChain's classic create_react_agent prompt: one user message, the scratchpad written into it.
LANGCHAIN_REACT = """Answer the following questions as best you can. You have access to the following tools:

get_weather: Get the current weather for a city.
search_flights: Search flights between two airports.

Use the following format:

Question: the input question you must answer
Thought: you should always think about what to do
Action: the action to take, should be one of [get_weather, search_flights]
Action Input: the input to the action
Observation: the result of the action
... (this Thought/Action/Action Input/Observation can repeat N times)
Thought: I now know the final answer
Final Answer: the final answer to the original input question

Begin!

Question: What's the weather in Oslo?
Thought:"""
HANDOFF = Tool(
    "handoff",
    "Useful for handing off to another agent.\nIf you are currently not equipped to handle the user's request, "
    "please hand off to the appropriate agent.\n\nCurrently available agents:\nWeatherAgent: Looks up the weather\n"
    "TravelAgent: Books trips\n",
    {
        "type": "object",
        "properties": {"to_agent": {"type": "string"}, "reason": {"type": "string"}},
        "required": ["to_agent", "reason"],
    },
)
COWORKERS = "one of the following coworkers: Researcher, Senior Writer\nThe input to this tool should be the coworker."
DELEGATE = Tool(
    "delegate_work_to_coworker",
    f"Delegate a specific task to {COWORKERS}",
    {
        "type": "object",
        "properties": {"task": {"type": "string"}, "context": {"type": "string"}, "coworker": {"type": "string"}},
        "required": ["task", "context", "coworker"],
    },
)
ASK = Tool("ask_question_to_coworker", f"Ask a specific question to {COWORKERS}", DELEGATE.parameters)
FINAL_ANSWER = Tool(
    "final_answer",
    "Provides a final answer.",
    {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
)
ORDER = Tool(
    "record_order",
    "Record an order",
    {
        "type": "object",
        "properties": {
            "customer": {"type": "string"},
            "quantity": {"type": "integer"},
            "unit_price": {"type": "number"},
            "currency": {"type": "string"},
            "order_date": {"type": "string"},
        },
        "required": ["customer", "quantity", "unit_price", "currency", "order_date"],
    },
)


def tool_turn(name: str, arguments: str, result: str) -> list[ChatMessage]:
    return [
        ChatMessage("assistant", "", calls=(ForcedCall(name, arguments, "call_1"),)),
        ChatMessage("tool", result, call_id="call_1"),
    ]


@dataclass(frozen=True)
class Row:
    messages: list[ChatMessage]
    tools: tuple[Tool, ...] = ()
    choice: str = "auto"
    calls: tuple[str, ...] = ()  # the tools called, in order
    values: dict[str, Any] = field(default_factory=dict)  # the first call's arguments include these
    values_in: dict[str, list[Any]] = field(default_factory=dict)  # ... or one of these
    starts: str | None = None  # the decided text starts with this
    has: tuple[str, ...] = ()  # the decided text holds each of these
    ends: str | None = None  # the decided text ends with this
    sampled: bool = False  # nothing decided


ROWS = {
    # 1. Stop words: the answer that completes the task ends with the word the prompt asks for.
    "stop-word/calls-the-tool-first": Row([AUTOGEN, QUESTION], (WEATHER,), calls=("get_weather",)),
    "stop-word/after-the-result-quotes-and-ends": Row(
        [AUTOGEN, QUESTION, *tool_turn("get_weather", '{"city":"Paris"}', "sunny")],
        (WEATHER,),
        has=("get_weather returned sunny",),
        ends="TERMINATE",
    ),
    "stop-word/no-tool-needed-ends-at-once": Row([AUTOGEN, ChatMessage("user", "Write a haiku.")], ends="TERMINATE"),
    "stop-word/ag2-quoted": Row(
        [ChatMessage("system", 'Reply "TERMINATE" in the end when everything is done.'), ChatMessage("user", "Hi")],
        ends="TERMINATE",
    ),
    "stop-word/none-asked-is-sampled": Row(
        [ChatMessage("system", "Be brief."), ChatMessage("user", "Hi")], sampled=True
    ),
    # 2. ReAct text: one Action with valid input, then the final answer under the prompt's label.
    "react/llamaindex-action": Row(
        [LLAMA_REACT, QUESTION], starts="Thought:", has=("\nAction: get_weather\nAction Input: ", '"city":"Paris"')
    ),
    "react/llamaindex-after-observation-answers": Row(
        [
            LLAMA_REACT,
            QUESTION,
            ChatMessage("assistant", 'Thought: I need a tool.\nAction: get_weather\nAction Input: {"city": "Paris"}'),
            ChatMessage("user", "Observation: It is 21 degrees and sunny in Paris."),
        ],
        has=("\nAnswer: ", "get_weather returned It is 21 degrees and sunny in Paris."),
    ),
    "react/crewai-action-with-older-arguments": Row(
        [CREW_REACT, CREW_TASK], has=("Action: get_weather\nAction Input: ", '"city":"Lisbon"')
    ),
    "react/crewai-observation-on-the-step-then-a-nudge": Row(
        [
            CREW_REACT,
            CREW_TASK,
            ChatMessage(
                "assistant",
                'Thought: go\nAction: get_weather\nAction Input: {"city":"Lisbon"}\nObservation: 19 degrees in Lisbon',
            ),
            ChatMessage("user", "Analyze the tool result. If requirements are met, provide the Final Answer."),
        ],
        has=("\nFinal Answer: ", "19 degrees in Lisbon"),
    ),
    "react/langchain-classic-action-takes-the-named-value": Row(
        [ChatMessage("user", LANGCHAIN_REACT)], has=("\nAction: get_weather\nAction Input: Oslo",)
    ),
    "react/langchain-classic-scratchpad-observed": Row(
        [
            ChatMessage(
                "user",
                LANGCHAIN_REACT + " I need a tool.\nAction: get_weather\nAction Input: Oslo\n"
                "Observation: 3 degrees and snowing\nThought: ",
            )
        ],
        has=("\nFinal Answer: ", "get_weather returned 3 degrees and snowing"),
    ),
    # 5. The question's values fill the first call.
    "question/city": Row([QUESTION], (WEATHER,), calls=("get_weather",), values={"city": "Paris"}),
    "question/order-values": Row(
        [ChatMessage("user", "Record that Ada Lovelace ordered 3 notebooks at 12.50 EUR each on 2026-03-14.")],
        (ORDER,),
        calls=("record_order",),
        values={"customer": "Ada Lovelace", "quantity": 3, "unit_price": 12.5, "currency": "EUR"},
        values_in={"order_date": ["2026-03-14"]},
    ),
    # 4. Choices the prompt lists; one delegation per turn.
    "choices/handoff-to-an-agent-that-exists": Row(
        [ChatMessage("user", "Please hand off this request to the right agent.")],
        (HANDOFF,),
        "required",
        calls=("handoff",),
        values_in={"to_agent": ["WeatherAgent", "TravelAgent"]},
    ),
    "choices/one-delegation-per-turn": Row(
        [ChatMessage("user", "Delegate the research on Paris to a coworker.")],
        (DELEGATE, ASK),
        calls=("delegate_work_to_coworker",),
        values_in={"coworker": ["Researcher", "Senior Writer"]},
    ),
    "choices/handoff-then-the-agent-calls-its-tool": Row(
        [
            QUESTION,
            *tool_turn(
                "handoff",
                '{"to_agent":"WeatherAgent","reason":"weather"}',
                "Agent WeatherAgent is now handling the request.",
            ),
        ],
        (WEATHER,),
        calls=("get_weather",),
        values={"city": "Paris"},
    ),
    # 6. Under auto, after the results, the loop-ending tool the framework waits for.
    "auto/final-answer-tool-after-results": Row(
        [QUESTION, *tool_turn("get_weather", '{"city":"Paris"}', "sunny")],
        (WEATHER, FINAL_ANSWER),
        calls=("final_answer",),
    ),
    "auto/exit-tool-the-system-prompt-names": Row(
        [
            ChatMessage("system", "When you have the answer, call Report with it."),
            QUESTION,
            *tool_turn("get_weather", '{"city":"Paris"}', '{"city": "Paris", "sky": "sunny"}'),
        ],
        (WEATHER, Tool("Report", "A report", {"type": "object", "properties": {"city": {"type": "string"}}})),
        calls=("Report",),
        values={"city": "Paris"},
    ),
    "auto/an-ending-tool-nobody-waits-for-is-not-called": Row(
        [QUESTION, *tool_turn("get_weather", '{"city":"Paris"}', "sunny")],
        (WEATHER, Tool("Report", "A report", {"type": "object"})),
        has=("get_weather returned sunny",),
    ),
}


def _request(row: Row) -> GenerationRequest:
    named = row.choice not in ("none", "auto", "required")
    return GenerationRequest(
        endpoint="chat",
        model="gpt-4o-mini",
        prompts=(Prompt(messages=tuple(row.messages)),),
        n=1,
        sampling=Sampling(max_tokens=None),
        seed=5,
        context_window=4096,
        tools=row.tools,
        tool_choice="required" if named else row.choice,  # type: ignore[arg-type]
        tool_name=row.choice if named else None,
    )


def _answer(row: Row) -> Answer | None:
    decided = decide(_request(row))
    return decided.answers[0] if decided.answers else None


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_prompted_agents(row: Row) -> None:
    answer = _answer(row)
    if row.sampled:
        assert answer is None
        return
    assert answer is not None
    assert tuple(call.name for call in answer.tool_calls) == row.calls
    if row.calls:
        arguments = json.loads(answer.tool_calls[0].arguments or "")
        assert arguments.items() >= row.values.items(), arguments
        for name, allowed in row.values_in.items():
            assert arguments[name] in allowed, arguments
        return
    text = answer.text
    if row.starts is not None:
        assert text.startswith(row.starts), text
    for part in row.has:
        assert part in text, text
    if row.ends is not None:
        assert text.endswith(row.ends), text


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_prompted_agents_answer_the_same_every_time(row: Row) -> None:
    assert _answer(row) == _answer(row)


def test_react_action_input_is_valid_json_for_the_tool() -> None:
    answer = _answer(ROWS["react/llamaindex-action"])
    assert answer is not None
    arguments = json.loads(answer.text.split("Action Input:", 1)[1])
    assert arguments == {"city": "Paris"}
    assert "Observation" not in answer.text  # the framework writes the observation, never the model


def test_a_tool_arguments_schema_is_never_the_answers_schema() -> None:
    """The ReAct prompt says JSON and holds a schema (the tool's), yet the answer is an Action."""
    answer = _answer(ROWS["react/llamaindex-action"])
    assert answer is not None and not answer.text.lstrip().startswith("{")


def test_scripted_answers_still_win() -> None:
    scripted = (Answer(text="scripted"),)
    request = _request(ROWS["react/llamaindex-action"])
    from dataclasses import replace

    assert decide(replace(request, answers=scripted)).answers == scripted


@pytest.mark.parametrize(
    ("system", "word"),
    [
        ("Reply with TERMINATE when the task has been completed.", "TERMINATE"),
        ('Reply "TERMINATE" in the end when everything is done.', "TERMINATE"),
        ("When you are finished, say DONE.", "DONE"),
        ("Respond with APPROVE when you are satisfied with the draft.", "APPROVE"),
        ("Reply with the answer when done.", None),
        ("When asked, respond in JSON format.", None),
        ("Be brief.", None),
    ],
)
def test_stop_words(system: str, word: str | None) -> None:
    assert stop_word([ChatMessage("system", system)]) == word
    assert stop_word([ChatMessage("user", system)]) is None  # only the system and developer prompts ask


def test_react_prompts_list_their_tools() -> None:
    llama = react_prompt([LLAMA_REACT])
    crew = react_prompt([CREW_REACT])
    assert llama is not None and [t.name for t in llama.tools] == ["get_weather", "search_flights"]
    assert llama.final_label == "Answer"
    assert crew is not None and crew.final_label == "Final Answer"
    assert crew.tools[0].parameters["properties"] == {"city": {"type": "string"}}
    assert react_prompt([ChatMessage("system", "Use the tools."), QUESTION]) is None


@pytest.mark.parametrize(
    ("text", "lists"),
    [
        ("Currently available agents:\nA: does a\nB: does b\n", [("agents", ["A", "B"])]),
        ("Currently available agents:\n{'WeatherAgent': 'Looks up the weather.'}\n", [("agents", ["WeatherAgent"])]),
        (COWORKERS, [("coworkers", ["Researcher", "Senior Writer"])]),
        ("The unit, one of [celsius, fahrenheit].", [("", ["celsius", "fahrenheit"])]),
        ("Valid agents: alice, bob.", [("agents", ["alice", "bob"])]),
        ("Get the current weather for a city.", []),
    ],
)
def test_listed_choices(text: str, lists: list[tuple[str, list[str]]]) -> None:
    assert listed(text) == lists


def test_the_question_names_values() -> None:
    named = named_values("Book a flight from New York to San Francisco on March 14 for 2 people, ref ORD-1234.")
    assert named.places == ("New York", "San Francisco")
    assert named.dates == ("March 14",)
    assert named.ids == ("ORD-1234",)
    assert named.numbers == (2.0,)


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ('{"conditions": "sunny"}</message>', "sunny"),  # JSON inside markup: parsed, no markup leaks
        ('<tool_result>{"conditions": "sunny", "temp": 21}</tool_result>', "sunny"),
        ("conditions: rainy, wind: 5", "rainy"),
        ("<b>conditions</b>: <i>cloudy</i>", "cloudy"),
    ],
)
def test_recall_parses_never_scrapes(result: str, expected: str) -> None:
    schema = {
        "type": "object",
        "properties": {"conditions": {"type": "string"}, "temp": {"type": "integer"}},
        "required": ["conditions"],
    }
    transcript = Transcript(question="How is it?", results=(PastResult(result),), after_results=True)
    value = recalled(schema, {"conditions": "x", "temp": 0}, transcript)
    assert value["conditions"] == expected
    if '"temp": 21' in result:
        assert value["temp"] == 21  # types kept


@pytest.mark.parametrize(
    "label", ["Tool Args: ", "Tool Arguments: ", "It takes arguments ", "Input schema: "], ids=str.strip
)
def test_a_schema_labelled_as_arguments_is_not_the_prompts_schema(label: str) -> None:
    from mockserver.answers.prompt_schema import prompt_schema

    text = f'Answer in JSON.\n{label}{{"properties": {{"city": {{"type": "string"}}}}, "type": "object"}}\n'
    assert prompt_schema([ChatMessage("system", text)], json_object=False) is None
