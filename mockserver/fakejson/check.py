"""Vet a caller's JSON Schema before we promise to fake values for it.

:func:`check_schema` turns a schema we could never satisfy into a 400 naming where it is wrong:
Draft 2020-12 metaschema errors, unresolvable ``$ref``, cheap contradictions, and OpenAI's
strict-mode rules. jsonschema is imported on first use: importing this module must stay cheap.
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from typing import Any

from mockserver.errors import InvalidRequest
from mockserver.fakejson.algebra import int_bounds, is_type, loose_bounds, resolve, types_of, walk

__all__ = ["check_schema"]


def check_schema(schema: object, param: str, *, strict: bool = False) -> None:
    """Raise :class:`InvalidRequest` (``param=param``) unless ``schema`` is a usable JSON Schema.

    Checks the Draft 2020-12 metaschema, that every ``$ref`` is local and resolves, and cheap
    contradictions (``minimum`` > ``maximum``, an empty ``enum``, a required property that
    ``additionalProperties: false`` forbids …). ``strict`` adds OpenAI's structured-output rules:
    an object root, and every object closed (``additionalProperties: false``) with every
    property required.
    """
    if not isinstance(schema, dict):
        raise InvalidRequest(
            f"Invalid schema for {param}: a schema must be a JSON object, not {type(schema).__name__}.", param=param
        )
    try:
        problem = _problem(json.dumps(schema, ensure_ascii=False), strict)
    except (TypeError, ValueError) as exc:
        problem = f"not JSON ({exc})."
    except RecursionError:
        problem = "the schema nests too deeply."
    if problem is not None:
        raise InvalidRequest(f"Invalid schema for {param}: {problem}", param=param)


@lru_cache(maxsize=256)
def _problem(text: str, strict: bool) -> str | None:
    """What is wrong with the schema (cached: callers check the same tool schemas on every request)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    root = json.loads(text)
    try:
        Draft202012Validator.check_schema(root)
    except SchemaError as exc:
        return f"In context={tuple(exc.absolute_path)!r}, {exc.message[:300]}."
    for path, sub in walk(root, ()):
        found = _contradiction(sub) or _ref_problem(root, sub) or (_strict_problem(sub) if strict else None)
        if found:
            return f"In context={path!r}, {found}"
    if strict and root.get("type") != "object":
        return f"In context=(), the root must be 'type: \"object\"', got 'type: {json.dumps(root.get('type'))}'."
    return None


_NUMBERS = frozenset({"integer", "number"})
_RANGES = [
    ("minimum", "maximum", _NUMBERS),
    ("minLength", "maxLength", frozenset({"string"})),
    ("minItems", "maxItems", frozenset({"array"})),
    ("minProperties", "maxProperties", frozenset({"object"})),
]
_OPEN_RANGES = [
    ("exclusiveMinimum", "maximum"),
    ("minimum", "exclusiveMaximum"),
    ("exclusiveMinimum", "exclusiveMaximum"),
]


def _binding(types: list[str], kinds: frozenset[str]) -> bool:
    """Whether constraints on ``kinds`` hold for every allowed value: no declared type escapes them.
    (No type at all counts as binding: nobody writes minimum > maximum meaning "not a number".)"""
    return not types or all(t in kinds for t in types)


def _contradiction(s: dict[str, Any]) -> str | None:
    """A cheap proof that no value satisfies ``s`` alone, as a message; None when none is found."""
    types = types_of(s)
    for lo, hi, kinds in _RANGES:
        if lo in s and hi in s and s[lo] > s[hi] and _binding(types, kinds):
            return f"'{lo}' {s[lo]} is greater than '{hi}' {s[hi]}."
    numbers = _binding(types, _NUMBERS)
    for lo, hi in _OPEN_RANGES:
        if lo in s and hi in s and s[lo] >= s[hi] and numbers:
            return f"'{lo}' {s[lo]} leaves no number below '{hi}' {s[hi]}."
    low, high = int_bounds(s) if types == ["integer"] else loose_bounds(s)
    if numbers and low is not None and high is not None:
        if low > high:
            return "no integer lies within the bounds."
        m = s.get("multipleOf")  # the slack keeps float rounding from rejecting a satisfiable schema
        if isinstance(m, int | float) and m > 0 and math.ceil(low / m - 1e-9) > math.floor(high / m + 1e-9):
            return f"no multiple of 'multipleOf' {m} lies within the bounds."
    if "enum" in s and not s["enum"]:
        return "'enum' must list at least one value."
    if "enum" in s and types and not any(is_type(v, t) for v in s["enum"] for t in types):
        return f"no value in 'enum' has type {types!r}."
    props, required = s.get("properties", {}), s.get("required", [])
    objects = _binding(types, frozenset({"object"}))
    if objects and s.get("additionalProperties") is False and not s.get("patternProperties"):
        missing = [r for r in required if r not in props]
        if missing:
            return f"required property {missing[0]!r} is not in 'properties' and 'additionalProperties' is false."
    if objects and "maxProperties" in s and len(set(required)) > s["maxProperties"]:
        return f"{len(set(required))} required properties exceed 'maxProperties' {s['maxProperties']}."
    for regex in [s.get("pattern"), *s.get("patternProperties", {})]:
        if isinstance(regex, str) and _bad_regex(regex):
            return f"'pattern' {regex!r} is not a regular expression we support."
    return None


def _bad_regex(regex: str) -> bool:
    try:
        re.compile(regex)
    except re.error:
        return True
    return False


def _ref_problem(root: dict[str, Any], s: dict[str, Any]) -> str | None:
    ref, seen = s.get("$ref"), set()
    while isinstance(ref, str):
        if ref in seen:
            return f"'$ref' {ref!r} refers to itself without ever describing a value."
        seen.add(ref)
        target = resolve(root, ref)
        if target is None:
            return f"'$ref' {ref!r} cannot be resolved (only local references such as '#/$defs/name' are supported)."
        bare = isinstance(target, dict) and set(target) <= {"$ref", "description", "title"}
        ref = target.get("$ref") if bare else None
    return None


def _strict_problem(s: dict[str, Any]) -> str | None:
    if not ("object" in types_of(s) or ("properties" in s and "type" not in s)):
        return None
    if s.get("additionalProperties") is not False:
        return "'additionalProperties' is required to be supplied and to be false."
    missing = [k for k in s.get("properties", {}) if k not in s.get("required", [])]
    if missing:
        return (
            "'required' is required to be supplied and to be an array including every key in properties. "
            f"Missing {missing[0]!r}."
        )
    return None
