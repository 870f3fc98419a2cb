"""What the conversation already said, reused in an answer: text quoting the last tool results,
and object fields filled with values the user or a tool result gave.

* :func:`quote` — the decided text after tool results: ``Here is what I found: get_weather
  returned {"temp": 21}.`` (each result on one line, cut at 300 characters).
* :func:`recalled` — an object (valid against ``schema``) whose properties take the values the
  conversation named: a key of a JSON value in a tool result (latest first) — the whole result,
  or each JSON object or array written inside its text (``<message>{"conditions": "sunny"}</message>``),
  parsed, so values keep their types and no markup leaks into one — else ``name: value``,
  ``name = value`` or ``name is value`` in a result (outside its JSON and its markup tags) or the
  user's question. Property and key
  names match case- and separator-blind (``unit`` ~ ``Unit``, ``temp_c`` ~ ``tempC``). A value
  is converted to the property's type (``"21"`` for an integer becomes 21) and kept only when
  the whole object stays valid. A text property named like an answer (``answer``, ``result``,
  ``summary``…) with nothing named for it quotes the results.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from mockserver.answers.transcript import PastResult, Transcript
from mockserver.fakejson.generate import is_valid

__all__ = ["quote", "recalled"]

_CLIP = 300
_ANSWER_NAMES = frozenset({"answer", "finalanswer", "result", "response", "output", "summary", "text", "content"})
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _CLIP else flat[: _CLIP - 1] + "…"


def quote(results: tuple[PastResult, ...]) -> str:
    """Text that quotes ``results`` (see the module docstring)."""
    parts = [f"{r.call.name if r.call is not None else 'the tool'} returned {_line(r.text)}" for r in results]
    said = "; ".join(parts) if parts else "the tools returned nothing"
    return f"Here is what I found: {said}" + ("" if said.endswith((".", "!", "?", "…")) else ".")


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _pairs(value: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) of a JSON value, outer keys first."""
    if isinstance(value, dict):
        yield from ((_key(str(k)), v) for k, v in value.items())
        for v in value.values():
            yield from _pairs(v)
    elif isinstance(value, list):
        for v in value:
            yield from _pairs(v)


_TAG = re.compile(r"</?[A-Za-z][\w:-]*(?:\s[^<>]*)?/?>")


def _embedded(text: str) -> tuple[list[Any], str]:
    """The JSON values in ``text`` (the whole of it, else each object or array written inside it),
    and the text left around them with markup tags taken out (for ``name: value`` reading)."""
    with contextlib.suppress(ValueError):
        return [json.loads(text)], ""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    rest: list[str] = []
    at = done = 0
    while True:
        starts = [i for i in (text.find("{", at), text.find("[", at)) if i != -1]
        if not starts:
            break
        at = min(starts)
        try:
            value, end = decoder.raw_decode(text, at)
        except ValueError:
            at += 1
            continue
        if isinstance(value, (dict, list)):
            values.append(value)
            rest.append(text[done:at])
            done = end
        at = end
    rest.append(text[done:])
    return values, _TAG.sub(" ", " ".join(rest))


def _said(name: str, transcript: Transcript) -> list[Any]:
    """What the conversation gave for ``name``, best first."""
    key = _key(name)
    found: list[Any] = []
    texts = [r.text for r in reversed(transcript.results)] + [transcript.question]
    for k, text in enumerate(texts[:-1]):
        values, texts[k] = _embedded(text)
        for value in values:
            found += [v for k2, v in _pairs(value) if k2 == key]
    spelled = r"[\s_-]*".join(
        re.escape(w) for w in re.findall(r"[a-z]+|\d+", re.sub(r"([a-z])([A-Z])", r"\1 \2", name).lower())
    )
    if spelled:
        said = re.compile(
            rf"\b{spelled}\b[\"']?\s*(?:is|are|was|were|:|=)\s*(\"[^\"]*\"|'[^']*'|[^,;\n]+?)\s*(?:[,;\n]|\.(?!\d)|$)",
            re.IGNORECASE,
        )
        for text in texts:
            found += [m.group(1).strip("\"'") for m in said.finditer(text)]
    return found


def _as(schema: Mapping[str, Any], value: Any) -> Any:
    """``value`` converted to the type ``schema`` names, when it can be (else as it is)."""
    enum = schema.get("enum")
    if isinstance(enum, list) and isinstance(value, str):
        return next((e for e in enum if isinstance(e, str) and e.lower() == value.lower()), value)
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    if isinstance(value, str) and kinds and "string" not in kinds:
        if "boolean" in kinds and value.lower() in ("true", "false", "yes", "no"):
            return value.lower() in ("true", "yes")
        number = _NUMBER.search(value)
        if number is not None and ("number" in kinds or "integer" in kinds):
            parsed = float(number.group())
            return int(parsed) if "integer" in kinds and parsed.is_integer() else parsed
    if "string" in kinds and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


def recalled(schema: Mapping[str, Any], value: Any, transcript: Transcript) -> Any:
    """``value`` (an object valid against ``schema``) with the conversation's values put in."""
    properties = schema.get("properties")
    if not isinstance(value, dict) or not isinstance(properties, Mapping):
        return value
    out = dict(value)
    for name, sub in properties.items():
        sub = sub if isinstance(sub, Mapping) else {}
        candidates = _said(name, transcript)
        if not candidates and transcript.results and _key(name) in _ANSWER_NAMES:
            candidates = [quote(transcript.last_results or transcript.results)]
        for candidate in candidates:
            trial = {**out, name: _as(sub, candidate)}
            if is_valid(schema, trial):
                out = trial
                break
    return out
