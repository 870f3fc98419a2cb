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
global RNG. With no processor beyond temperature/top-k/top-p set, none of the above costs anything.

Everything here is NumPy on float32 with orders that are the same on every machine, so a
seed draws the same token everywhere: ``exp`` is the kernel's (:mod:`mockserver.gpt.kernels`:
NumPy's own may use another algorithm per CPU), running sums are cumulative sums (sequential
by definition), and the best tokens are chosen by value, ties going to the lower token id.

Logprobs are *not* taken from the processed distribution: they are ``log_softmax`` of the raw
logits, the model's own belief, as OpenAI reports them. So a token forced by ``logit_bias``
still shows how unlikely the model found it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from mockserver.gpt.kernels import spec
from mockserver.spine.request import Sampling

__all__ = ["Exp", "MirostatState", "Sampler", "best", "pick", "rank", "top_candidates"]


# How many of the most likely tokens to look at first for a nucleus (top-p): a partial
# selection of 64 costs a fraction of sorting the vocabulary, and almost always holds the nucleus.
_NUCLEUS_GUESS = 64

_F32 = np.ndarray[Any, np.dtype[np.float32]]
_I64 = np.ndarray[Any, np.dtype[np.int64]]
Exp = Callable[[_F32], _F32]  # the kernel's elementwise exp


def _keys(values: _F32) -> npt.NDArray[np.uint64]:
    """One unsigned key per value, ordered as (value, then the lower index first): the float's
    bits made monotone in the high half, the index reversed in the low half. Unique, so any
    sort or selection of them has one answer."""
    bits = values.view(np.uint32).astype(np.uint64)
    monotone = bits ^ np.where(bits >> np.uint64(31), np.uint64(0xFFFFFFFF), np.uint64(0x80000000))
    index = np.arange(values.size, dtype=np.uint64)
    keys: npt.NDArray[np.uint64] = (monotone << np.uint64(32)) | (np.uint64(0xFFFFFFFF) - index)
    return keys


def best(values: _F32, k: int) -> _I64:
    """Indices of the ``k`` largest values, largest first; equal values in index order."""
    n = values.size
    k = min(k, n)
    if k <= 0:
        return np.zeros(0, np.int64)
    keys = _keys(np.ascontiguousarray(values, dtype=np.float32))
    top = np.sort(np.partition(keys, n - k)[n - k :] if k < n else keys)[::-1]
    order: _I64 = (np.uint64(0xFFFFFFFF) - (top & np.uint64(0xFFFFFFFF))).astype(np.int64)
    return order


def _draw(masses: _F32, rng: random.Random) -> int:
    """Inverse CDF over (not necessarily normalised) masses: the first index whose
    cumulative mass exceeds a uniform draw scaled to the total."""
    cdf = np.cumsum(masses, dtype=np.float32)
    index = int(np.searchsorted(cdf, rng.random() * float(cdf[-1]), side="right"))
    return min(index, cdf.size - 1)


def _masses(scores: _F32, temperature: float, exp: Exp) -> _F32:
    """Unnormalised probabilities (the best token's is 1), safe with -inf entries."""
    scaled = scores / np.float32(temperature) if temperature != 1.0 else scores
    return exp(scaled - scaled.max())


def pick(logits: _F32, temperature: float, top_k: int, top_p: float, rng: random.Random, exp: Exp = spec.exp) -> int:
    """The next token id from logits [V] with temperature, top-k and top-p only (the fast path:
    any other processor, ``min_p`` included, goes through :class:`Sampler`).
    ``temperature == 0`` is greedy and draws nothing."""
    if temperature == 0.0:
        return int(logits.argmax())
    return _pick(_masses(logits, temperature, exp), top_k, top_p, rng)


def _pick(probs: _F32, top_k: int, top_p: float, rng: random.Random) -> int:
    """Top-k, then top-p over the (renormalised) top-k, then a draw."""
    vocab = probs.size
    if (top_k <= 0 or top_k >= vocab) and top_p >= 1.0:
        return _draw(probs, rng)
    if 0 < top_k < vocab:
        order = best(probs, top_k)
        total = float(np.cumsum(probs[order], dtype=np.float32)[-1])  # top-p works on the top-k
    else:  # a nucleus: look among the best 64, then 512, ... until they hold it
        total = float(np.cumsum(probs, dtype=np.float32)[-1])
        guess = _NUCLEUS_GUESS
        order = best(probs, guess)
        while guess < vocab and float(np.cumsum(probs[order], dtype=np.float32)[-1]) < top_p * total:
            guess *= 8
            order = best(probs, guess)
    values = probs[order]
    if top_p < 1.0:
        before = np.cumsum(values, dtype=np.float32) - values  # mass strictly above each token
        keep = max(1, int((before < top_p * total).sum()))
        order, values = order[:keep], values[:keep]
    return int(order[_draw(values, rng)])


class MirostatState:
    """Mirostat v2's running threshold μ (bits), starting at 2τ as the paper prescribes."""

    def __init__(self, target: float, lr: float) -> None:
        self.target = target
        self.lr = lr
        self.mu = 2.0 * target
        self.surprise = 0.0  # the last observed surprise, in bits (for tests and benchmarks)


class Sampler:
    """One choice's picker: the request's processors, with the state they keep between steps.

    ``end_ids`` are the tokens that would end the choice (end-of-sequence, the chat end
    markers, ``stop_token_ids``): what ``min_tokens`` and ``ignore_eos`` hold back. Call
    :meth:`observe` with every sampled token.

    With no processor beyond temperature/top-k/top-p this is :func:`pick`. Otherwise the
    processors run on a copy of the logits; the penalties only ever touch the few tokens
    already seen, so they are applied to those indices alone. ``exp`` is the kernel's.
    """

    def __init__(
        self,
        params: Sampling,
        rng: random.Random,
        vocab: int,
        prompt_ids: Iterable[int] = (),
        end_ids: Iterable[int] = (),
        exp: Exp = spec.exp,
    ) -> None:
        self.params = params
        self.rng = rng
        self.exp = exp
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

    def pick(self, logits: _F32) -> int:
        p = self.params
        if self._plain:
            return pick(logits, p.temperature, p.top_k, p.top_p, self.rng, self.exp)
        scores = self.process(logits)
        if p.temperature == 0.0:
            return int(scores.argmax())
        probs = _masses(scores, p.temperature, self.exp)
        if self.mirostat is not None:
            return _mirostat(probs, self.mirostat, self.rng)
        if p.min_p > 0.0:  # relative to the best token, whose mass is 1
            probs = np.where(probs >= p.min_p, probs, np.float32(0.0))
        return _pick(probs, p.top_k, p.top_p, self.rng)

    def process(self, logits: _F32) -> _F32:
        """Steps 1-4 of the module docstring, as a new array; the input is untouched."""
        p = self.params
        scores = np.array(logits, dtype=np.float32)
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


def _mirostat(masses: _F32, state: MirostatState, rng: random.Random) -> int:
    """Mirostat v2 (Basu et al., 2020): drop every token whose surprise ``-log2 p`` exceeds μ
    (the most likely one always stays), sample from the rest renormalised, then move μ by
    ``η · (τ − observed surprise)``, the surprise measured in the renormalised distribution."""
    probs = masses / np.cumsum(masses, dtype=np.float32)[-1]
    kept = np.where(probs >= 2.0 ** (-state.mu), probs, np.float32(0.0))
    total = float(np.cumsum(kept, dtype=np.float32)[-1])
    if total <= 0.0:
        token, observed = int(np.argmax(probs)), 0.0
    else:
        token = _draw(kept, rng)
        observed = -math.log2(float(kept[token]) / total)
    state.surprise = observed
    state.mu -= state.lr * (observed - state.target)
    return token


def top_candidates(logprobs: _F32, k: int) -> list[tuple[int, float]]:
    """The ``k`` most likely ``(token id, logprob)`` pairs of one position, best first (ties:
    the lower id first)."""
    order = best(logprobs, k)
    return list(zip(order.tolist(), logprobs[order].tolist(), strict=True))


def rank(logprobs: _F32, token_id: int) -> int:
    """1 + how many tokens are strictly more likely than ``token_id`` (vLLM's rank)."""
    return 1 + int((logprobs > logprobs[token_id]).sum())
