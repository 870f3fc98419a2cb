"""Embeddings from the reference model: pooled hidden states, a fixed projection, unit length.

For one input of T tokens (run alone, so a vector never depends on its batch):

1. the residual stream after the token embeddings and after the first block,
   ``GPT.states(ids, depth=1)`` → [2, T, C];
2. each layer-normalised (no scale) and averaged over the tokens;
3. the block's average centred on :attr:`Pooler.centre`, the average of that block's output
   over every vocabulary token seen alone: a direction every text shares, which otherwise
   makes unrelated texts look alike (block alone: cosine ~0.7 between unrelated sentences
   uncentred, ~0.45 centred);
4. both halves made unit length and concatenated (2C), so words and context weigh the same;
5. a fixed Gaussian projection 2C → the model's native dimension, seeded per model id;
6. L2-normalised; a ``dimensions`` request keeps the first coordinates, re-normalised.

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
import torch
import torch.nn.functional as F
from torch import Tensor

from mockserver.gpt.model import GPT
from mockserver.media.vectors import Space

__all__ = ["INPUT_COST", "SLICE_COST", "Pooler", "projection", "shortest", "slices"]

_POW10 = 10.0 ** np.arange(23)  # exact doubles
_DEPTH = 1  # blocks whose output is pooled (with the token embeddings)
# A pool task computes inputs worth about this many tokens (~30-60 ms on a small CPU) and then
# lets other requests have the thread; an input costs its tokens plus INPUT_COST.
SLICE_COST = 1024
INPUT_COST = 16


@lru_cache(maxsize=8)
def projection(seed: int, rows: int, columns: int) -> Tensor:
    """A fixed Gaussian [rows, columns] from its own seeded generator (never the global RNG).
    Random projections keep cosines (Johnson–Lindenstrauss): 2C = 256 → 1536 distorts them
    by ~0.03. Cached: built in ~5 ms, used by every request for the model."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(rows, columns, generator=generator)


class Pooler:
    """Token ids → one unit vector in a :class:`~mockserver.media.vectors.Space`."""

    def __init__(self, model: GPT) -> None:
        self.model = model
        self._lock = threading.Lock()
        self._centre: Tensor | None = None

    @property
    def centre(self) -> Tensor:
        """[C]: the layer-normalised output of block 1 for each vocabulary token alone, averaged.
        Computed once (~10 ms), in whichever pool thread needs it first."""
        with self._lock:
            if self._centre is None:
                self._centre = self._average_alone()
            return self._centre

    @torch.inference_mode()
    def _average_alone(self) -> Tensor:
        c = self.model.cfg.n_embd
        x = self.model.embed.unsqueeze(1)  # [V, 1, C]: every token as a one-token text
        rot = self.model.rotary.multipliers(0, 1)
        for block in list(self.model.blocks)[:_DEPTH]:
            x = block(x, rot)
        return F.layer_norm(x[:, 0], (c,)).mean(0)

    @torch.inference_mode()
    def vector(self, ids: list[int], space: Space) -> Tensor:
        """[space.dimensions], unit length."""
        c = self.model.cfg.n_embd
        states = F.layer_norm(self.model.states(ids, depth=_DEPTH), (c,)).mean(1)  # [2, C]
        words, context = states[0], states[1] - self.centre
        feature = torch.cat((F.normalize(words, dim=0), F.normalize(context, dim=0)))  # [2C]
        # A vector times a matrix, one input at a time: the same op whatever the batch.
        native = F.normalize(feature @ projection(space.seed, 2 * c, space.native), dim=0)
        if space.dimensions == space.native:
            return native
        return F.normalize(native[: space.dimensions], dim=0)


def shortest(vectors: Sequence[Tensor]) -> list[list[float]]:
    """float32 vectors as Python floats, each the double nearest to the shortest decimal that
    reads back as the same float32 (``0.0058215605``, not ``0.005821560509502888``), as OpenAI
    writes them: JSON 40% smaller and faster to write, and ``struct.pack("<f")`` (base64) still
    gives back the exact float32."""
    if not vectors:
        return []
    exact = torch.stack(list(vectors)).numpy()
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
