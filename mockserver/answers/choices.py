"""Valid values a prompt lists in prose, so that arguments pick among them.

A handoff or a delegation names an agent, and only the agents that exist will do: LlamaIndex's
``handoff`` tool lists them under "Currently available agents:" (``name: description`` lines, or
a dict ``{'WeatherAgent': '…'}`` as AgentWorkflow writes it), CrewAI's delegation tools say
"Delegate a specific task to one of the following coworkers: Researcher, Writer", other prompts
"Valid agents: …" or "must be one of …". A made-up name fails the handoff and the second agent
never runs.

:func:`listed` finds those lists in a text, each with the noun it lists (``agents``,
``coworkers``, or ``""`` when the text does not say); :func:`chosen` fills a string property with
one of them (drawn with the given seed) when the list is in the property's own description, or
in the tool's description or the system prompt under a noun its name shares (``to_agent`` ~
``agents``, ``coworker`` ~ ``coworkers``). Properties with an ``enum`` already pick among it.
"""

from __future__ import annotations

import ast
import contextlib
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from mockserver.fakejson.generate import is_valid

__all__ = ["chosen", "listed"]

# "one of the following coworkers: A, B", "Valid agents: A, B", "must be one of [A, B]", "one of: A, B".
_INLINE = re.compile(
    r"(?i:\b(?:one\s+of(?:\s+the\s+following)?|valid|available|allowed|possible|choose\s+from))"
    r"(?:\s+(?P<noun>[A-Za-z_-]+))?\s*(?:(?i:are|is)\s*)?:\s*(?P<values>\[[^\]\n]+\]|[^\n.]+)"
)
_BRACKETED = re.compile(r"(?i:\bone\s+of)\s+(?P<values>\[[^\]\n]+\])")
# "Currently available agents:" then "name: description" lines (LlamaIndex's handoff).
_BLOCK = re.compile(r"(?i:available\s+(?P<noun>[a-z]+)\s*:)\s*\n(?P<lines>(?:[ \t]*[-*]?[ \t]*[\w .-]+:[^\n]*\n?)+)")
# ... or one dict of them, name → description (LlamaIndex's AgentWorkflow writes its dict).
_MAPPING = re.compile(r"(?i:available\s+(?P<noun>[a-z]+)\s*:)\s*(?P<mapping>\{[^\n]*\})")
_SPLIT = re.compile(r"\s*(?:,|;|\bor\b|\band\b|\|)\s*")


def _values(text: str) -> list[str]:
    text = text.strip().strip("[]()")
    parts = [p.strip().strip("'\"`*") for p in _SPLIT.split(text)]
    # A list is short words or names: a clause ("the task you want them to do") is no value.
    values = [p for p in parts if p and len(p) <= 40 and len(p.split()) <= 4]
    return values if len(values) == len([p for p in parts if p]) and values else []


def listed(text: str) -> list[tuple[str, list[str]]]:
    """The lists of valid values ``text`` gives, each with the noun it lists (lower case)."""
    found: list[tuple[str, list[str]]] = []
    for block in _BLOCK.finditer(text):
        names = [line.split(":", 1)[0].strip(" \t-*") for line in block.group("lines").splitlines() if ":" in line]
        if names:
            found.append((block.group("noun").lower(), names))
    for mapping in _MAPPING.finditer(text):
        with contextlib.suppress(ValueError, SyntaxError, MemoryError, RecursionError):
            parsed = ast.literal_eval(mapping.group("mapping"))
            if isinstance(parsed, dict) and parsed:
                found.append((mapping.group("noun").lower(), [str(k) for k in parsed]))
    for inline in (*_INLINE.finditer(text), *_BRACKETED.finditer(text)):
        values = _values(inline.group("values"))
        noun = inline.groupdict().get("noun") or ""
        if len(values) >= 2 or inline.group("values").strip().startswith("["):
            found.append((noun.lower(), values))
    return [(noun, values) for noun, values in found if values]


def _stem(word: str) -> str:
    return word[:-1] if word.endswith("s") else word


def _shares(name: str, noun: str) -> bool:
    parts = {_stem(w) for w in re.split(r"[^a-z]+", re.sub(r"([a-z])([A-Z])", r"\1 \2", name).lower()) if w}
    nouns = {_stem(w) for w in noun.split()}
    return bool(parts & nouns)


def chosen(schema: Mapping[str, Any], value: Any, about: Sequence[str], seed: int) -> Any:
    """``value`` (an object valid against ``schema``) with each string property whose valid values
    a text lists set to one of them. ``about``: the tool's description, then the system prompt."""
    properties = schema.get("properties")
    if not isinstance(value, dict) or not isinstance(properties, Mapping):
        return value
    texts = [t for t in about if t]
    lists = [(noun, values) for text in texts for noun, values in listed(text)]
    out = dict(value)
    for k, (name, sub) in enumerate(properties.items()):
        sub = sub if isinstance(sub, Mapping) else {}
        if "enum" in sub or sub.get("type", "string") != "string":
            continue
        own = [values for _, values in listed(str(sub.get("description") or ""))]
        shared = [values for noun, values in lists if noun and _shares(str(name), noun)]
        options = (own or shared or [[]])[0]
        if not options:
            continue
        pick = random.Random(seed * 31 + k).choice(options)
        trial = {**out, name: pick}
        if is_valid(schema, trial):
            out = trial
    return out
