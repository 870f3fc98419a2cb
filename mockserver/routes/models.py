"""``GET /v1/models`` and ``GET /v1/models/{id}``: the model list of the answering profile
(``--models`` when given, else the ids its provider lists); ``DELETE /v1/models/{id}`` for
fine-tuned ids."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from mockserver.context import ServerContext
from mockserver.profiles import model_not_found
from mockserver.wire.json import dumps

# A fixed date, so listings are byte-stable (2024-01-01T00:00:00Z).
MODEL_CREATED = 1704067200
FINE_TUNED = "ft:"  # OpenAI's fine-tuned model ids: ft:gpt-4o-mini:org:suffix:id


def describe(model: str) -> dict[str, Any]:
    owner, _, _ = (
        model.partition("/") if "/" in model else ("openai" if model.startswith("gpt") else "mockserver", "", "")
    )
    return {"id": model, "object": "model", "created": MODEL_CREATED, "owned_by": owner}


async def list_models(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    listed = ctx.options.models.listed(ctx.profile_of(request.scope))
    body = {"object": "list", "data": [describe(m) for m in listed]}
    return Response(dumps(body), media_type="application/json")


async def retrieve_model(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    model = request.path_params["model"]
    if model not in ctx.options.models.listed(ctx.profile_of(request.scope)):
        raise model_not_found(model)
    return Response(dumps(describe(model)), media_type="application/json")


async def delete_model(request: Request) -> Response:
    """``DELETE /v1/models/{model}``: only fine-tuned models (``ft:…`` ids) can be deleted, as
    on OpenAI, and this server keeps none, so any ``ft:`` id is deleted (the same answer every
    time: a test can delete what its fine-tuning step made). A base model is a 404."""
    model = request.path_params["model"]
    if not model.startswith(FINE_TUNED):
        raise model_not_found(model)
    return Response(dumps({"id": model, "object": "model", "deleted": True}), media_type="application/json")
