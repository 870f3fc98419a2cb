"""Fake JSON that validates: tool-call arguments and structured outputs from the caller's JSON Schema.

* :func:`fake_value` draws plausible values (see :mod:`mockserver.fakejson.draw`, :mod:`mockserver.fakejson.hints`
  and :mod:`mockserver.fakejson.regex`) from a Faker seeded per call, so (schema, seed, name) always
  gives the same value. Every value is checked with jsonschema before it is returned; a miss retries
  with a derived seed, and a schema we cannot satisfy raises ``ValueError``.
* :func:`check_schema` (from :mod:`mockserver.fakejson.check`) is re-exported here, where callers
  have always imported it.

faker and jsonschema are imported on first use: importing this module must stay cheap.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from mockserver.fakejson.algebra import Unsat
from mockserver.fakejson.check import check_schema
from mockserver.fakejson.draw import Gen

__all__ = ["check_schema", "fake_json", "fake_value", "is_valid", "off_schema"]

_ATTEMPTS = 6  # derived seeds tried before a schema is declared unsatisfiable

_LOCK = threading.Lock()  # the one Faker instance is re-seeded per call, so calls must not interleave
_FAKER: Any = None


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
                value = Gen(root, fk, validator).value(root, name, 0)
            except Unsat as exc:
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


def is_valid(schema: Mapping[str, Any], value: Any) -> bool:
    """Is ``value`` valid against ``schema``? (False too when the schema cannot be read.)"""
    try:
        _, validator = _compiled(json.dumps(schema, ensure_ascii=False, default=_plain))
        return bool(validator.is_valid(value))
    except Exception:  # jsonschema's own trouble with a malformed schema: not valid, never a 500
        return False


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


def _wrong(schema: Any) -> Any:
    """A value of a type ``schema`` does not name (a best guess: the checks below decide)."""
    kinds = schema.get("type") if isinstance(schema, Mapping) else None
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    return [] if "string" in kinds else "not-a-" + (kinds[0] if kinds else "value")


def off_schema(schema: Mapping[str, Any] | None, text: str) -> str:
    """``text`` (JSON valid against ``schema``) changed into JSON that is *not* — the
    ``content.off_schema`` fault. Tried in order: drop a required property, give a property a
    value of the wrong type, answer with the wrong type altogether. ``None`` (any JSON object)
    becomes an array. A schema that accepts everything cannot be broken: ``text`` comes back.
    """
    value = json.loads(text)
    if schema is None:
        return json.dumps([value], ensure_ascii=False, separators=(",", ":"))
    _, validator = _compiled(json.dumps(schema, ensure_ascii=False, default=_plain))
    candidates: list[Any] = []
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            candidates.append({k: v for k, v in value.items() if k != key})
        for key, sub in (schema.get("properties") or {}).items():
            candidates.append({**value, key: _wrong(sub)})
    candidates += [_wrong(schema), None, "off-schema", 0, [], {}]
    for candidate in candidates:
        if not validator.is_valid(candidate):
            return json.dumps(candidate, ensure_ascii=False, separators=(",", ":"))
    return text
