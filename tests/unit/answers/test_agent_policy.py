"""The multi-turn tool policy as a table: (conversation, tools, tool_choice) → (calls or text).

Conversations come in the shapes the codecs give the director: chat (an assistant message's
``calls``, ``tool`` messages with ``call_id``), Responses (a ``function_call`` item as the
assistant turn ``name(arguments)``, its output as a ``tool`` turn) and smolagents' text
(``Calling tools: [...]`` from the assistant, ``Observation:`` from the user).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from mockserver.answers.director import decide
from mockserver.spine.request import (
    Answer,
    ChatMessage,
    ForcedCall,
    GenerationRequest,
    JsonFormat,
    Prompt,
    Sampling,
    Tool,
)

WEATHER = Tool(
    "get_weather",
    "Get the current weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
FLIGHTS = Tool(
    "search_flights",
    "Search flights between two airports",
    {"type": "object", "properties": {"origin": {"type": "string"}}, "required": ["origin"]},
)
REPORT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "temperature": {"type": "number"},
        "summary": {"type": "string"},
    },
    "required": ["city", "temperature", "summary"],
}
FINAL = Tool("final_result", "The final response which ends this conversation", REPORT_SCHEMA)  # pydantic-ai
WEATHER_OUT = Tool("Weather", "Weather report", REPORT_SCHEMA)  # LangChain ToolStrategy(Weather)
REPORT = Tool("Report", "A report", REPORT_SCHEMA)  # a class sharing no word with the question
FINAL_ANSWER = Tool(  # smolagents
    "final_answer",
    "Provides a final answer to the given problem.",
    {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
)
TRANSFER = Tool("transfer_to_weather_agent", "Handoff to the Weather agent to handle the request.", {})

QUESTION = ChatMessage("user", "What's the weather in Paris?")
RESULT = '{"city": "Paris", "temperature": 21.5, "sky": "sunny"}'


def chat_turn(name: str, arguments: str, result: str, ident: str = "call_1") -> list[ChatMessage]:
    """A chat assistant message with one call, and the tool message answering it."""
    return [
        ChatMessage("assistant", "", calls=(ForcedCall(name, arguments, ident),)),
        ChatMessage("tool", result, call_id=ident),
    ]


def responses_turn(name: str, arguments: str, result: str) -> list[ChatMessage]:
    """A Responses function_call and its function_call_output, as the codec renders them."""
    return [ChatMessage("assistant", f"{name}({arguments})"), ChatMessage("tool", result)]


def smol_turn(name: str, arguments: dict[str, Any], result: str) -> list[ChatMessage]:
    """smolagents' text conventions: the call as a Python list, the result as an observation."""
    listed = [{"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}]
    return [
        ChatMessage("assistant", "Calling tools:\n" + str(listed)),
        ChatMessage("user", f"Call id: call_1\nObservation:\n{result}"),
    ]


@dataclass(frozen=True)
class Row:
    messages: list[ChatMessage]
    tools: tuple[Tool, ...]
    choice: str = "auto"  # "none" | "auto" | "required" | a tool's name
    calls: tuple[str, ...] = ()  # the tools called, in order
    text: str | None = None  # a substring the decided text has ("" = any decided text)
    fmt: JsonFormat | None = None
    parallel: bool = True
    sampled: bool = False  # nothing decided: the model answers
    values: dict[str, Any] = field(default_factory=dict)  # argument values the (first) call must carry


ROWS = {
    # Before any result: the question's words pick the data tools; a loop-ending tool never joins them.
    "required/first-turn-picks-the-data-tool": Row([QUESTION], (WEATHER, FINAL), "required", calls=("get_weather",)),
    "required/first-turn-no-word-shared-takes-the-first-data-tool": Row(
        [ChatMessage("user", "Tell me something")], (FINAL, WEATHER), "required", calls=("get_weather",)
    ),
    "required/toolstrategy-class-sharing-a-word-waits": Row(
        [QUESTION], (WEATHER, WEATHER_OUT), "required", calls=("get_weather",)
    ),
    "required/only-the-output-tool-is-pointed-at": Row(
        [QUESTION], (FLIGHTS, WEATHER_OUT), "required", calls=("Weather",)
    ),
    "auto/first-turn-calls-what-the-question-points-at": Row([QUESTION], (WEATHER, FLIGHTS), calls=("get_weather",)),
    "auto/first-turn-nothing-pointed-at-is-sampled": Row([ChatMessage("user", "Hello!")], (WEATHER,), sampled=True),
    # After results, "required": one loop-ending call, with the conversation's values.
    "required/chat-after-result-ends-with-final_result": Row(
        [QUESTION, *chat_turn("get_weather", '{"city":"Paris"}', RESULT)],
        (WEATHER, FINAL),
        "required",
        calls=("final_result",),
        values={"city": "Paris", "temperature": 21.5},
    ),
    "required/responses-after-result-ends-with-final_result": Row(
        [QUESTION, *responses_turn("get_weather", '{"city":"Paris"}', RESULT)],
        (WEATHER, FINAL),
        "required",
        calls=("final_result",),
        values={"city": "Paris", "temperature": 21.5},
    ),
    "required/toolstrategy-after-result-calls-the-class": Row(
        [QUESTION, *chat_turn("get_weather", '{"city":"Paris"}', RESULT)],
        (WEATHER, REPORT),
        "required",
        calls=("Report",),
        values={"city": "Paris"},
    ),
    "required/text-after-result-says-it-too": Row(
        [QUESTION, *chat_turn("get_weather", '{"city":"Paris"}', "The temperature is 19, city: Lyon")],
        (WEATHER, FINAL),
        "required",
        calls=("final_result",),
        values={"city": "Lyon", "temperature": 19},
    ),
    "required/smolagents-observation-ends-with-final_answer": Row(
        [
            ChatMessage("system", "You are an expert assistant."),
            QUESTION,
            *smol_turn("get_weather", {"city": "Paris"}, "sunny, 21 C"),
        ],
        (WEATHER, FINAL_ANSWER),
        "required",
        calls=("final_answer",),
        values={"answer": "Here is what I found: get_weather returned sunny, 21 C."},
    ),
    "required/uncalled-data-tool-before-calling-again": Row(
        [QUESTION, *chat_turn("get_weather", '{"city":"Paris"}', RESULT)],
        (WEATHER, FLIGHTS),
        "required",
        calls=("search_flights",),
    ),
    "required/all-called-calls-the-ending-tool-again": Row(
        [QUESTION, *chat_turn("get_weather", '{"city":"Paris"}', RESULT), *chat_turn("final_result", "{}", "ok", "c2")],
        (WEATHER, FINAL),
        "required",
        calls=("final_result",),
    ),
    "required/serial-still-one-call": Row(
        [QUESTION, *chat_turn("get_weather", '{"city":"Paris"}', RESULT)],
        (WEATHER, FINAL),
        "required",
        calls=("final_result",),
        parallel=False,
    ),
    # After results, "auto" (and "none"): text quoting them.
    "auto/chat-after-result-quotes-it": Row(
        [QUESTION, *chat_turn("get_weather", '{"city":"Paris"}', RESULT)],
        (WEATHER, FLIGHTS),
        text=f"get_weather returned {RESULT}",
    ),
    "auto/responses-after-result-quotes-it": Row(
        [QUESTION, *responses_turn("get_weather", '{"city":"Paris"}', '{"temp": 21}')],
        (WEATHER,),
        text='get_weather returned {"temp": 21}',
    ),
    "auto/smolagents-observation-quotes-it": Row(
        [QUESTION, *smol_turn("get_weather", {"city": "Paris"}, "sunny")],
        (WEATHER,),
        text="get_weather returned sunny",
    ),
    "none/after-result-quotes-it": Row(
        [QUESTION, *chat_turn("get_weather", '{"city":"Paris"}', "sunny")], (WEATHER,), "none", text="sunny"
    ),
    "no-tools/after-result-quotes-it": Row(
        [QUESTION, *chat_turn("get_weather", '{"city":"Paris"}', "sunny")], (), text="get_weather returned sunny"
    ),
    "auto/after-result-with-a-schema-answers-json": Row(
        [QUESTION, *chat_turn("get_weather", '{"city":"Paris"}', RESULT)],
        (WEATHER,),
        fmt=JsonFormat(REPORT_SCHEMA),
        text='"city":"Paris"',
    ),
    "auto/user-speaks-again-after-result": Row(
        [QUESTION, *chat_turn("get_weather", '{"city":"Paris"}', RESULT), ChatMessage("user", "Thanks!")],
        (WEATHER,),
        sampled=True,
    ),
    # Handoffs (OpenAI Agents SDK): the new agent calls its fitting tool once, then answers.
    "handoff/new-agent-calls-its-tool": Row(
        [QUESTION, *responses_turn("transfer_to_weather_agent", "{}", '{"assistant": "Weather agent"}')],
        (WEATHER,),
        calls=("get_weather",),
    ),
    "handoff/chat-shaped-too": Row(
        [QUESTION, *chat_turn("transfer_to_weather_agent", "{}", '{"assistant": "Weather agent"}')],
        (WEATHER, TRANSFER),
        calls=("get_weather",),
    ),
    "handoff/then-answers": Row(
        [
            QUESTION,
            *responses_turn("transfer_to_weather_agent", "{}", '{"assistant": "Weather agent"}'),
            *responses_turn("get_weather", '{"city":"Paris"}', "sunny"),
        ],
        (WEATHER,),
        text="get_weather returned sunny",
    ),
    "handoff/no-fitting-tool-answers": Row(
        [QUESTION, *responses_turn("transfer_to_weather_agent", "{}", '{"assistant": "Weather agent"}')],
        (FLIGHTS,),
        text='returned {"assistant": "Weather agent"}',
    ),
    # A named tool is always called.
    "named/after-result": Row(
        [QUESTION, *chat_turn("get_weather", '{"city":"Paris"}', RESULT)],
        (WEATHER, FINAL),
        "final_result",
        calls=("final_result",),
        values={"city": "Paris"},
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
        seed=11,
        context_window=4096,
        tools=row.tools,
        tool_choice="required" if named else row.choice,  # type: ignore[arg-type]
        tool_name=row.choice if named else None,
        parallel_tool_calls=row.parallel,
        response_format=row.fmt,
    )


def _answer(row: Row) -> Answer | None:
    decided = decide(_request(row))
    return decided.answers[0] if decided.answers else None


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_the_policy(row: Row) -> None:
    answer = _answer(row)
    if row.sampled:
        assert answer is None
        return
    assert answer is not None
    assert tuple(call.name for call in answer.tool_calls) == row.calls
    if row.calls:
        assert answer.text == ""
        arguments = json.loads(answer.tool_calls[0].arguments or "")
        assert arguments.items() >= row.values.items()
    else:
        assert row.text is not None and row.text in answer.text
        assert answer.finish_reason is None  # no calls: the answer finishes with "stop"


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_the_same_conversation_gets_the_same_answer(row: Row) -> None:
    assert _answer(row) == _answer(row)


def test_a_data_tool_and_the_loop_ending_tool_are_never_called_together() -> None:
    for row in ROWS.values():
        answer = _answer(row)
        names = {call.name for call in answer.tool_calls} if answer is not None else set()
        ending = names & {"final_result", "final_answer", "Weather", "Report"}
        assert not ending or names == ending, names


def test_a_call_already_answered_is_not_repeated() -> None:
    two = Tool(
        "get_weather",
        "Get the weather",
        {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]}}, "required": ["city"]},
    )
    for answered in ("Paris", "Rome"):
        row = Row([QUESTION, *chat_turn("get_weather", json.dumps({"city": answered}), "sunny")], (two,), "required")
        answer = _answer(row)
        assert answer is not None
        assert json.loads(answer.tool_calls[0].arguments or "") != {"city": answered}


def test_decided_answers_such_as_scripted_ones_are_kept() -> None:
    row = ROWS["required/chat-after-result-ends-with-final_result"]
    scripted = (Answer(text="scripted"),)
    request = replace(_request(row), answers=scripted)
    assert decide(request).answers == scripted
