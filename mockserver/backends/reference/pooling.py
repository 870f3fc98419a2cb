"""Embeddings from the reference model: pooled hidden states, a fixed projection, unit length.

For one input of T tokens (run alone, so a vector never depends on its batch):

1. the residual stream after the token embeddings and after the first block,
   ``Decoder.states(ids, depth=1)`` → [2, T, C];
2. each layer-normalised (no scale) and averaged over the tokens;
3. the block's average centred on :attr:`Pooler.centre`, the average of that block's output
   over every vocabulary token seen alone: a direction every text shares, which otherwise
   makes unrelated texts look alike (block alone: cosine ~0.7 between unrelated sentences
   uncentred, ~0.45 centred);
4. both halves made unit length and concatenated (2C), so words and context weigh the same;
5. a fixed random projection 2C → the model's native dimension, seeded per model id;
6. L2-normalised; a ``dimensions`` request keeps the first coordinates, re-normalised.

Every sum is the kernel's (:mod:`mockserver.gpt.kernels`): a vector is the same on every machine.

Why these layers: this model is two blocks deep and trained on a small synthetic corpus, so
what it knows about meaning is mostly which tokens occur. The token embeddings carry that; the
first block adds each token's neighbourhood (word order, phrases). The last block is shaped to
predict the next token and ranks paraphrases worse (8-9 of 10 where the others get 10). On
two sets of (anchor, paraphrase, unrelated) triples of ordinary English (10, the test's, and
12 held out), this pooling ranks the paraphrase nearer in all 22, by ≥ 0.23 in cosine (mean
cosine 0.81 to the paraphrase, 0.40 to the unrelated sentence). The token embeddings alone,
or the first block alone, also rank all 22 but with a worst case of 0.16 or 0.12.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from mockserver.gpt.decoder import Decoder
from mockserver.gpt.kernels import spec
from mockserver.media.vectors import Space

__all__ = ["INPUT_COST", "SLICE_COST", "Pooler", "projection", "shortest", "slices"]

F32s = npt.NDArray[np.float32]
_POW10 = 10.0 ** np.arange(23)  # exact doubles
_DEPTH = 1  # blocks whose output is pooled (with the token embeddings)
_EPS = np.float32(1e-12)  # a zero vector stays zero when normalised
# A pool task computes inputs worth about this many tokens (~30-60 ms on a small CPU) and then
# lets other requests have the thread; an input costs its tokens plus INPUT_COST.
SLICE_COST = 1024
INPUT_COST = 16


@lru_cache(maxsize=8)
def projection(seed: int, rows: int, columns: int) -> F32s:
    """A fixed [rows, columns] matrix of random signs (±1), from the raw 64-bit words of a
    PCG64 generator seeded with ``seed``: the same bits with every NumPy (its distributions
    may change between releases; its raw stream may not), never the global RNG. Random
    projections keep cosines (Johnson–Lindenstrauss; signs do as well as Gaussians):
    2C = 256 → 1536 distorts them by ~0.03. Cached: built in a few ms, used by every request."""
    words = np.random.PCG64(seed).random_raw(-(-rows * columns // 64))
    bits = np.unpackbits(np.asarray(words, dtype="<u8").view(np.uint8))[: rows * columns]
    signs: F32s = (bits.astype(np.float32) * np.float32(2.0) - np.float32(1.0)).reshape(rows, columns)
    return signs


def _normalize(v: F32s, decoder: Decoder) -> F32s:
    """v / max(‖v‖, 1e-12), the norm a lane sum."""
    norm = np.sqrt(np.float32(decoder.kernel.lane_sum(v * v)))
    out: F32s = v / max(norm, _EPS)
    return out


def _mean_rows(x: F32s) -> F32s:
    """The average over axis -2 ([..., T, C] → [..., C]): a lane sum over T, divided by T."""
    mean: F32s = spec.lane_sum(x, axis=-2) / np.float32(x.shape[-2])
    return mean


class Pooler:
    """Token ids → one unit vector in a :class:`~mockserver.media.vectors.Space`."""

    def __init__(self, decoder: Decoder) -> None:
        self.decoder = decoder
        self._lock = threading.Lock()
        self._centre: F32s | None = None

    @property
    def centre(self) -> F32s:
        """[C]: the layer-normalised output of block 1 for each vocabulary token alone, averaged.
        Computed once (~10 ms), in whichever pool thread needs it first."""
        with self._lock:
            if self._centre is None:
                self._centre = self._average_alone()
            return self._centre

    def _average_alone(self) -> F32s:
        every = self.decoder.alone(range(self.decoder.weights.vocab), depth=_DEPTH)  # [2, V, C]
        return _mean_rows(self.decoder.kernel.layer_norm(every[_DEPTH]))

    def vector(self, ids: list[int], space: Space) -> F32s:
        """[space.dimensions], unit length."""
        decoder = self.decoder
        c = decoder.weights.n_embd
        states = _mean_rows(decoder.kernel.layer_norm(decoder.states(ids, depth=_DEPTH)))  # [2, C]
        words, context = states[0], states[1] - self.centre
        feature = np.concatenate((_normalize(words, decoder), _normalize(context, decoder)))  # [2C]
        # A vector times a matrix, one input at a time: the same op whatever the batch.
        native = _normalize(
            decoder.kernel.matmul(feature[None], projection(space.seed, 2 * c, space.native))[0], decoder
        )
        if space.dimensions == space.native:
            return native
        return _normalize(np.ascontiguousarray(native[: space.dimensions]), decoder)


def shortest(vectors: Sequence[F32s]) -> list[list[float]]:
    """float32 vectors as Python floats, each the double nearest to the shortest decimal that
    reads back as the same float32 (``0.0058215605``, not ``0.005821560509502888``), as OpenAI
    writes them: JSON 40% smaller and faster to write, and ``struct.pack("<f")`` (base64) still
    gives back the exact float32."""
    if not vectors:
        return []
    exact = np.stack(list(vectors))
    shown: npt.NDArray[np.float64] = _shortest(exact)
    rows: list[list[float]] = shown.tolist()
    return rows


def _shortest(values: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    """Vectorised: per value, a binary search over d = 1..9 significant digits for the fewest
    that round-trip (9 always do), rounding to d digits as ``integer / 10**p``: one correctly
    rounded division of exact operands (p ≤ 22), so exactly the double that parsing the d-digit
    decimal gives."""
    out = values.astype(np.float64)
    flat, wanted = out.ravel(), values.ravel()
    todo = np.flatnonzero((wanted != 0) & np.isfinite(wanted))
    exact, target = flat[todo], wanted[todo]
    exponent = np.floor(np.log10(np.abs(exact))).astype(np.int64)

    def rounded(digits: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
        places = digits - 1 - exponent  # unit vectors have |x| ≤ 1: places ≥ 0
        scale = _POW10[np.clip(places, 0, 22)]
        shown = np.round(exact * scale) / scale
        return shown, (places >= 0) & (places <= 22) & (shown.astype(np.float32) == target)

    low = np.ones(todo.size, np.int64)  # the fewest digits that work are in [low, high]
    high = np.full(todo.size, 9, np.int64)
    while (low < high).any():
        middle = (low + high) // 2
        _, good = rounded(middle)
        searching = low < high
        high = np.where(searching & good, middle, high)
        low = np.where(searching & ~good, middle + 1, low)
    shown, good = rounded(high)
    flat[todo] = np.where(good, shown, exact)  # |x| < 1e-14: the exact, longer form
    return out


def slices(ids: list[list[int]], budget: int = SLICE_COST) -> list[list[list[int]]]:
    """Consecutive inputs grouped into pool tasks of about ``budget`` cost units (a token is
    one, an input :data:`INPUT_COST` more: the fixed cost of a forward pass), one input at least."""
    groups: list[list[list[int]]] = []
    cost = budget
    for tokens in ids:
        if cost + len(tokens) + INPUT_COST > budget:
            groups.append([])
            cost = 0
        groups[-1].append(tokens)
        cost += len(tokens) + INPUT_COST
    return groups
