"""What both implementations of the model's arithmetic read and write: weights, key cache, rows.

Plain float32 and int64 NumPy arrays, C-contiguous, so the C kernel reads the very memory the
NumPy one does (and torch's tensors share it: no copy of the weights is made).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["Cache", "Rows", "Weights"]

F32s = npt.NDArray[np.float32]
I64s = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Weights:
    """The model's parameters for inference. ``layers`` holds, per block, (norm1 [C], qkv [C, 3C],
    proj [C, C], norm2 [C], fc [C, 4C], out [4C, C]); ``head`` is ``embed`` transposed [C, V]."""

    embed: F32s  # [V, C]
    head: F32s  # [C, V]
    norm: F32s  # [C]
    layers: tuple[tuple[F32s, F32s, F32s, F32s, F32s, F32s], ...]
    n_head: int
    window: int

    @property
    def n_embd(self) -> int:
        return int(self.embed.shape[1])

    @property
    def vocab(self) -> int:
        return int(self.embed.shape[0])

    @property
    def head_size(self) -> int:
        return self.n_embd // self.n_head


@dataclass(frozen=True)
class Cache:
    """Keys and values of many sequences, one *slot* each: keys [layers, S, H, D, L] (a slot's
    keys transposed, so that one row's scores are a run over L), values [layers, S, H, L, D]."""

    keys: F32s
    values: F32s

    @staticmethod
    def empty(weights: Weights, slots: int, capacity: int) -> Cache:
        n_layer, h, d = len(weights.layers), weights.n_head, weights.head_size
        return Cache(
            np.zeros((n_layer, slots, h, d, capacity), np.float32),
            np.zeros((n_layer, slots, h, capacity, d), np.float32),
        )

    @property
    def slots(self) -> int:
        return int(self.keys.shape[1])

    @property
    def capacity(self) -> int:
        return int(self.keys.shape[-1])


@dataclass(frozen=True)
class Rows:
    """Tokens to run, one row each. Row r reads token ``tokens[r]``, writes its key and value
    at index ``at[r]`` of slot ``slots[r]``, and attends to that slot's keys ``first[r]`` to
    ``at[r]`` inclusive (rows of one slot in one call must come in increasing ``at``: each sees
    the keys written by the rows before it). ``rot`` [R, D/2, 2] is each row's rotation
    (cos, sin) for its position; ``logits`` lists the rows whose next-token logits are wanted."""

    tokens: I64s
    slots: I64s
    at: I64s
    first: I64s
    rot: F32s
    logits: I64s

    def __len__(self) -> int:
        return int(self.tokens.shape[0])
