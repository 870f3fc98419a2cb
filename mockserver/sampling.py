"""Choosing the next token from real logits: pure functions plus one explicit uniform draw.

Temperature, top-k and top-p are applied in that order (the order vLLM and HF use) to the
raw logits of one position. Sampling is an inverse-CDF lookup with a uniform number drawn
from the choice's own ``random.Random`` — never a global RNG, and far cheaper here than
``torch.multinomial`` (~140 µs per call on these CPUs): the cumulative sum is read through a
zero-copy NumPy view and searched with one ``searchsorted``.

Logprobs are *not* taken from the processed distribution: they are ``log_softmax`` of the raw
logits (before temperature, top-k and top-p), the model's own belief, as OpenAI reports them.
So the sampled token's logprob is the same number wherever it appears, in ``logprob`` or in a
top-logprobs list.
"""

from __future__ import annotations

import random

import numpy as np
from torch import Tensor

__all__ = ["log_probs", "pick", "top_candidates"]


# How many of the most likely tokens to look at first for a nucleus (top-p): a partial topk
# of 64 costs a fraction of sorting the vocabulary, and almost always holds the nucleus.
_NUCLEUS_GUESS = 64


def pick(logits: Tensor, temperature: float, top_k: int, top_p: float, rng: random.Random) -> int:
    """The next token id from logits [V]. ``temperature == 0`` is greedy and draws nothing."""
    if temperature == 0.0:
        return int(logits.argmax())
    scaled = logits / temperature if temperature != 1.0 else logits
    probs = scaled.softmax(-1)
    vocab = probs.numel()
    if (top_k <= 0 or top_k >= vocab) and top_p >= 1.0:
        return _draw(probs, rng)
    if 0 < top_k < vocab:
        values, order = probs.topk(top_k)  # best first
        total = float(values.sum())  # top-p then works on the renormalised top-k
    else:
        values, order = probs.topk(min(_NUCLEUS_GUESS, vocab))
        total = 1.0
        if float(values.sum()) < top_p:  # the nucleus is wider than the guess
            values, order = probs.topk(vocab)
    if top_p < 1.0:
        before = values.cumsum(-1) - values  # mass strictly above each token
        keep = max(1, int((before < top_p * total).sum()))
        values, order = values[:keep], order[:keep]
    return int(order[_draw(values, rng)])


def _draw(probs: Tensor, rng: random.Random) -> int:
    """Inverse CDF over (not necessarily normalised) masses: the first index whose
    cumulative mass exceeds a uniform draw scaled to the total."""
    cdf = probs.cumsum(-1).numpy()
    index = int(np.searchsorted(cdf, rng.random() * float(cdf[-1]), side="right"))
    return min(index, cdf.size - 1)


def log_probs(logits: Tensor) -> Tensor:
    """Raw log-probabilities [..., V] (see the module docstring for why raw)."""
    return logits.float().log_softmax(-1)


def top_candidates(logprobs: Tensor, k: int) -> list[tuple[int, float]]:
    """The ``k`` most likely ``(token id, logprob)`` pairs of one position, best first."""
    if k <= 0:
        return []
    values, ids = logprobs.topk(min(k, logprobs.numel()))
    return list(zip(ids.tolist(), values.tolist(), strict=True))
