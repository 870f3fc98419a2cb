"""fake_json: every value validates against its schema, is seeded, looks plausible; bad schemas are 400s."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from mockserver.errors import InvalidRequest
from mockserver.fakejson.generate import check_schema, fake_json, fake_value

DEPTH = 2  # how deep the random schemas nest: metaschema checks cost ~0.5 ms per subschema
_FORMAT = Draft202012Validator.FORMAT_CHECKER

_PATTERNS = [
    r"^[A-Z]{2}-\d{4}$",
    r"^\d{3}-\d{3}-\d{4}$",
    r"^[a-z0-9_]{3,16}$",
    r"^(foo|bar|baz)\d*$",
    r"^#[0-9a-fA-F]{6}$",
    r"^[A-Z][a-z]+( [A-Z][a-z]+)*$",
    r"\d+",
    r"^https?://[a-z]+\.(com|org)/?$",
    r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$",
    r"^v\d+\.\d+\.\d+$",
    r"^\+?[1-9]\d{1,14}$",
    r"^\d{5}(-\d{4})?$",
]
_FORMATS = ["email", "uri", "uuid", "date", "date-time", "time", "ipv4", "ipv6", "hostname", "duration"]
_NAMES = [
    "email",
    "name",
    "city",
    "country",
    "age",
    "price",
    "id",
    "description",
    "unit",
    "latitude",
    "lon",
    "created_at",
    "phone",
    "zip",
    "url",
    "company",
    "color",
    "currency",
    "tags",
    "count",
    "title",
    "x",
    "foo",
]


def _leaf(rng: random.Random) -> dict[str, Any]:
    kind = rng.choice(["string", "string", "integer", "number", "boolean", "enum", "format", "pattern", "const"])
    if kind == "string":
        s: dict[str, Any] = {"type": "string"}
        if rng.random() < 0.5:
            lo = rng.randint(0, 12)
            s |= {"minLength": lo, "maxLength": lo + rng.randint(0, 30)}
        return s
    if kind in ("integer", "number"):
        s = {"type": kind}
        if rng.random() < 0.7:
            lo = rng.randint(-50, 50)
            s |= {"minimum": lo, "maximum": lo + rng.randint(0, 100)}
        if rng.random() < 0.3:
            if rng.random() < 0.5:
                s["exclusiveMinimum"] = s.get("minimum", 0) - 1
            else:
                s["exclusiveMaximum"] = s.get("maximum", 0) + 1
        if rng.random() < 0.2:
            s["multipleOf"] = rng.choice([2, 5, 0.5, 0.25] if kind == "number" else [2, 3, 5])
        return s
    if kind == "enum":
        return {"type": "string", "enum": rng.sample(["red", "green", "blue", "celsius", "fahrenheit"], 3)}
    if kind == "format":
        return {"type": "string", "format": rng.choice(_FORMATS)}
    if kind == "pattern":
        return {"type": "string", "pattern": rng.choice(_PATTERNS)}
    if kind == "const":
        return {"const": rng.choice(["fixed", 3, True])}
    return {"type": "boolean"}


def _schema(rng: random.Random, depth: int, strict: bool) -> dict[str, Any]:
    roll = rng.random() if depth < DEPTH else 0.0
    if roll < 0.45:
        s = _leaf(rng)
    elif roll < 0.6:
        lo = rng.randint(0, 2)
        s = {"type": "array", "items": _schema(rng, depth + 1, strict), "minItems": lo}
        s["maxItems"] = lo + rng.randint(0, 3)
        if rng.random() < 0.3 and "enum" not in s["items"] and "const" not in s["items"]:
            s["uniqueItems"] = True
            s["items"] = {"type": "string", "minLength": 8}
    elif roll < 0.7:  # nullable, both spellings
        s = _schema(rng, depth + 1, strict)
        if isinstance(s.get("type"), str) and "enum" not in s and rng.random() < 0.5:
            s["type"] = [s["type"], "null"]
        else:
            s = {"anyOf": [s, {"type": "null"}]}
    else:
        s = _object(rng, depth, strict)
    return s


def _object(rng: random.Random, depth: int, strict: bool) -> dict[str, Any]:
    names = rng.sample(_NAMES, rng.randint(1, 4))
    props = {n: _schema(rng, depth + 1, strict) for n in names}
    if strict:
        return {"type": "object", "properties": props, "required": names, "additionalProperties": False}
    required = rng.sample(names, rng.randint(0, len(names)))
    s: dict[str, Any] = {"type": "object", "properties": props, "required": required}
    if rng.random() < 0.5:
        s["additionalProperties"] = False
    return s


def _random_schema(seed: int) -> tuple[dict[str, Any], bool]:
    rng = random.Random(seed)
    strict = rng.random() < 0.3
    root = _object(rng, 0, strict)
    if rng.random() < 0.3:  # a recursive definition reached through $ref
        node = {
            "type": "object",
            "properties": {
                "label": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
        }
        if strict:
            node |= {"required": ["label", "children"], "additionalProperties": False}
        root["$defs"] = {"node": node}
        root["properties"]["tree"] = {"$ref": "#/$defs/node"}
        if strict:
            root["required"].append("tree")
    return root, strict


@pytest.mark.parametrize("batch", range(4))
def test_random_schemas_validate(batch: int) -> None:
    for seed in range(batch * 50, batch * 50 + 50):
        schema, strict = _random_schema(seed)
        check_schema(schema, "response_format", strict=strict)
        value = fake_value(schema, seed)
        Draft202012Validator(schema, format_checker=_FORMAT).validate(value)


def test_same_seed_same_text_and_seeds_differ() -> None:
    schema, _ = _random_schema(7)
    assert fake_json(schema, 11) == fake_json(schema, 11)
    texts = {fake_json(schema, seed) for seed in range(10)}
    assert len(texts) >= 8


@pytest.mark.parametrize("seed", range(10))
def test_name_hints_and_constraints(seed: int) -> None:
    schema = {
        "type": "object",
        "properties": {
            "email": {"type": "string"},
            "city": {"type": "string"},
            "age": {"type": "integer", "minimum": 30, "maximum": 40},
            "scores": {"type": "array", "items": {"type": "integer"}, "minItems": 4, "maxItems": 6},
            "note": {"type": "string"},
        },
        "required": ["email", "city", "age", "scores"],
    }
    value = fake_value(schema, seed)
    assert re.fullmatch(r"[^@\s]+@[^@\s]+\.[a-z]+", value["email"])
    assert re.fullmatch(r"[A-Z][A-Za-z .'-]+", value["city"])
    assert 30 <= value["age"] <= 40 and isinstance(value["age"], int)
    assert 4 <= len(value["scores"]) <= 6
    assert {"email", "city", "age", "scores"} <= value.keys()


def test_unit_hint_yields_to_enum() -> None:
    assert {fake_value({"type": "string"}, s, name="unit") for s in range(20)} == {"celsius", "fahrenheit"}
    assert {fake_value({"enum": ["K"]}, s, name="unit") for s in range(5)} == {"K"}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "format": "email"},
        {"type": "string", "format": "uuid"},
        {"type": "string", "format": "date-time"},
        {"type": "string", "pattern": r"^[A-Z]{3}-\d{2,4}$"},
        {"type": "string", "pattern": r"^[a-z]+$", "minLength": 20, "maxLength": 25},
        {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "multipleOf": 0.1},
        {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False, "minItems": 2},
        {"type": "array", "items": {"type": "integer"}, "contains": {"const": 7}},
        {"oneOf": [{"type": "integer", "multipleOf": 2}, {"type": "integer", "multipleOf": 3}]},
        {
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
            ]
        },
        {"not": {"type": "string"}},
        {"type": ["string", "null"], "maxLength": 3},
        {
            "type": "object",
            "patternProperties": {"^x_": {"type": "integer"}},
            "additionalProperties": False,
            "minProperties": 2,
        },
        {
            "$defs": {
                "l": {
                    "type": "object",
                    "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/$defs/l"}},
                    "required": ["v", "next"],
                }
            },
            "anyOf": [{"$ref": "#/$defs/l"}, {"type": "null"}],
        },
        {"definitions": {"a": {"type": "string", "format": "ipv4"}}, "$ref": "#/definitions/a"},
    ],
    ids=lambda s: json.dumps(s)[:40],
)
def test_feature_schemas(schema: dict[str, Any]) -> None:
    for seed in range(5):
        Draft202012Validator(schema, format_checker=_FORMAT).validate(fake_value(schema, seed))


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "items": {"enum": [1, 2]}, "uniqueItems": True, "minItems": 3},
        {"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]},  # no finite instance
        {"type": "string", "minLength": "three"},  # malformed, as if check_schema had been skipped
        {"type": "string", "pattern": r"\p{L}+"},  # ECMA-only syntax Python's re cannot read
    ],
    ids=["unique-enum", "endless", "malformed", "ecma-regex"],
)
def test_unsatisfiable_raises_value_error(schema: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="schema"):
        fake_value(schema, 0)


def test_fake_json_none_is_an_object() -> None:
    for seed in range(5):
        value = json.loads(fake_json(None, seed))
        assert isinstance(value, dict) and len(value) >= 2


def test_fake_json_is_compact() -> None:
    text = fake_json({"type": "object", "properties": {"a": {"const": "é"}}, "required": ["a"]}, 0)
    assert text == '{"a":"é"}'


@pytest.mark.parametrize(
    ("schema", "strict", "needle"),
    [
        ([1, 2], False, "JSON object"),
        ({"type": "strng"}, False, "strng"),
        (
            {"type": "object", "properties": {"age": {"type": "integer", "minimum": 5, "maximum": 3}}},
            False,
            "('properties', 'age'), 'minimum' 5 is greater than 'maximum' 3",
        ),
        ({"$ref": "#/$defs/missing"}, False, "cannot be resolved"),
        ({"$ref": "https://example.com/schema.json"}, False, "cannot be resolved"),
        ({"enum": []}, False, "at least one"),
        ({"type": "string", "minLength": 4, "maxLength": 2}, False, "minLength"),
        ({"type": "object", "required": ["a"], "additionalProperties": False}, False, "'a'"),
        ({"type": "string", "pattern": "(unclosed"}, False, "pattern"),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, True, "additionalProperties"),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}, True, "'a'"),
        ({"type": "array", "items": {"type": "string"}}, True, "root"),
        (
            {
                "type": "object",
                "properties": {"o": {"type": "object", "properties": {}}},
                "required": ["o"],
                "additionalProperties": False,
            },
            True,
            "('properties', 'o')",
        ),
    ],
    ids=lambda v: json.dumps(v)[:30] if not isinstance(v, bool) else str(v),
)
def test_check_schema_rejects(schema: object, strict: bool, needle: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        check_schema(schema, "tools[0].function.parameters", strict=strict)
    assert info.value.param == "tools[0].function.parameters"
    assert info.value.status == 400
    assert needle in info.value.message


def test_check_schema_accepts_strict_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": ["string", "null"]}},
        "required": ["a"],
        "additionalProperties": False,
    }
    check_schema(schema, "response_format", strict=True)
    check_schema({"type": "object"}, "response_format")


def test_threads_do_not_disturb_each_other() -> None:
    from concurrent.futures import ThreadPoolExecutor

    schema, _ = _random_schema(3)
    alone = [fake_json(schema, seed) for seed in range(40)]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(lambda seed: fake_json(schema, seed), range(40))) == alone


def test_dates_do_not_depend_on_today() -> None:
    """Faker's date_time() ends its range at "now"; ours must not, or a seed drifts day to day."""
    import datetime as dt
    from unittest import mock

    schema = {"type": "object", "properties": {"d": {"format": "date-time", "type": "string"}}, "required": ["d"]}
    before = fake_json(schema, 5)
    later = dt.datetime(2040, 1, 1, tzinfo=dt.UTC)
    with mock.patch("faker.providers.date_time.datetime") as fake_dt:
        fake_dt.now.return_value = later
        assert fake_json(schema, 5) == before
