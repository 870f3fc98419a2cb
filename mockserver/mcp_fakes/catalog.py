"""What a fake MCP server offers: tools, resources and prompts, checked once where they are defined.

A catalog comes from ``--mcp FILE``, ``POST /__mockserver/mcp`` or the plugin's
``mockserver.mcp_tool(...)``, always as the same JSON (camelCase, as MCP writes it)::

    {"tools": [{"name", "description", "inputSchema", "outputSchema"?, "result"?, "fault"?}],
     "resources": [{"uri", "name", "description"?, "mimeType"?, "text"}],
     "prompts": [{"name", "description"?, "arguments", "messages"}]}

:mod:`mockserver.mcp_fakes.parse` reads (and checks) it into the frozen :class:`Catalog` here. A
resource whose ``uri`` holds ``{placeholders}`` is a template.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PLACEHOLDER", "Catalog", "Prompt", "Resource", "Tool", "fill"]

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None = None
    results: tuple[Mapping[str, Any], ...] = ()  # CallToolResult JSON, played in order (the last repeats)
    fault: str | None = None  # "mcp.error": every call of it fails

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "description": self.description, "inputSchema": self.input_schema}
        if self.output_schema is not None:
            out["outputSchema"] = self.output_schema
        if self.results:
            out["result"] = self.results[0] if len(self.results) == 1 else list(self.results)
        if self.fault is not None:
            out["fault"] = self.fault
        return out


@dataclass(frozen=True, slots=True)
class Resource:
    uri: str
    name: str
    text: str
    description: str | None = None
    mime_type: str | None = None

    @property
    def template(self) -> bool:
        return bool(PLACEHOLDER.search(self.uri))

    def match(self, uri: str) -> dict[str, str] | None:
        """The placeholders' values when ``uri`` is this resource (or an instance of its template)."""
        if not self.template:
            return {} if uri == self.uri else None
        pattern = "".join(
            f"(?P<{part}>[^/]+)" if i % 2 else re.escape(part) for i, part in enumerate(PLACEHOLDER.split(self.uri))
        )
        found = re.fullmatch(pattern, uri)
        return found.groupdict() if found is not None else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"uri": self.uri, "name": self.name, "text": self.text}
        if self.description is not None:
            out["description"] = self.description
        if self.mime_type is not None:
            out["mimeType"] = self.mime_type
        return out


@dataclass(frozen=True, slots=True)
class Prompt:
    name: str
    arguments: tuple[Mapping[str, Any], ...]  # {"name", "description"?, "required"?}
    messages: tuple[tuple[str, str], ...]  # (role, text with {argument} placeholders)
    description: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "arguments": [dict(a) for a in self.arguments],
            "messages": [{"role": role, "content": text} for role, text in self.messages],
        }
        if self.description is not None:
            out["description"] = self.description
        return out


@dataclass(frozen=True, slots=True)
class Catalog:
    tools: tuple[Tool, ...] = ()
    resources: tuple[Resource, ...] = ()
    prompts: tuple[Prompt, ...] = ()
    _keys: tuple[str, ...] = field(default=(), compare=False)

    def over(self, below: Catalog) -> Catalog:
        """This catalog over ``below``: a definition here replaces one of the same name (or uri) there."""
        return Catalog(
            _merge(below.tools, self.tools, lambda t: t.name),
            _merge(below.resources, self.resources, lambda r: r.uri),
            _merge(below.prompts, self.prompts, lambda p: p.name),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "tools": [t.to_json() for t in self.tools],
            "resources": [r.to_json() for r in self.resources],
            "prompts": [p.to_json() for p in self.prompts],
        }

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)

    def prompt(self, name: str) -> Prompt | None:
        return next((p for p in self.prompts if p.name == name), None)


def _merge(below: Sequence[Any], above: Sequence[Any], key: Any) -> tuple[Any, ...]:
    replaced = {key(item) for item in above}
    return (*(item for item in below if key(item) not in replaced), *above)


def fill(text: str, values: Mapping[str, str]) -> str:
    """``text`` with each ``{name}`` replaced by its value (a missing one left as written)."""
    return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)
