"""Tools and structured-output formats at the wire, and their checked spine forms.

Chat takes ``tools`` / ``tool_choice`` / ``parallel_tool_calls`` (and the legacy
``functions`` / ``function_call``) and ``response_format``; completions take Fireworks'
``response_format: {"type": "json_object", "schema": …}``. Every caller schema is checked
here, once, so a schema we cannot satisfy is a 400 naming where it sits, never a 500.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from mockserver.errors import InvalidRequest
from mockserver.schemas.common import WireModel, refuse_unencodable
from mockserver.spine.request import JsonFormat, Tool

__all__ = [
    "FunctionDef",
    "FunctionTool",
    "NamedFunction",
    "NamedToolChoice",
    "ResponseFormat",
    "ToolChoice",
    "chat_tools",
    "json_format",
    "spine_tools",
    "tool_choice",
]

NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"  # OpenAI's rule for function and format names


class FunctionDef(WireModel):
    name: str = Field(pattern=NAME_PATTERN)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class FunctionTool(WireModel):
    type: Literal["function"]
    function: FunctionDef


class NamedFunction(WireModel):
    name: str


class NamedToolChoice(WireModel):
    type: Literal["function"]
    function: NamedFunction


ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice
FunctionCall = Literal["none", "auto"] | NamedFunction  # the legacy ``function_call``


class _JsonSchema(WireModel):
    name: str = Field(pattern=NAME_PATTERN)
    description: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    strict: bool | None = None


class ResponseFormat(WireModel):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: _JsonSchema | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")  # Fireworks: json_object with a schema


def _checked(schema: dict[str, Any], param: str, strict: bool) -> dict[str, Any]:
    from mockserver.fakejson.generate import check_schema

    refuse_unencodable(schema, param)  # names, ``required`` and ``enum`` go into answers and keys
    check_schema(schema, param, strict=strict)
    return schema


def chat_tools(
    tools: Sequence[FunctionTool] | None, functions: Sequence[FunctionDef] | None = None
) -> tuple[Tool, ...]:
    """Chat's offered functions (``tools``, or the legacy ``functions``: only one may be sent)."""
    if tools and functions:
        raise InvalidRequest("Provide either 'tools' or the deprecated 'functions', not both.", param="functions")
    if tools:
        return spine_tools([(t.function, f"tools[{i}].function") for i, t in enumerate(tools)])
    return spine_tools([(f, f"functions[{i}]") for i, f in enumerate(functions or ())])


def spine_tools(named: Sequence[tuple[FunctionDef, str]]) -> tuple[Tool, ...]:
    """Functions (each with where it sits in the body), every parameters schema checked."""
    seen: set[str] = set()
    spine: list[Tool] = []
    for fn, param in named:
        if fn.name in seen:
            raise InvalidRequest(f"Duplicate function name '{fn.name}'.", param=f"{param}.name")
        seen.add(fn.name)
        parameters = _checked(fn.parameters, f"{param}.parameters", bool(fn.strict)) if fn.parameters else {}
        spine.append(Tool(fn.name, fn.description or "", parameters, bool(fn.strict)))
    return tuple(spine)


def tool_choice(
    choice: ToolChoice | FunctionCall | None, tools: tuple[Tool, ...], param: str = "tool_choice"
) -> tuple[Literal["none", "auto", "required"], str | None]:
    """``(mode, name)`` for the spine; a named function must be one of ``tools``."""
    if choice is None:
        return "auto", None
    if not tools:
        what = "tools" if param == "tool_choice" else "functions"
        raise InvalidRequest(
            f"Invalid value for '{param}': '{param}' is only allowed when '{what}' are specified.", param=param
        )
    if isinstance(choice, str):
        return choice, None
    name = choice.function.name if isinstance(choice, NamedToolChoice) else choice.name
    if name not in {t.name for t in tools}:
        raise InvalidRequest(
            f"Invalid value for '{param}': function '{name}' is not one of the functions offered "
            f"({', '.join(t.name for t in tools)}).",
            param=param,
        )
    return "required", name


def json_format(fmt: ResponseFormat | None, param: str = "response_format") -> JsonFormat | None:
    """The structured output asked for (None: free text)."""
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        schema = _checked(fmt.schema_, param + ".schema", False) if fmt.schema_ is not None else None
        return JsonFormat(schema)
    spec = fmt.json_schema
    if spec is None:
        raise InvalidRequest(f"Missing required parameter: '{param}.json_schema'.", param=f"{param}.json_schema")
    strict = bool(spec.strict)
    schema = spec.schema_ if spec.schema_ is not None else {"type": "object"}
    return JsonFormat(_checked(schema, f"{param}.json_schema.schema", strict), spec.name, strict)
