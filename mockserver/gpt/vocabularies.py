"""Token ids of real vocabularies, read by the reference model.

Clients that tokenize for themselves (LangChain's ``OpenAIEmbeddings``, evaluation harnesses
scoring with ``echo``, ``logit_bias`` maps) send ids of the answering model's own tokenizer:
tiktoken's ``cl100k_base`` for ``gpt-4`` and the embedding models, ``o200k_base`` for
``gpt-4o`` and later. OpenAI accepts every id of that vocabulary, so a stand-in must too.

The rule, one place for prompts, embedding inputs, ``logit_bias`` keys and ``stop_token_ids``:

* the **accepted range** is the model family's vocabulary (:func:`vocabulary`), matched on the
  model id as tiktoken matches it (a ``ft:`` prefix and any ``provider/`` path are left out);
  an id of no known family must be one of the reference model's own (2048 ids: the server
  cannot know another tokenizer's size, and guessing one would hide a client's bug);
* an id **within the reference vocabulary** is read as itself, so the ids this server's own
  tokenizer gives out (and every test written with them) keep their meaning;
* an id **beyond it** is folded (:func:`fold`) onto an ordinary reference token in
  ``[3, size)`` by a fixed multiplicative hash: deterministic and stateless (the same id is the
  same token in every request, on every server), spreading neighbouring ids (tiktoken's ids of
  related words are often neighbours) over the vocabulary rather than onto neighbours, and never
  onto a special token, which would end or restructure the text the model reads — except the
  family's own end-of-text id, which is the reference ``<|endoftext|>`` (id 0), as harnesses
  send it to open an empty context.

Each id sent stays one token, so ``usage`` and echo positions count what the client sent.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

__all__ = ["FAMILIES", "VocabularyFamily", "end_of_text", "family", "fold", "fold_all", "vocabulary"]

SPECIALS = 3  # the reference tokenizer's <|endoftext|>, <|im_start|>, <|im_end|>: ids 0, 1, 2
_GOLDEN = 2654435761  # Knuth's multiplicative hash constant (⌊2³² / φ⌋): spreads neighbours apart


class VocabularyFamily:
    """A tokenizer family: its name (tiktoken's encoding), size and end-of-text id."""

    __slots__ = ("end_of_text", "name", "size")

    def __init__(self, name: str, size: int, end_of_text: int) -> None:
        self.name = name
        self.size = size  # ids 0 … size-1 (tiktoken's ``n_vocab``, special tokens included)
        self.end_of_text = end_of_text


# tiktoken's n_vocab: the mergeable ranks plus the special tokens (cl100k: 100,256 ranks, then
# <|endoftext|> 100257 … <|endofprompt|> 100276; o200k: 199,998 ranks, <|endoftext|> 199999 …
# <|endofprompt|> 200018; o200k_harmony, gpt-oss's, reserves specials up to 201087).
FAMILIES: dict[str, VocabularyFamily] = {
    "o200k_harmony": VocabularyFamily("o200k_harmony", 201_088, 199_999),
    "o200k_base": VocabularyFamily("o200k_base", 200_019, 199_999),
    "cl100k_base": VocabularyFamily("cl100k_base", 100_277, 100_257),
    "p50k_base": VocabularyFamily("p50k_base", 50_281, 50_256),
    "r50k_base": VocabularyFamily("r50k_base", 50_257, 50_256),
}

# Model id prefixes → family, longest first wins (tiktoken's MODEL_PREFIX_TO_ENCODING, in short).
_PREFIXES: tuple[tuple[str, str], ...] = (
    ("gpt-oss", "o200k_harmony"),
    ("gpt-4o", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
    ("codex-", "o200k_base"),
    ("computer-use", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("gpt-35", "cl100k_base"),  # Azure's spelling
    ("text-embedding-3", "cl100k_base"),
    ("text-embedding-ada-002", "cl100k_base"),
    ("davinci-002", "cl100k_base"),
    ("babbage-002", "cl100k_base"),
    ("text-davinci-003", "p50k_base"),
    ("text-davinci-002", "p50k_base"),
    ("code-davinci", "p50k_base"),
    ("code-cushman", "p50k_base"),
)
# GPT-3's models, named exactly (as prefixes "ada" or "text-" would claim other ids).
_GPT3 = ("davinci", "curie", "babbage", "ada")
_EXACT = {name: "r50k_base" for name in (*_GPT3, *(f"text-{m}-001" for m in _GPT3))}


@functools.lru_cache(maxsize=4096)  # asked twice per request, for a handful of model ids
def family(model: str) -> VocabularyFamily | None:
    """The tokenizer family of model id ``model``; None for a model of no known family."""
    name = model.rsplit("/", 1)[-1].lower()  # "openai/gpt-4o", "accounts/x/models/gpt-oss-20b"
    name = name.removeprefix("ft:")
    best = ""
    found = _EXACT.get(name)
    for prefix, encoding in _PREFIXES:
        if name.startswith(prefix) and len(prefix) > len(best):
            best, found = prefix, encoding
    return FAMILIES[found] if found is not None else None


def vocabulary(model: str, reference: int) -> int:
    """How many token ids ``model`` accepts: its family's, at least the ``reference`` model's."""
    known = family(model)
    return max(known.size, reference) if known is not None else reference


def end_of_text(model: str) -> int | None:
    """The id that is ``<|endoftext|>`` in ``model``'s family (None: no known family)."""
    known = family(model)
    return known.end_of_text if known is not None else None


def fold(token: int, reference: int, eot: int | None = None) -> int:
    """The reference token id that ``token`` (already checked to be in range) is read as."""
    if token < reference:
        return token
    if token == eot:
        return 0
    return SPECIALS + (token * _GOLDEN % 2**32) % (reference - SPECIALS)


def fold_all(tokens: Iterable[int], model: str, reference: int) -> list[int]:
    """:func:`fold` of every id of one prompt or input of ``model``."""
    eot = end_of_text(model)
    return [fold(t, reference, eot) for t in tokens]
