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

This module defines the network and trains it (:mod:`training.train`; torch is in the ``train``
and ``test`` extras, not in the plain install). Serving neither runs nor imports it:
:mod:`mockserver.gpt.checkpoint` reads the files :func:`save_model` writes with NumPy, and
:mod:`mockserver.gpt.decoder` computes the same network with them, through a kernel whose every
float operation is defined (:mod:`mockserver.gpt.kernels`), so that an answer is the same on
every machine and in every batch. The two agree to ~1e-5 in the logits (tests hold them to
it). Nothing here draws random numbers.

Shapes use B = batch, T = tokens, H = heads, D = head size, C = embedding size, V = vocab.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mockserver.gpt.checkpoint import GPTConfig, read_config

__all__ = ["GPT", "GPTConfig", "load_model", "save_model"]


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
    # [in, out]: x @ w, the layout the inference kernel reads (a weight row per input).
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


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Parameter(torch.empty(cfg.vocab_size, cfg.n_embd))  # tied with the head
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm = nn.Parameter(torch.ones(cfg.n_embd))
        self.rotary = _Rotary(cfg.head_size, cfg.rope_base)
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
        return F.layer_norm(x, (self.cfg.n_embd,), self.norm) @ self.embed.t()

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

    def freeze(self) -> None:
        """Eval mode, no gradients: the weights as inference reads them."""
        self.eval()
        self.requires_grad_(False)


def save_model(model: GPT, directory: Path) -> None:
    """Write ``model.safetensors`` and ``config.json`` into ``directory``."""
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(directory / "model.safetensors"))
    (directory / "model.safetensors").chmod(0o644)  # safetensors writes 0600; the package ships it
    (directory / "config.json").write_text(json.dumps(asdict(model.cfg), indent=2) + "\n")


def load_model(directory: Path) -> GPT:
    """Load saved weights (safetensors, never pickle) into the torch module, in eval mode: for
    training and the tests that hold the kernels to this definition (serving reads them with
    :func:`mockserver.gpt.checkpoint.load_weights`, without torch)."""
    from safetensors.torch import load_file

    model = GPT(read_config(directory))
    model.load_state_dict(load_file(str(directory / "model.safetensors")))
    model.freeze()
    return model
