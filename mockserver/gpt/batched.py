"""Many sequences, one decoding step: the batched path of :meth:`GPT.step`, bit for bit.

Continuous batching (see :mod:`mockserver.backends.reference.scheduler`) advances every live
sequence together. A plain batched matrix product ``X[B, in] @ W`` would be cheaper, but on
this CPU it rounds differently from the single-row product once B ≥ 4 (MKL switches from a
per-row kernel to a blocked gemm), so an answer would depend on what else runs beside it. The
step here is built only from operations whose every row is computed by exactly the code that
computes it alone (``tests/unit/gpt/test_batch_invariance.py`` proves each one, B = 1…64):

* matrix products as *per-row* batched products, ``torch.bmm([B, 1, in] @ [B, in, out])``
  against the weight expanded (stride 0, no copy), and ``baddbmm`` where the single-row
  step fuses the residual add into ``addmm``: MKL runs one single-row product per batch
  entry, the very kernel ``[1, in] @ [in, out]`` runs;
* layer norms over the last dimension, GELU and the rotary complex multiply: row-wise or
  element-wise kernels whose rows are independent;
* attention per row, ``scaled_dot_product_attention`` of the row's query over a view of its
  own keys (its own length, no padding: padding with a mask changes the softmax's summation
  order, by up to 2e-7 in a test).

A batch of one needs none of this: it runs the single-row step's own ops over its slot,
compiled by TorchScript (:func:`_one_row`), so a lone request costs what it did before
batching.

Keys and values live in :class:`SlotCache`: one buffer per layer, one *slot* (row) per
sequence, each slot holding that sequence's visible keys contiguously and in order, so the
view attention reads is exactly the tensor the single-row step builds by concatenation.

Shapes use B = rows in the step, S = slots, H = heads, L = slot capacity, D = head size,
C = embedding size, V = vocabulary.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor

from mockserver.gpt.model import Block, KVCache, _plain_graphs_in_this_thread

if TYPE_CHECKING:
    from mockserver.gpt.model import GPT

__all__ = ["SlotCache", "step_rows"]

# Room past the window in each slot: a slot whose keys reach its end moves its last
# ``window - 1`` keys to the front, once every SPARE steps (a copy of ~130 kB per layer).
SPARE = 64


class SlotCache:
    """The keys and values of many sequences: per layer, a buffer [S, H, L, D].

    A sequence owns one slot; its visible keys are ``[start, end)`` of that slot, in order
    (L = window - 1 + SPARE). Slots are handed out lowest first and the buffers grow (by
    doubling) when every slot is taken. Only the scheduler's thread touches it.
    """

    def __init__(self, model: GPT, slots: int = 8) -> None:
        cfg = model.cfg
        self.model = model
        self.keep = cfg.window - 1  # keys kept between steps, as KVCache keeps them
        self.capacity = self.keep + SPARE
        self._shape = (cfg.n_head, self.capacity, cfg.head_size)
        self.keys = [torch.zeros(slots, *self._shape) for _ in range(cfg.n_layer)]
        self.values = [torch.zeros(slots, *self._shape) for _ in range(cfg.n_layer)]
        self.start = [0] * slots
        self.end = [0] * slots
        self.position = [0] * slots  # absolute position of the slot's next token
        self._free = list(range(slots - 1, -1, -1))  # a stack: the lowest slot on top
        self._expanded: dict[int, list[Tensor]] = {}
        # Every weight in the order :func:`_one_row` reads them.
        self.flat: list[Tensor] = []
        for block in model.blocks:
            assert isinstance(block, Block)
            self.flat += [block.norm1, block.w_qkv, block.w_proj, block.norm2, block.w_fc, block.w_out]
        self.flat += [model.norm, model._head if model._head is not None else model.embed.t()]

    @property
    def slots(self) -> int:
        return self.keys[0].size(0)

    def expanded(self, b: int) -> list[Tensor]:
        """The weights in :func:`_many_rows`'s order, the matrices expanded to [B, in, out]
        (views, stride 0: no copy); made once per batch size."""
        made = self._expanded.get(b)
        if made is None:
            made = [w.expand(b, *w.shape) if w.dim() == 2 else w for w in self.flat]
            self._expanded[b] = made
        return made

    def in_use(self) -> int:
        return self.slots - len(self._free)

    def _grow(self) -> None:
        old = self.slots
        self.keys = [torch.cat((k, torch.zeros_like(k))) for k in self.keys]
        self.values = [torch.cat((v, torch.zeros_like(v))) for v in self.values]
        self.start += [0] * old
        self.end += [0] * old
        self.position += [0] * old
        self._free = list(range(2 * old - 1, old - 1, -1)) + self._free

    def load(self, cache: KVCache, slot: int | None = None) -> int:
        """Copy ``cache`` into a slot (a new one unless given); returns the slot."""
        if slot is None:
            if not self._free:
                self._grow()
            slot = self._free.pop()
        t = cache.keys[0].size(2)  # ≤ window - 1: KVCache trims as it goes
        for layer, (k, v) in enumerate(zip(cache.keys, cache.values, strict=True)):
            self.keys[layer][slot, :, :t] = k[0]
            self.values[layer][slot, :, :t] = v[0]
        self.start[slot], self.end[slot], self.position[slot] = 0, t, cache.position
        return slot

    def export(self, slot: int) -> KVCache:
        """The slot as a :class:`KVCache` (copies), e.g. to feed a few tokens the single-row way."""
        a, b = self.start[slot], self.end[slot]
        keys = [k[slot : slot + 1, :, a:b].clone() for k in self.keys]
        values = [v[slot : slot + 1, :, a:b].clone() for v in self.values]
        return KVCache(keys, values, self.position[slot])

    def free(self, slot: int) -> None:
        self._free.append(slot)
        self._free.sort(reverse=True)  # lowest on top: live slots stay packed at the front

    def _make_room(self, slot: int) -> None:
        """Before a write at the slot's end: if it is full, move its last keys to the front."""
        if self.end[slot] < self.capacity:
            return
        a, b = self.end[slot] - self.keep, self.end[slot]
        for buffer in (*self.keys, *self.values):
            buffer[slot, :, : self.keep] = buffer[slot, :, a:b].clone()  # overlapping ranges
        self.start[slot], self.end[slot] = 0, self.keep


def _groups(
    slots: list[int], spans: list[tuple[int, int]]
) -> tuple[list[int], list[int], list[Tensor], list[int], list[int]]:
    """Runs of rows (sorted by span) that attend over the same span: where each run starts
    (and the end), its first slot, the slots to gather (empty: neighbouring slots, a view),
    and the span ``[a, e)``."""
    first: list[int] = []
    slot0: list[int] = []
    gathered: list[Tensor] = []
    starts: list[int] = []
    ends: list[int] = []
    i, b = 0, len(slots)
    while i < b:
        j = i + 1
        while j < b and spans[j] == spans[i]:
            j += 1
        s = slots[i]
        neighbours = j - i == 1 or slots[i:j] == list(range(s, s + j - i))
        first.append(i)
        slot0.append(s)
        gathered.append(_NONE if neighbours else torch.tensor(slots[i:j]))
        starts.append(spans[i][0])
        ends.append(spans[i][1])
        i = j
    first.append(b)
    return first, slot0, gathered, starts, ends


_NONE = torch.empty(0, dtype=torch.long)


def _attend_groups(
    q: Tensor,
    keys: Tensor,
    values: Tensor,
    first: list[int],
    slot0: list[int],
    gathered: list[Tensor],
    starts: list[int],
    ends: list[int],
) -> Tensor:
    """Attention of each row over its own keys: q [B, H, 1, D] → [B, H, 1, D], one call per
    run of :func:`_groups` (the kernel computes each (row, head) alone, exactly as for one
    row: the same length means the same summation order)."""
    parts: list[Tensor] = []
    for g in range(len(slot0)):
        i, j, a, e = first[g], first[g + 1], starts[g], ends[g]
        if gathered[g].numel() == 0:  # neighbouring slots: a view
            s = slot0[g]
            k, v = keys[s : s + j - i, :, a:e], values[s : s + j - i, :, a:e]
        else:  # a copy of just these keys
            k, v = keys[gathered[g], :, a:e], values[gathered[g], :, a:e]
        parts.append(F.scaled_dot_product_attention(q[i:j], k, v))
    return torch.cat(parts)


def _attend(q: Tensor, keys: Tensor, values: Tensor, slots: list[int], spans: list[tuple[int, int]]) -> Tensor:
    """:func:`_attend_groups` for rows sorted by span (what the tests call)."""
    return _attend_groups(q, keys, values, *_groups(slots, spans))


def _many_rows(
    x: Tensor,
    rot: Tensor,
    weights: list[Tensor],
    keys: list[Tensor],
    values: list[Tensor],
    rows: Tensor,
    at: Tensor,
    first: list[int],
    slot0: list[int],
    gathered: list[Tensor],
    starts: list[int],
    ends: list[int],
) -> Tensor:
    """B rows: :meth:`Block.decode` op for op with ``bmm`` for ``mm`` and ``baddbmm`` for
    ``addmm`` against expanded weights (``weights``: per layer norm1, qkv, proj, norm2, fc,
    out, then the final norm and the head). x [B, 1, C], rot [B, 1, D/2] → logits [B, V];
    each row's new key is written at ``(rows, at)`` first. Compiled by TorchScript
    (:func:`_compiled`): besides the per-op cost, the interpreter holds the GIL far less than
    Python would, and the event loop shares the process."""
    b, c = x.size(0), x.size(2)
    h, d = keys[0].size(1), keys[0].size(3)
    for layer in range(len(keys)):
        norm1, w_qkv, w_proj, norm2, w_fc, w_out = weights[6 * layer : 6 * layer + 6]
        qkv = torch.bmm(F.layer_norm(x, [c], norm1), w_qkv)  # [B, 1, 3C]
        pairs = torch.view_as_complex(qkv[:, 0, : 2 * c].reshape(b, 2 * h, d // 2, 2))
        qk = torch.view_as_real(pairs * rot).view(b, 2, h, d)  # rotated q and k
        k, v = keys[layer], values[layer]
        k[rows, :, at] = qk[:, 1]
        v[rows, :, at] = qkv[:, 0, 2 * c :].view(b, h, d)
        att = _attend_groups(qk[:, 0].unsqueeze(2), k, v, first, slot0, gathered, starts, ends)  # [B, H, 1, D]
        x = torch.baddbmm(x, att.view(b, 1, c), w_proj)
        hidden = F.gelu(torch.bmm(F.layer_norm(x, [c], norm2), w_fc), approximate="tanh")
        x = torch.baddbmm(x, hidden, w_out)
    return torch.bmm(F.layer_norm(x, [c], weights[-2]), weights[-1]).view(b, -1)


def _one_row(
    x: Tensor, rot: Tensor, weights: list[Tensor], keys: list[Tensor], values: list[Tensor], slot: int, a: int, e: int
) -> Tensor:
    """A batch of one: :meth:`Block.decode` op for op (``mm``/``addmm``, no batching at all),
    except that the new key is written into the slot and attention reads the slot's keys
    ``[a, e]`` in place, where the single-row step concatenates them (the same numbers in the
    same order; proven equal). x [1, C], rot [D/2] → logits [1, V]. Compiled by TorchScript
    (:func:`_compiled`): a lone request pays no Python per op, as the traced step does not."""
    c = x.size(1)
    h = keys[0].size(1)
    d = keys[0].size(3)
    for layer in range(len(keys)):
        norm1, w_qkv, w_proj, norm2, w_fc, w_out = weights[6 * layer : 6 * layer + 6]
        qkv = F.layer_norm(x, [c], norm1) @ w_qkv  # [1, 3C]
        pairs = torch.view_as_complex(qkv[0, : 2 * c].view(2 * h, d // 2, 2))
        qk = torch.view_as_real(pairs * rot).view(2, 1, h, 1, d)  # rotated q and k
        k, v = keys[layer], values[layer]
        k[slot, :, e] = qk[1].view(h, d)
        v[slot, :, e] = qkv[0, 2 * c :].view(h, d)
        att = F.scaled_dot_product_attention(qk[0], k[slot : slot + 1, :, a : e + 1], v[slot : slot + 1, :, a : e + 1])
        x = torch.addmm(x, att.view(1, c), w_proj)
        hidden = F.gelu(F.layer_norm(x, [c], norm2) @ w_fc, approximate="tanh")
        x = torch.addmm(x, hidden, w_out)
    return F.layer_norm(x, [c], weights[-2]) @ weights[-1]


@functools.cache
def _compiled(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """``fn`` compiled by TorchScript once (in whichever thread first needs it), or ``fn``
    itself if this torch cannot script it (the same ops, only slower)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled: Callable[..., Tensor] = torch.jit.script(fn)
    except Exception:  # pragma: no cover - depends on the torch build
        return fn
    return compiled


def _alone(model: GPT, cache: SlotCache, slot: int, token: int) -> Tensor:
    _plain_graphs_in_this_thread()  # an optimising graph executor could fuse, and round differently
    a, e = cache.start[slot], cache.end[slot]
    rot = model.rotary.table[cache.position[slot]]
    return _compiled(_one_row)(model.embed[token : token + 1], rot, cache.flat, cache.keys, cache.values, slot, a, e)


@torch.inference_mode()
def step_rows(model: GPT, cache: SlotCache, slots: list[int], tokens: list[int]) -> Tensor:
    """One decoding step for each ``(slot, token)``: logits [B, V], row i bit-identical to
    ``model.step(tokens[i], <slot i as a KVCache>)[0]``; each slot gains the token's keys."""
    b = len(slots)
    for slot in slots:
        cache._make_room(slot)
    # Rows sorted by the span of keys they attend over, so that equal spans sit side by side.
    order = sorted(range(b), key=lambda i: (cache.start[slots[i]], cache.end[slots[i]], slots[i]))
    ranked = [slots[i] for i in order]
    ends = [cache.end[s] for s in ranked]  # where each row's new key is written
    if b == 1:
        logits = _alone(model, cache, slots[0], tokens[0])
    else:
        spans = [(cache.start[s], e + 1) for s, e in zip(ranked, ends, strict=True)]
        at, rows = torch.tensor(ends), torch.tensor(ranked)
        rot = model.rotary.table[torch.tensor([cache.position[s] for s in ranked])].unsqueeze(1)  # [B, 1, D/2]
        x = model.embed[[tokens[i] for i in order]].unsqueeze(1)  # [B, 1, C]
        _plain_graphs_in_this_thread()
        logits = _compiled(_many_rows)(
            x, rot, cache.expanded(b), cache.keys, cache.values, rows, at, *_groups(ranked, spans)
        )
        if order != list(range(b)):  # back to the caller's order
            logits = logits[torch.tensor(sorted(range(b), key=order.__getitem__))]
    for slot, end in zip(ranked, ends, strict=True):
        cache.start[slot], cache.end[slot] = max(cache.start[slot], end + 1 - cache.keep), end + 1
        cache.position[slot] += 1
    return logits
