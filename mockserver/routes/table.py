"""The route table: one line per endpoint, each a thin adapter over the spine."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mockserver.routes import (
    admin,
    audio,
    batches,
    chat,
    chat_store,
    completions,
    console,
    conversations,
    docs,
    embeddings,
    files,
    health,
    images,
    mcp,
    models,
    moderations,
    realtime,
    tokenize,
    uploads,
)
from mockserver.routes.anthropic import endpoints as anthropic
from mockserver.routes.gemini import endpoints as gemini
from mockserver.routes.handler import Family, Handler, deliver_with, handle, replayable
from mockserver.routes.responses import compact
from mockserver.routes.responses import endpoints as responses

__all__ = ["CHAT", "COMPLETIONS", "GENERATION", "routes"]

CHAT = Family(chat.CODEC, deliver_with(chat.CODEC))
COMPLETIONS = Family(completions.CODEC, deliver_with(completions.CODEC))
# POST: the spine's.
GENERATION = frozenset({"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"})


def endpoint(family: Family) -> Handler:
    """The route endpoint of a generation family."""

    async def generate(request: Request) -> Response:
        return await handle(request, family)

    return generate


def routes(recorded: bool = False) -> list[BaseRoute]:
    """Every route; with ``recorded`` (cassettes in the backend chain) the endpoints that
    generate nothing answer from recordings first too."""
    table: list[BaseRoute] = [
        # The generation endpoints first: the router tries routes in order, and these are hot.
        Route("/v1/chat/completions", endpoint(CHAT), methods=["POST"]),
        Route("/v1/completions", endpoint(COMPLETIONS), methods=["POST"]),
        # Google's /v1beta/models/… (its path names the model, so the router matches it: early, as it is hot).
        *gemini.routes(recorded),
        Route("/health", health.health, methods=["GET"]),
        Route("/openapi.json", docs.openapi_json, methods=["GET"]),
        *anthropic.routes(),  # /v1/messages…; /v1/models in Anthropic's shape when asked as Anthropic
        Route("/v1/models", models.list_models, methods=["GET"]),
        Route("/v1/models/{model:path}", models.retrieve_model, methods=["GET"]),
        Route("/v1/models/{model:path}", models.delete_model, methods=["DELETE"]),
        Route("/v1/embeddings", embeddings.create, methods=["POST"]),
        Route("/v1/moderations", moderations.create, methods=["POST"]),
        *chat_store.routes(),  # GET on the same path lists stored completions
        # A fixed path beside /v1/responses/{response_id} (which takes no POST): listed first, to read plainly.
        Route("/v1/responses/compact", compact.compact, methods=["POST"]),
        *responses.routes(),
        *conversations.routes(),  # the Responses API's conversations (on the state)
        *tokenize.routes(),  # vLLM's, outside /v1/
        *images.routes(),
        *files.routes(),  # OpenAI's asynchronous platform: files, uploads, batches
        *uploads.routes(),
        *batches.routes(),
        *audio.routes(),  # speech, transcriptions, translations (mockserver.voice)
        *realtime.routes(),  # the Realtime API's WebSocket
        *admin.routes(),
        *console.routes(),  # the page over the journal, under the admin rule
        *mcp.routes(),  # /mcp (the SDK's MCP server, started on its first message) and its admin API
    ]
    return [_replayable(route) for route in table] if recorded else table


# The server's own objects (files, uploads, batches, conversations: state it keeps), never a recording's.
_OWN = ("/v1/files", "/v1/uploads", "/v1/batches", "/v1/conversations")


def _replayable(route: BaseRoute) -> BaseRoute:
    if not isinstance(route, Route) or not route.path.startswith("/v1/") or route.path.startswith(_OWN):
        return route
    methods = set(route.methods or ()) - {"HEAD"}
    if route.path in GENERATION and methods == {"POST"}:
        return route
    return Route(route.path, replayable(route.endpoint), methods=sorted(methods))
