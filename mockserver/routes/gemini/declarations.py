"""Gemini's function declarations, tool config and response schemas read as the spine's.

``tools[].functionDeclarations`` take ``parameters`` (Google's OpenAPI subset, types in capitals)
or ``parametersJsonSchema``; ``responseMimeType: application/json`` takes ``responseSchema`` or
``responseJsonSchema``. Every schema is checked once, here, so one nothing satisfies is a 400
naming where it sits. ``toolConfig.functionCallingConfig.mode`` maps to the spine's tool choice:
``AUTO`` and ``VALIDATED`` → auto, ``ANY`` → required (one ``allowedFunctionNames``: that one),
``NONE`` → none.
"""

from __future__ import annotations

from typing import Any, Literal

from mockserver.errors import InvalidRequest
from mockserver.fakejson.check import check_schema
from mockserver.schemas.common import refuse_unencodable
from mockserver.schemas.gemini import FunctionDeclaration, GenerateRequest, GenerationConfig
from mockserver.spine.request import JsonFormat, Tool

__all__ = ["google_schema", "invalid", "json_format", "tool_choice", "tools"]

_MODES: dict[str, Literal["none", "auto", "required"]] = {
    "AUTO": "auto",
    "VALIDATED": "auto",
    "ANY": "required",
    "NONE": "none",
}


def invalid(param: str, message: str) -> InvalidRequest:
    """Google's 400 for a value, naming where it sits."""
    return InvalidRequest(f"Invalid value at '{param}': {message}", param=param)


def google_schema(schema: Any) -> Any:
    """Google's OpenAPI-subset ``Schema`` as a JSON Schema: types in lower case, ``nullable``
    as a ``null`` type, its own keywords (``propertyOrdering``) left out."""
    if isinstance(schema, list):
        return [google_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("propertyOrdering", "property_ordering", "nullable"):
            continue
        if key == "type" and isinstance(value, str):
            out["type"] = value.lower()
        elif key == "properties" and isinstance(value, dict):
            out["properties"] = {name: google_schema(s) for name, s in value.items()}
        elif key in ("items", "anyOf", "any_of"):
            out["anyOf" if key == "any_of" else key] = google_schema(value)
        elif key in ("minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties"):
            out[key] = int(value) if isinstance(value, str) and value.isdigit() else value
        else:
            out[key] = value
    if schema.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def _checked(schema: dict[str, Any], param: str) -> dict[str, Any]:
    refuse_unencodable(schema, param)  # a lone surrogate: 400, not 500
    check_schema(schema, param)
    return schema


def tools(body: GenerateRequest) -> tuple[Tool, ...]:
    declared: list[tuple[FunctionDeclaration, str]] = []
    for i, tool in enumerate(body.tools or ()):
        for j, fn in enumerate(tool.function_declarations or ()):
            declared.append((fn, f"tools[{i}].functionDeclarations[{j}]"))
    seen: set[str] = set()
    out: list[Tool] = []
    for fn, param in declared:
        if fn.name in seen:
            raise invalid(f"{param}.name", f"duplicate function declaration '{fn.name}'.")
        seen.add(fn.name)
        if fn.parameters_json_schema is not None:
            schema = _checked(fn.parameters_json_schema, f"{param}.parametersJsonSchema")
        elif fn.parameters is not None:
            schema = _checked(google_schema(fn.parameters), f"{param}.parameters")
        else:
            schema = {"type": "object", "properties": {}}
        out.append(Tool(fn.name, fn.description or "", schema))
    return tuple(out)


def tool_choice(body: GenerateRequest, tools: tuple[Tool, ...]) -> tuple[tuple[Tool, ...], str, str | None]:
    """(tools offered, mode, a single allowed name) from ``toolConfig.functionCallingConfig``."""
    config = body.tool_config.function_calling_config if body.tool_config is not None else None
    if config is None:
        return tools, "auto", None
    param = "toolConfig.functionCallingConfig"
    mode = _MODES.get((config.mode or "AUTO").upper())
    if mode is None:
        raise invalid(f"{param}.mode", f"'{config.mode}' is not one of AUTO, ANY, NONE, VALIDATED.")
    allowed = config.allowed_function_names
    if not allowed:
        return tools, mode, None
    if mode != "required":
        raise invalid(f"{param}.allowedFunctionNames", "allowed function names need mode ANY.")
    names = {t.name for t in tools}
    for name in allowed:
        if name not in names:
            raise invalid(f"{param}.allowedFunctionNames", f"'{name}' is not a declared function.")
    kept = tuple(t for t in tools if t.name in allowed)
    return kept, mode, allowed[0] if len(allowed) == 1 else None


def json_format(config: GenerationConfig) -> JsonFormat | None:
    schema: dict[str, Any] | None = None
    if config.response_json_schema is not None:
        schema = _checked(config.response_json_schema, "generationConfig.responseJsonSchema")
    elif config.response_schema is not None:
        schema = _checked(google_schema(config.response_schema), "generationConfig.responseSchema")
    mime = config.response_mime_type
    if mime != "application/json":
        if schema is not None and mime != "text/x.enum":
            raise invalid(
                "generationConfig.responseMimeType",
                "a response schema needs responseMimeType 'application/json'.",
            )
        return None
    return JsonFormat(schema)
