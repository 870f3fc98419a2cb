"""Reading a catalog: the admin body's JSON (or the ``--mcp`` file's) into a
:class:`~mockserver.mcp_fakes.catalog.Catalog`, every mistake a :class:`CatalogError` naming the
field (``tools[0].inputSchema``), so the admin API answers a 400 that says which and nothing wrong
reaches a client. A scripted tool result is checked against the SDK's own ``CallToolResult``
model (imported only then) and refused past :data:`MAX_RESULT_BYTES`; schemas with the checks
the chat endpoints use (:func:`mockserver.fakejson.check.check_schema`)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from mockserver.errors import InvalidRequest
from mockserver.fakejson.check import check_schema
from mockserver.faults.catalogue import FaultError, parse
from mockserver.mcp_fakes.catalog import PLACEHOLDER, Catalog, Prompt, Resource, Tool

__all__ = ["MAX_RESULT_BYTES", "CatalogError", "parse_catalog"]

MAX_RESULT_BYTES = 1024 * 1024  # one scripted result (or resource text), as JSON: refused beyond
MAX_ENTRIES = 1024  # tools, resources or prompts one catalog may hold
_NAME = re.compile(r"[A-Za-z0-9_.\-/]{1,128}")  # the tool names MCP's spec recommends (SEP-986)


class CatalogError(ValueError):
    """A definition the server cannot take; ``field`` names where (the 400's ``param``)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def parse_catalog(data: object) -> Catalog:
    """The catalog in ``data`` (the admin body's JSON), or :class:`CatalogError` naming the field."""
    if not isinstance(data, Mapping):
        raise CatalogError(
            'The MCP catalog is a JSON object: {"tools": [...], "resources": [...], "prompts": [...]}.', ""
        )
    _only(data, {"tools", "resources", "prompts", "session"}, "")
    tools = tuple(_tool(item, f"tools[{i}]") for i, item in enumerate(_list(data, "tools")))
    resources = tuple(_resource(item, f"resources[{i}]") for i, item in enumerate(_list(data, "resources")))
    prompts = tuple(_prompt(item, f"prompts[{i}]") for i, item in enumerate(_list(data, "prompts")))
    for kind, items, key in (("tools", tools, "name"), ("resources", resources, "uri"), ("prompts", prompts, "name")):
        seen: set[str] = set()
        for i, item in enumerate(items):
            value = getattr(item, key)
            if value in seen:
                raise CatalogError(f"{kind}[{i}].{key} {value!r} is defined twice.", f"{kind}[{i}].{key}")
            seen.add(value)
    return Catalog(tools, resources, prompts)


def _list(data: Mapping[str, Any], key: str) -> list[Any]:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise CatalogError(f"{key!r} must be a list, not {type(value).__name__}.", key)
    if len(value) > MAX_ENTRIES:
        raise CatalogError(f"{key!r} holds at most {MAX_ENTRIES} entries, not {len(value)}.", key)
    return value


def _only(item: Mapping[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(item) - known)
    if unknown:
        at = f"{where}." if where else ""
        raise CatalogError(f"Unknown field {at}{unknown[0]} (known: {', '.join(sorted(known))}).", f"{at}{unknown[0]}")


def _text(item: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str | None:
    value = item.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        need = "a non-empty string" if required else "a string"
        raise CatalogError(f"{where}.{key} must be {need}.", f"{where}.{key}")
    return value


def _object(item: object, where: str) -> Mapping[str, Any]:
    if not isinstance(item, Mapping):
        raise CatalogError(f"{where} must be a JSON object, not {type(item).__name__}.", where)
    return item


def _schema(value: object, where: str) -> Mapping[str, Any]:
    try:
        check_schema(value, where)
    except InvalidRequest as exc:
        raise CatalogError(exc.message, where) from None
    assert isinstance(value, dict)
    if value.get("type") != "object":  # MCP: a tool's input and output schemas describe objects
        raise CatalogError(f'{where} must describe an object ("type": "object").', where)
    return value


def _tool(raw: object, where: str) -> Tool:
    item = _object(raw, where)
    _only(item, {"name", "description", "inputSchema", "outputSchema", "result", "fault"}, where)
    name = _text(item, "name", where)
    assert name is not None
    if not _NAME.fullmatch(name):
        raise CatalogError(f"{where}.name {name!r}: 1-128 of A-Z a-z 0-9 _ - . /", f"{where}.name")
    description = _text(item, "description", where, required=False) or ""
    if "inputSchema" not in item:
        raise CatalogError(f'{where}.inputSchema is required (at least {{"type": "object"}}).', f"{where}.inputSchema")
    inputs = _schema(item["inputSchema"], f"{where}.inputSchema")
    outputs = _schema(item["outputSchema"], f"{where}.outputSchema") if item.get("outputSchema") is not None else None
    raw_results = item.get("result")
    listed = raw_results if isinstance(raw_results, list) else ([] if raw_results is None else [raw_results])
    if isinstance(raw_results, list) and not raw_results:
        raise CatalogError(f"{where}.result: an empty list scripts nothing (leave it out).", f"{where}.result")
    results = tuple(
        _result(r, f"{where}.result" + (f"[{i}]" if isinstance(raw_results, list) else ""), outputs)
        for i, r in enumerate(listed)
    )
    fault = _fault(item["fault"], f"{where}.fault") if item.get("fault") is not None else None
    return Tool(name, description, inputs, outputs, results, fault)


def _result(raw: object, where: str, outputs: Mapping[str, Any] | None) -> Mapping[str, Any]:
    from mcp_types import CallToolResult  # the SDK's own model of the wire: the authority
    from pydantic import ValidationError

    item = _object(raw, where)
    size = len(json.dumps(item, ensure_ascii=False))
    if size > MAX_RESULT_BYTES:
        raise CatalogError(f"{where} is {size} bytes as JSON; at most {MAX_RESULT_BYTES}.", where)
    try:
        checked = CallToolResult.model_validate(item)
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(p) for p in first["loc"])
        raise CatalogError(
            f"{where} is not a CallToolResult: {at}: {first['msg']}.", f"{where}.{at}" if at else where
        ) from None
    dumped = checked.model_dump(by_alias=True, mode="json", exclude_none=True)
    dumped.pop("resultType", None)
    structured = dumped.get("structuredContent")
    if outputs is not None and structured is not None and not dumped.get("isError"):
        from mockserver.fakejson.generate import is_valid

        if not is_valid(outputs, structured):
            raise CatalogError(f"{where}.structuredContent does not match the tool's outputSchema.", where)
    return dumped


def _fault(spec: object, where: str) -> str:
    """A tool's own fault: ``mcp.error`` (every call of it fails); the others are a rule's."""
    if not isinstance(spec, str):
        raise CatalogError(f'{where} must be "mcp.error".', where)
    try:
        faults = parse(spec)
    except FaultError as exc:
        raise CatalogError(f"{where}: {exc}", where) from None
    if [(f.name, f.probability) for f in faults] != [("mcp.error", 1.0)]:
        raise CatalogError(
            f'{where} is "mcp.error" (every call fails), not {spec!r}; for other MCP faults add a rule '
            'with "path": "/mcp/tools/call/<tool>" (docs/mcp.md).',
            where,
        )
    return faults[0].render()


def _resource(raw: object, where: str) -> Resource:
    item = _object(raw, where)
    _only(item, {"uri", "name", "description", "mimeType", "text"}, where)
    uri, name, text = (_text(item, k, where) for k in ("uri", "name", "text"))
    assert uri is not None and name is not None and text is not None
    if ":" not in uri:
        raise CatalogError(f"{where}.uri {uri!r} is not a URI (file:///…, docs://…).", f"{where}.uri")
    if len(text.encode()) > MAX_RESULT_BYTES:
        raise CatalogError(f"{where}.text is over {MAX_RESULT_BYTES} bytes.", f"{where}.text")
    return Resource(
        uri,
        name,
        text,
        _text(item, "description", where, required=False),
        _text(item, "mimeType", where, required=False),
    )


def _prompt(raw: object, where: str) -> Prompt:
    item = _object(raw, where)
    _only(item, {"name", "description", "arguments", "messages"}, where)
    name = _text(item, "name", where)
    assert name is not None
    arguments = []
    for i, arg in enumerate(_list(item, "arguments")):
        at = f"{where}.arguments[{i}]"
        a = _object(arg, at)
        _only(a, {"name", "description", "required"}, at)
        _text(a, "name", at)
        _text(a, "description", at, required=False)
        if not isinstance(a.get("required", False), bool):
            raise CatalogError(f"{at}.required must be true or false.", f"{at}.required")
        arguments.append(dict(a))
    names = {a["name"] for a in arguments}
    messages = []
    raw_messages = _list(item, "messages")
    if not raw_messages:
        raise CatalogError(f"{where}.messages needs at least one message.", f"{where}.messages")
    for i, msg in enumerate(raw_messages):
        at = f"{where}.messages[{i}]"
        m = _object(msg, at)
        _only(m, {"role", "content"}, at)
        role = m.get("role")
        if role not in ("user", "assistant"):
            raise CatalogError(f'{at}.role must be "user" or "assistant".', f"{at}.role")
        content = m.get("content")
        if isinstance(content, Mapping) and content.get("type") == "text":
            content = content.get("text")
        if not isinstance(content, str):
            raise CatalogError(f'{at}.content must be text (or {{"type": "text", "text": ...}}).', f"{at}.content")
        unknown = sorted(set(PLACEHOLDER.findall(content)) - names)
        if unknown:
            raise CatalogError(
                f"{at}.content names {{{unknown[0]}}}, which is no argument of the prompt.", f"{at}.content"
            )
        messages.append((str(role), content))
    return Prompt(name, tuple(arguments), tuple(messages), _text(item, "description", where, required=False))
