"""Inference: the model's tokens through a :class:`~mockserver.gpt.kernels.Kernel`, over slots.

Every way the server runs the model is one call shape, :meth:`Decoder.run`: some *rows*, each a
token of some sequence, through the whole network at once. A prompt is its tokens as rows of
one sequence; a decoding step is one row per sequence, for every sequence that advances, alone
or batched with any others. The kernel computes each row with the same operations in the same
order whatever the other rows are, so which rows share a call never changes a number: a
request decodes to the same bytes alone, beside 63 others, or after a prompt prefilled in
pieces.

A sequence's keys and values live in a *slot* of a :class:`Slots` (one buffer per layer, one
slot per sequence): its visible keys sit in order at ``[start, end)`` of its slot, the window's
last ``window - 1`` tokens at most. Rows write their keys at ``end`` and attend to the keys
before them in the window, so a slot needs room for ``window - 1 + SPARE`` keys: when it is
full its last keys move to the front (a copy once every SPARE tokens).

Shapes: T = tokens, C = embedding size, V = vocabulary.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from mockserver.gpt.checkpoint import GPTConfig, load_weights, weights_from
from mockserver.gpt.kernels import Cache, Kernel, Rows, Weights, rotary

if TYPE_CHECKING:
    from mockserver.gpt.model import GPT

__all__ = ["SPARE", "Decoder", "Slots", "weights_of"]

Array = npt.NDArray[np.float32]
SPARE = 64  # room past the window in a slot; also the most rows of one sequence in one call


def weights_of(model: GPT) -> Weights:
    """A live torch module's parameters as the kernels' float32 arrays, sharing the tensors'
    memory (no copy): training's closing check and the tests read a module this way. Serving
    reads the saved files instead (:func:`mockserver.gpt.checkpoint.load_weights`), without torch."""
    tensors = {name: t.detach().contiguous().numpy() for name, t in model.state_dict().items()}
    return weights_from(model.cfg, tensors)


class Slots:
    """The keys and values of many sequences, a slot each (see the module docstring). Slots are
    handed out lowest first; the buffers double when every slot is taken. A slot holds at most
    ``window - 1 + SPARE`` keys; the buffers start at ``capacity`` keys a slot (less for a short
    prompt: a new buffer costs its pages) and grow to that when a sequence needs it. One
    thread at a time."""

    def __init__(self, weights: Weights, slots: int = 1, capacity: int | None = None) -> None:
        self.weights = weights
        self.keep = weights.window - 1  # keys a sequence still needs between calls
        self.room = self.keep + SPARE  # the most a slot ever holds
        self.cache = Cache.empty(weights, slots, min(self.room, capacity or self.room))
        self.start = [0] * slots
        self.end = [0] * slots
        self.position = [0] * slots  # absolute position of the slot's next token
        self._free = list(range(slots - 1, -1, -1))  # a stack: the lowest slot on top

    @property
    def slots(self) -> int:
        return self.cache.slots

    def in_use(self) -> int:
        return self.slots - len(self._free)

    def take(self) -> int:
        """A free slot, emptied (the buffers grow when none is left)."""
        if not self._free:
            self._grow()
        slot = self._free.pop()
        self.start[slot] = self.end[slot] = self.position[slot] = 0
        return slot

    def free(self, slot: int) -> None:
        self._free.append(slot)
        self._free.sort(reverse=True)  # lowest on top: live slots stay packed at the front

    def _grow(self) -> None:
        old = self.slots
        self._resize(2 * old, self.cache.capacity)
        self.start += [0] * old
        self.end += [0] * old
        self.position += [0] * old
        self._free = list(range(2 * old - 1, old - 1, -1)) + self._free

    def _resize(self, slots: int, capacity: int) -> None:
        """New buffers of ``slots`` × ``capacity``, the keys copied over where they are."""
        cache = Cache.empty(self.weights, slots, capacity)
        s, c = self.cache.slots, min(capacity, self.cache.capacity)
        cache.keys[:, :s, :, :, :c] = self.cache.keys[..., :c]
        cache.values[:, :s, :, :c] = self.cache.values[:, :, :, :c]
        self.cache = cache

    def copy(self, source: Slots, slot: int, into: int | None = None) -> int:
        """Copy ``source``'s ``slot`` into one of these slots (a new one unless ``into``)."""
        into = self.take() if into is None else into
        a, b = source.start[slot], source.end[slot]
        if b - a > self.cache.capacity:  # never more than ``keep`` keys: within the room
            self._resize(self.slots, min(self.room, max(b - a, 2 * self.cache.capacity)))
        self.cache.keys[:, into, :, :, : b - a] = source.cache.keys[:, slot, :, :, a:b]
        self.cache.values[:, into, :, : b - a] = source.cache.values[:, slot, :, a:b]
        self.start[into], self.end[into], self.position[into] = 0, b - a, source.position[slot]
        return into

    def make_room(self, slot: int, rows: int) -> None:
        """Before ``rows`` keys are written at the slot's end: grow the buffers if they may, or
        move the slot's keys to the front, if they would not fit."""
        need = self.end[slot] + rows
        if need <= self.cache.capacity:
            return
        if self.cache.capacity < self.room:
            self._resize(self.slots, min(self.room, max(need, 2 * self.cache.capacity)))
            if need <= self.cache.capacity:
                return
        a, b = self.start[slot], self.end[slot]
        keys, values = self.cache.keys, self.cache.values
        keys[:, slot, :, :, : b - a] = keys[:, slot, :, :, a:b].copy()  # the ranges may overlap
        values[:, slot, :, : b - a] = values[:, slot, :, a:b].copy()
        self.start[slot], self.end[slot] = 0, b - a


class Decoder:
    """The model for inference: its weights, the kernel that computes, the rotary table."""

    def __init__(
        self, weights: Weights, kernel: Kernel, head_size: int, rope_base: float, positions: int = 1024
    ) -> None:
        self.weights = weights
        self.kernel = kernel
        self.window = weights.window
        self._rope = (head_size, rope_base)
        self._lock = threading.Lock()
        self._table = rotary.table(positions, head_size, rope_base)

    @classmethod
    def of(cls, model: GPT, kernel: Kernel) -> Decoder:
        """A live torch module computed by ``kernel`` (training, tests)."""
        return cls.from_weights(model.cfg, weights_of(model), kernel)

    @classmethod
    def from_weights(cls, cfg: GPTConfig, weights: Weights, kernel: Kernel) -> Decoder:
        return cls(weights, kernel, cfg.head_size, cfg.rope_base)

    @classmethod
    def read(cls, directory: Path, kernel: Kernel) -> Decoder:
        """The model saved in ``directory`` computed by ``kernel``: NumPy reads it, no torch."""
        return cls.from_weights(*load_weights(directory), kernel)

    def reach(self, positions: int) -> None:
        """Make the rotary table cover ``positions`` (grown ahead of time: threads only read it)."""
        with self._lock:
            if positions > self._table.shape[0]:
                self._table = rotary.table(max(positions, 2 * self._table.shape[0]), *self._rope)

    def slots(self, count: int = 1, capacity: int | None = None) -> Slots:
        """``count`` empty slots (of ``capacity`` keys to begin with: they grow as needed)."""
        return Slots(self.weights, count, capacity)

    # ---- the one call -----------------------------------------------------------------------

    def run(
        self,
        slots: Slots,
        rows: Sequence[tuple[int, int]],
        logits: Sequence[int] | None = None,
        depth: int | None = None,
        states: bool = False,
    ) -> tuple[Array, Array | None]:
        """Rows ``(slot, token)`` in order, each appended to its slot's sequence (at most
        :data:`SPARE` per slot); logits for the rows listed in ``logits`` (all by default)."""
        count: dict[int, int] = {}
        for slot, _ in rows:
            count[slot] = count.get(slot, 0) + 1
        for slot, n in count.items():
            slots.make_room(slot, n)
        at, first, positions = [], [], []
        for slot, _ in rows:
            e = slots.end[slot]
            at.append(e)
            first.append(max(slots.start[slot], e - self.window + 1))
            positions.append(slots.position[slot])
            slots.end[slot] = e + 1
            slots.position[slot] += 1
        for slot in count:
            slots.start[slot] = max(slots.start[slot], slots.end[slot] - slots.keep)
        table = self._table
        if positions and max(positions) >= table.shape[0]:
            self.reach(max(positions) + 1)
            table = self._table
        wanted = range(len(rows)) if logits is None else logits
        batch = Rows(
            tokens=np.array([t for _, t in rows], np.int64),
            slots=np.array([s for s, _ in rows], np.int64),
            at=np.array(at, np.int64),
            first=np.array(first, np.int64),
            rot=table[positions],
            logits=np.array(wanted, np.int64),
        )
        return self.kernel.forward(self.weights, slots.cache, batch, depth, states)

    # ---- what the server asks of it ---------------------------------------------------------

    def extend(self, slots: Slots, slot: int, ids: Sequence[int], all_logits: bool = False) -> Array:
        """Feed ``ids`` after the slot's sequence, SPARE at a time: logits [T, V] after each
        token with ``all_logits``, else [1, V] after the last."""
        if not ids:
            raise ValueError("nothing to feed")
        parts = []
        for start in range(0, len(ids), SPARE):
            chunk = ids[start : start + SPARE]
            last = start + len(chunk) == len(ids)
            wanted = None if all_logits else ([len(chunk) - 1] if last else [])
            logits, _ = self.run(slots, [(slot, t) for t in chunk], wanted)
            parts.append(logits)
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def prefill(self, ids: Sequence[int], all_logits: bool = False) -> tuple[Array, Slots]:
        """A prompt into a new one-slot :class:`Slots` (slot 0): its logits (as :meth:`extend`)."""
        if not ids:
            raise ValueError("prefill needs at least one token")
        slots = self.slots(1, capacity=len(ids) + 16)
        return self.extend(slots, slots.take(), ids, all_logits), slots

    def step(self, slots: Slots, pairs: Sequence[tuple[int, int]]) -> Array:
        """One token for each of several slots ``(slot, token)``: logits [B, V]."""
        logits, _ = self.run(slots, pairs)
        return logits

    def score(self, slots: Slots, slot: int, ids: Sequence[int]) -> Array:
        """Logits [T, V] after each of ``ids`` fed after the slot (teacher forcing: row j scores
        the token after ``ids[j]``); the slot itself is left as it was."""
        scratch = self.slots(1, capacity=slots.end[slot] - slots.start[slot] + len(ids))
        return self.extend(scratch, scratch.copy(slots, slot), ids, all_logits=True)

    def states(self, ids: Sequence[int], depth: int | None = None) -> Array:
        """The residual stream of a text run alone: [depth + 1, T, C] (row 0 the token
        embeddings, row l the output of block l; only ``depth`` blocks run, all by default)."""
        slots = self.slots(1, capacity=len(ids))
        slot = slots.take()
        parts = []
        for start in range(0, len(ids), SPARE):
            chunk = ids[start : start + SPARE]
            _, kept = self.run(slots, [(slot, t) for t in chunk], [], depth=depth, states=True)
            assert kept is not None
            parts.append(kept)
        return np.concatenate(parts, axis=1)

    def alone(self, ids: Sequence[int], depth: int) -> Array:
        """Each token as a one-token text, all at once: the residual stream [depth + 1, T, C]."""
        slots = Slots(self.weights, len(ids), capacity=1)
        rows = [(slots.take(), t) for t in ids]
        _, kept = self.run(slots, rows, [], depth=depth, states=True)
        assert kept is not None
        return kept
