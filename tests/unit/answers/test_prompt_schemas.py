"""Schemas and fields asked for in the prompt: each framework's own wording (as its docs and
source describe it), answered with JSON valid against the schema, fenced when a block is asked
for, and DSPy's field markers with values of the declared types."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from mockserver.answers.director import decide
from mockserver.spine.request import ChatMessage, GenerationRequest, JsonFormat, Prompt, Sampling

PERSON: dict[str, Any] = {
    "title": "UserDetail",
    "type": "object",
    "properties": {
        "full_name": {"title": "Full Name", "type": "string"},
        "years": {"title": "Years", "type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["full_name", "years", "tags"],
}
NESTED: dict[str, Any] = {
    "$defs": {
        "Address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "zip_code": {"type": "string"}},
            "required": ["street", "zip_code"],
        }
    },
    "type": "object",
    "properties": {"label": {"type": "string"}, "address": {"$ref": "#/$defs/Address"}},
    "required": ["label", "address"],
}
GENERIC_KEYS = {"name", "city", "email", "age", "score", "description"}


def _request(messages: list[ChatMessage], fmt: JsonFormat | None = None) -> GenerationRequest:
    return GenerationRequest(
        endpoint="chat",
        model="gpt-4o-mini",
        prompts=(Prompt(messages=tuple(messages)),),
        n=1,
        sampling=Sampling(max_tokens=None),
        seed=5,
        context_window=8192,
        response_format=fmt,
    )


def _text(messages: list[ChatMessage], fmt: JsonFormat | None = None) -> str | None:
    decided = decide(_request(messages, fmt))
    if not decided.answers:
        return None
    answer = decided.answers[0]
    assert answer is not None
    return answer.text


def _valid(schema: dict[str, Any], text: str) -> dict[str, Any]:
    value = json.loads(text)
    Draft202012Validator(schema).validate(value)
    assert isinstance(value, dict)
    return value


JSON_OBJECT = JsonFormat(None)

# (messages, response_format, schema the answer follows, fenced)
SCHEMA_ROWS = {
    # pydantic-ai PromptedOutput: the schema in the instructions, no fencing wanted.
    "pydantic-ai-prompted-output": (
        [
            ChatMessage(
                "system",
                "Always respond with a JSON object that's compatible with this schema:\n\n"
                + json.dumps(PERSON)
                + "\n\nDon't include any text or Markdown fencing before or after.",
            ),
            ChatMessage("user", "Who wrote Dune?"),
        ],
        JSON_OBJECT,
        PERSON,
        False,
    ),
    # instructor Mode.JSON: json_object, the schema pretty-printed in the system message.
    "instructor-json": (
        [
            ChatMessage(
                "system",
                "As a genius expert, your task is to understand the content and provide the parsed "
                "objects in json that match the following json_schema:\n\n"
                + json.dumps(PERSON, indent=2)
                + "\n\nMake sure to return an instance of the JSON, not the schema itself",
            ),
            ChatMessage("user", "Jason is 25 years old"),
        ],
        JSON_OBJECT,
        PERSON,
        False,
    ),
    # instructor Mode.MD_JSON: no response_format; a ```json code block is asked for.
    "instructor-md-json": (
        [
            ChatMessage(
                "system",
                "As a genius expert, your task is to understand the content and provide the parsed "
                "objects in json that match the following json_schema:\n\n"
                + json.dumps(NESTED, indent=2)
                + "\n\nMake sure to return an instance of the JSON, not the schema itself",
            ),
            ChatMessage("user", "Home is 1 Main St"),
            ChatMessage("user", "Return the correct JSON response within a ```json codeblock. not the JSON_SCHEMA"),
        ],
        None,
        NESTED,
        True,
    ),
    # LangChain json_mode: json_object; the caller's own prompt carries the schema after "schema:".
    "langchain-json-mode": (
        [
            ChatMessage(
                "system", "Answer the user's question. Respond in JSON with this schema: " + json.dumps(PERSON)
            ),
            ChatMessage("user", "Tell me about a user"),
        ],
        JSON_OBJECT,
        PERSON,
        False,
    ),
    # A schema shown inside a plain fence (as output parsers' format instructions do): not a request to fence.
    "schema-inside-a-fence": (
        [ChatMessage("user", "Reply as JSON. Here is the output schema:\n```\n" + json.dumps(PERSON) + "\n```")],
        None,
        PERSON,
        False,
    ),
    # A json_schema response format object written in the prompt: its "schema" is the schema.
    "wrapped-under-schema": (
        [ChatMessage("developer", "Output JSON matching " + json.dumps({"name": "person", "schema": PERSON}))],
        None,
        PERSON,
        False,
    ),
    "told-not-to-fence": (
        [ChatMessage("system", "Return JSON for " + json.dumps(PERSON) + " and do not wrap it in a code block.")],
        JSON_OBJECT,
        PERSON,
        False,
    ),
}


@pytest.mark.parametrize(("messages", "fmt", "schema", "fenced"), SCHEMA_ROWS.values(), ids=SCHEMA_ROWS.keys())
def test_a_schema_in_the_prompt_shapes_the_answer(
    messages: list[ChatMessage], fmt: JsonFormat | None, schema: dict[str, Any], fenced: bool
) -> None:
    text = _text(messages, fmt)
    assert text is not None
    if fenced:
        found = re.fullmatch(r"```json\n(.*)\n```", text, re.DOTALL)
        assert found is not None, text
        text = found.group(1)
    else:
        assert not text.startswith("```")
    value = _valid(schema, text)
    assert set(value) <= set(schema["properties"])


def test_json_object_without_a_schema_keeps_the_generic_object() -> None:
    text = _text([ChatMessage("user", "Describe a person in JSON.")], JSON_OBJECT)
    assert text is not None
    assert set(json.loads(text)) <= GENERIC_KEYS


def test_a_schema_without_any_json_asked_for_is_left_to_the_model() -> None:
    assert _text([ChatMessage("user", "What does this mean? " + json.dumps(PERSON))]) is None


def test_a_json_example_is_not_a_schema() -> None:
    assert _text([ChatMessage("user", 'Reply in JSON like {"name": "Ann", "age": 3}')]) is None


def test_a_response_format_schema_outranks_the_prompt() -> None:
    own = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    }
    text = _text([ChatMessage("system", "Respond in JSON: " + json.dumps(PERSON))], JsonFormat(own))
    assert text is not None
    assert set(json.loads(text)) == {"ok"}


# DSPy 3.x ChatAdapter / JSONAdapter prompts for ReAct's step and its final extraction.
NOTE_NAME = "# note: the value you produce must exactly match (no extra characters) one of: get_weather; finish"
NOTE_ARGS = (
    '# note: the value you produce must adhere to the JSON schema: {"type": "object", "additionalProperties": true}'
)
REACT_SYSTEM = "\n".join(
    [
        "Your input fields are:",
        "1. `question` (str):",
        "2. `trajectory` (str):",
        "Your output fields are:",
        "1. `next_thought` (str):",
        "2. `next_tool_name` (Literal['get_weather', 'finish']):",
        "3. `next_tool_args` (dict[str, Any]):",
        "All interactions will be structured in the following way, with the appropriate values filled in.",
        "",
        "[[ ## question ## ]]\n{question}\n",
        "[[ ## trajectory ## ]]\n{trajectory}\n",
        "[[ ## next_thought ## ]]\n{next_thought}\n",
        f"[[ ## next_tool_name ## ]]\n{{next_tool_name}}        {NOTE_NAME}\n",
        f"[[ ## next_tool_args ## ]]\n{{next_tool_args}}        {NOTE_ARGS}\n",
        "[[ ## completed ## ]]",
        "In adhering to this structure, your objective is:",
        "        You are an Agent. In each episode, you will be given the fields `question` as input."
        " And you can see your past trajectory so far.",
        "        When selecting the next_tool_name and its next_tool_args, the tool must be one of:",
        "",
        "        (1) get_weather, whose description is <desc>Get the weather in a city.</desc>."
        " It takes arguments {'city': {'type': 'string'}}.",
        "        (2) finish, whose description is <desc>Marks the task as complete.</desc>. It takes arguments {}.",
        "        When providing `next_tool_args`, the value inside the field must be in JSON format",
    ]
)
REACT_ASK = (
    "Respond with the corresponding output fields, starting with the field `[[ ## next_thought ## ]]`, then "
    "`[[ ## next_tool_name ## ]]` (must be formatted as a valid Python Literal['get_weather', 'finish']), then "
    "`[[ ## next_tool_args ## ]]` (must be formatted as a valid Python dict[str, Any]), and then ending with the "
    "marker for `[[ ## completed ## ]]`."
)
OBSERVED = (
    "[[ ## thought_0 ## ]]\nI should call get_weather.\n\n[[ ## tool_name_0 ## ]]\nget_weather\n\n"
    '[[ ## tool_args_0 ## ]]\n{"city": "Paris"}\n\n[[ ## observation_0 ## ]]\nSunny, 21 C'
)


def _step(trajectory: str, ask: str = REACT_ASK) -> list[ChatMessage]:
    user = f"[[ ## question ## ]]\nWhat's the weather in Paris?\n\n[[ ## trajectory ## ]]\n{trajectory}\n\n{ask}"
    return [ChatMessage("system", REACT_SYSTEM), ChatMessage("user", user)]


def _markers(text: str) -> dict[str, str]:
    parts = re.split(r"\[\[ ## (\w+) ## \]\]", text)
    assert parts[0].strip() == ""
    fields = {name: value.strip() for name, value in zip(parts[1::2], parts[2::2], strict=True)}
    assert list(fields)[-1] == "completed"
    return fields


def test_dspy_react_first_step_picks_the_tool() -> None:
    text = _text(_step(""))
    assert text is not None
    fields = _markers(text)
    assert list(fields) == ["next_thought", "next_tool_name", "next_tool_args", "completed"]
    assert fields["next_tool_name"] == "get_weather"
    args = json.loads(fields["next_tool_args"])
    assert set(args) == {"city"} and isinstance(args["city"], str)
    assert "get_weather" in fields["next_thought"]


def test_dspy_react_after_an_observation_finishes() -> None:
    text = _text(_step(OBSERVED))
    assert text is not None
    fields = _markers(text)
    assert fields["next_tool_name"] == "finish"
    assert json.loads(fields["next_tool_args"]) == {}


def test_dspy_json_adapter_gets_one_object_with_the_fields() -> None:
    ask = (
        "Respond with a JSON object in the following order of fields: `next_thought`, then `next_tool_name` "
        "(must be formatted as a valid Python Literal['get_weather', 'finish']), then `next_tool_args` "
        "(must be formatted as a valid Python dict[str, Any])."
    )
    text = _text(_step(OBSERVED, ask), JSON_OBJECT)
    assert text is not None
    value = json.loads(text)
    assert list(value) == ["next_thought", "next_tool_name", "next_tool_args"]
    assert value["next_tool_name"] == "finish" and value["next_tool_args"] == {}


def test_dspy_extraction_answers_from_the_observation() -> None:
    system = (
        "Your input fields are:\n1. `question` (str):\n2. `trajectory` (str):\n"
        "Your output fields are:\n1. `reasoning` (str):\n2. `answer` (str):\n"
        "All interactions will be structured in the following way, with the appropriate values filled in."
    )
    user = (
        f"[[ ## question ## ]]\nWhat's the weather in Paris?\n\n[[ ## trajectory ## ]]\n{OBSERVED}\n\n"
        "Respond with the corresponding output fields, starting with the field `[[ ## reasoning ## ]]`, "
        "then `[[ ## answer ## ]]`, and then ending with the marker for `[[ ## completed ## ]]`."
    )
    text = _text([ChatMessage("system", system), ChatMessage("user", user)])
    assert text is not None
    fields = _markers(text)
    assert "Sunny, 21 C" in fields["answer"]
    assert fields["reasoning"]


def test_dspy_extraction_quotes_the_tool_not_finish_nor_the_instruction() -> None:
    """ReAct's extract step: the trajectory ends with ``finish``'s own "Completed." and DSPy's
    closing instruction follows the last field; the answer quotes the tool's observation only."""
    system = (
        "Your input fields are:\n1. `question` (str):\n2. `trajectory` (str):\n"
        "Your output fields are:\n1. `reasoning` (str):\n2. `answer` (str):\n"
        "All interactions will be structured in the following way, with the appropriate values filled in."
    )
    finished = (
        f"{OBSERVED}\n\n[[ ## thought_1 ## ]]\nI have what I need.\n\n[[ ## tool_name_1 ## ]]\nfinish\n\n"
        "[[ ## tool_args_1 ## ]]\n{}\n\n[[ ## observation_1 ## ]]\nCompleted."
    )
    user = (
        f"[[ ## question ## ]]\nWhat's the weather in Paris?\n\n[[ ## trajectory ## ]]\n{finished}\n\n"
        "Respond with the corresponding output fields, starting with the field `[[ ## reasoning ## ]]`, "
        "then `[[ ## answer ## ]]`, and then ending with the marker for `[[ ## completed ## ]]`."
    )
    text = _text([ChatMessage("system", system), ChatMessage("user", user)])
    assert text is not None
    answer = _markers(text)["answer"]
    assert "Sunny, 21 C" in answer
    assert "Completed" not in answer and "Respond with" not in answer


def test_dspy_fields_get_values_of_their_declared_types() -> None:
    system = (
        "Your input fields are:\n1. `text` (str):\nYour output fields are:\n"
        "1. `count` (int): how many\n2. `ratio` (float):\n3. `flag` (bool):\n4. `labels` (list[str]):\n"
        "5. `mood` (Literal['happy', 'sad']):\nAll interactions will be structured in the following way."
    )
    text = _text([ChatMessage("system", system), ChatMessage("user", "[[ ## text ## ]]\nhello")])
    assert text is not None
    fields = _markers(text)
    assert isinstance(json.loads(fields["count"]), int)
    assert isinstance(json.loads(fields["ratio"]), (int, float))
    assert isinstance(json.loads(fields["flag"]), bool)
    labels = json.loads(fields["labels"])
    assert isinstance(labels, list) and all(isinstance(x, str) for x in labels)
    assert fields["mood"] in ("happy", "sad")


def test_the_same_prompt_gets_the_same_answer() -> None:
    for messages, fmt, _, _ in SCHEMA_ROWS.values():
        assert _text(messages, fmt) == _text(messages, fmt)
    assert _text(_step("")) == _text(_step(""))
