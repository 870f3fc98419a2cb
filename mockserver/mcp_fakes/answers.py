"""What the fake MCP server answers, as MCP's JSON (camelCase), from a catalog: pure and seeded.

No SDK here: :mod:`mockserver.mcp_fakes.server` turns these into the SDK's models. A problem a
client caused is an :class:`McpProblem` (a JSON-RPC error code and a message naming what);
a tool's own failure is an ``isError`` result, as MCP says a tool reports one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mockserver.mcp_fakes.catalog import Catalog, Tool, fill
from mockserver.spine.seeding import digest

__all__ = ["INVALID_PARAMS", "RESOURCE_NOT_FOUND", "McpProblem", "call_seed", "prompt", "read", "tool_result"]

INVALID_PARAMS = -32602
RESOURCE_NOT_FOUND = -32002  # MCP's code for a resource that is not there
_SEED_MASK = (1 << 63) - 1


class McpProblem(Exception):
    """A JSON-RPC error the message gets."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(code, message)
        self.code, self.message, self.data = code, message, data


def _error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def call_seed(global_seed: int, name: str, arguments: Mapping[str, Any]) -> int:
    """The seed of one call: the same tool and arguments draw the same output, run after run."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return int.from_bytes(digest(b"mcp", global_seed, name, canonical)[:8], "big") & _SEED_MASK


def argument_problem(tool: Tool, arguments: Mapping[str, Any]) -> str | None:
    """Why ``arguments`` break the tool's ``inputSchema`` (naming the argument), or None."""
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(dict(tool.input_schema))
    error = next(iter(sorted(validator.iter_errors(dict(arguments)), key=lambda e: list(e.absolute_path))), None)
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path)
    if not where and error.validator == "required" and isinstance(error.instance, dict):
        missing = [r for r in error.validator_value if r not in error.instance]
        where = str(missing[0]) if missing else ""
    named = f"argument {where!r}" if where else "the arguments"
    return f"Invalid arguments for tool {tool.name!r}: {named}: {error.message}"


def tool_result(tool: Tool, arguments: Mapping[str, Any], call: int, seed: int, failed: bool) -> dict[str, Any]:
    """The ``CallToolResult`` of a tool's ``call``-th call (1 for the first): an ``isError`` one when
    ``failed`` (an ``mcp.error`` fault) or the arguments break its schema, else its scripted result
    (a sequence plays in order, the last repeating), else ``structuredContent`` drawn from its
    ``outputSchema`` with the same JSON as text (any small object when it declares none)."""
    if failed:
        return _error(f"Tool {tool.name!r} failed (the mcp.error fault).")
    problem = argument_problem(tool, arguments)
    if problem is not None:
        return _error(problem)
    if tool.results:
        return dict(tool.results[min(call, len(tool.results)) - 1])
    from mockserver.fakejson.generate import fake_json, fake_value

    if tool.output_schema is None:
        return {"content": [{"type": "text", "text": fake_json(None, seed)}], "isError": False}
    structured = fake_value(tool.output_schema, seed)
    text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
    return {"content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": False}


def read(catalog: Catalog, uri: str) -> dict[str, Any]:
    """``resources/read``: the resource (or a template's instance, its ``{placeholders}`` filled)."""
    for resource in sorted(catalog.resources, key=lambda r: r.template):  # exact URIs first
        values = resource.match(uri)
        if values is not None:
            content: dict[str, Any] = {"uri": uri, "text": fill(resource.text, values)}
            if resource.mime_type is not None:
                content["mimeType"] = resource.mime_type
            return {"contents": [content]}
    raise McpProblem(RESOURCE_NOT_FOUND, f"Resource not found: {uri}", {"uri": uri})


def prompt(catalog: Catalog, name: str, arguments: Mapping[str, str]) -> dict[str, Any]:
    """``prompts/get``: the prompt's messages, each ``{argument}`` filled."""
    found = catalog.prompt(name)
    if found is None:
        known = ", ".join(p.name for p in catalog.prompts) or "none"
        raise McpProblem(INVALID_PARAMS, f"Unknown prompt: {name!r} (this session's prompts: {known}).")
    for arg in found.arguments:
        if arg.get("required") and arg["name"] not in arguments:
            raise McpProblem(INVALID_PARAMS, f"Missing required argument {arg['name']!r} for prompt {name!r}.")
    out: dict[str, Any] = {
        "messages": [
            {"role": role, "content": {"type": "text", "text": fill(text, arguments)}} for role, text in found.messages
        ]
    }
    if found.description is not None:
        out["description"] = found.description
    return out


def unknown_tool(catalog: Catalog, name: str) -> McpProblem:
    known = ", ".join(t.name for t in catalog.tools) or "none"
    return McpProblem(INVALID_PARAMS, f"Unknown tool: {name!r} (this session's tools: {known}).")
