"""The reference model: a tiny GPT, whole in one file.

A decoder-only transformer with pre-LayerNorm blocks (scale, no bias), rotary position embeddings and a
*sliding attention window*: every token attends to itself and the ``window - 1`` tokens
before it, never further. Rotary embeddings make attention depend only on the distance
between two tokens, and the window bounds that distance, so a model trained on sequences of
``window`` tokens behaves the same at position 50 and at position 8,000. That is what lets
each served model id declare a context window (8,192 tokens by default) far longer than the
network's own span: the whole prompt counts against the context window, but only its last
``n_layer × (window − 1)`` tokens can still influence the next token (each layer reaches
one window further back).

Inference is incremental: :meth:`GPT.prefill` runs the prompt once (in window-sized chunks,
so a long prompt never builds a quadratic mask) and returns a :class:`KVCache`;
:meth:`GPT.step` then costs one token. Nothing here draws random numbers; sampling lives in
:mod:`mockserver.backends.reference.sampling` with an explicitly seeded generator.

Shapes use B = batch, T = tokens, H = heads, D = head size, C = embedding size, V = vocab.
"""

from __future__ import annotations

import json
import math
import threading
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["GPT", "GPTConfig", "KVCache", "load_model", "save_model"]

# TorchScript's "optimise graphs" switch is per thread, and an optimised graph may fuse ops
# and round differently after its first runs; every thread that runs the traced step turns it
# off first (see GPT._trace_step).
_THREAD = threading.local()


def _plain_graphs_in_this_thread() -> None:
    if not getattr(_THREAD, "plain", False):
        torch._C._set_graph_executor_optimize(False)
        _THREAD.plain = True


@dataclass(frozen=True)
class GPTConfig:
    """Hyper-parameters; saved beside the weights as ``config.json``."""

    vocab_size: int = 2048
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 128
    window: int = 256  # attention span in tokens, the current token included
    rope_base: float = 10000.0

    @property
    def head_size(self) -> int:
        return self.n_embd // self.n_head


class KVCache:
    """Per-layer keys and values of the last ``window - 1`` tokens, plus the next position.

    Keys are stored already rotated, so the cache never needs to know absolute positions
    again. ``fork()`` copies nothing: tensors are replaced, never written in place, so
    several choices can continue from one prefilled prompt.
    """

    __slots__ = ("keys", "position", "values")

    def __init__(self, keys: list[Tensor], values: list[Tensor], position: int) -> None:
        self.keys = keys  # n_layer × [1, H, t, D], t ≤ window - 1
        self.values = values
        self.position = position  # absolute position of the next token

    def fork(self) -> KVCache:
        return KVCache(list(self.keys), list(self.values), self.position)


class _Rotary:
    """Rotary embeddings as complex multipliers, grown on demand (no position limit).

    Pairs of adjacent channels (2i, 2i+1) are one complex number rotated by position × θ_i;
    as a complex multiply this is one op on CPU, where op count dominates a tiny model.
    """

    def __init__(self, head_size: int, base: float) -> None:
        self.inv_freq = 1.0 / (base ** (torch.arange(0, head_size, 2, dtype=torch.float32) / head_size))
        self.table = torch.empty(0, head_size // 2, dtype=torch.complex64)

    def multipliers(self, start: int, length: int) -> Tensor:
        """Complex [T, D/2] rotations for positions start .. start + length - 1."""
        end = start + length
        if end > self.table.size(0):
            size = max(end, 2 * self.table.size(0), 1024)
            angles = torch.outer(torch.arange(size, dtype=torch.float32), self.inv_freq)
            self.table = torch.polar(torch.ones_like(angles), angles)
        return self.table[start:end]


def _rotate(x: Tensor, rot: Tensor) -> Tensor:
    """Rotate x [..., T, D] by rot [T, D/2] (complex)."""
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(pairs * rot).flatten(-2)


def _weight(n_in: int, n_out: int) -> nn.Parameter:
    # [in, out] so that x @ w is a plain mm: F.linear's transposed layout is several times
    # slower for single-row inputs on CPU.
    return nn.Parameter(torch.empty(n_in, n_out))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.norm1 = nn.Parameter(torch.ones(cfg.n_embd))
        self.w_qkv = _weight(cfg.n_embd, 3 * cfg.n_embd)
        self.w_proj = _weight(cfg.n_embd, cfg.n_embd)
        self.norm2 = nn.Parameter(torch.ones(cfg.n_embd))
        self.w_fc = _weight(cfg.n_embd, 4 * cfg.n_embd)
        self.w_out = _weight(4 * cfg.n_embd, cfg.n_embd)

    def _qkv(self, x: Tensor, rot: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        b, t, c = x.shape
        h, d = self.cfg.n_head, self.cfg.head_size
        qkv = (F.layer_norm(x, (c,), self.norm1) @ self.w_qkv).view(b, t, 3, h, d)
        qkv = qkv.permute(2, 0, 3, 1, 4)  # [3, B, H, T, D]
        qk = _rotate(qkv[:2], rot)  # rotate q and k in one go
        return qk[0], qk[1], qkv[2]

    def _finish(self, x: Tensor, att: Tensor) -> Tensor:
        b, _, t, _ = att.shape
        x = x + att.transpose(1, 2).reshape(b, t, self.cfg.n_embd) @ self.w_proj
        hidden = F.gelu(F.layer_norm(x, (self.cfg.n_embd,), self.norm2) @ self.w_fc, approximate="tanh")
        return x + hidden @ self.w_out

    def forward(self, x: Tensor, rot: Tensor) -> Tensor:
        """Training path: x [B, T, C], T ≤ window, plain causal attention."""
        q, k, v = self._qkv(x, rot)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self._finish(x, att)

    def extend(
        self, x: Tensor, rot: Tensor, mask: Tensor | None, past_k: Tensor, past_v: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Prefill path: x [1, T, C] after cached [1, H, past, D]; returns x and new k, v."""
        q, k, v = self._qkv(x, rot)
        keys = torch.cat((past_k, k), dim=2)  # [1, H, past + T, D]
        vals = torch.cat((past_v, v), dim=2)
        att = F.scaled_dot_product_attention(q, keys, vals, attn_mask=mask)
        return self._finish(x, att), keys, vals

    def decode(self, x: Tensor, rot: Tensor, past_k: Tensor, past_v: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """One token: x [1, C], rot [D/2], cache [1, H, t, D]. The same maths as :meth:`extend`
        with fewer, fused ops: at this size each torch call costs more than its arithmetic
        (4-D attention inputs too: the 3-D path of SDPA is twice as slow on CPU)."""
        c, h, d = self.cfg.n_embd, self.cfg.n_head, self.cfg.head_size
        qkv = F.layer_norm(x, (c,), self.norm1) @ self.w_qkv  # [1, 3C]
        pairs = torch.view_as_complex(qkv[0, : 2 * c].view(2 * h, d // 2, 2))
        qk = torch.view_as_real(pairs * rot).view(2, 1, h, 1, d)  # rotated q and k
        keys = torch.cat((past_k, qk[1]), dim=2)  # [1, H, t + 1, D]
        vals = torch.cat((past_v, qkv[0, 2 * c :].view(1, h, 1, d)), dim=2)
        att = F.scaled_dot_product_attention(qk[0], keys, vals)  # [1, H, 1, D]: heads side by side
        x = torch.addmm(x, att.view(1, c), self.w_proj)
        hidden = F.gelu(F.layer_norm(x, (c,), self.norm2) @ self.w_fc, approximate="tanh")
        return torch.addmm(x, hidden, self.w_out), keys, vals


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Parameter(torch.empty(cfg.vocab_size, cfg.n_embd))  # tied with the head
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm = nn.Parameter(torch.ones(cfg.n_embd))
        self.rotary = _Rotary(cfg.head_size, cfg.rope_base)
        self._head: Tensor | None = None  # contiguous embed.T, made once for inference
        self._traced_step: Callable[..., tuple[Tensor, tuple[Tensor, ...]]] | None = None
        nn.init.normal_(self.embed, std=0.02)
        residual_std = 0.02 / math.sqrt(2 * cfg.n_layer)  # GPT-2's scaled residual init
        for block in self.blocks:
            assert isinstance(block, Block)
            nn.init.normal_(block.w_qkv, std=0.02)
            nn.init.normal_(block.w_fc, std=0.02)
            nn.init.normal_(block.w_proj, std=residual_std)
            nn.init.normal_(block.w_out, std=residual_std)

    def logits(self, x: Tensor) -> Tensor:
        """Final norm and the tied output head: [..., C] → [..., V]."""
        x = F.layer_norm(x, (self.cfg.n_embd,), self.norm)
        if self.training or self._head is None:
            return x @ self.embed.t()
        return x @ self._head

    def forward(self, idx: Tensor) -> Tensor:
        """Training: idx [B, T] (T ≤ window) → logits [B, T, V]."""
        t = idx.size(1)
        if t > self.cfg.window:
            raise ValueError(f"training sequences must fit the window ({t} > {self.cfg.window})")
        rot = self.rotary.multipliers(0, t)
        x = self.embed[idx]
        for block in self.blocks:
            x = block(x, rot)
        return self.logits(x)

    def freeze(self, trace: bool = True) -> None:
        """Switch to inference: eval mode, no grads, the head laid out for a plain mm, and
        (``trace``) the single-token step traced by TorchScript (see :meth:`_trace_step`)."""
        self.eval()
        self.requires_grad_(False)
        self._head = self.embed.detach().t().contiguous()  # [C, V]
        self._traced_step = self._trace_step() if trace else None

    def _decode_layers(self, x: Tensor, rot: Tensor, past: tuple[Tensor, ...]) -> tuple[Tensor, tuple[Tensor, ...]]:
        """One token through every block and the head: logits [V] and untrimmed (k, v) per
        layer, flattened as (k0, v0, k1, v1, ...) so that TorchScript can trace it."""
        kv: list[Tensor] = []
        for i, block in enumerate(self.blocks):
            assert isinstance(block, Block)
            x, k, v = block.decode(x, rot, past[2 * i], past[2 * i + 1])
            kv += (k, v)
        return self.logits(x)[0], tuple(kv)

    @torch.inference_mode()
    def _trace_step(self) -> Callable[..., tuple[Tensor, tuple[Tensor, ...]]] | None:
        """:meth:`_decode_layers` traced once into a TorchScript graph.

        Why: at this size a decoding step is ~60 tiny torch calls, and the Python side of
        each call costs as much as its arithmetic; the traced graph runs the very same aten
        ops from C++, in ~55% of the time. Its optimiser (fusion, shape specialisation) is
        switched off (in every thread that runs it), so the graph computes exactly what eager
        mode computes, bit for bit, on every call: tests check it. Returns None if tracing
        fails (the eager path is the same maths).
        """
        _plain_graphs_in_this_thread()
        _, cache = self.prefill([0, 1])
        rot = self.rotary.multipliers(cache.position, 1)[0]
        past = tuple(t for pair in zip(cache.keys, cache.values, strict=True) for t in pair)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # TorchScript's deprecation notice; pinned torch
                traced = torch.jit.trace_module(  # type: ignore[no-untyped-call]
                    _StepModule(self), {"forward": (self.embed[0:1], rot, past)}, check_trace=False
                )
        except Exception:  # pragma: no cover - depends on the torch build
            return None
        step: Callable[..., tuple[Tensor, tuple[Tensor, ...]]] = traced.forward
        return step

    def empty_cache(self) -> KVCache:
        empty = torch.zeros(1, self.cfg.n_head, 0, self.cfg.head_size)
        return KVCache([empty] * self.cfg.n_layer, [empty] * self.cfg.n_layer, 0)

    def _window_mask(self, start: int, past: int, t: int) -> Tensor | None:
        """Boolean mask [T, past + T]: query i sees key j iff 0 ≤ pos(i) − pos(j) < window."""
        if t == 1:
            return None  # the cache already holds exactly the visible keys
        if past == 0 and t <= self.cfg.window:
            return torch.ones(t, t, dtype=torch.bool).tril()  # plain causal
        q_pos = torch.arange(start, start + t).unsqueeze(1)
        k_pos = torch.arange(start - past, start + t).unsqueeze(0)
        dist = q_pos - k_pos
        return (dist >= 0) & (dist < self.cfg.window)

    def extend(self, ids: list[int], cache: KVCache) -> tuple[Tensor, KVCache]:
        """Feed ``ids`` after ``cache``; returns hidden states [T, C] and the new cache."""
        t = len(ids)
        past = cache.keys[0].size(2)
        rot = self.rotary.multipliers(cache.position, t)
        mask = self._window_mask(cache.position, past, t)
        x = self.embed[ids].unsqueeze(0)  # [1, T, C]
        keep = self.cfg.window - 1
        new_keys: list[Tensor] = []
        new_vals: list[Tensor] = []
        for block, pk, pv in zip(self.blocks, cache.keys, cache.values, strict=True):
            assert isinstance(block, Block)
            x, k, v = block.extend(x, rot, mask, pk, pv)
            new_keys.append(k[:, :, -keep:] if k.size(2) > keep else k)
            new_vals.append(v[:, :, -keep:] if v.size(2) > keep else v)
        return x[0], KVCache(new_keys, new_vals, cache.position + t)

    @torch.inference_mode()
    def prefill(self, ids: list[int], all_logits: bool = False) -> tuple[Tensor, KVCache]:
        """Run a prompt in window-sized chunks.

        Returns logits [T, V] for every prompt position when ``all_logits`` (to score the
        prompt), else [1, V] for the last position only, and the cache after the prompt.
        """
        if not ids:
            raise ValueError("prefill needs at least one token")
        cache = self.empty_cache()
        chunk = self.cfg.window
        hidden: list[Tensor] = []
        for start in range(0, len(ids), chunk):
            h, cache = self.extend(ids[start : start + chunk], cache)
            hidden.append(h if all_logits else h[-1:])
        states = torch.cat(hidden) if all_logits else hidden[-1]
        return self.logits(states), cache

    @torch.inference_mode()
    def states(self, ids: list[int], depth: int | None = None) -> Tensor:
        """The residual stream of a prompt run alone: [depth + 1, T, C], row 0 the token
        embeddings and row l the output of block l (no final norm). Only the first ``depth``
        blocks run (all by default). Window-sized chunks, like :meth:`prefill`; embeddings
        pool these (see :mod:`mockserver.backends.reference.pooling`)."""
        blocks = list(self.blocks)[: self.cfg.n_layer if depth is None else depth]
        cache = self.empty_cache()
        keep = self.cfg.window - 1
        rows: list[Tensor] = []
        for start in range(0, len(ids), self.cfg.window):
            chunk = ids[start : start + self.cfg.window]
            t, past = len(chunk), cache.keys[0].size(2)
            rot = self.rotary.multipliers(cache.position, t)
            mask = self._window_mask(cache.position, past, t)
            x = self.embed[chunk].unsqueeze(0)  # [1, T, C]
            layers, keys, vals = [x[0]], [], []
            for block, pk, pv in zip(blocks, cache.keys, cache.values, strict=False):
                assert isinstance(block, Block)
                x, k, v = block.extend(x, rot, mask, pk, pv)
                layers.append(x[0])
                keys.append(k[:, :, -keep:])
                vals.append(v[:, :, -keep:])
            rows.append(torch.stack(layers))  # [depth + 1, T, C]
            cache = KVCache(keys, vals, cache.position + t)
        return torch.cat(rows, dim=1)

    @torch.inference_mode()
    def feed(self, ids: list[int], cache: KVCache) -> tuple[Tensor, KVCache]:
        """Feed a few known tokens after ``cache``: logits [V] for the next token, and the cache."""
        hidden, cache = self.extend(ids, cache)
        return self.logits(hidden[-1:])[0], cache

    @torch.inference_mode()
    def score(self, ids: list[int], cache: KVCache) -> Tensor:
        """Logits [T, V] after each of ``ids`` fed after ``cache`` (teacher forcing: row j
        scores the token that would follow ``ids[j]``). ``cache`` itself is not changed."""
        chunk = self.cfg.window
        rows: list[Tensor] = []
        for start in range(0, len(ids), chunk):
            hidden, cache = self.extend(ids[start : start + chunk], cache)
            rows.append(hidden)
        return self.logits(torch.cat(rows))

    @torch.inference_mode()
    def step(self, token: int, cache: KVCache, eager: bool = False) -> tuple[Tensor, KVCache]:
        """One decoding step: logits [V] for the token after ``token``, and the new cache.
        ``eager`` skips the traced graph (tests compare the two)."""
        rot = self.rotary.multipliers(cache.position, 1)[0]
        x = self.embed[token : token + 1]  # [1, C], a view
        past = tuple(t for pair in zip(cache.keys, cache.values, strict=True) for t in pair)
        if eager or self._traced_step is None:
            logits, kv = self._decode_layers(x, rot, past)
        else:
            _plain_graphs_in_this_thread()
            logits, kv = self._traced_step(x, rot, past)
        keep = self.cfg.window - 1  # the window slides: drop the key that fell out of it
        kv = tuple(t[:, :, -keep:] if t.size(2) > keep else t for t in kv)
        return logits, KVCache(list(kv[0::2]), list(kv[1::2]), cache.position + 1)


class _StepModule(nn.Module):
    """A module whose forward is :meth:`GPT._decode_layers`, because TorchScript traces
    modules; it shares (not copies) the model's weights."""

    def __init__(self, model: GPT) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Tensor, rot: Tensor, past: tuple[Tensor, ...]) -> tuple[Tensor, tuple[Tensor, ...]]:
        return self.model._decode_layers(x, rot, past)


def save_model(model: GPT, directory: Path) -> None:
    """Write ``model.safetensors`` and ``config.json`` into ``directory``."""
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(directory / "model.safetensors"))
    (directory / "model.safetensors").chmod(0o644)  # safetensors writes 0600; the package ships it
    (directory / "config.json").write_text(json.dumps(asdict(model.cfg), indent=2) + "\n")


def load_model(directory: Path) -> GPT:
    """Load the shipped weights (safetensors, never pickle) in eval mode."""
    from safetensors.torch import load_file

    cfg = GPTConfig(**json.loads((directory / "config.json").read_text()))
    model = GPT(cfg)
    model.load_state_dict(load_file(str(directory / "model.safetensors")))
    model.freeze()
    return model
