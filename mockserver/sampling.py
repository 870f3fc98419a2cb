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

import numpy as np
import torch
from torch import Tensor

from mockserver.generation import Sampling

__all__ = ["Sampler", "log_probs", "mirostat_pick", "pick", "top_candidates"]


# How many of the most likely tokens to look at first for a nucleus (top-p): a partial topk
# of 64 costs a fraction of sorting the vocabulary, and almost always holds the nucleus.
_NUCLEUS_GUESS = 64


def pick(logits: Tensor, temperature: float, top_k: int, top_p: float, rng: random.Random, min_p: float = 0.0) -> int:
    """The next token id from logits [V]. ``temperature == 0`` is greedy and draws nothing."""
    if temperature == 0.0:
        return int(logits.argmax())
    scaled = logits / temperature if temperature != 1.0 else logits
    probs = scaled.softmax(-1)
    total = 1.0
    if min_p > 0.0:  # keep tokens at least min_p times as likely as the most likely one
        probs = probs.masked_fill(probs < min_p * probs.max(), 0.0)
        total = float(probs.sum())
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


def mirostat_pick(logits: Tensor, temperature: float, state: MirostatState, rng: random.Random) -> int:
    """Mirostat v2 (Basu et al., 2020): drop every token whose surprise ``-log2 p`` exceeds μ
    (the most likely one always stays), sample from the rest renormalised, then move μ by
    ``η · (τ − observed surprise)``, the surprise measured in the renormalised distribution."""
    if temperature == 0.0:
        return int(logits.argmax())
    probs = (logits / temperature if temperature != 1.0 else logits).softmax(-1)
    kept = probs.masked_fill(probs < 2.0 ** (-state.mu), 0.0)
    total = float(kept.sum())
    if total <= 0.0:  # nothing is unsurprising enough: the most likely token alone
        token = int(probs.argmax())
        observed = 0.0
    else:
        token = _draw(kept, rng)
        observed = -math.log2(float(kept[token]) / total)
    state.surprise = observed
    state.mu -= state.lr * (observed - state.target)
    return token


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
        if self._plain:
            return
        self._bias: Tensor | None = None
        if params.logit_bias:
            self._bias = torch.zeros(vocab)
            ids, values = zip(*params.logit_bias, strict=True)
            self._bias[list(ids)] = torch.tensor(values)
        self._end = torch.tensor(sorted(set(end_ids)), dtype=torch.long)
        self._counts: Tensor | None = None
        if params.frequency_penalty or params.presence_penalty:
            self._counts = torch.zeros(vocab)
        self._seen: Tensor | None = None
        if params.repetition_penalty != 1.0:
            self._seen = torch.zeros(vocab, dtype=torch.bool)
            self._seen[list(prompt_ids)] = True
        self.mirostat = MirostatState(params.mirostat.target, params.mirostat.lr) if params.mirostat else None

    def pick(self, logits: Tensor) -> int:
        p = self.params
        if self._plain:
            return pick(logits, p.temperature, p.top_k, p.top_p, self.rng)
        scores = self.process(logits)
        if self.mirostat is not None:
            return mirostat_pick(scores, p.temperature, self.mirostat, self.rng)
        return pick(scores, p.temperature, p.top_k, p.top_p, self.rng, p.min_p)

    def process(self, logits: Tensor) -> Tensor:
        """Steps 1-4 of the module docstring; returns new logits, the input is untouched."""
        p = self.params
        scores = logits if self._bias is None else logits + self._bias
        if p.ignore_eos or self.sampled < p.min_tokens:
            scores = scores.index_fill(0, self._end, -math.inf)
        if self._seen is not None:
            r = p.repetition_penalty
            penalised = torch.where(scores > 0, scores / r, scores * r)
            scores = torch.where(self._seen, penalised, scores)
        if self._counts is not None:
            scores = scores - self._counts * p.frequency_penalty - (self._counts > 0) * p.presence_penalty
        return scores

    def observe(self, token_id: int) -> None:
        """Record a sampled token (the penalties and ``min_tokens`` count it)."""
        self.sampled += 1
        if self._plain:
            return
        if self._counts is not None:
            self._counts[token_id] += 1.0
        if self._seen is not None:
            self._seen[token_id] = True


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
