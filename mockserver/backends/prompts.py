"""Prompts as the model reads them, without the model: token ids, what each prompt costs, how
many tokens it may still produce, and the echoed prompt text.

Shared by the reference backend and the torch-free scripted answers, so both render chats,
count usage, check context windows and cut at ``max_tokens`` exactly alike. Everything here
raises its 400s (bad token ids, a lone surrogate, context overflow) before any event.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mockserver.errors import ContextLengthExceeded, InvalidRequest
from mockserver.gpt.tokenizer import NotUnicode, Tokenizer
from mockserver.spine.events import TextDelta, Token
from mockserver.spine.request import GenerationRequest, Prompt
from mockserver.spine.stopping import TextAssembler

__all__ = ["Prepared", "TokenMaker", "echo", "plain_token", "prepare"]

# A token's id and position → (its released text → the Token): how each token is reported.
TokenMaker = Callable[[int, int], Callable[[str], Token]]


@dataclass(frozen=True, slots=True)
class Prepared:
    """One prompt, ready: its ids, what it costs (images count though the model never sees
    them), and how many tokens each of its choices may produce."""

    ids: list[int]
    size: int
    budget: int


def prepare(request: GenerationRequest, tok: Tokenizer, decided: bool = False) -> list[Prepared]:
    """Every prompt of ``request``; all are checked before any is used. ``decided``: its
    answers are decided (whatever ``request.answers`` says), so a reasoning model does not think."""
    param = "messages" if request.endpoint == "chat" else "prompt"
    thinks = request.think > 0 and not decided and not request.answers
    encoded = [_encode(request, prompt, tok, param, thinks) for prompt in request.prompts]
    images = [p.image_tokens + sum(m.image_tokens for m in p.messages or ()) for p in request.prompts]
    sizes = [len(ids) + extra for ids, extra in zip(encoded, images, strict=True)]
    return [Prepared(ids, size, _budget(request, size, param)) for ids, size in zip(encoded, sizes, strict=True)]


def _encode(request: GenerationRequest, prompt: Prompt, tok: Tokenizer, param: str, thinks: bool) -> list[int]:
    try:
        return _tokens(request, prompt, tok, param, thinks)
    except NotUnicode as exc:
        raise InvalidRequest(f"Invalid value for '{param}': {exc}.", param=param) from None


def _tokens(request: GenerationRequest, prompt: Prompt, tok: Tokenizer, param: str, thinks: bool) -> list[int]:
    keep = request.sampling.keep_prompt_tokens
    if prompt.messages is not None:
        turns = [(m.role, m.content) for m in prompt.messages]
        if thinks:
            # A reasoning model's turn opens as a "think" turn; the assistant's follows it.
            rendered = [*tok.render_chat(turns, generation_prompt=False), tok.im_start_id, *tok.encode("think\n")]
        else:
            rendered = tok.render_chat(turns)
        return rendered[-keep:] if keep is not None else rendered
    if prompt.token_ids is not None:
        bad = [t for t in prompt.token_ids if not 0 <= t < tok.vocab_size]
        if bad:
            raise InvalidRequest(
                f"Invalid token id {bad[0]} in prompt: ids must be in [0, {tok.vocab_size}).",
                param=param,
            )
        ids = list(prompt.token_ids)
    else:
        ids = tok.encode(prompt.text or "")
    if prompt.suffix is not None:
        # Insert mode. The model was never trained to infill, so the suffix conditions it
        # the one way it can read: as a document of its own placed before the prompt.
        ids = [*tok.encode(prompt.suffix), tok.eos_id, *ids]
    return ids[-keep:] if keep is not None else ids


def _budget(request: GenerationRequest, prompt_len: int, param: str) -> int:
    window = request.context_window
    params = request.sampling
    wanted = params.max_tokens
    if wanted is None or (params.truncate and prompt_len < window):  # fill what is left
        if prompt_len >= window:
            raise ContextLengthExceeded(window, prompt_len, 1, param)
        return window - prompt_len if wanted is None else min(wanted, window - prompt_len)
    if prompt_len + wanted > window:
        raise ContextLengthExceeded(window, prompt_len, wanted, param)
    return wanted


def plain_token(tok: Tokenizer) -> TokenMaker:
    """Tokens reported without scores (no logprobs were asked for)."""

    def make(token_id: int, position: int) -> Callable[[str], Token]:
        return lambda text: Token(tok.token_name(token_id), tok.token_bytes(token_id), text, None)

    return make


def echo(ids: list[int], tok: Tokenizer, make: TokenMaker, with_tokens: bool) -> TextDelta:
    """The prompt as completions' ``echo`` returns it (choice 0; callers re-index it)."""
    assembler = TextAssembler(())
    tokens: list[Token] = []
    for position, token_id in enumerate(ids):
        tokens.extend(assembler.push(tok.token_bytes(token_id), make(token_id, position)))
    tokens.extend(assembler.flush())
    text = "".join(t.text for t in tokens)
    return TextDelta(0, text, tuple(tokens) if with_tokens else (), echo=True)
