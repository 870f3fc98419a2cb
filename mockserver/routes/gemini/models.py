"""``GET /v1beta/models[/{model}]``: the ``gemini`` profile's models (or ``--models``) in Google's shape."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from mockserver.context import ServerContext
from mockserver.errors import NotFound
from mockserver.wire.json import Json, dumps

__all__ = ["describe", "get_model", "list_models"]

OUTPUT_LIMIT = 65536  # tokens, every listed model's outputTokenLimit (Gemini 2.5's)


def _json(body: Json) -> Response:
    return Response(dumps(body), media_type="application/json")


def describe(model: str, window: int) -> Json:
    """A ``Model`` as Google lists one."""
    embeds = "embedding" in model
    methods = ["embedContent", "batchEmbedContents"] if embeds else ["generateContent", "countTokens"]
    return {
        "name": f"models/{model}",
        "version": "001",
        "displayName": model,
        "description": f"{model}, answered by mockserver.",
        "inputTokenLimit": window,
        "outputTokenLimit": 1 if embeds else OUTPUT_LIMIT,
        "supportedGenerationMethods": methods,
        **({} if embeds else {"temperature": 1, "topP": 0.95, "topK": 64, "maxTemperature": 2, "thinking": True}),
    }


async def list_models(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    listed = ctx.options.models.listed(ctx.profile_of(request.scope))
    return _json({"models": [describe(m, w) for m, w in listed.items()]})


async def get_model(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    model: str = request.path_params["name"]
    listed = ctx.options.models.listed(ctx.profile_of(request.scope))
    if model not in listed:
        raise NotFound(
            f"models/{model} is not found for API version v1beta, or is not supported for generateContent. "
            "Call ListModels to see the list of available models and their supported methods.",
            param="model",
        )
    return _json(describe(model, listed[model]))
