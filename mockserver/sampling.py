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


def pick(logits: Tensor, temperature: float, top_k: int, top_p: float, rng: random.Random) -> int:
    """The next token id from logits [V]. ``temperature == 0`` is greedy and draws nothing."""
    if temperature == 0.0:
        return int(logits.argmax())
    scaled = logits / temperature if temperature != 1.0 else logits
    if top_k > 0 or top_p < 1.0:
        # One stable sort serves both filters; ties keep id order, so results are reproducible.
        values, order = scaled.sort(descending=True, stable=True)
        if 0 < top_k < values.numel():
            values, order = values[:top_k], order[:top_k]
        probs = values.softmax(-1)
        if top_p < 1.0:
            before = probs.cumsum(-1) - probs  # mass strictly above each token
            keep = max(1, int((before < top_p).sum()))
            probs, order = probs[:keep], order[:keep]
        return int(order[_draw(probs, rng)])
    return _draw(scaled.softmax(-1), rng)


def _draw(probs: Tensor, rng: random.Random) -> int:
    """Inverse CDF: the first index whose cumulative mass exceeds a uniform draw."""
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
