"""Gemini's ``:embedContent`` and ``:batchEmbedContents``: the reference model's vectors.

The vectors are the model's pooled hidden states in a space of the model id's own (as
``/v1/embeddings``' are): ``gemini-embedding-*`` have 3,072 dimensions, the older ids 768, and
``outputDimensionality`` keeps the first so many, re-normalised. A batch asks for one size.
"""

from __future__ import annotations

from functools import partial

from starlette.requests import Request
from starlette.responses import Response

from mockserver.backends import ModelNotInstalled, model_installed
from mockserver.context import ServerContext
from mockserver.errors import InvalidRequest, NotFound
from mockserver.http.body import json_body
from mockserver.media import vectors
from mockserver.schemas.common import validated
from mockserver.schemas.gemini import BatchEmbedRequest, EmbedRequest
from mockserver.wire.json import dumps

__all__ = ["batch_embed_contents", "embed_content"]


def _json(body: object) -> Response:
    return Response(dumps(body), media_type="application/json")


def _dimensions(model: str) -> int:
    """A Gemini embedding model's own size (gemini-embedding-*: 3072; the older ones: 768)."""
    return 3072 if model.startswith("gemini-embedding") else 768


async def _embed(request: Request, model: str, asked: list[EmbedRequest], where: str) -> list[list[float]]:
    ctx: ServerContext = request.app.state.ctx
    backend = ctx.model
    if not isinstance(backend, vectors.Embedder):
        if not model_installed():
            raise ModelNotInstalled(f"POST {request.url.path}")
        raise NotFound(
            f"Embeddings are not available with the backends {', '.join(ctx.chain.names)}: "
            "they need the reference model (add reference to --backend)."
        )
    texts: list[str] = []
    dims = {e.output_dimensionality for e in asked}
    if len(dims) > 1:
        raise InvalidRequest(
            f"Invalid value at '{where}': every request of a batch must ask for the same outputDimensionality.",
            param=where,
        )
    for i, e in enumerate(asked):
        text = "".join(p.text or "" for p in e.content.parts)
        if not text:
            name = f"{where}[{i}].content" if where == "requests" else "content"
            raise InvalidRequest(f"Invalid value at '{name}': the content has no text to embed.", param=name)
        texts.append(text)
    native = _dimensions(model)
    wanted = dims.pop() or native
    if wanted > native:
        raise InvalidRequest(
            f"Invalid value at 'outputDimensionality': {model} has {native} dimensions; ask for at most {native}.",
            param="outputDimensionality",
        )
    base = vectors.space(model, None)
    space = vectors.Space(model, native, wanted, base.seed)
    items, _ = vectors.inputs(texts)
    check = partial(vectors.check_tokens, vocab=ctx.options.vocab_size, single=False)
    found, _tokens = await backend.embed(items, space, check, for_json=True)
    return found


async def embed_content(request: Request, model: str) -> Response:
    _, data = await json_body(request)
    asked = validated(EmbedRequest, data)
    found = await _embed(request, model, [asked], "content")
    return _json({"embedding": {"values": found[0]}})


async def batch_embed_contents(request: Request, model: str) -> Response:
    _, data = await json_body(request)
    asked = validated(BatchEmbedRequest, data)
    for i, e in enumerate(asked.requests):
        if e.model is not None and e.model.removeprefix("models/") != model:
            raise InvalidRequest(
                f"Invalid value at 'requests[{i}].model': {e.model} is not models/{model}, the model of the path.",
                param=f"requests[{i}].model",
            )
    found = await _embed(request, model, list(asked.requests), "requests")
    return _json({"embeddings": [{"values": v} for v in found]})
