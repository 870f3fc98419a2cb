"""The model's files, read without torch: ``config.json`` and ``model.safetensors``.

Serving reads the weights here, with safetensors' NumPy loader (never pickle, never torch), into
the :class:`~mockserver.gpt.kernels.Weights` the kernels compute with. Training writes the same
files from the torch module (:func:`mockserver.gpt.model.save_model`): the tensors carry the
module's parameter names (``embed``, ``norm``, ``blocks.{i}.w_qkv``, …), and :func:`weights_from`
is the one place those names become the kernels' layout, for the files and for a live torch
module alike (:func:`mockserver.gpt.decoder.weights_of`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mockserver.gpt.kernels.layout import Weights

__all__ = ["BLOCK_PARAMETERS", "CheckpointError", "GPTConfig", "load_weights", "read_config", "weights_from"]

Array = npt.NDArray[np.float32]
BLOCK_PARAMETERS = ("norm1", "w_qkv", "w_proj", "norm2", "w_fc", "w_out")  # the kernels' order of a layer


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

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Every parameter's name and shape, as the torch module names them."""
        c, v = self.n_embd, self.vocab_size
        layer = {"norm1": (c,), "w_qkv": (c, 3 * c), "w_proj": (c, c), "norm2": (c,), "w_fc": (c, 4 * c)}
        layer["w_out"] = (4 * c, c)
        shapes: dict[str, tuple[int, ...]] = {"embed": (v, c), "norm": (c,)}
        for i in range(self.n_layer):
            shapes.update({f"blocks.{i}.{name}": shape for name, shape in layer.items()})
        return shapes


class CheckpointError(ValueError):
    """Files that do not make the model their config describes (names, shapes or dtypes)."""


def read_config(directory: Path) -> GPTConfig:
    """``config.json`` of the model in ``directory``."""
    return GPTConfig(**json.loads((directory / "config.json").read_text()))


def weights_from(cfg: GPTConfig, tensors: Mapping[str, Any]) -> Weights:
    """The kernels' :class:`Weights` from parameters by name (float32 arrays, or anything
    ``np.asarray`` makes one of without a copy, such as a CPU tensor's ``.numpy()``)."""
    expected = cfg.shapes()
    missing, unexpected = sorted(set(expected) - set(tensors)), sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise CheckpointError(f"weights do not match the config: missing {missing}, unexpected {unexpected}")

    def array(name: str) -> Array:
        out: Array = np.ascontiguousarray(tensors[name])  # C order: what the C kernel reads
        if out.dtype != np.float32 or out.shape != expected[name]:
            raise CheckpointError(f"{name}: {out.dtype}{list(out.shape)}, expected float32{list(expected[name])}")
        return out

    def layer(i: int) -> tuple[Array, Array, Array, Array, Array, Array]:
        norm1, qkv, proj, norm2, fc, out = (array(f"blocks.{i}.{name}") for name in BLOCK_PARAMETERS)
        return norm1, qkv, proj, norm2, fc, out

    embed = array("embed")
    return Weights(
        embed=embed,
        head=np.ascontiguousarray(embed.T),  # [C, V]: the tied output head, a row per channel
        norm=array("norm"),
        layers=tuple(layer(i) for i in range(cfg.n_layer)),
        n_head=cfg.n_head,
        window=cfg.window,
    )


def load_weights(directory: Path) -> tuple[GPTConfig, Weights]:
    """The config and the weights of the model in ``directory``, read with NumPy alone."""
    from safetensors.numpy import load_file

    cfg = read_config(directory)
    return cfg, weights_from(cfg, load_file(str(directory / "model.safetensors")))
