"""Fake JSON that validates: tool-call arguments and structured outputs from the caller's JSON Schema.

* :func:`check_schema` turns a schema we could never satisfy into a 400 naming where it is wrong
  (metaschema errors, unresolvable ``$ref``, cheap contradictions, OpenAI's strict-mode rules).
* :func:`fake_value` walks the schema and draws plausible values — by property name (``email``,
  ``city``, ``price`` …), by ``format``, by ``pattern`` (a small generator over Python's own regex
  parse tree) — from a Faker seeded per call, so (schema, seed, name) always gives the same value.
  Every value is checked with jsonschema before it is returned; a miss retries with a derived
  seed, and a schema we cannot satisfy raises ``ValueError``.

faker and jsonschema are imported on first use: importing this module must stay cheap.
"""

from __future__ import annotations

import copy
import importlib
import json
import math
import re
import string
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any

from mockserver.errors import InvalidRequest

__all__ = ["check_schema", "fake_json", "fake_value"]

_DEEP = 4  # nesting past which objects keep only required keys, arrays their minimum, unions their shortest branch
_LIMIT = 48  # nesting (or $ref hops) past which a schema has no finite instance for us
_ATTEMPTS = 6  # derived seeds tried before a schema is declared unsatisfiable
_NULL_CHANCE = 0.1  # how often a nullable value is null: "usually" the real thing

_LOCK = threading.Lock()  # the one Faker instance is re-seeded per call, so calls must not interleave
_FAKER: Any = None


class _Unsat(Exception):
    """This draw cannot satisfy the schema; the caller retries with another seed."""


# ── check_schema ────────────────────────────────────────────────────────────────────────────

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
    for path, sub in _walk(root, ()):
        found = _contradiction(sub) or _ref_problem(root, sub) or (_strict_problem(sub) if strict else None)
        if found:
            return f"In context={path!r}, {found}"
    if strict and root.get("type") != "object":
        return f"In context=(), the root must be 'type: \"object\"', got 'type: {json.dumps(root.get('type'))}'."
    return None


def _walk(schema: Any, path: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], dict[str, Any]]]:
    """Every schema object inside ``schema`` (booleans skipped), with its path."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for key in _ONE:
        yield from _walk(schema.get(key), (*path, key))
    for key in _MANY:
        subs = schema.get(key)
        for i, sub in enumerate(subs if isinstance(subs, list) else ()):
            yield from _walk(sub, (*path, key, i))
    for key in _NAMED:
        named = schema.get(key)
        for name, sub in (named if isinstance(named, dict) else {}).items():
            yield from _walk(sub, (*path, key, name))


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
    types = _types(s)
    for lo, hi, kinds in _RANGES:
        if lo in s and hi in s and s[lo] > s[hi] and _binding(types, kinds):
            return f"'{lo}' {s[lo]} is greater than '{hi}' {s[hi]}."
    numbers = _binding(types, _NUMBERS)
    for lo, hi in _OPEN_RANGES:
        if lo in s and hi in s and s[lo] >= s[hi] and numbers:
            return f"'{lo}' {s[lo]} leaves no number below '{hi}' {s[hi]}."
    low, high = _int_bounds(s) if types == ["integer"] else _loose_bounds(s)
    if numbers and low is not None and high is not None:
        if low > high:
            return "no integer lies within the bounds."
        m = s.get("multipleOf")  # the slack keeps float rounding from rejecting a satisfiable schema
        if isinstance(m, int | float) and m > 0 and math.ceil(low / m - 1e-9) > math.floor(high / m + 1e-9):
            return f"no multiple of 'multipleOf' {m} lies within the bounds."
    if "enum" in s and not s["enum"]:
        return "'enum' must list at least one value."
    if "enum" in s and types and not any(_is_type(v, t) for v in s["enum"] for t in types):
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
        target = _resolve(root, ref)
        if target is None:
            return f"'$ref' {ref!r} cannot be resolved (only local references such as '#/$defs/name' are supported)."
        bare = isinstance(target, dict) and set(target) <= {"$ref", "description", "title"}
        ref = target.get("$ref") if bare else None
    return None


def _strict_problem(s: dict[str, Any]) -> str | None:
    if not ("object" in _types(s) or ("properties" in s and "type" not in s)):
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


def _resolve(root: Any, ref: str) -> Any:
    """The local schema ``ref`` points to (JSON pointer or ``$anchor``), or None."""
    base = root.get("$id") if isinstance(root, dict) else None
    if isinstance(base, str) and ref.startswith(base + "#"):
        ref = ref[len(base) :]
    if not ref.startswith("#"):
        return None
    from urllib.parse import unquote

    fragment = unquote(ref[1:])
    if fragment and not fragment.startswith("/"):
        return next((s for _, s in _walk(root, ()) if s.get("$anchor") == fragment), None)
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


# ── schema arithmetic ───────────────────────────────────────────────────────────────────────

_INFER = (
    ("object", ("properties", "required", "additionalProperties", "patternProperties", "minProperties")),
    ("array", ("items", "prefixItems", "minItems", "maxItems", "contains", "uniqueItems")),
    ("string", ("minLength", "maxLength", "pattern", "format")),
    ("number", ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")),
)


def _types(s: Mapping[str, Any]) -> list[str]:
    t = s.get("type")
    return [t] if isinstance(t, str) else [x for x in t if isinstance(x, str)] if isinstance(t, list) else []


def _is_type(v: Any, t: str) -> bool:
    if t == "integer":
        return (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer())
    if t == "number":
        return isinstance(v, int | float) and not isinstance(v, bool)
    kinds: dict[str, type | tuple[type, ...]] = {"string": str, "boolean": bool, "array": list, "object": dict}
    return v is None if t == "null" else isinstance(v, kinds.get(t, ()))


def _int_bounds(s: Mapping[str, Any]) -> tuple[int | None, int | None]:
    lows = [math.ceil(s["minimum"])] if "minimum" in s else []
    lows += [math.floor(s["exclusiveMinimum"]) + 1] if "exclusiveMinimum" in s else []
    highs = [math.floor(s["maximum"])] if "maximum" in s else []
    highs += [math.ceil(s["exclusiveMaximum"]) - 1] if "exclusiveMaximum" in s else []
    return (max(lows) if lows else None), (min(highs) if highs else None)


def _loose_bounds(s: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """The numeric range, exclusive ends counted in (we only claim "empty" when it surely is)."""
    lows = [s[k] for k in ("minimum", "exclusiveMinimum") if k in s]
    highs = [s[k] for k in ("maximum", "exclusiveMaximum") if k in s]
    return (max(lows) if lows else None), (min(highs) if highs else None)


def _number_ok(x: float, s: Mapping[str, Any]) -> bool:
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


def _meet(a: Any, b: Any) -> Any:
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
            wt, vt = _types(out), _types(b)
            both = [t for t in wt if t in vt or (t == "integer" and "number" in vt)]
            out[k] = both + ["integer" for t in wt if t == "number" and "integer" in vt and "integer" not in both]
            if not out[k]:
                raise _Unsat("allOf asks for incompatible types")
        elif k == "enum":
            out[k] = [x for x in w if x in v]
        elif k in ("properties", "patternProperties", "$defs", "definitions"):
            out[k] = {**w, **{p: _meet(w[p], sv) if p in w else sv for p, sv in v.items()}}
        elif k in ("items", "additionalProperties", "contains", "propertyNames"):
            out[k] = _meet(w, v)
        elif k == "allOf":
            out[k] = [*w, *v]
        elif k == "prefixItems":
            longer = w if len(w) >= len(v) else v
            out[k] = [_meet(x, y) for x, y in zip(w, v, strict=False)] + longer[min(len(w), len(v)) :]
        elif k == "$ref" and w != v:
            out["allOf"] = [*out.get("allOf", []), {"$ref": v}]
    return out


def _weight(s: Any) -> int:
    """How far a branch is from a leaf: deep in a recursive schema, take the lightest."""
    if not isinstance(s, Mapping):
        return 1
    if s.get("type") == "null":
        return 0
    heavy = ("$ref", "properties", "items", "prefixItems", "anyOf", "oneOf", "allOf")
    return 2 if any(k in s for k in heavy) or set(_types(s)) & {"object", "array"} else 1


def _singular(name: str | None) -> str | None:
    if not name:
        return None
    for plural, single in (("ies", "y"), ("sses", "ss"), ("ches", "ch"), ("shes", "sh"), ("xes", "x")):
        if name.endswith(plural):
            return name[: -len(plural)] + single
    return name[:-1] if name.endswith("s") and not name.endswith("ss") else name


# ── plausible values ────────────────────────────────────────────────────────────────────────

_Draw = Callable[[Any], Any]  # a Faker instance (seeded; its .random is the call's generator) → a value


def _words(fk: Any, n: int = 2) -> str:
    return " ".join(fk.words(nb=n))


def _uuid(fk: Any) -> str:
    return str(uuid.UUID(int=fk.random.getrandbits(128), version=4))


def _moment(fk: Any, fmt: str) -> str:
    # Not fk.date_time(): its range ends at "now", so the same seed would drift from day to day.
    when = datetime.fromtimestamp(fk.random.randint(0, 1_900_000_000), tz=UTC)
    return when.strftime(fmt)


def _datetime(fk: Any) -> str:
    return _moment(fk, "%Y-%m-%dT%H:%M:%SZ")  # RFC 3339, as format "date-time" demands


def _duration(fk: Any) -> str:
    r = fk.random
    return f"P{r.randint(1, 30)}D" if r.random() < 0.5 else f"PT{r.randint(1, 23)}H{r.randint(1, 59)}M"


_FORMATS: dict[str, _Draw] = {
    "email": lambda fk: fk.email(),
    "idn-email": lambda fk: fk.email(),
    "uri": lambda fk: fk.url(),
    "url": lambda fk: fk.url(),
    "iri": lambda fk: fk.url(),
    "uri-reference": lambda fk: fk.uri_path(),
    "iri-reference": lambda fk: fk.uri_path(),
    "uri-template": lambda fk: fk.url() + "{id}",
    "uuid": _uuid,
    "date": lambda fk: _moment(fk, "%Y-%m-%d"),
    "date-time": _datetime,
    "time": lambda fk: _moment(fk, "%H:%M:%SZ"),  # RFC 3339 full-time carries an offset
    "ipv4": lambda fk: fk.ipv4(),
    "ipv6": lambda fk: fk.ipv6(),
    "hostname": lambda fk: fk.hostname(),
    "idn-hostname": lambda fk: fk.hostname(),
    "duration": _duration,
    "json-pointer": lambda fk: "/" + "/".join(fk.words(nb=2)),
    "relative-json-pointer": lambda fk: "0/" + fk.word(),
    "regex": lambda fk: "^[a-z]+$",
}


def _hints() -> dict[str, _Draw]:
    table: dict[tuple[str, ...], _Draw] = {
        ("email", "emailaddress", "mail"): lambda fk: fk.email(),
        ("name", "fullname", "customername", "contactname", "authorname", "personname"): lambda fk: fk.name(),
        ("firstname", "givenname"): lambda fk: fk.first_name(),
        ("lastname", "surname", "familyname"): lambda fk: fk.last_name(),
        ("username", "login", "handle", "screenname", "nickname"): lambda fk: fk.user_name(),
        ("city", "cityname", "town"): lambda fk: fk.city(),
        ("country", "countryname"): lambda fk: fk.country(),
        ("countrycode",): lambda fk: fk.country_code(),
        ("state", "province", "region"): lambda fk: fk.state(),
        ("street", "streetaddress", "address", "address1", "addressline1"): lambda fk: fk.street_address(),
        ("zip", "zipcode", "postalcode", "postcode"): lambda fk: fk.postcode(),
        ("phone", "phonenumber", "mobile", "telephone", "tel"): lambda fk: fk.phone_number(),
        ("url", "website", "homepage", "link", "uri"): lambda fk: fk.url(),
        ("company", "companyname", "organization", "organisation", "employer"): lambda fk: fk.company(),
        ("job", "jobtitle", "occupation", "profession", "role"): lambda fk: fk.job(),
        ("title", "subject", "headline"): lambda fk: fk.sentence(nb_words=4).rstrip("."),
        ("date", "birthdate", "dob", "dateofbirth", "day"): lambda fk: _moment(fk, "%Y-%m-%d"),
        ("time",): lambda fk: _moment(fk, "%H:%M"),
        ("datetime", "timestamp", "at"): _datetime,
        ("description", "summary", "text", "comment", "content", "message", "body", "note", "notes", "bio"): (
            lambda fk: fk.sentence()
        ),
        ("reason", "explanation", "reasoning", "answer", "feedback", "review"): lambda fk: fk.sentence(),
        ("id", "uuid", "guid"): _uuid,
        ("price", "amount", "cost", "total", "subtotal", "salary", "balance", "fee", "budget"): (
            lambda fk: round(fk.random.uniform(1, 500), 2)
        ),
        ("age",): lambda fk: fk.random.randint(18, 90),
        ("year",): lambda fk: fk.random.randint(1990, 2030),
        ("month",): lambda fk: fk.random.randint(1, 12),
        ("quantity", "qty", "count"): lambda fk: fk.random.randint(1, 10),
        ("lat", "latitude"): lambda fk: float(fk.latitude()),
        ("lon", "lng", "long", "longitude"): lambda fk: float(fk.longitude()),
        ("color", "colour"): lambda fk: fk.color_name(),
        ("currency", "currencycode"): lambda fk: fk.currency_code(),
        ("language", "lang"): lambda fk: fk.language_name(),
        ("locale",): lambda fk: fk.locale(),
        ("unit", "units", "temperatureunit"): lambda fk: fk.random.choice(["celsius", "fahrenheit"]),
        ("temperature", "temp"): lambda fk: round(fk.random.uniform(-10, 35), 1),
        ("location", "place"): lambda fk: f"{fk.city()}, {fk.country()}",
        ("query", "q", "search", "searchterm", "keywords"): lambda fk: _words(fk, 3),
        ("tag", "word", "keyword", "category", "label"): lambda fk: fk.word(),
        ("domain", "hostname", "host"): lambda fk: fk.domain_name(),
        ("ip", "ipaddress"): lambda fk: fk.ipv4(),
        ("password",): lambda fk: fk.password(),
        ("filename", "file"): lambda fk: fk.file_name(),
        ("path", "filepath"): lambda fk: fk.file_path(),
        ("rating", "score"): lambda fk: round(fk.random.uniform(1, 5), 1),
        ("percent", "percentage"): lambda fk: round(fk.random.uniform(0, 100), 1),
        ("timezone", "tz"): lambda fk: fk.timezone(),
    }
    return {key: draw for keys, draw in table.items() for key in keys}


_HINTS = _hints()
_TAIL_ONLY_SKIP = frozenset({"name", "title", "text", "body"})  # "product_name" is not a person's name


@lru_cache(maxsize=1024)
def _hint(name: str | None) -> _Draw | None:
    """The value maker a property name suggests: the whole name, else its last word (``billing_city``)."""
    if not name:
        return None
    words = re.findall(r"[a-z]+|[0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower())
    if not words:
        return None
    whole = _HINTS.get("".join(words))
    if whole is not None or len(words) == 1 or words[-1] in _TAIL_ONLY_SKIP:
        return whole
    return _HINTS.get(words[-1])


# ── strings from a pattern ──────────────────────────────────────────────────────────────────

_PRINTABLE = string.ascii_letters + string.digits + " -_.,:;!?@#$%&*+=/()[]{}'\""
_CATEGORY = {
    "CATEGORY_DIGIT": (string.digits, str.isdigit),
    "CATEGORY_NOT_DIGIT": (string.ascii_letters + " -_.", lambda c: not c.isdigit()),
    "CATEGORY_SPACE": (" ", str.isspace),
    "CATEGORY_NOT_SPACE": (string.ascii_letters + string.digits, lambda c: not c.isspace()),
    "CATEGORY_WORD": (string.ascii_letters + string.digits + "_", lambda c: c.isalnum() or c == "_"),
    "CATEGORY_NOT_WORD": (" -.,!", lambda c: not (c.isalnum() or c == "_")),
}


@lru_cache(maxsize=512)
def _parsed(pattern: str) -> Any:
    """Python's own parse tree of the pattern (re._parser is private, so typed as Any)."""
    try:
        return importlib.import_module("re._parser").parse(pattern)
    except re.error as exc:
        raise _Unsat(f"pattern {pattern!r} is not a regular expression: {exc}") from None


def _search(pattern: str, text: str) -> bool:
    """JSON Schema's pattern test (unanchored); a pattern Python cannot compile matches nothing."""
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return False


def _from_pattern(pattern: str, rng: Any, extra: tuple[int, int]) -> str:
    """A string the pattern matches; each repeat runs ``extra`` (a range) beyond its minimum, within its maximum."""
    out: list[str] = []
    _emit(_parsed(pattern), rng, extra, out, {})
    return "".join(out)


def _emit(items: Any, rng: Any, extra: tuple[int, int], out: list[str], groups: dict[int, str]) -> None:
    for op, av in items:
        kind = str(op)
        if kind == "LITERAL":
            out.append(chr(av))
        elif kind == "NOT_LITERAL":
            out.append(rng.choice([c for c in _PRINTABLE if ord(c) != av]))
        elif kind == "ANY":
            out.append(rng.choice(string.ascii_letters + string.digits))
        elif kind == "IN":
            out.append(_class_char(av, rng))
        elif kind in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            lo, hi, sub = av
            for _ in range(rng.randint(min(hi, lo + extra[0]), min(hi, lo + extra[1]))):
                _emit(sub, rng, extra, out, groups)
        elif kind == "SUBPATTERN":
            start = len(out)
            _emit(av[-1], rng, extra, out, groups)
            if av[0]:
                groups[av[0]] = "".join(out[start:])
        elif kind == "ATOMIC_GROUP":
            _emit(av, rng, extra, out, groups)
        elif kind == "BRANCH":
            _emit(rng.choice(av[1]), rng, extra, out, groups)
        elif kind == "GROUPREF":
            out.append(groups.get(av, ""))
        elif kind == "GROUPREF_EXISTS":
            branch = av[1] if av[0] in groups else av[2]
            if branch is not None:
                _emit(branch, rng, extra, out, groups)
        elif kind not in ("AT", "ASSERT", "ASSERT_NOT"):  # anchors hold by construction; lookarounds: re.search decides
            raise _Unsat(f"pattern construct {kind} is not supported")


def _class_char(items: Any, rng: Any) -> str:
    if items and str(items[0][0]) == "NEGATE":
        pool = [c for c in _PRINTABLE if not any(_in_item(c, op, av) for op, av in items[1:])]
        if not pool:
            raise _Unsat("empty negated character class")
        return str(rng.choice(pool))
    op, av = rng.choice(items)
    kind = str(op)
    if kind == "LITERAL":
        return chr(av)
    if kind == "RANGE":
        return chr(rng.randint(*av))
    return str(rng.choice(_CATEGORY[str(av)][0]))


def _in_item(c: str, op: Any, av: Any) -> bool:
    kind = str(op)
    if kind == "LITERAL":
        return bool(ord(c) == av)
    if kind == "RANGE":
        return bool(av[0] <= ord(c) <= av[1])
    return kind == "CATEGORY" and bool(_CATEGORY[str(av)][1](c))


# ── the generator ───────────────────────────────────────────────────────────────────────────


class _Gen:
    """One draw of a value for ``root``; ``fk`` is the call's seeded Faker (``fk.random`` its RNG)."""

    def __init__(self, root: Any, fk: Any, validator: Any) -> None:
        self.root, self.fk, self.rng, self.validator = root, fk, fk.random, validator

    def value(self, s: Any, name: str | None, depth: int) -> Any:
        if depth > _LIMIT:
            raise _Unsat("the schema recurses without a way out")
        s = self.flatten(s)
        if "const" in s:
            return copy.deepcopy(s["const"])
        if "enum" in s:
            types = _types(s)
            values = [v for v in s["enum"] if not types or any(_is_type(v, t) for t in types)]
            if not values:
                raise _Unsat("no enum value fits")
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
            raise _Unsat("false schema")
        s: Any = dict(schema) if isinstance(schema, Mapping) else {}
        for _ in range(_LIMIT):
            ref, parts = s.pop("$ref", None), s.pop("allOf", None) or []
            if ref is None and not parts:
                return dict(s)
            if ref is not None:
                target = _resolve(self.root, ref)
                if target is None:
                    raise _Unsat(f"$ref {ref!r} does not resolve")
                parts = [target, *parts]
            for part in parts:
                s = _meet(s, part)
                if s is False:
                    raise _Unsat("false schema")
        raise _Unsat("$ref chain too long")

    def pick_type(self, s: Mapping[str, Any], depth: int) -> str | None:
        types = _types(s) or [t for t, keys in _INFER if any(k in s for k in keys)]
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
        if t is None and (hint := _hint(name)) is not None:  # an untyped property: whatever its name suggests
            return hint(self.fk)
        return self.string(s, name)

    def branch(self, s: dict[str, Any], key: str, name: str | None, depth: int) -> Any:
        """anyOf/oneOf: one branch (met with its siblings); oneOf's value must match exactly one."""
        branches, base = s[key], {k: v for k, v in s.items() if k != key}
        order = list(range(len(branches)))
        self.rng.shuffle(order)
        if depth >= _DEEP:
            order.sort(key=lambda i: _weight(branches[i]))
        elif self.rng.random() >= _NULL_CHANCE:
            order.sort(key=lambda i: _weight(branches[i]) == 0)
        for i in order:
            try:
                v = self.value(_meet(base, branches[i]), name, depth)
            except _Unsat:
                continue
            if key == "anyOf" or self.validator.evolve(schema=s).is_valid(v):
                return v
        raise _Unsat(f"no {key} branch could be satisfied")

    def negated(self, s: dict[str, Any], name: str | None, depth: int) -> Any:
        base, banned = {k: v for k, v in s.items() if k != "not"}, self.validator.evolve(schema=s["not"])
        for t in [None, None, None, "string", "integer", "boolean", "object", "array", "null"]:
            v = self.value(base if t is None else {**base, "type": t}, name, depth)
            if not banned.is_valid(v):
                return v
        raise _Unsat("every try matched 'not'")

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
                raise _Unsat("minProperties needs more keys than the schema allows")
        return {k: self.value(self.property(s, k), k, depth + 1) for k in keys}

    def property(self, s: Mapping[str, Any], key: str) -> Any:
        props, patterns = s.get("properties") or {}, s.get("patternProperties") or {}
        parts = [props[key]] if key in props else []
        parts += [sub for p, sub in patterns.items() if _search(p, key)]
        if not parts:
            parts = [s.get("additionalProperties", True)]
        merged: Any = True
        for part in parts:
            merged = _meet(merged, part) if merged is not True else part
        if merged is False:
            raise _Unsat(f"property {key!r} is required but not allowed")
        return merged

    def extra_key(self, s: Mapping[str, Any], taken: list[str]) -> str:
        patterns = list(s.get("patternProperties") or {})
        for i in range(20):
            if s.get("additionalProperties") is False:
                pattern = self.rng.choice(patterns)
                key = _from_pattern(pattern, self.rng, (0, 4)) + (self.fk.word() if i % 2 else "")
                if not _search(pattern, key):  # the suffix broke an end anchor
                    continue
            else:
                key = self.fk.word()
            if key not in taken:
                return key
        raise _Unsat("no fresh property name")

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
                sub = _meet(sub, contains) if sub is not True else contains
            v = self.value(sub, _singular(name), depth + 1)
            key = json.dumps(v, sort_keys=True)
            if not (unique and key in seen):
                seen.add(key)
                out.append(v)
        return out

    def number(self, s: Mapping[str, Any], name: str | None, integer: bool) -> int | float:
        hint = _hint(name)
        guess = hint(self.fk) if hint is not None else None
        if isinstance(guess, int | float) and not isinstance(guess, bool):
            if integer and isinstance(guess, float):
                guess = int(guess) if guess.is_integer() else None
            if guess is not None and _number_ok(guess, s):
                return guess
        lo, hi = _int_bounds(s) if integer else _loose_bounds(s)
        lo = lo if lo is not None else (hi - 100 if hi is not None else 0)
        hi = hi if hi is not None else lo + 100
        m = s.get("multipleOf")
        for _ in range(12):
            if m:
                k_lo, k_hi = math.ceil(lo / m), math.floor(hi / m)
                if k_lo > k_hi:
                    raise _Unsat("no multiple of multipleOf within the bounds")
                k = self.rng.randint(k_lo, k_hi)
                # Decimal: 3 * 0.1 is 0.30000000000000004 in floats, which is no multiple of 0.1
                x: int | float = k * m if isinstance(m, int) else float(Decimal(k) * Decimal(str(m)))
                x = int(x) if isinstance(x, float) and x.is_integer() else x
            elif integer:
                x = self.rng.randint(int(lo), int(hi))
            else:
                x = round(self.rng.uniform(lo, hi), 2)
                x = x if _number_ok(x, s) else self.rng.uniform(lo, hi)
            if _number_ok(x, s) and (not integer or isinstance(x, int)):
                return x
        raise _Unsat("no number fits the bounds")

    def string(self, s: Mapping[str, Any], name: str | None) -> str:
        lo, hi, pattern, fmt = s.get("minLength", 0), s.get("maxLength"), s.get("pattern"), s.get("format")

        def fits(v: str) -> bool:
            in_length = lo <= len(v) and (hi is None or len(v) <= hi)
            return in_length and (pattern is None or _search(pattern, v))

        draw = _FORMATS.get(fmt) if isinstance(fmt, str) else None
        hint = _hint(name)
        for _ in range(3 if draw is not None else 1):
            guess = draw(self.fk) if draw is not None else hint(self.fk) if hint is not None else None
            guess = str(guess) if isinstance(guess, int | float) and not isinstance(guess, bool) else guess
            if isinstance(guess, str) and fits(guess):
                return guess
        if isinstance(pattern, str):
            return self.matching(pattern, fits, lo)
        text = self.fk.sentence() if hint is None and name is None else _words(self.fk, self.rng.randint(1, 3))
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
            v = _from_pattern(pattern, self.rng, (0, 3))
            if fits(v):
                return v
        low, high = 0, max(2 * lo, 16)
        while low <= high:
            extra = (low + high) // 2
            v = _from_pattern(pattern, self.rng, (extra, extra))
            if fits(v):
                return v
            low, high = (extra + 1, high) if len(v) < lo else (low, extra - 1)
        raise _Unsat(f"no string of the right length matches pattern {pattern!r}")


# ── public API ──────────────────────────────────────────────────────────────────────────────


def _faker() -> Any:
    """The shared Faker: building one takes ~0.4 s, so it is built once, on first use (hold _LOCK)."""
    global _FAKER
    if _FAKER is None:
        from faker import Faker

        _FAKER = Faker("en_US")
    return _FAKER


@lru_cache(maxsize=512)
def _compiled(text: str) -> tuple[Any, Any]:
    """The schema (our own copy) and its validator, by the schema's JSON text."""
    from jsonschema import Draft202012Validator

    schema = json.loads(text)
    return schema, Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def _plain(o: object) -> object:
    if isinstance(o, Mapping):
        return dict(o)
    raise TypeError(f"{type(o).__name__} is not JSON")


def fake_value(schema: Mapping[str, Any], seed: int, *, name: str | None = None) -> Any:
    """A value valid against ``schema``, deterministic for (schema, seed, name).

    ``name`` is the property name the value is for, when there is one: it picks plausible values
    (``email`` → an address). Raises ``ValueError`` when no valid value could be produced.
    """
    try:
        root, validator = _compiled(json.dumps(schema, ensure_ascii=False, default=_plain))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the schema is not JSON: {exc}") from None
    why = ""
    for attempt in range(_ATTEMPTS):
        with _LOCK:
            fk = _faker()
            fk.seed_instance(seed if attempt == 0 else (seed * 1_000_003 + attempt) & ((1 << 63) - 1))
            try:
                value = _Gen(root, fk, validator).value(root, name, 0)
            except _Unsat as exc:
                why = str(exc)
                continue
            except (RecursionError, TypeError, ValueError, LookupError, AttributeError, ArithmeticError) as exc:
                # A malformed schema that skipped check_schema (a string where a number belongs …):
                # still the caller's schema at fault, so still a ValueError, never a 500.
                why = f"{type(exc).__name__}: {exc}"
                continue
        try:
            error = next(iter(validator.iter_errors(value)), None)
        except Exception as exc:  # jsonschema's own trouble with a malformed schema (bad $ref, recursion …)
            raise ValueError(f"the schema cannot be checked: {exc}") from None
        if error is None:
            return value
        why = f"{error.message[:200]} at {'/'.join(map(str, error.absolute_path)) or 'the root'}"
    raise ValueError(f"cannot produce a value valid against the schema: {why}")


_ANY_OBJECT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "city": {"type": "string"},
        "email": {"type": "string"},
        "age": {"type": "integer"},
        "score": {"type": "number"},
        "description": {"type": "string"},
    },
    "minProperties": 2,
    "maxProperties": 4,
    "additionalProperties": False,
}


def fake_json(schema: Mapping[str, Any] | None, seed: int) -> str:
    """:func:`fake_value` as compact JSON; ``None`` means any JSON object (a few plausible keys)."""
    value = fake_value(_ANY_OBJECT if schema is None else schema, seed)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
