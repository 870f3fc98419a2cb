"""One draw of a fake value for a JSON Schema: the walk that :func:`mockserver.fakejson.generate.fake_value` retries.

:class:`Gen` folds ``$ref``/``allOf`` in, picks union branches and types, and draws objects, arrays,
numbers and strings (by name/format hint, by ``pattern``, else filler text) from one seeded Faker.
It is best effort: a draw that cannot satisfy the schema raises :class:`Unsat`, and the caller
validates every value with jsonschema before returning it.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from mockserver.fakejson.algebra import (
    INFER,
    Unsat,
    int_bounds,
    is_type,
    loose_bounds,
    meet,
    number_ok,
    resolve,
    types_of,
    weight,
)
from mockserver.fakejson.hints import FORMATS, name_hint, singular, words
from mockserver.fakejson.regex import from_pattern, search

__all__ = ["Gen"]

_DEEP = 4  # nesting past which objects keep only required keys, arrays their minimum, unions their shortest branch
_LIMIT = 48  # nesting (or $ref hops) past which a schema has no finite instance for us
_NULL_CHANCE = 0.1  # how often a nullable value is null: "usually" the real thing


class Gen:
    """One draw of a value for ``root``; ``fk`` is the call's seeded Faker (``fk.random`` its RNG)."""

    def __init__(self, root: Any, fk: Any, validator: Any) -> None:
        self.root, self.fk, self.rng, self.validator = root, fk, fk.random, validator

    def value(self, s: Any, name: str | None, depth: int) -> Any:
        if depth > _LIMIT:
            raise Unsat("the schema recurses without a way out")
        s = self.flatten(s)
        if "const" in s:
            return copy.deepcopy(s["const"])
        if "enum" in s:
            types = types_of(s)
            values = [v for v in s["enum"] if not types or any(is_type(v, t) for t in types)]
            if not values:
                raise Unsat("no enum value fits")
            return copy.deepcopy(self.rng.choice(values))
        for key in ("oneOf", "anyOf"):
            if isinstance(s.get(key), list) and s[key]:
                return self.branch(s, key, name, depth)
        if "not" in s:
            return self.negated(s, name, depth)
        return self.typed(s, self.pick_type(s, depth), name, depth)

    def flatten(self, schema: Any) -> dict[str, Any]:
        """``schema`` with its ``$ref`` and ``allOf`` folded in."""
        if schema is False:
            raise Unsat("false schema")
        s: Any = dict(schema) if isinstance(schema, Mapping) else {}
        for _ in range(_LIMIT):
            ref, parts = s.pop("$ref", None), s.pop("allOf", None) or []
            if ref is None and not parts:
                return dict(s)
            if ref is not None:
                target = resolve(self.root, ref)
                if target is None:
                    raise Unsat(f"$ref {ref!r} does not resolve")
                parts = [target, *parts]
            for part in parts:
                s = meet(s, part)
                if s is False:
                    raise Unsat("false schema")
        raise Unsat("$ref chain too long")

    def pick_type(self, s: Mapping[str, Any], depth: int) -> str | None:
        types = types_of(s) or [t for t, keys in INFER if any(k in s for k in keys)]
        real = [t for t in types if t != "null"]
        if "null" in types and (not real or depth >= _DEEP or self.rng.random() < _NULL_CHANCE):
            return "null"
        return self.rng.choice(real) if real else None

    def typed(self, s: Mapping[str, Any], t: str | None, name: str | None, depth: int) -> Any:
        if t == "object":
            return self.object(s, name, depth)
        if t == "array":
            return self.array(s, name, depth)
        if t in ("integer", "number"):
            return self.number(s, name, t == "integer")
        if t == "boolean":
            return self.rng.random() < 0.5
        if t == "null":
            return None
        if t is None and (hint := name_hint(name)) is not None:  # an untyped property: whatever its name suggests
            return hint(self.fk)
        return self.string(s, name)

    def branch(self, s: dict[str, Any], key: str, name: str | None, depth: int) -> Any:
        """anyOf/oneOf: one branch (met with its siblings); oneOf's value must match exactly one."""
        branches, base = s[key], {k: v for k, v in s.items() if k != key}
        order = list(range(len(branches)))
        self.rng.shuffle(order)
        if depth >= _DEEP:
            order.sort(key=lambda i: weight(branches[i]))
        elif self.rng.random() >= _NULL_CHANCE:
            order.sort(key=lambda i: weight(branches[i]) == 0)
        for i in order:
            try:
                v = self.value(meet(base, branches[i]), name, depth)
            except Unsat:
                continue
            if key == "anyOf" or self.validator.evolve(schema=s).is_valid(v):
                return v
        raise Unsat(f"no {key} branch could be satisfied")

    def negated(self, s: dict[str, Any], name: str | None, depth: int) -> Any:
        base, banned = {k: v for k, v in s.items() if k != "not"}, self.validator.evolve(schema=s["not"])
        for t in [None, None, None, "string", "integer", "boolean", "object", "array", "null"]:
            v = self.value(base if t is None else {**base, "type": t}, name, depth)
            if not banned.is_valid(v):
                return v
        raise Unsat("every try matched 'not'")

    def object(self, s: Mapping[str, Any], name: str | None, depth: int) -> dict[str, Any]:
        props, required = s.get("properties") or {}, [r for r in s.get("required", []) if isinstance(r, str)]
        keys = [k for k in props if k in required or (depth < _DEEP and self.rng.random() < 0.75)]
        keys += [r for r in required if r not in keys]
        for k in keys:  # grows while iterating: dependencies of dependencies
            keys += [d for d in (s.get("dependentRequired") or {}).get(k, []) if d not in keys]
        optional = [k for k in keys if k not in required]
        while "maxProperties" in s and len(keys) > s["maxProperties"] and optional:
            keys.remove(optional.pop())
        spare = [k for k in props if k not in keys]
        while len(keys) < s.get("minProperties", 0):
            if spare:
                keys.append(spare.pop(0))
            elif s.get("additionalProperties") is not False or s.get("patternProperties"):
                keys.append(self.extra_key(s, keys))
            else:
                raise Unsat("minProperties needs more keys than the schema allows")
        return {k: self.value(self.property(s, k), k, depth + 1) for k in keys}

    def property(self, s: Mapping[str, Any], key: str) -> Any:
        props, patterns = s.get("properties") or {}, s.get("patternProperties") or {}
        parts = [props[key]] if key in props else []
        parts += [sub for p, sub in patterns.items() if search(p, key)]
        if not parts:
            parts = [s.get("additionalProperties", True)]
        merged: Any = True
        for part in parts:
            merged = meet(merged, part) if merged is not True else part
        if merged is False:
            raise Unsat(f"property {key!r} is required but not allowed")
        return merged

    def extra_key(self, s: Mapping[str, Any], taken: list[str]) -> str:
        patterns = list(s.get("patternProperties") or {})
        for i in range(20):
            if s.get("additionalProperties") is False:
                pattern = self.rng.choice(patterns)
                key = from_pattern(pattern, self.rng, (0, 4)) + (self.fk.word() if i % 2 else "")
                if not search(pattern, key):  # the suffix broke an end anchor
                    continue
            else:
                key = self.fk.word()
            if key not in taken:
                return key
        raise Unsat("no fresh property name")

    def array(self, s: Mapping[str, Any], name: str | None, depth: int) -> list[Any]:
        prefix, items, contains = s.get("prefixItems") or [], s.get("items", True), s.get("contains")
        lo = s.get("minItems", 0)
        n = lo if depth >= _DEEP else self.rng.randint(max(lo, 1), max(lo, 1) + 2)  # 1–3 items by default
        need = s.get("minContains", 1) if contains is not None else 0
        if need:  # the items that satisfy `contains` are drawn right after the prefix
            n = max(n, len(prefix) + need)
        n = max(min(n, s.get("maxItems", n), len(prefix) if items is False else n), lo)
        out: list[Any] = []
        seen: set[str] = set()
        unique = s.get("uniqueItems") is True
        for _ in range(6 * n + 10):
            if len(out) >= n:
                break
            i = len(out)
            sub = prefix[i] if i < len(prefix) else items
            if contains is not None and i >= len(prefix) and i - len(prefix) < need:
                sub = meet(sub, contains) if sub is not True else contains
            v = self.value(sub, singular(name), depth + 1)
            key = json.dumps(v, sort_keys=True)
            if not (unique and key in seen):
                seen.add(key)
                out.append(v)
        return out

    def number(self, s: Mapping[str, Any], name: str | None, integer: bool) -> int | float:
        hint = name_hint(name)
        guess = hint(self.fk) if hint is not None else None
        if isinstance(guess, int | float) and not isinstance(guess, bool):
            if integer and isinstance(guess, float):
                guess = int(guess) if guess.is_integer() else None
            if guess is not None and number_ok(guess, s):
                return guess
        lo, hi = int_bounds(s) if integer else loose_bounds(s)
        lo = lo if lo is not None else (hi - 100 if hi is not None else 0)
        hi = hi if hi is not None else lo + 100
        m = s.get("multipleOf")
        for _ in range(12):
            if m:
                k_lo, k_hi = math.ceil(lo / m), math.floor(hi / m)
                if k_lo > k_hi:
                    raise Unsat("no multiple of multipleOf within the bounds")
                k = self.rng.randint(k_lo, k_hi)
                # Decimal: 3 * 0.1 is 0.30000000000000004 in floats, which is no multiple of 0.1
                x: int | float = k * m if isinstance(m, int) else float(Decimal(k) * Decimal(str(m)))
                x = int(x) if isinstance(x, float) and x.is_integer() else x
            elif integer:
                x = self.rng.randint(int(lo), int(hi))
            else:
                x = round(self.rng.uniform(lo, hi), 2)
                x = x if number_ok(x, s) else self.rng.uniform(lo, hi)
            if number_ok(x, s) and (not integer or isinstance(x, int)):
                return x
        raise Unsat("no number fits the bounds")

    def string(self, s: Mapping[str, Any], name: str | None) -> str:
        lo, hi, pattern, fmt = s.get("minLength", 0), s.get("maxLength"), s.get("pattern"), s.get("format")

        def fits(v: str) -> bool:
            in_length = lo <= len(v) and (hi is None or len(v) <= hi)
            return in_length and (pattern is None or search(pattern, v))

        draw = FORMATS.get(fmt) if isinstance(fmt, str) else None
        hint = name_hint(name)
        for _ in range(3 if draw is not None else 1):
            guess = draw(self.fk) if draw is not None else hint(self.fk) if hint is not None else None
            guess = str(guess) if isinstance(guess, int | float) and not isinstance(guess, bool) else guess
            if isinstance(guess, str) and fits(guess):
                return guess
        if isinstance(pattern, str):
            return self.matching(pattern, fits, lo)
        text = self.fk.sentence() if hint is None and name is None else words(self.fk, self.rng.randint(1, 3))
        while len(text) < lo:
            text += " " + self.fk.paragraph(nb_sentences=5)
        if hi is not None and len(text) > hi:
            cut = text[:hi].rstrip(" .,")
            text = cut if len(cut) >= lo else text[:hi]
        return text

    def matching(self, pattern: str, fits: Callable[[str], bool], lo: int) -> str:
        """A string matching ``pattern`` that ``fits`` the length bounds: a few free draws, then
        a search over how far every repeat runs (longer repeats, longer strings)."""
        for _ in range(4):
            v = from_pattern(pattern, self.rng, (0, 3))
            if fits(v):
                return v
        low, high = 0, max(2 * lo, 16)
        while low <= high:
            extra = (low + high) // 2
            v = from_pattern(pattern, self.rng, (extra, extra))
            if fits(v):
                return v
            low, high = (extra + 1, high) if len(v) < lo else (low, extra - 1)
        raise Unsat(f"no string of the right length matches pattern {pattern!r}")
