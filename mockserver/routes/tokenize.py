"""vLLM's tokenizer routes, with the shipped tokenizer (no torch): ``POST /tokenize``,
``POST /detokenize`` and ``GET /tokenizer_info``.

vLLM serves them at the server's root, beside ``/v1/``; here they are at the root and under
the ``vllm`` profile's prefix (``/vllm/tokenize``), where lm-eval's remote tokenizer looks for
them (it strips ``/v1/completions`` off its base URL and probes ``/tokenizer_info``, then
``/tokenize`` with ``{"prompt": …}``, no model). Bodies as vLLM's protocol has them:

* ``/tokenize``: ``{"model"?, "prompt"}`` or ``{"model"?, "messages", "add_generation_prompt"?}``
  → ``{"count", "max_model_len", "tokens", "token_strs"}`` (``token_strs`` only with
  ``return_token_strs``; null otherwise). Chats are rendered with the chat template the
  generation endpoints use, so ``count`` is what a chat request's ``prompt_tokens`` would be.
* ``/detokenize``: ``{"model"?, "tokens"}`` → ``{"prompt"}``; an id outside the vocabulary is a
  400 naming ``tokens[i]``.
* ``/tokenizer_info``: the tokenizer's special tokens, size, window and chat template (Jinja,
  the same ChatML :meth:`~mockserver.gpt.tokenizer.Tokenizer.render_chat` renders).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mockserver.context import ServerContext
from mockserver.errors import InvalidRequest
from mockserver.gpt.tokenizer import EOS, IM_END, IM_START, NotUnicode, Tokenizer
from mockserver.http.body import json_body
from mockserver.routes import params
from mockserver.wire.json import Json, dumps

__all__ = ["CHAT_TEMPLATE", "detokenize", "routes", "tokenize", "tokenizer_info"]

# What Tokenizer.render_chat renders, as a Jinja chat template (a developer turn is a system one).
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% set role = 'system' if message['role'] == 'developer' else message['role'] %}"
    f"{IM_START}{{{{ role }}}}\n{{{{ message['content'] }}}}{IM_END}\n"
    "{% endfor %}"
    f"{{% if add_generation_prompt %}}{IM_START}assistant\n{{% endif %}}"
)


def _json(body: Json) -> Response:
    return Response(dumps(body), media_type="application/json")


def _window(ctx: ServerContext, request: Request, model: Any) -> int:
    profile = ctx.profile_of(request.scope)
    if model is None:
        return ctx.options.models.default_window
    if not isinstance(model, str):
        raise params.invalid("model", "must be a string.")
    return ctx.options.models.context_window(model, profile)  # a 404 for an unknown id, if rejected


def _flag(data: Json, name: str, default: bool) -> bool:
    value = data.get(name, default)
    if not isinstance(value, bool):
        raise params.invalid(name, "must be a boolean.")
    return value


def _text(content: Any, where: str) -> str:
    """A message's content as text: a string, or the text of its ``text`` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for i, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("text", ""), str):
                raise params.invalid(f"{where}[{i}]", "must be a content part object with a string 'text'.")
            texts.append(part.get("text", ""))
        return "".join(texts)
    if content is None:
        return ""
    raise params.invalid(where, "must be a string or an array of content parts.")


def _chat(messages: Any) -> list[tuple[str, str]]:
    if not isinstance(messages, list) or not messages:
        raise params.invalid("messages", "must be a non-empty array of messages.")
    turns = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise params.invalid(f"messages[{i}].role", "each message needs a string 'role'.")
        turns.append((message["role"], _text(message.get("content"), f"messages[{i}].content")))
    return turns


def _encoded(tokenizer: Tokenizer, encode: Any, what: Any, param: str) -> list[int]:
    try:
        ids: list[int] = encode(what)
    except NotUnicode as exc:
        raise params.invalid(param, str(exc)) from None
    return ids


async def tokenize(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    _, data = await json_body(request)
    window = _window(ctx, request, data.get("model"))
    tokenizer = Tokenizer.shipped()
    if "prompt" in data and "messages" in data:
        raise InvalidRequest("Give either 'prompt' or 'messages', not both.", param="messages")
    if "messages" in data:
        turns = _chat(data["messages"])
        generation = _flag(data, "add_generation_prompt", True)
        ids = _encoded(tokenizer, lambda t: tokenizer.render_chat(t, generation), turns, "messages")
    elif "prompt" in data:
        prompt = data["prompt"]
        if not isinstance(prompt, str):
            raise params.invalid("prompt", "must be a string.")
        ids = _encoded(tokenizer, tokenizer.encode, prompt, "prompt")
    else:
        raise InvalidRequest("Missing required parameter: 'prompt' (or 'messages').", param="prompt")
    _flag(data, "add_special_tokens", True)  # accepted: the shipped tokenizer adds none either way
    strings = [tokenizer.token_name(i) for i in ids] if _flag(data, "return_token_strs", False) else None
    return _json({"count": len(ids), "max_model_len": window, "tokens": ids, "token_strs": strings})


async def detokenize(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    _, data = await json_body(request)
    _window(ctx, request, data.get("model"))
    tokenizer = Tokenizer.shipped()
    if "tokens" not in data:
        raise InvalidRequest("Missing required parameter: 'tokens'.", param="tokens")
    tokens = data["tokens"]
    if not isinstance(tokens, list):
        raise params.invalid("tokens", "must be an array of token ids.")
    for i, token in enumerate(tokens):
        # bool is an int to Python, not to JSON: true is not a token id.
        if not isinstance(token, int) or isinstance(token, bool) or not 0 <= token < tokenizer.vocab_size:
            raise params.invalid(f"tokens[{i}]", f"must be a token id in [0, {tokenizer.vocab_size}).")
    return _json({"prompt": tokenizer.decode(tokens)})


async def tokenizer_info(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    tokenizer = Tokenizer.shipped()
    return _json(
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "vocab_size": tokenizer.vocab_size,
            "model_max_length": ctx.options.models.default_window,
            "bos_token": None,
            "eos_token": EOS,
            "pad_token": EOS,
            "unk_token": None,
            "add_bos_token": False,
            "add_eos_token": False,
            "additional_special_tokens": [IM_START, IM_END],
            "chat_template": CHAT_TEMPLATE,
        }
    )


def routes() -> list[BaseRoute]:
    return [
        Route("/tokenize", tokenize, methods=["POST"]),
        Route("/detokenize", detokenize, methods=["POST"]),
        Route("/tokenizer_info", tokenizer_info, methods=["GET"]),
    ]
