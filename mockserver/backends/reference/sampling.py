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

The choice itself — masses, ``min_p``, top-k, top-p, the draw — is the kernel's
(:func:`mockserver.gpt.kernels.spec.pick`, and its C copy): its sums have one order and the
best tokens are ranked by value, ties going to the lower token id, so a seed draws the same
token on every machine. The processors are NumPy elementwise operations (the same everywhere).

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

from mockserver.gpt.kernels import Kernel, Spec, spec
from mockserver.spine.request import Sampling

__all__ = ["MirostatState", "Sampler", "best", "pick", "rank", "top_candidates"]

_F32 = np.ndarray[Any, np.dtype[np.float32]]
best = spec.best
_SPEC = Spec()


def pick(logits: _F32, temperature: float, top_k: int, top_p: float, rng: random.Random, kernel: Kernel = _SPEC) -> int:
    """The next token id from logits [V] with temperature, top-k and top-p only (the fast path:
    any other processor, ``min_p`` included, goes through :class:`Sampler`).
    ``temperature == 0`` is greedy and draws nothing; otherwise one uniform number is drawn."""
    if temperature == 0.0:
        return int(logits.argmax())
    return kernel.pick(logits, temperature, 0.0, top_k, top_p, rng.random())


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
        kernel: Kernel = _SPEC,
    ) -> None:
        self.params = params
        self.rng = rng
        self.kernel = kernel
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
            return pick(logits, p.temperature, p.top_k, p.top_p, self.rng, self.kernel)
        scores = self.process(logits)
        if p.temperature == 0.0:
            return int(scores.argmax())
        if self.mirostat is not None:
            return _mirostat(spec.masses(scores, p.temperature), self.mirostat, self.rng)
        return self.kernel.pick(scores, p.temperature, p.min_p, p.top_k, p.top_p, self.rng.random())

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
    kept = np.where(probs >= np.float32(2.0 ** (-state.mu)), probs, np.float32(0.0))
    total = float(np.cumsum(kept, dtype=np.float32)[-1])
    if total <= 0.0:
        token, observed = int(np.argmax(probs)), 0.0
    else:
        token = spec.draw(kept, rng.random())
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
