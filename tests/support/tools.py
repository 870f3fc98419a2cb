"""Tools the tests offer the model: a weather lookup and an email sender, as chat's ``tools``."""

from __future__ import annotations

from typing import Any

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
EMAIL = {
    "type": "function",
    "function": {
        "name": "send_email",
        "description": "Send an email message to someone",
        "parameters": {
            "type": "object",
            "properties": {"to": {"type": "string", "format": "email"}, "subject": {"type": "string"}},
            "required": ["to", "subject"],
        },
    },
}
TOOLS: list[Any] = [WEATHER, EMAIL]


# The fake MCP server's catalog the MCP tests define (POST /__mockserver/mcp): a weather tool
# with a schema and a fixed result, and a time tool with neither.
MCP_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
MCP_TOOLS = [
    {
        "name": "get_weather",
        "description": "The weather.",
        "inputSchema": MCP_SCHEMA,
        "result": {"content": [{"type": "text", "text": "21 degrees"}]},
    },
    {"name": "get_time", "description": "The time.", "inputSchema": {"type": "object"}},
]
