"""``POST /v1/embeddings``: body → schema → OpenAI's rules → the backend's ``embed`` → JSON.

No tokens are generated, so none of the generation spine applies (no engine wrappers, no
stream); HTTP faults, the journal and rate limits still apply, in the injector in front.
"""

from __future__ import annotations

import asyncio
from functools import partial

from starlette.requests import Request
from starlette.responses import Response

from mockserver.backends import ModelNotInstalled, model_installed, prompts
from mockserver.context import ServerContext
from mockserver.errors import ContextLengthExceeded, NotFound
from mockserver.gpt.tokenizer import Tokenizer
from mockserver.http.body import json_body
from mockserver.media import vectors as embeddings
from mockserver.routes import params
from mockserver.schemas.common import validated
from mockserver.schemas.embeddings import EmbeddingRequest
from mockserver.wire.json import dumps

__all__ = ["create"]

LARGE = 16 * 1536  # floats: bodies this big take ~10 ms to write as JSON


async def create(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    profile = ctx.profile_of(request.scope)
    _, raw = await json_body(request)
    # Profiles list the fields their provider documents for chat and completions only, so
    # --strict has nothing to check here: this just lifts a literal ``extra_body``.
    data = params.prepare(raw, profile, "chat", strict=False)
    body = validated(EmbeddingRequest, data)
    backend = ctx.model
    if not isinstance(backend, embeddings.Embedder):
        if not model_installed():  # the vectors are the model's pooled hidden states
            raise ModelNotInstalled("POST /v1/embeddings")
        raise NotFound(
            f"Embeddings are not available with the backends {', '.join(ctx.chain.names)}: "
            "POST /v1/embeddings needs the reference model (add reference to --backend)."
        )
    if body.model not in embeddings.MODELS:
        ctx.options.models.context_window(body.model, profile)  # 404 for an unlisted id under --reject-unknown-models
    space = embeddings.space(body.model, body.dimensions)
    inputs, single = embeddings.inputs(body.input)
    _fits(inputs, single)
    inputs = embeddings.fold_tokens(inputs, body.model, ctx.options.vocab_size, single=single)
    check = partial(embeddings.check_tokens, vocab=ctx.options.vocab_size, single=single)
    as_float = body.encoding_format != "base64"
    vectors, tokens = await backend.embed(inputs, space, check, for_json=as_float)
    answer = embeddings.response(body.model, vectors, tokens, "float" if as_float else "base64")
    if as_float and len(vectors) * space.dimensions > LARGE:  # written off the event loop (see render)
        return Response(await asyncio.to_thread(embeddings.render, answer), media_type="application/json")
    return Response(dumps(answer), media_type="application/json")


def _fits(inputs: list[str | list[int]], single: bool) -> None:
    """Texts too long for an embedding model's context whatever their tokens, refused before
    they are tokenized (see :func:`~mockserver.backends.prompts.fewest_tokens`)."""
    longest = prompts.longest_token(Tokenizer.shipped())
    for i, item in enumerate(inputs):
        if isinstance(item, str) and len(item) > embeddings.MAX_INPUT_TOKENS:
            fewest = prompts.fewest_tokens(item, longest)
            if fewest > embeddings.MAX_INPUT_TOKENS:
                name = "input" if single else f"input[{i}]"
                raise ContextLengthExceeded(embeddings.MAX_INPUT_TOKENS, fewest, 0, name, at_least=True)
