"""ReAct text prompts: tools described in the prompt, called by writing ``Action:`` lines.

Frameworks whose model has no native function calling describe the tools and the protocol in the
prompt, and parse the answer's text:

* LlamaIndex's ``ReActAgent``: ``> Tool Name: get_weather`` / ``Tool Description: …`` /
  ``Tool Args: {JSON Schema}``, then the format ``Thought:`` / ``Action:`` / ``Action Input:``,
  ``Observation:`` (sent back as a user message), and the final ``Thought: …`` / ``Answer: …``;
* LangChain's classic ``create_react_agent``: tools as ``name: description`` lines, their names
  on the format's Action line (``one of [get_weather]``), the scratchpad (Action, Action Input,
  Observation) written into the same user message after ``Begin!``, and ``Final Answer:``; each
  tool takes one string, so its Action Input is the value the question names (else the question);
* CrewAI without function calling: ``Tool Name: get_weather`` / ``Tool Arguments: {…}`` (a JSON
  Schema, or CrewAI's older ``{'city': {'description': …, 'type': 'str'}}``) / ``Tool
  Description: …``, the same Thought/Action/Action Input, the ``Observation:`` appended to the
  assistant's own message, and ``Final Answer: …``.

:func:`react_prompt` reads such a prompt (a system, developer or user message holding ``Action:``,
``Action Input:`` and at least one tool); the director answers it in that format
(:func:`call_text`, :func:`final_text`): before an observation, one Action naming a listed tool
with an Action Input valid against that tool's arguments; after one, the final answer under the
prompt's own label (``Final Answer:`` when the prompt names it, else ``Answer:``).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mockserver.answers.transcript import PastResult, react_step
from mockserver.spine.request import ChatMessage, ForcedCall, Tool

__all__ = ["ReactPrompt", "call_text", "final_text", "observations", "question", "react_prompt"]

_READ = frozenset({"system", "developer", "user"})
_PROTOCOL = re.compile(r"^\s*Action\s*:.*^\s*Action\s*Input\s*:", re.MULTILINE | re.DOTALL)
_TOOL_NAME = re.compile(r"^\s*>?\s*Tool\s+Name\s*:\s*(?P<name>[^\n]+?)\s*$", re.MULTILINE)
_TOOL_ARGS = re.compile(r"^\s*Tool\s+Arg(?:ument)?s\s*:\s*", re.MULTILINE)
_TOOL_DESCRIPTION = re.compile(
    r"^\s*Tool\s+Description\s*:\s*(?P<text>.*?)(?=^\s*Tool\s+\w+\s*:|\n\s*\n|\Z)", re.MULTILINE | re.DOTALL
)
_ACTION_LINE = re.compile(r"^\s*Action\s*:[^\n\[]*\[(?P<names>[^\]\n]+)\]", re.MULTILINE)
_FINAL_LABEL = re.compile(r"^\s*Final\s+Answer\s*:", re.MULTILINE)
# CrewAI's older argument listing names Python types.
_PY_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "list": "array", "dict": "object"}


@dataclass(frozen=True, slots=True)
class ReactPrompt:
    """The tools a ReAct prompt lists, in order, and the label of its final answer."""

    tools: tuple[Tool, ...]
    final_label: str = "Answer"


def _object(text: str) -> Any:
    """The JSON (or Python literal) object at the start of ``text``, or None."""
    start = text.find("{")
    if start == -1 or text[:start].strip():
        return None
    try:
        return json.JSONDecoder().raw_decode(text, start)[0]
    except ValueError:
        pass
    depth = 0
    for end, char in enumerate(text[start:], start):  # a Python dict: its balanced braces
        depth += (char == "{") - (char == "}")
        if depth == 0:
            try:
                return ast.literal_eval(text[start : end + 1])
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return None
    return None


def _as_schema(arguments: Any) -> dict[str, Any]:
    """A tool's listed arguments as a JSON Schema for an object."""
    if not isinstance(arguments, Mapping):
        return {"type": "object"}
    if isinstance(arguments.get("properties"), Mapping):
        return dict(arguments)
    properties: dict[str, Any] = {}
    for name, spec in arguments.items():
        spec = spec if isinstance(spec, Mapping) else {}
        kind = _PY_TYPES.get(str(spec.get("type", "str")), "string")
        properties[str(name)] = {"type": kind} | (
            {"description": spec["description"]} if spec.get("description") else {}
        )
    return {"type": "object", "properties": properties, "required": list(properties)}


def _tools(text: str) -> list[Tool]:
    tools: list[Tool] = []
    names = list(_TOOL_NAME.finditer(text))
    for k, found in enumerate(names):
        block = text[found.end() : names[k + 1].start() if k + 1 < len(names) else len(text)]
        args = _TOOL_ARGS.search(block)
        described = _TOOL_DESCRIPTION.search(block)
        schema = _as_schema(_object(block[args.end() :]) if args is not None else None)
        about = " ".join(described.group("text").split()) if described is not None else ""
        tools.append(Tool(found.group("name").strip("`*'\""), about, schema))
    return tools


def _listed_tools(text: str) -> list[Tool]:
    """Tools named only on the format's Action line ("should be one of [get_weather, search]", as
    LangChain's classic ReAct prompt writes them), described by a ``name: …`` or ``name(…) - …``
    line when there is one. Their argument schemas are unknown: each takes one string."""
    named = _ACTION_LINE.search(text)
    if named is None:
        return []
    tools = []
    for name in (n.strip().strip("`'\"") for n in named.group("names").split(",")):
        if not name:
            continue
        line = re.search(rf"^\s*{re.escape(name)}\b[^\n]*?(?::|\s-)\s*(?P<about>[^\n]*)$", text, re.MULTILINE)
        tools.append(Tool(name, line.group("about").strip() if line is not None else "", {}))
    return tools


def react_prompt(messages: Sequence[ChatMessage]) -> ReactPrompt | None:
    """The ReAct protocol the prompt defines (see the module docstring), or ``None``."""
    for message in messages:
        if message.role not in _READ or "Action" not in message.content:
            continue
        text = message.content
        if _PROTOCOL.search(text) is None:
            continue
        tools = _tools(text) or _listed_tools(text)
        if tools:
            return ReactPrompt(tuple(tools), "Final Answer" if _FINAL_LABEL.search(text) else "Answer")
    return None


def observations(messages: Sequence[ChatMessage]) -> tuple[PastResult, ...]:
    """What the tools said since the user's question, in order. An observation comes as a user
    message ``Observation: …`` (LlamaIndex) or at the end of the assistant's own step (CrewAI);
    a user message right after such a step is the framework's nudge ("Analyze the tool result…"),
    not a new question."""
    found: list[PastResult] = []
    observed = False  # the message before was a step that carries its observation
    calling = None  # the call of the last step, which an observation message answers
    for message in messages:
        if message.role == "assistant":
            step = react_step(message.content) if "Action" in message.content else None
            observed = step is not None and step[1] is not None
            calling = step[0] if step is not None else None
            if step is not None and step[1] is not None:
                found.append(PastResult(step[1], step[0]))
            continue
        if message.role == "user":
            text = message.content.lstrip()
            if text.startswith("Observation:"):
                found.append(PastResult(text.removeprefix("Observation:").strip(), calling))
            elif not observed:
                found = list(_scratchpad(text))
        elif message.role == "tool":
            found.append(PastResult(message.content))
    return tuple(found)


_BEGIN = re.compile(r"^\s*Begin!?", re.MULTILINE)
_STEP = re.compile(
    r"^\s*Action\s*:\s*(?P<name>[^\n]+?)\s*\n\s*Action\s*Input\s*:\s*(?P<args>.*?)\s*\n\s*Observation\s*:\s*"
    r"(?P<observed>.*?)\s*(?=^\s*Thought\s*:|^\s*Action\s*:|\Z)",
    re.MULTILINE | re.DOTALL,
)


def _scratchpad(text: str) -> list[PastResult]:
    """The steps a prompt carries after its ``Begin!`` (LangChain's classic ReAct writes the
    agent's scratchpad into the one user message), each with its observation."""
    begins = list(_BEGIN.finditer(text))
    if not begins:
        return []
    rest = text[begins[-1].end() :]
    return [
        PastResult(step.group("observed"), ForcedCall(step.group("name").strip(), step.group("args").strip()))
        for step in _STEP.finditer(rest)
    ]


def question(messages: Sequence[ChatMessage], fallback: str) -> str:
    """The user's question: the last ``Question:`` line a ReAct prompt holds, else ``fallback``."""
    for message in reversed(messages):
        if message.role == "user":
            found = re.findall(r"^\s*Question\s*:\s*(.+)$", message.content, re.MULTILINE)
            if found:
                return str(found[-1]).strip()
    return fallback


def call_text(tool: Tool, arguments: str) -> str:
    """One ReAct step that calls ``tool`` (no Observation: the framework writes that)."""
    return (
        f"Thought: I need to use a tool to help me answer the question.\nAction: {tool.name}\nAction Input: {arguments}"
    )


def final_text(prompt: ReactPrompt, answer: str) -> str:
    """The ReAct step that ends the loop, under the prompt's own label."""
    thought = (
        "I now know the final answer"
        if prompt.final_label == "Final Answer"
        else "I can answer without using any more tools."
    )
    return f"Thought: {thought}\n{prompt.final_label}: {answer}"
