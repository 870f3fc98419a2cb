"""Validate JSON bodies against OpenAI's own OpenAPI description.

``validate(component, instance)`` raises ``AssertionError`` listing every violation as
``<JSON path>: <what the schema says>``; ``errors(component, instance)`` returns that list.
``component`` is a name under ``#/components/schemas`` of ``tests/support/openai-wire.json``:
the wire facts of OpenAI's OpenAPI description (2.3.0) that the tests use, made from the
document by ``python -m tests.support.make_wire_spec`` (which records the source's commit and
sha256), so the repository needs nothing beside it. ``MOCKSERVER_OPENAPI_SPEC`` points at
another document instead (the whole YAML, say). It is read once per process and one
validator is built per component, so calling these in a loop over stream chunks is cheap.

How the document is read
------------------------
* It is OpenAPI 3.1, whose schemas are JSON Schema 2020-12, so we use
  ``Draft202012Validator`` with one ``referencing`` resource holding the whole
  ``components.schemas`` tree: every ``$ref`` in it is ``#/components/schemas/X``.
* OpenAPI-only keywords (``discriminator``, ``x-*``, ``example``, ``deprecated``) are
  ignored by JSON Schema, which is right, except ``nullable``: 110 places in the document
  still use the OpenAPI 3.0 ``nullable: true`` instead of a ``"null"`` type. JSON Schema
  ignores it, which would reject valid nulls (``finish_reason`` and ``usage`` of chat
  stream chunks among them), so it is rewritten into a ``null`` alternative before use.
* ``format`` is not asserted (no format checker): most formats in the document are
  non-standard (``unixtime``, ``binary``, ``double``) and are meant as annotations.
* ``discriminator`` is used to pick the variant whose errors are reported, so a bad
  Responses stream event says what is wrong with *its* event type rather than with all 58.

Errata (on by default; ``errors(..., errata=False)`` checks the document exactly as written)
---------------------------------------------------------------------------------------------
* ``CreateCompletionResponse`` ``choices[].logprobs.token_logprobs`` items are
  ``number`` and ``top_logprobs`` items are objects, but with ``echo`` the API sends
  ``null`` for the first prompt token in both (the SDK types are just as strict). Both are
  widened to allow ``null``.
* ``Response.usage`` is a ``ResponseUsage`` object, but the API (and the document's own
  examples of ``response.created``/``in_progress``/``failed``/``incomplete`` events) sends
  ``"usage": null`` until a response has finished. Widened to allow ``null``.
* ``Batch``'s ids and times not reached yet (``output_file_id``, ``in_progress_at``…, and
  ``errors``, ``model``, ``usage``) are typed non-null, but the document's own examples of a
  batch (``POST /batches``) send ``null`` for each; ``OpenAIFile.expires_at`` and
  ``status_details`` likewise. Widened to allow ``null``.
* The document has no schema for legacy-completions stream chunks (``POST /completions``
  declares only ``application/json``). ``CreateCompletionStreamResponse`` is ours:
  ``CreateCompletionResponse`` with ``finish_reason`` allowed to be ``null``, as it is in
  every chunk but the last. It is not an OpenAI name.

What a valid body must look like (surprises found in the document, 2.3.0)
--------------------------------------------------------------------------
* Completions choice: ``text``, ``index``, ``logprobs`` (key required, ``null`` allowed),
  ``finish_reason`` in {stop, length, content_filter}. Top level requires ``id``,
  ``object`` = "text_completion", ``created`` (integer), ``model``, ``choices``;
  ``usage`` and ``system_fingerprint`` are optional, ``system_fingerprint`` must be a
  string when present (never ``null``).
* Chat choice: ``index``, ``message``, ``finish_reason`` in {stop, length, tool_calls,
  content_filter, function_call}, and ``logprobs`` (key required, ``null`` allowed); a
  non-null ``logprobs`` needs both ``content`` and ``refusal`` keys (each list or null).
* Chat message: ``role`` = "assistant", and ``content`` and ``refusal`` keys are both
  required (``null`` allowed). ``tool_calls`` is optional and must not be ``null``.
* Token logprob (chat): ``token``, ``logprob``, ``bytes`` (list of ints or ``null``) and
  ``top_logprobs`` are required; each top entry needs ``token``, ``logprob``, ``bytes``.
* Chat stream chunk: ``object`` = "chat.completion.chunk"; each choice requires
  ``index``, ``delta`` and the ``finish_reason`` *key* (``null`` allowed); ``logprobs``
  is optional and nullable; ``usage`` is optional and nullable; ``choices: []`` is valid.
* ``service_tier`` is optional; when present it is one of auto, default, flex, scale,
  priority, fast, or ``null``. ``system_fingerprint`` is optional, deprecated, and
  string-only. ``created`` is an integer (Unix seconds), not a float.
* Usage: ``prompt_tokens``, ``completion_tokens``, ``total_tokens`` required; the
  ``*_details`` objects are optional.
* Error envelope: ``{"error": {...}}`` with all four keys ``message``, ``type``,
  ``param``, ``code`` present; ``param`` and ``code`` may be ``null``, ``type`` may not.
* Model: ``id``, ``object`` = "model", ``created`` (integer), ``owned_by`` required.
  ``ListModelsResponse``: ``object`` = "list", ``data``. ``DeleteModelResponse``:
  ``id``, ``object`` (any string), ``deleted``.
* Embeddings: ``object`` = "list", ``model``, ``data`` (``index``, ``object`` =
  "embedding", ``embedding``) and ``usage`` (``prompt_tokens``, ``total_tokens``) all
  required. ``ImagesResponse`` requires only ``created``.
* Responses: ``Response`` requires ``id``, ``object`` = "response", ``created_at`` (a
  number: floats allowed here, unlike ``created`` elsewhere), ``model``, ``output``,
  ``tools``, ``tool_choice``, ``parallel_tool_calls``, ``metadata``, ``temperature``,
  ``top_p``, and the nullable-but-present keys ``error``, ``incomplete_details``,
  ``instructions``. ``user`` must be omitted or a string (the document's own examples send
  ``null``, which its schema rejects). An ``output_text`` part requires ``text``,
  ``annotations`` *and* ``logprobs`` (a list, may be empty); ``usage`` needs
  ``input_tokens_details.{cached_tokens, cache_write_tokens}`` and
  ``output_tokens_details.reasoning_tokens``. Stream events are the ``ResponseStreamEvent``
  union (58 variants, keyed by ``type``); every event requires ``sequence_number`` and the
  text delta/done events require ``logprobs``. Several of the document's own examples are
  stale against these rules, so copy shapes from the schemas, not from the examples.
"""

from __future__ import annotations

import copy
import functools
import json
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import yaml
from jsonschema import Draft202012Validator, ValidationError
from jsonschema.exceptions import best_match
from referencing import Registry
from referencing.jsonschema import DRAFT202012, Schema, SchemaRegistry

__all__ = ["ENV_VAR", "SYNTHETIC_COMPONENTS", "WIRE", "component_names", "errors", "spec_path", "validate"]

ENV_VAR: Final = "MOCKSERVER_OPENAPI_SPEC"

# The base URI the whole components tree is registered under; every `#/components/...`
# reference inside it then resolves against this one resource.
_BASE_URI: Final = "urn:openai-openapi"

# Names that exist only with errata on: shapes the API sends but the document lacks.
SYNTHETIC_COMPONENTS: Final = frozenset({"CreateCompletionStreamResponse"})

_MAX_MESSAGE: Final = 300  # jsonschema messages embed the instance's repr; keep them readable

Json = Any  # a parsed JSON/YAML value: dict, list, str, int, float, bool or None


WIRE: Final = Path(__file__).with_name("openai-wire.json")


def spec_path() -> Path:
    """Where the schemas come from: ``$MOCKSERVER_OPENAPI_SPEC``, else the repository's own
    ``tests/support/openai-wire.json``."""
    override = os.environ.get(ENV_VAR)
    return Path(override) if override else WIRE


@functools.cache
def _raw_schemas() -> dict[str, Json]:
    """``components.schemas`` as written (JSON, or a whole OpenAPI YAML when overridden)."""
    path = spec_path()
    if not path.is_file():
        raise FileNotFoundError(f"OpenAPI schemas not found at {path} (set {ENV_VAR} to override)")
    with path.open("rb") as stream:
        # CSafeLoader is the libyaml parser: ~5x faster than the pure-Python SafeLoader.
        document = json.load(stream) if path.suffix == ".json" else yaml.load(stream, Loader=yaml.CSafeLoader)
    schemas: dict[str, Json] = document["components"]["schemas"]
    return schemas


def _or_null(schema: dict[str, Json]) -> dict[str, Json]:
    """``schema`` widened to also accept ``null``."""
    kind = schema.get("type")
    composite = {"$ref", "anyOf", "oneOf", "allOf", "not", "const"} & schema.keys()
    if isinstance(kind, str) and not composite:
        # Keep the flat shape when possible: errors then name the real type, not an anyOf.
        widened = {**schema, "type": [kind, "null"]}
        if "enum" in schema:
            widened["enum"] = [*schema["enum"], None]
        return widened
    return {"anyOf": [schema, {"type": "null"}]}


def _rewrite_nullable(node: Json) -> Json:
    """A copy of ``node`` with OpenAPI 3.0 ``nullable: true`` turned into JSON Schema.

    Only a boolean ``nullable`` is the keyword; a dict under that key would be a property
    named "nullable", which is left alone.
    """
    if isinstance(node, list):
        return [_rewrite_nullable(item) for item in node]
    if not isinstance(node, dict):
        return node
    nullable = node.get("nullable")
    if not isinstance(nullable, bool):
        return {key: _rewrite_nullable(value) for key, value in node.items()}
    rest = {key: _rewrite_nullable(value) for key, value in node.items() if key != "nullable"}
    return _or_null(rest) if nullable else rest


def _patch(
    schemas: dict[str, Json],
    pointer: Sequence[str | int],
    expected: Json,
    change: Callable[[Json], Json],
) -> None:
    """Replace the node at ``pointer`` by ``change(node)``, if it still is ``expected``.

    The check makes a spec update that fixes (or moves) an erratum fail loudly instead of
    silently patching something else.
    """
    parent: Json = schemas
    for step in pointer[:-1]:
        parent = parent[step]
    last = pointer[-1]
    if parent[last] != expected:
        where = "/".join(map(str, pointer))
        raise LookupError(f"erratum no longer applies at {where}: found {parent[last]!r}")
    parent[last] = change(parent[last])


# CreateCompletionResponse.choices[].logprobs, after `_rewrite_nullable` (it was already an
# anyOf [object, null] in the document).
_COMPLETION_LOGPROBS: Final[tuple[str | int, ...]] = (
    "CreateCompletionResponse", "properties", "choices", "items", "properties", "logprobs",
    "anyOf", 0, "properties",
)  # fmt: skip


_BATCH_NULLABLE: Final = tuple(
    f"Batch.{field}"
    for field in (
        "model", "errors", "output_file_id", "error_file_id", "in_progress_at", "finalizing_at",
        "completed_at", "failed_at", "expired_at", "cancelling_at", "cancelled_at", "usage",
    )
)  # fmt: skip
_FILE_NULLABLE: Final = ("OpenAIFile.expires_at", "OpenAIFile.status_details")


def _apply_errata(schemas: dict[str, Json]) -> None:
    """Correct the document where the real API (and so our server) differs; see module doc."""
    _patch(schemas, (*_COMPLETION_LOGPROBS, "token_logprobs", "items"), {"type": "number"}, _or_null)
    _patch(
        schemas,
        (*_COMPLETION_LOGPROBS, "top_logprobs", "items"),
        {"type": "object", "additionalProperties": {"type": "number"}},
        _or_null,
    )
    _patch(
        schemas,
        ("Response", "allOf", 2, "properties", "usage"),
        {"$ref": "#/components/schemas/ResponseUsage"},
        _or_null,
    )
    # The Batch object's own examples send null for the ids and times not reached yet (and the
    # model of a batch not yet validated); the File object's, for expires_at and status_details.
    for name in (*_BATCH_NULLABLE, *_FILE_NULLABLE):
        component, field = name.split(".")
        props = schemas[component]["properties"]
        props[field] = _or_null(props[field])
    stream = copy.deepcopy(schemas["CreateCompletionResponse"])
    choice = stream["properties"]["choices"]["items"]["properties"]
    choice["finish_reason"] = _or_null(choice["finish_reason"])
    schemas["CreateCompletionStreamResponse"] = stream


@functools.cache
def _schemas(errata: bool) -> dict[str, Json]:
    """The component schemas as validated: ``nullable`` rewritten, errata applied if asked."""
    schemas: dict[str, Json] = _rewrite_nullable(_raw_schemas())  # a fresh copy to patch
    if errata:
        _apply_errata(schemas)
    return schemas


@functools.cache
def _registry(errata: bool) -> SchemaRegistry:
    """One resource for the whole components tree, under ``_BASE_URI``."""
    resource = DRAFT202012.create_resource({"components": {"schemas": _schemas(errata)}})
    registry: SchemaRegistry = Registry().with_resource(_BASE_URI, resource)
    return registry


@functools.cache
def _validator(component: str, errata: bool) -> Draft202012Validator:
    if component not in _schemas(errata):
        raise KeyError(f"no component schema {component!r} in {spec_path()}")
    # A root that only points into the registered document: `#/...` references inside it
    # are then resolved against that document, not against this little root.
    root: Schema = {"$ref": f"{_BASE_URI}#/components/schemas/{component}"}
    # No format_checker: formats stay annotations (see module doc).
    return Draft202012Validator(root, registry=_registry(errata))


def component_names(*, errata: bool = True) -> frozenset[str]:
    """All component schema names ``validate`` accepts."""
    return frozenset(_schemas(errata))


def _branches(error: ValidationError) -> list[list[ValidationError]]:
    """The sub-errors of a failed ``anyOf``/``oneOf``, grouped by the branch they came from."""
    grouped: dict[Json, list[ValidationError]] = {}
    for sub in error.context or ():
        grouped.setdefault(sub.relative_schema_path[0], []).append(sub)
    return list(grouped.values())


def _leaves(error: ValidationError) -> Iterator[tuple[ValidationError, str]]:
    """What to show for ``error``: itself, or, for a failed union, what is wrong inside the
    branch the instance was evidently meant to match.

    jsonschema's generic ``best_match`` often blames the wrong branch here: for "X or null"
    it reports "not of type 'null'", and in a 58-way discriminated union it picks some
    variant's missing field. So a branch is ruled out first when it disagrees with the
    discriminator value, or (without a discriminator) rejects the instance's type outright.
    """
    branches = _branches(error) if error.validator in ("anyOf", "oneOf") else []
    if not branches:
        yield error, error.message
        return
    discriminator = error.schema.get("discriminator") if isinstance(error.schema, dict) else None
    key = discriminator.get("propertyName") if isinstance(discriminator, dict) else None
    if isinstance(key, str) and isinstance(error.instance, dict):
        if key not in error.instance:
            yield error, f"{key!r} is a required property (it selects the variant)"
            return
        plausible = [b for b in branches if all(list(sub.relative_path) != [key] for sub in b)]
        if not plausible:
            yield error, f"{key}={error.instance[key]!r} names none of the variants"
            return
    else:
        plausible = [b for b in branches if not any(sub.validator == "type" and not sub.relative_path for sub in b)]
    if len(plausible) == 1:
        for sub in plausible[0]:
            yield from _leaves(sub)
        return
    best = best_match(sub for branch in plausible for sub in branch)
    if best is None:  # no branch fits the instance's type at all: the union's own message
        yield error, error.message
    else:
        yield from _leaves(best)


def _describe(error: ValidationError, message: str) -> str:
    if len(message) > _MAX_MESSAGE:
        message = message[: _MAX_MESSAGE - 1] + "…"
    return f"{error.json_path}: {message}"


def errors(component: str, instance: object, *, errata: bool = True) -> list[str]:
    """Every way ``instance`` violates ``#/components/schemas/<component>``, as
    ``"<JSON path>: <complaint>"`` strings in document order; empty when valid.

    ``errata=False`` checks against the document as written, without the corrections and
    the synthetic components listed in the module docstring.
    """
    validator = _validator(component, errata)
    found = [_describe(leaf, message) for error in validator.iter_errors(instance) for leaf, message in _leaves(error)]
    return list(dict.fromkeys(found))  # variants can repeat a complaint; keep the first


def validate(component: str, instance: object, *, errata: bool = True) -> None:
    """Raise ``AssertionError`` if ``instance`` is not a valid ``<component>``.

    The message names the component and lists each failing JSON path with the schema's
    complaint, so a test failure points straight at the wrong field.
    """
    problems = errors(component, instance, errata=errata)
    if problems:
        listing = "\n".join(f"  {problem}" for problem in problems)
        raise AssertionError(f"not a valid {component} ({len(problems)} problem(s)):\n{listing}")


def request_fields(component: str) -> frozenset[str]:
    """Every property a request component documents, ``allOf`` parts included."""
    schemas = _raw_schemas()

    def walk(node: Json) -> set[str]:
        found: set[str] = set()
        if "$ref" in node:
            found |= walk(schemas[node["$ref"].rsplit("/", 1)[-1]])
        for part in node.get("allOf", []):
            found |= walk(part)
        found |= set(node.get("properties", {}))
        return found

    return frozenset(walk(schemas[component]))
