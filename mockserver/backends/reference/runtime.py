"""The loaded model, its decoder and the tokenizer. No torch: the weights are read with NumPy
(:mod:`mockserver.gpt.checkpoint`) and computed by the project's kernels."""

from __future__ import annotations

from pathlib import Path

__all__ = ["ASSET_FILES", "Runtime"]

ASSET_FILES = ("config.json", "model.safetensors", "tokenizer.json")


class Runtime:
    """The model's config, the :class:`~mockserver.gpt.decoder.Decoder` that computes with its
    weights (``kernel``: which kernel, see :func:`mockserver.gpt.kernels.load`), and the tokenizer."""

    def __init__(self, assets: Path | None = None, max_positions: int = 8192, kernel: str = "auto") -> None:
        from mockserver.gpt import kernels
        from mockserver.gpt.checkpoint import load_weights
        from mockserver.gpt.decoder import Decoder
        from mockserver.gpt.tokenizer import ASSETS, Tokenizer

        directory = assets or ASSETS
        self.config, weights = load_weights(directory)
        self.decoder = Decoder.from_weights(self.config, weights, kernels.load(kernel))
        self.kernel = self.decoder.kernel
        # The shipped tokenizer is shared with the torch-free scripted answers (and its cache).
        self.tokenizer: Tokenizer = (
            Tokenizer.shipped() if assets is None else Tokenizer.from_file(directory / "tokenizer.json")
        )
        if self.tokenizer.vocab_size != self.config.vocab_size:
            raise RuntimeError("tokenizer and model disagree on the vocabulary size")
        # Grow the rotary table once, now, so worker threads only ever read it.
        self.decoder.reach(max_positions + 1)
