"""Fake MCP servers beside the fake model: tools, resources and prompts a test scripts, served at
``/mcp`` by the official ``mcp`` SDK's server (docs/mcp.md).

Named ``mcp_fakes`` so that it never shadows the SDK's own ``mcp`` package. The SDK is imported
only when ``/mcp`` is first called (:mod:`mockserver.mcp_fakes.server`).
"""
