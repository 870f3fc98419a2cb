"""Prompts as the model reads them, without the model: token ids, what each prompt costs, how
many tokens it may still produce, and the echoed prompt text.

Shared by the reference backend and the torch-free scripted answers, so both render chats,
count usage, check context windows and cut at ``max_tokens`` exactly alike. Everything here
raises its 400s (bad token ids, a lone surrogate, context overflow) before any event.

Work in proportion to the prompt comes after the cheap checks: no token stands for more than
:func:`longest_token` bytes, so a prompt's UTF-8 length gives a lower bound of its tokens, and
a prompt that cannot fit the window whatever its tokens is refused (``context_length_exceeded``,
"at least N tokens") before anything is tokenized. What fits is tokenized; a long text off the
event loop (:func:`prepare_off_loop`, for callers on the loop).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

from mockserver.errors import ContextLengthExceeded, InvalidRequest, clip
from mockserver.gpt import vocabularies
from mockserver.gpt.tokenizer import SPECIAL_TOKENS, NotUnicode, Tokenizer
from mockserver.spine.events import TextDelta, Token
from mockserver.spine.request import GenerationRequest, Prompt
from mockserver.spine.stopping import TextAssembler

__all__ = [
    "LARGE",
    "IndexedTokenMaker",
    "PromptIds",
    "echo",
    "fewest_tokens",
    "heavy",
    "longest_token",
    "plain_token",
    "prepare",
    "prepare_off_loop",
    "prompt_field",
    "refuse_unfittable",
]

LARGE = 64 * 1024  # characters to tokenize: a request with more is prepared off the event loop

# A token's id and position → (its released text → the Token): how each token is reported.
IndexedTokenMaker = Callable[[int, int], Callable[[str], Token]]


@dataclass(frozen=True, slots=True)
class PromptIds:
    """One prompt, ready: its ids, what it costs (images count though the model never sees
    them), and how many tokens each of its choices may produce."""

    ids: list[int]
    size: int
    budget: int


def prepare(request: GenerationRequest, tok: Tokenizer, decided: bool = False) -> list[PromptIds]:
    """Every prompt of ``request``; all are checked before any is used (first by their size,
    before any is tokenized). ``decided``: its answers are decided (whatever ``request.answers``
    says), so a reasoning model does not think."""
    param = prompt_field(request)
    if heavy(request):  # much to tokenize: first what no tokenizing can make fit
        refuse_unfittable(request, tok)
    thinks = request.think > 0 and not decided and not request.answers
    many = len(request.prompts) > 1  # a list of token-id lists: errors name ``prompt[i]``
    encoded = [
        _encode(request, prompt, tok, f"{param}[{i}]" if many else param, thinks)
        for i, prompt in enumerate(request.prompts)
    ]
    images = [p.image_tokens + sum(m.image_tokens for m in p.messages or ()) for p in request.prompts]
    sizes = [len(ids) + extra for ids, extra in zip(encoded, images, strict=True)]
    return [PromptIds(ids, size, _budget(request, size)) for ids, size in zip(encoded, sizes, strict=True)]


def refuse_unfittable(request: GenerationRequest, tok: Tokenizer) -> None:
    """``context_length_exceeded`` ("at least N tokens") for a prompt that cannot fit the
    window whatever its tokens, judged by its size alone (see the module's docstring): no
    tokenizing, C-speed string work only. For :func:`prepare`, and for the handler, which asks
    before it hashes a big body (the canonical JSON of 5 MB holds the event loop ~40 ms)."""
    longest = longest_token(tok)
    for prompt in request.prompts:
        _refuse_early(request, *_at_least(request, prompt, longest))


def prompt_field(request: GenerationRequest) -> str:
    """The field that holds ``request``'s prompt, as its endpoint names it."""
    if request.surface == "responses":
        return "input"
    return "messages" if request.endpoint == "chat" else "prompt"


def _exceeded(request: GenerationRequest, prompt_len: int, completion: int, at_least: bool) -> ContextLengthExceeded:
    """The overflow, naming the field to change: the max-tokens field when the completion
    asked for does not fit the window whatever the prompt, else the prompt's."""
    prompt = prompt_field(request)
    param = prompt
    if completion >= request.context_window:
        param = "max_output_tokens" if request.surface == "responses" else "max_tokens"
    return ContextLengthExceeded(request.context_window, prompt_len, completion, param, at_least, prompt=prompt)


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
        ids = _read_ids(prompt.token_ids, request.model, tok, param)
    else:
        ids = tok.encode(prompt.text or "")
    if prompt.suffix is not None:
        # Insert mode. The model was never trained to infill, so the suffix conditions it
        # the one way it can read: as a document of its own placed before the prompt.
        ids = [*tok.encode(prompt.suffix), tok.eos_id, *ids]
    return ids[-keep:] if keep is not None else ids


def _read_ids(token_ids: Sequence[int], model: str, tok: Tokenizer, param: str) -> list[int]:
    """Token ids as sent, checked against ``model``'s real vocabulary and folded into the
    reference one (see :mod:`mockserver.gpt.vocabularies`): one token per id sent."""
    size = vocabularies.vocabulary(model, tok.vocab_size)
    bad = [t for t in token_ids if not 0 <= t < size]
    if bad:
        where = f"outside the vocabulary [0, {size}) of {clip(model, 60)}"
        raise InvalidRequest(f"Invalid value for '{param}': token id {bad[0]} is {where}.", param=param)
    return vocabularies.fold_all(token_ids, model, tok.vocab_size)


async def prepare_off_loop(request: GenerationRequest, tok: Tokenizer, decided: bool = False) -> list[PromptIds]:
    """:func:`prepare` for a caller on the event loop: in a thread when there is much to
    tokenize (the tokenizer lets go of the GIL on long texts), so other requests go on."""
    if heavy(request):
        return await asyncio.to_thread(prepare, request, tok, decided)
    return prepare(request, tok, decided)


def heavy(request: GenerationRequest) -> bool:
    """Has ``request`` more than :data:`LARGE` characters (or token ids) to read?"""
    total = 0
    for prompt in request.prompts:
        total += len(prompt.text or "") + len(prompt.suffix or "") + len(prompt.token_ids or ())
        total += sum(len(m.content) for m in prompt.messages or ())
        if total > LARGE:
            return True
    return False


@cache
def longest_token(tok: Tokenizer) -> int:
    """The most bytes one token stands for: a special token's text (``<|im_end|>``, written in
    a prompt) is one token too."""
    most = max(len(tok.token_bytes(i)) for i in range(tok.vocab_size))
    return max(most, *(len(name.encode()) for name in SPECIAL_TOKENS))


def fewest_tokens(text: str, longest: int) -> int:
    """The fewest tokens ``text`` can take: its UTF-8 bytes over the longest token's."""
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return -(-size // longest)


def _at_least(request: GenerationRequest, prompt: Prompt, longest: int) -> tuple[int, bool]:
    """What ``prompt`` costs (its tokens and images) at least, without tokenizing it; and
    whether that is exactly its cost (token ids are counted, text is bounded)."""
    exact = prompt.messages is None and prompt.token_ids is not None and prompt.suffix is None
    if prompt.messages is not None:
        # Each turn: <|im_start|>, "role\ncontent", <|im_end|>, "\n"; then the assistant's opening.
        tokens = sum(3 + fewest_tokens(m.content, longest) for m in prompt.messages) + 1
    elif prompt.token_ids is not None:
        tokens = len(prompt.token_ids)
    else:
        tokens = fewest_tokens(prompt.text or "", longest)
    if prompt.suffix is not None:
        tokens += fewest_tokens(prompt.suffix, longest) + 1
    keep = request.sampling.keep_prompt_tokens
    if keep is not None:
        tokens = min(tokens, keep)
    return tokens + prompt.image_tokens + sum(m.image_tokens for m in prompt.messages or ()), exact


def _refuse_early(request: GenerationRequest, at_least: int, exact: bool) -> None:
    """The context overflow of a prompt of ``at_least`` tokens: refusal grows with the prompt
    (see :func:`_overflow`), so if that many do not fit, its real tokens do not either."""
    completion = _overflow(request, at_least)
    if completion is not None:
        raise _exceeded(request, at_least, completion, at_least=not exact)


def _overflow(request: GenerationRequest, prompt_len: int) -> int | None:
    """The completion tokens the refusal of a ``prompt_len``-token prompt reports, or None
    when it fits. A longer prompt never fits where a shorter one does not."""
    window = request.context_window
    params = request.sampling
    wanted = params.max_tokens
    if wanted is None or (params.truncate and prompt_len < window):  # fill what is left
        return 1 if prompt_len >= window else None
    return wanted if prompt_len + wanted > window else None


def _budget(request: GenerationRequest, prompt_len: int) -> int:
    completion = _overflow(request, prompt_len)
    if completion is not None:
        raise _exceeded(request, prompt_len, completion, at_least=False)
    window = request.context_window
    wanted = request.sampling.max_tokens
    if wanted is None:
        return window - prompt_len
    if request.sampling.truncate and prompt_len < window:
        return min(wanted, window - prompt_len)
    return wanted


def plain_token(tok: Tokenizer) -> IndexedTokenMaker:
    """Tokens reported without scores (no logprobs were asked for)."""

    def make(token_id: int, position: int) -> Callable[[str], Token]:
        return lambda text: Token(tok.token_name(token_id), tok.token_bytes(token_id), text, None)

    return make


def echo(ids: list[int], tok: Tokenizer, make: IndexedTokenMaker, with_tokens: bool) -> TextDelta:
    """The prompt as completions' ``echo`` returns it (choice 0; callers re-index it)."""
    assembler = TextAssembler(())
    tokens: list[Token] = []
    for position, token_id in enumerate(ids):
        tokens.extend(assembler.push(tok.token_bytes(token_id), make(token_id, position)))
    tokens.extend(assembler.flush())
    text = "".join(t.text for t in tokens)
    return TextDelta(0, text, tuple(tokens) if with_tokens else (), echo=True)
