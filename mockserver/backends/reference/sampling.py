"""Choosing the next token from real logits: pure processors plus one explicit uniform draw.

A :class:`Sampler` is one choice's picker. Each step it runs the request's processors over
the raw logits of one position, in this order (vLLM's, which the providers we stand in for
run):

1. ``logit_bias`` is added (``+100`` makes a token all but certain, ``-100`` bans it);
2. while fewer than ``min_tokens`` were sampled, or always with ``ignore_eos``, the
   end-of-sequence and ``stop_token_ids`` tokens are masked out (-inf);
3. ``repetition_penalty`` r (HF / vLLM / Fireworks form): the logit of every token seen so
   far, prompt included, is divided by r when positive and multiplied by r when negative;
4. ``frequency_penalty`` and ``presence_penalty`` (OpenAI's formula, over *generated*
   tokens only): ``logit[j] -= count[j] * frequency + (count[j] > 0) * presence``;
5. temperature; then either Mirostat v2, or ``min_p``, ``top_k`` and ``top_p`` in that order.

Temperature 0 is greedy over the processed logits and draws nothing. Sampling is an
inverse-CDF lookup with a uniform number from the choice's own ``random.Random`` — never a
global RNG, and far cheaper here than ``torch.multinomial`` (~140 µs per call on these CPUs).
With no processor beyond temperature/top-k/top-p set, none of the above costs anything.

Logprobs are *not* taken from the processed distribution: they are ``log_softmax`` of the raw
logits, the model's own belief, as OpenAI reports them. So a token forced by ``logit_bias``
still shows how unlikely the model found it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from typing import Any

import numpy as np
from torch import Tensor

from mockserver.spine.request import Sampling

__all__ = ["MirostatState", "Sampler", "log_probs", "pick", "rank", "top_candidates"]


# How many of the most likely tokens to look at first for a nucleus (top-p): a partial topk
# of 64 costs a fraction of sorting the vocabulary, and almost always holds the nucleus.
_NUCLEUS_GUESS = 64

_F32 = np.ndarray[Any, np.dtype[np.float32]]


def pick(logits: Tensor, temperature: float, top_k: int, top_p: float, rng: random.Random) -> int:
    """The next token id from logits [V] with temperature, top-k and top-p only (the fast path:
    any other processor, ``min_p`` included, goes through :class:`Sampler`'s NumPy step).
    ``temperature == 0`` is greedy and draws nothing."""
    if temperature == 0.0:
        return int(logits.argmax())
    scaled = logits / temperature if temperature != 1.0 else logits
    probs = scaled.softmax(-1)
    total = 1.0
    vocab = probs.numel()
    if (top_k <= 0 or top_k >= vocab) and top_p >= 1.0:
        return _draw(probs, rng)
    if 0 < top_k < vocab:
        values, order = probs.topk(top_k)  # best first
        total = float(values.sum())  # top-p then works on the renormalised top-k
    else:
        values, order = probs.topk(min(_NUCLEUS_GUESS, vocab))
        if float(values.sum()) < top_p * total:  # the nucleus is wider than the guess
            values, order = probs.topk(vocab)
    if top_p < 1.0:
        before = values.cumsum(-1) - values  # mass strictly above each token
        keep = max(1, int((before < top_p * total).sum()))
        values, order = values[:keep], order[:keep]
    return int(order[_draw(values, rng)])


class MirostatState:
    """Mirostat v2's running threshold μ (bits), starting at 2τ as the paper prescribes."""

    def __init__(self, target: float, lr: float) -> None:
        self.target = target
        self.lr = lr
        self.mu = 2.0 * target
        self.surprise = 0.0  # the last observed surprise, in bits (for tests and benchmarks)


def _draw(probs: Tensor, rng: random.Random) -> int:
    """Inverse CDF over (not necessarily normalised) masses: the first index whose
    cumulative mass exceeds a uniform draw scaled to the total."""
    cdf = probs.cumsum(-1).numpy()
    index = int(np.searchsorted(cdf, rng.random() * float(cdf[-1]), side="right"))
    return min(index, cdf.size - 1)


class Sampler:
    """One choice's picker: the request's processors, with the state they keep between steps.

    ``end_ids`` are the tokens that would end the choice (end-of-sequence, the chat end
    markers, ``stop_token_ids``): what ``min_tokens`` and ``ignore_eos`` hold back. Call
    :meth:`observe` with every sampled token.

    With no processor beyond temperature/top-k/top-p this is :func:`pick`. Otherwise the
    whole step runs in NumPy on a zero-copy view of the logits: a torch call costs ~5-10 µs
    here whatever its size, a NumPy call on 2,048 floats about 1 µs, and the penalties only
    ever touch the few tokens already seen, so they are applied to those indices alone.
    """

    def __init__(
        self,
        params: Sampling,
        rng: random.Random,
        vocab: int,
        prompt_ids: Iterable[int] = (),
        end_ids: Iterable[int] = (),
    ) -> None:
        self.params = params
        self.rng = rng
        self.sampled = 0
        self._plain = not params.processed
        self.mirostat = MirostatState(params.mirostat.target, params.mirostat.lr) if params.mirostat else None
        if self._plain:
            return
        ids, values = zip(*params.logit_bias, strict=True) if params.logit_bias else ((), ())
        self._bias_ids = np.array(ids, dtype=np.int64)
        self._bias = np.array(values, dtype=np.float32)
        self._end = np.array(sorted(set(end_ids)), dtype=np.int64)
        self._counts: dict[int, int] = {}  # generated token → times (frequency / presence)
        self._seen: set[int] = set(prompt_ids) if params.repetition_penalty != 1.0 else set()

    def pick(self, logits: Tensor) -> int:
        p = self.params
        if self._plain:
            return pick(logits, p.temperature, p.top_k, p.top_p, self.rng)
        scores = self.process(logits)
        if p.temperature == 0.0:
            return int(scores.argmax())
        if self.mirostat is not None:
            return _np_mirostat(scores, p.temperature, self.mirostat, self.rng)
        return _np_pick(scores, p.temperature, p.top_k, p.top_p, p.min_p, self.rng)

    def process(self, logits: Tensor) -> _F32:
        """Steps 1-4 of the module docstring, as a new array; the input is untouched."""
        p = self.params
        scores = logits.numpy().astype(np.float32, copy=True)
        if self._bias.size:
            scores[self._bias_ids] += self._bias
        if self._end.size and (p.ignore_eos or self.sampled < p.min_tokens):
            scores[self._end] = -np.inf
        if self._seen:
            seen = np.fromiter(self._seen, dtype=np.int64, count=len(self._seen))
            values = scores[seen]
            r = p.repetition_penalty
            scores[seen] = np.where(values > 0, values / r, values * r)
        if self._counts:
            ids = np.fromiter(self._counts, dtype=np.int64, count=len(self._counts))
            counts = np.fromiter(self._counts.values(), dtype=np.float32, count=len(self._counts))
            scores[ids] -= counts * p.frequency_penalty + p.presence_penalty
        return scores

    def observe(self, token_id: int) -> None:
        """Record a sampled token (the penalties and ``min_tokens`` count it)."""
        self.sampled += 1
        if self._plain:
            return
        if self.params.frequency_penalty or self.params.presence_penalty:
            self._counts[token_id] = self._counts.get(token_id, 0) + 1
        if self.params.repetition_penalty != 1.0:
            self._seen.add(token_id)


def _np_softmax(scores: _F32, temperature: float) -> _F32:
    """Unnormalised probabilities (the best token's is 1), safe with -inf entries."""
    scaled = scores / np.float32(temperature) if temperature != 1.0 else scores
    probs: _F32 = np.exp(scaled - scaled.max())
    return probs


def _np_draw(masses: _F32, rng: random.Random) -> int:
    cdf = np.cumsum(masses)
    index = int(np.searchsorted(cdf, rng.random() * float(cdf[-1]), side="right"))
    return min(index, cdf.size - 1)


def _np_pick(scores: _F32, temperature: float, top_k: int, top_p: float, min_p: float, rng: random.Random) -> int:
    """:func:`pick` over processed scores (min-p, then top-k, then top-p), in NumPy."""
    probs = _np_softmax(scores, temperature)
    if min_p > 0.0:  # relative to the best token, whose mass is 1
        probs = np.where(probs >= min_p, probs, np.float32(0.0))
    vocab = probs.size
    if (top_k <= 0 or top_k >= vocab) and top_p >= 1.0:
        return _np_draw(probs, rng)
    if 0 < top_k < vocab:
        order = np.argpartition(-probs, top_k - 1)[:top_k]
    else:  # a nucleus: guess it lies within the 64 best, as :func:`pick` does
        guess = min(_NUCLEUS_GUESS, vocab)
        order = np.argpartition(-probs, guess - 1)[:guess] if guess < vocab else np.arange(vocab)
        if float(probs[order].sum()) < top_p * float(probs.sum()):
            order = np.arange(vocab)
    order = order[np.argsort(-probs[order], kind="stable")]  # best first
    values = probs[order]
    if top_p < 1.0:
        total = float(values.sum()) if 0 < top_k < vocab else float(probs.sum())
        before = np.cumsum(values) - values  # mass strictly above each token
        keep = max(1, int((before < top_p * total).sum()))
        order, values = order[:keep], values[:keep]
    return int(order[_np_draw(values, rng)])


def _np_mirostat(scores: _F32, temperature: float, state: MirostatState, rng: random.Random) -> int:
    """Mirostat v2 (Basu et al., 2020): drop every token whose surprise ``-log2 p`` exceeds μ
    (the most likely one always stays), sample from the rest renormalised, then move μ by
    ``η · (τ − observed surprise)``, the surprise measured in the renormalised distribution."""
    probs = _np_softmax(scores, temperature)
    probs = probs / probs.sum()
    kept = np.where(probs >= 2.0 ** (-state.mu), probs, np.float32(0.0))
    total = float(kept.sum())
    if total <= 0.0:
        token, observed = int(probs.argmax()), 0.0
    else:
        token = _np_draw(kept, rng)
        observed = -math.log2(float(kept[token]) / total)
    state.surprise = observed
    state.mu -= state.lr * (observed - state.target)
    return token


def log_probs(logits: Tensor) -> Tensor:
    """Raw log-probabilities [..., V] (see the module docstring for why raw)."""
    return logits.float().log_softmax(-1)


def top_candidates(logprobs: Tensor, k: int) -> list[tuple[int, float]]:
    """The ``k`` most likely ``(token id, logprob)`` pairs of one position, best first."""
    if k <= 0:
        return []
    values, ids = logprobs.topk(min(k, logprobs.numel()))
    return list(zip(ids.tolist(), values.tolist(), strict=True))


def rank(logprobs: Tensor, token_id: int) -> int:
    """1 + how many tokens are strictly more likely than ``token_id`` (vLLM's rank)."""
    return 1 + int((logprobs > logprobs[token_id]).sum())
