"""Schema arithmetic shared by the schema checker and the fake-value generator.

Reading a JSON Schema the way both need it: its declared or implied types, numeric bounds,
local ``$ref`` resolution, a walk over every subschema, and :func:`meet` — one schema asking for
what two ask for (``allOf``, ``$ref`` siblings, a union branch with its parent). Pure Python, no
third-party imports, so every module built on it stays cheap to import.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "INFER",
    "Unsat",
    "int_bounds",
    "is_type",
    "loose_bounds",
    "meet",
    "number_ok",
    "resolve",
    "types_of",
    "walk",
    "weight",
]


# Lives here, not with the generator: meet(), the pattern generator and the draw all raise it,
# and fake_value catches it, so it belongs to the module they all already import.
class Unsat(Exception):
    """This draw cannot satisfy the schema; the caller retries with another seed."""


# Where subschemas live: under one keyword, in a list, or by name.
_ONE = (
    "additionalProperties",
    "items",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_MANY = ("allOf", "anyOf", "oneOf", "prefixItems")
_NAMED = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def walk(schema: Any, path: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], dict[str, Any]]]:
    """Every schema object inside ``schema`` (booleans skipped), with its path."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for key in _ONE:
        yield from walk(schema.get(key), (*path, key))
    for key in _MANY:
        subs = schema.get(key)
        for i, sub in enumerate(subs if isinstance(subs, list) else ()):
            yield from walk(sub, (*path, key, i))
    for key in _NAMED:
        named = schema.get(key)
        for name, sub in (named if isinstance(named, dict) else {}).items():
            yield from walk(sub, (*path, key, name))


def resolve(root: Any, ref: str) -> Any:
    """The local schema ``ref`` points to (JSON pointer or ``$anchor``), or None."""
    base = root.get("$id") if isinstance(root, dict) else None
    if isinstance(base, str) and ref.startswith(base + "#"):
        ref = ref[len(base) :]
    if not ref.startswith("#"):
        return None
    from urllib.parse import unquote

    fragment = unquote(ref[1:])
    if fragment and not fragment.startswith("/"):
        return next((s for _, s in walk(root, ()) if s.get("$anchor") == fragment), None)
    node = root
    for part in fragment.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node if isinstance(node, dict | bool) else None


# The types keywords imply when 'type' is absent ("minLength" → string). Keep the order: the draw picks
# from this list by seeded index, so reordering would change the outputs of existing seeds.
INFER = (
    ("object", ("properties", "required", "additionalProperties", "patternProperties", "minProperties")),
    ("array", ("items", "prefixItems", "minItems", "maxItems", "contains", "uniqueItems")),
    ("string", ("minLength", "maxLength", "pattern", "format")),
    ("number", ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")),
)


def types_of(s: Mapping[str, Any]) -> list[str]:
    t = s.get("type")
    return [t] if isinstance(t, str) else [x for x in t if isinstance(x, str)] if isinstance(t, list) else []


def is_type(v: Any, t: str) -> bool:
    if t == "integer":
        return (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer())
    if t == "number":
        return isinstance(v, int | float) and not isinstance(v, bool)
    kinds: dict[str, type | tuple[type, ...]] = {"string": str, "boolean": bool, "array": list, "object": dict}
    return v is None if t == "null" else isinstance(v, kinds.get(t, ()))


def int_bounds(s: Mapping[str, Any]) -> tuple[int | None, int | None]:
    lows = [math.ceil(s["minimum"])] if "minimum" in s else []
    lows += [math.floor(s["exclusiveMinimum"]) + 1] if "exclusiveMinimum" in s else []
    highs = [math.floor(s["maximum"])] if "maximum" in s else []
    highs += [math.ceil(s["exclusiveMaximum"]) - 1] if "exclusiveMaximum" in s else []
    return (max(lows) if lows else None), (min(highs) if highs else None)


def loose_bounds(s: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """The numeric range, exclusive ends counted in (we only claim "empty" when it surely is)."""
    lows = [s[k] for k in ("minimum", "exclusiveMinimum") if k in s]
    highs = [s[k] for k in ("maximum", "exclusiveMaximum") if k in s]
    return (max(lows) if lows else None), (min(highs) if highs else None)


def number_ok(x: float, s: Mapping[str, Any]) -> bool:
    """jsonschema's own numeric checks, multipleOf float arithmetic included."""
    if ("minimum" in s and x < s["minimum"]) or ("maximum" in s and x > s["maximum"]):
        return False
    if "exclusiveMinimum" in s and x <= s["exclusiveMinimum"]:
        return False
    if "exclusiveMaximum" in s and x >= s["exclusiveMaximum"]:
        return False
    m = s.get("multipleOf")
    if isinstance(m, float):
        q = x / m
        return math.isfinite(q) and int(q) == q
    return not isinstance(m, int) or x % m == 0


_MAX_OF = frozenset({"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties", "minContains"})
_MIN_OF = frozenset({"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", "maxContains"})


def meet(a: Any, b: Any) -> Any:
    """One schema asking for both (allOf, $ref siblings, a union branch with its parent); best effort."""
    if a is False or b is False:
        return False
    if not isinstance(b, Mapping):
        return a
    if not isinstance(a, Mapping):
        return dict(b)
    out = dict(a)
    for k, v in b.items():
        if k not in out:
            out[k] = v
            continue
        w: Any = out[k]
        if k in _MAX_OF:
            out[k] = max(w, v)
        elif k in _MIN_OF:
            out[k] = min(w, v)
        elif k == "required":
            out[k] = list(dict.fromkeys([*w, *v]))
        elif k == "type":
            wt, vt = types_of(out), types_of(b)
            both = [t for t in wt if t in vt or (t == "integer" and "number" in vt)]
            out[k] = both + ["integer" for t in wt if t == "number" and "integer" in vt and "integer" not in both]
            if not out[k]:
                raise Unsat("allOf asks for incompatible types")
        elif k == "enum":
            out[k] = [x for x in w if x in v]
        elif k in ("properties", "patternProperties", "$defs", "definitions"):
            out[k] = {**w, **{p: meet(w[p], sv) if p in w else sv for p, sv in v.items()}}
        elif k in ("items", "additionalProperties", "contains", "propertyNames"):
            out[k] = meet(w, v)
        elif k == "allOf":
            out[k] = [*w, *v]
        elif k == "prefixItems":
            longer = w if len(w) >= len(v) else v
            out[k] = [meet(x, y) for x, y in zip(w, v, strict=False)] + longer[min(len(w), len(v)) :]
        elif k == "$ref" and w != v:
            out["allOf"] = [*out.get("allOf", []), {"$ref": v}]
    return out


def weight(s: Any) -> int:
    """How far a branch is from a leaf: deep in a recursive schema, take the lightest."""
    if not isinstance(s, Mapping):
        return 1
    if s.get("type") == "null":
        return 0
    heavy = ("$ref", "properties", "items", "prefixItems", "anyOf", "oneOf", "allOf")
    return 2 if any(k in s for k in heavy) or set(types_of(s)) & {"object", "array"} else 1
