"""The route table: one line per endpoint, each a thin adapter over the spine."""

from __future__ import annotations

from starlette.routing import BaseRoute, Route

from mockserver.routes import admin, chat, chat_store, completions, docs, embeddings, health, images, models
from mockserver.routes.responses import endpoints as responses

__all__ = ["routes"]


def routes() -> list[BaseRoute]:
    return [
        Route("/health", health.health, methods=["GET"]),
        Route("/openapi.json", docs.openapi_json, methods=["GET"]),
        Route("/v1/models", models.list_models, methods=["GET"]),
        Route("/v1/models/{model:path}", models.retrieve_model, methods=["GET"]),
        Route("/v1/completions", completions.create, methods=["POST"]),
        Route("/v1/chat/completions", chat.create, methods=["POST"]),
        Route("/v1/embeddings", embeddings.create, methods=["POST"]),
        *chat_store.routes(),  # GET on the same path lists stored completions
        *responses.routes(),
        *images.routes(),
        *admin.routes(),
    ]
