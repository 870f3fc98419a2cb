"""A JSON Schema written into the prompt, when the answer is to be JSON.

Frameworks that cannot (or choose not to) send ``response_format: json_schema`` write the
schema into a message and ask for JSON: pydantic-ai's ``PromptedOutput`` ("Always respond with a
JSON object that's compatible with this schema: {…}"), instructor's ``Mode.JSON`` (with
``json_object``) and ``Mode.MD_JSON`` ("Return the correct JSON response within a ```json
codeblock"), LangChain's ``json_mode`` (the caller's own instructions). The answer follows that
schema when

* ``response_format`` is ``json_object`` (no schema of its own), or a system, developer or user
  message says ``JSON``; and
* one of those messages holds a JSON Schema: a JSON object with ``properties`` (or ``$defs``),
  written anywhere in the text — bare, after "schema:", inside a code fence. The last one
  written wins; an object that wraps one under ``schema`` (as ``json_schema`` formats do) counts.
  A schema labelled as a tool's arguments (``Tool Args: {…}``, ``Tool Arguments:``, ``It takes
  arguments {…}``: ReAct prompts) is the tool's, never the answer's.

It is fenced (```` ```json … ``` ````) when a message asks for a code block and does not say
not to. Without a schema nothing here applies: ``json_object`` keeps its generic object.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mockserver.spine.request import ChatMessage

__all__ = ["PromptSchema", "prompt_schema"]

_READ_BY_MODEL = frozenset({"system", "developer", "user"})
_ASKS_JSON = re.compile(r"\bjson\b", re.IGNORECASE)
# "within a ```json codeblock", "in a JSON code block": a fence shown around the schema is not a request.
_ASKS_BLOCK = re.compile(r"\b(?:in|within|inside|using|use)\s+(?:an?\s+)?```\s*json|\bcode\s*block", re.IGNORECASE)
# The label before a tool's argument schema, at the end of the text before the object.
_TOOL_ARGS = re.compile(r"\b(?:args|arguments|parameters|input\s+schema)\s*:?\s*$", re.IGNORECASE)
_NEGATED = re.compile(r"\b(?:not|no|never|without|don't|do not)\b[^.\n]{0,30}$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class PromptSchema:
    """The schema the prompt gives, and whether the answer goes in a ```json block."""

    schema: Mapping[str, Any]
    fenced: bool = False


def _objects(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects written in ``text``, outermost only, in order."""
    decoder = json.JSONDecoder()
    at = text.find("{")
    while at != -1:
        try:
            value, end = decoder.raw_decode(text, at)
        except ValueError:
            at = text.find("{", at + 1)
            continue
        line = text[text.rfind("\n", 0, at) + 1 : at]
        if isinstance(value, dict) and _TOOL_ARGS.search(line) is None:
            yield value
        at = text.find("{", end)


def _schema(value: dict[str, Any]) -> dict[str, Any] | None:
    if isinstance(value.get("properties"), dict) or isinstance(value.get("$defs"), dict):
        return value
    inner = value.get("schema")
    return _schema(inner) if isinstance(inner, dict) else None


def _asks_block(text: str) -> bool:
    return any(not _NEGATED.search(text[: m.start()]) for m in _ASKS_BLOCK.finditer(text))


def prompt_schema(messages: Sequence[ChatMessage], json_object: bool) -> PromptSchema | None:
    """The schema the prompt asks to follow (see the module docstring), or ``None``."""
    read = [m.content for m in messages if m.role in _READ_BY_MODEL]
    if not json_object and not any(_ASKS_JSON.search(text) for text in read):
        return None
    found = None
    for text in read:
        if "properties" not in text and "$defs" not in text:  # a cheap test before decoding
            continue
        for value in _objects(text):
            found = _schema(value) or found
    if found is None:
        return None
    return PromptSchema(found, fenced=any(_asks_block(text) for text in read))
