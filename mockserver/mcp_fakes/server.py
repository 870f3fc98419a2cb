"""The official ``mcp`` SDK's low-level server, its handlers reading the catalogs.

Imported only when ``/mcp`` is first called: the SDK's server costs about a second to import,
which start-up and the generation endpoints never pay. The SDK speaks the protocol (framing,
sessions, the initialize handshake, ``ping``, SSE); the handlers here only answer from the
catalog of the message's mockserver session, which :mod:`mockserver.mcp_fakes.endpoint` leaves
in the ASGI scope under :data:`MESSAGE_KEY` for them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError

from mockserver.mcp_fakes import answers
from mockserver.mcp_fakes.relay import Relay
from mockserver.mcp_fakes.store import McpStore

__all__ = ["MESSAGE_KEY", "Message", "build"]

MESSAGE_KEY = "mockserver.mcp"

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Message:
    """What the endpoint knew of one MCP message, for its handler."""

    session: str | None  # the mockserver session (x-mockserver-session or /mcp/{session})
    failed: bool = False  # an mcp.error fault: a tools/call answers isError


class _Server(Server[Any]):
    """The SDK's server, advertising ``listChanged`` (the admin API changes the lists)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        every = notification_options or NotificationOptions(
            prompts_changed=True, resources_changed=True, tools_changed=True
        )
        return super().create_initialization_options(every, experimental_capabilities, extensions)


def _message(ctx: Any) -> Message:
    request = getattr(ctx, "request", None)
    found = request.scope.get(MESSAGE_KEY) if request is not None else None
    return found if isinstance(found, Message) else Message(None)


def _answered(problem: answers.McpProblem) -> MCPError:
    return MCPError(problem.code, problem.message, problem.data)


def build(store: McpStore, seed: int, relayed: Relay) -> StreamableHTTPSessionManager:
    """The SDK server over ``store`` and its Streamable HTTP session manager (stateful: sessions,
    a GET stream for list-changed notifications); ``relayed`` answers a session that records or
    replays a real MCP server."""

    async def relay(session: str | None, method: str, params: Any, ask: Any) -> dict[str, Any] | None:
        try:
            return await relayed(session, method, params, ask)
        except answers.McpProblem as problem:
            raise _answered(problem) from None

    async def tell(session: Any) -> None:
        await session.send_tool_list_changed()
        await session.send_resource_list_changed()
        await session.send_prompt_list_changed()

    store.tell = tell

    def listening(ctx: Any, message: Message) -> None:
        request = getattr(ctx, "request", None)
        sid = request.headers.get("mcp-session-id") if request is not None else None
        if sid is not None:
            store.listen(message.session, sid, ctx.session)

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        found = await relay(_message(ctx).session, "tools/list", params, lambda c: c.list_tools())
        if found is not None:
            return types.ListToolsResult.model_validate(found)
        message = _message(ctx)
        listening(ctx, message)
        catalog = await store.catalog(message.session)
        tools = [
            {k: v for k, v in t.to_json().items() if k in ("name", "description", "inputSchema", "outputSchema")}
            for t in catalog.tools
        ]
        return types.ListToolsResult.model_validate({"tools": tools})

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        found = await relay(
            _message(ctx).session, "tools/call", params, lambda c: c.call_tool(params.name, params.arguments)
        )
        if found is not None:
            return types.CallToolResult.model_validate(found)
        message = _message(ctx)
        catalog = await store.catalog(message.session)
        tool = catalog.tool(params.name)
        if tool is None:
            raise _answered(answers.unknown_tool(catalog, params.name))
        arguments = dict(params.arguments or {})
        failed = message.failed or tool.fault == "mcp.error"  # its own fault (the only one a tool takes)
        call = await store.next_call(message.session, tool.name)
        result = answers.tool_result(tool, arguments, call, answers.call_seed(seed, tool.name, arguments), failed)
        return types.CallToolResult.model_validate(result)

    async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        found = await relay(_message(ctx).session, "resources/list", params, lambda c: c.list_resources())
        if found is not None:
            return types.ListResourcesResult.model_validate(found)
        message = _message(ctx)
        listening(ctx, message)
        catalog = await store.catalog(message.session)
        listed = [_resource(r.to_json(), "uri") for r in catalog.resources if not r.template]
        return types.ListResourcesResult.model_validate({"resources": listed})

    async def list_templates(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        found = await relay(
            _message(ctx).session, "resources/templates/list", params, lambda c: c.list_resource_templates()
        )
        if found is not None:
            return types.ListResourceTemplatesResult.model_validate(found)
        catalog = await store.catalog(_message(ctx).session)
        listed = [_resource(r.to_json(), "uriTemplate") for r in catalog.resources if r.template]
        return types.ListResourceTemplatesResult.model_validate({"resourceTemplates": listed})

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        found = await relay(_message(ctx).session, "resources/read", params, lambda c: c.read_resource(str(params.uri)))
        if found is not None:
            return types.ReadResourceResult.model_validate(found)
        catalog = await store.catalog(_message(ctx).session)
        return types.ReadResourceResult.model_validate(_or_error(lambda: answers.read(catalog, str(params.uri))))

    async def list_prompts(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        found = await relay(_message(ctx).session, "prompts/list", params, lambda c: c.list_prompts())
        if found is not None:
            return types.ListPromptsResult.model_validate(found)
        message = _message(ctx)
        listening(ctx, message)
        catalog = await store.catalog(message.session)
        listed = [{k: v for k, v in p.to_json().items() if k != "messages"} for p in catalog.prompts]
        return types.ListPromptsResult.model_validate({"prompts": listed})

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        found = await relay(
            _message(ctx).session, "prompts/get", params, lambda c: c.get_prompt(params.name, params.arguments)
        )
        if found is not None:
            return types.GetPromptResult.model_validate(found)
        catalog = await store.catalog(_message(ctx).session)
        values = dict(params.arguments or {})
        return types.GetPromptResult.model_validate(_or_error(lambda: answers.prompt(catalog, params.name, values)))

    server = _Server(
        "mockserver",
        version=_version(),
        instructions="A fake MCP server: its tools answer what the test scripted (mockserver docs/mcp.md).",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )
    # Origin and the protocol version are checked by the endpoint in front (which knows the
    # server's own origin); the SDK keeps its Content-Type and body-size checks.
    return StreamableHTTPSessionManager(app=server, session_idle_timeout=600.0)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mockserver")
    except PackageNotFoundError:  # a checkout run without installing
        return "0"


def _resource(data: dict[str, Any], key: str) -> dict[str, Any]:
    out = {k: v for k, v in data.items() if k != "text"}
    out[key] = out.pop("uri")
    return out


def _or_error(make: Callable[[], T]) -> T:
    try:
        return make()
    except answers.McpProblem as problem:
        raise _answered(problem) from None
