"""Field-marker prompts (DSPy's adapters): the output fields they declare, answered in their format.

DSPy's system message lists ``Your output fields are:`` as numbered lines
``1. `next_thought` (str): …``, ``2. `next_tool_name` (Literal['get_weather', 'finish']): …``,
and asks for each field under a marker ``[[ ## next_thought ## ]]`` … ending with
``[[ ## completed ## ]]`` (the ChatAdapter), or for one JSON object with those keys ("Outputs will
be a JSON object with the following fields", "Respond with a JSON object": the JSONAdapter).
Each field gets a value of its declared type:

* ``str`` a sentence; a thought says which tool it calls; an answer (``answer``, ``result``…)
  after observations quotes the last observation;
* ``int``, ``float``, ``bool``, ``list[…]``, ``dict[…]`` a JSON value of that type;
* ``Literal[…]`` one of the choices. When ``finish`` is a choice it names a tool (ReAct): after
  a tool observation (a ``[[ ## observation_N ## ]]`` in the prompt) ``finish``, else the tool
  whose name or description shares most words with the user's message (the first one offered
  when none does);
* the ``dict`` field after a tool name (``next_tool_args``): arguments valid against the
  tool's ``It takes arguments {…}`` as ReAct lists it, with the values the question names
  (:mod:`mockserver.answers.question`; ``{}`` for ``finish``).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mockserver.answers.question import filled
from mockserver.answers.tool_policy import words
from mockserver.fakejson.generate import fake_value
from mockserver.spine.request import ChatMessage

__all__ = ["FieldPrompt", "answer_fields", "field_prompt", "render"]

_FIELD = re.compile(r"^\s*\d+\.\s*`([^`]+)`\s*\((.+?)\)\s*(?::|$)", re.MULTILINE)
_JSON_ASK = re.compile(r"Outputs will be a JSON object|Respond with a JSON object", re.IGNORECASE)
_TOOL = re.compile(
    r"^\s*\(\d+\)\s*([\w.\-]+), whose description is <desc>(.*?)</desc>.*?It takes arguments (.*?)\.?\s*$",
    re.MULTILINE | re.DOTALL,
)
_OBSERVATION = re.compile(r"\[\[ ## observation_(\d+) ## \]\]\s*(.*?)\s*(?=\[\[ ## |\Z)", re.DOTALL)
_TOOL_NAME = re.compile(r"\[\[ ## tool_name_(\d+) ## \]\]\s*(\S+)")
# DSPy's closing instruction, after the last field of the user message: not part of an observation.
_INSTRUCTION = re.compile(r"\n\s*\n(?=Respond with the corresponding output fields)")
_ANSWERS = frozenset({"answer", "result", "output", "response", "summary"})
_SIMPLE: dict[str, dict[str, Any]] = {
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "bool": {"type": "boolean"},
}


@dataclass(frozen=True, slots=True)
class FieldPrompt:
    """The output fields a marker prompt declares, (name, declared type) in order."""

    fields: tuple[tuple[str, str], ...]
    json: bool = False  # one JSON object (JSONAdapter), else ``[[ ## field ## ]]`` markers


def field_prompt(messages: Sequence[ChatMessage]) -> FieldPrompt | None:
    """The marker prompt's fields, or ``None`` when the prompt declares none."""
    for message in messages:
        if message.role not in ("system", "developer"):
            continue
        _, sep, rest = message.content.partition("Your output fields are:")
        if not sep:
            continue
        block = rest.split("All interactions will be structured", 1)[0]
        fields = tuple((name.strip(), kind.strip()) for name, kind in _FIELD.findall(block))
        if fields:
            asks_json = any(_JSON_ASK.search(m.content) for m in messages if m.role != "assistant")
            return FieldPrompt(fields, json=asks_json)
    return None


def _tools(messages: Sequence[ChatMessage]) -> dict[str, tuple[str, Mapping[str, Any]]]:
    """ReAct's listed tools: name → (description, argument properties)."""
    tools: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for message in messages:
        for name, description, arguments in _TOOL.findall(message.content):
            try:
                properties = ast.literal_eval(arguments.strip())
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                properties = {}
            tools[name] = (description, properties if isinstance(properties, dict) else {})
    return tools


def _choices(kind: str) -> list[str]:
    inner = kind[len("Literal[") : -1] if kind.startswith("Literal[") and kind.endswith("]") else ""
    try:
        parsed = ast.literal_eval(f"[{inner}]")
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return []
    return [str(choice) for choice in parsed]


def _schema(kind: str) -> dict[str, Any]:
    if kind in _SIMPLE:
        return _SIMPLE[kind]
    if kind.startswith(("list[", "List[", "tuple[")):
        inner = kind[kind.index("[") + 1 : -1]
        return {"type": "array", "items": _schema(inner), "minItems": 1, "maxItems": 3}
    if kind.startswith(("dict", "Dict")):
        return {"type": "object", "maxProperties": 0}
    return {"type": "string"}


def answer_fields(prompt: FieldPrompt, messages: Sequence[ChatMessage], seed: int) -> dict[str, Any]:
    """A value for each declared field (see the module docstring)."""
    said = [m.content for m in messages if m.role == "user"]
    question = said[-1] if said else ""
    observations = [o for text in said for o in _observations(text)]
    tools = _tools(messages)
    # The tool is chosen first: a thought written before the choice says it.
    tool = next(
        (
            _next_tool(c, tools, question, bool(observations))
            for _, kind in prompt.fields
            if "finish" in (c := _choices(kind))
        ),
        None,
    )
    values: dict[str, Any] = {}
    for k, (name, kind) in enumerate(prompt.fields):
        choices = _choices(kind)
        if choices and "finish" in choices:
            values[name] = tool
        elif choices:
            values[name] = fake_value({"enum": choices}, seed + k)
        elif kind.startswith(("dict", "Dict")) and tool is not None:
            properties = tools.get(tool, ("", {}))[1]
            args = {"type": "object", "properties": properties, "required": list(properties)}
            # The question's values first ("weather in Oslo" → {"city": "Oslo"}), else seeded ones.
            values[name] = filled(args, fake_value(args, seed + k), question) if tool != "finish" else {}
        elif kind == "str" and "thought" in name and tool is not None:
            values[name] = f"I should call {tool} to find out." if tool != "finish" else "I have what I need."
        elif kind == "str" and name.lower() in _ANSWERS and observations:
            values[name] = f"Based on the observation: {' '.join(observations[-1].split())}"
        else:
            values[name] = fake_value(_schema(kind), seed + k, name=name)
    return values


def _observations(text: str) -> list[str]:
    """What the tools said, in order, in a ReAct trajectory: each ``observation_N`` cut before
    DSPy's closing instruction, leaving out those of ``finish`` (its "Completed." is no tool's
    result: an answer quotes the last real one)."""
    finished = {n for n, tool in _TOOL_NAME.findall(text) if tool == "finish"}
    found = []
    for n, said in _OBSERVATION.findall(text):
        said = _INSTRUCTION.split(said, maxsplit=1)[0].strip()
        if said and n not in finished:
            found.append(said)
    return found


def _next_tool(choices: list[str], tools: Mapping[str, tuple[str, Any]], question: str, observed: bool) -> str:
    if observed:
        return "finish"
    others = [c for c in choices if c != "finish"]
    said = words(question)
    scored = sorted(
        (
            (len(said & (words(c.replace("_", " ")) | words(tools.get(c, ("", {}))[0]))), i, c)
            for i, c in enumerate(others)
        ),
        key=lambda s: (-s[0], s[1]),
    )
    return scored[0][2] if scored else "finish"


def render(prompt: FieldPrompt, values: Mapping[str, Any]) -> str:
    """The answer as the prompt asked for it: one JSON object, or markers ending ``completed``."""
    if prompt.json:
        return json.dumps(values, ensure_ascii=False)
    parts = [f"[[ ## {name} ## ]]\n{_text(values[name])}" for name, _ in prompt.fields]
    return "\n\n".join([*parts, "[[ ## completed ## ]]"])


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
