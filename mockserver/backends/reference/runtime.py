"""The loaded model, its decoder and the tokenizer: the one place torch is imported for serving."""

from __future__ import annotations

from pathlib import Path

__all__ = ["ASSET_FILES", "Runtime"]

ASSET_FILES = ("config.json", "model.safetensors", "tokenizer.json")


class Runtime:
    """The loaded model (torch, which reads the weights), the :class:`~mockserver.gpt.decoder.Decoder`
    that computes with them (``kernel``: which kernel, see :func:`mockserver.gpt.kernels.load`),
    and the tokenizer."""

    def __init__(self, assets: Path | None = None, max_positions: int = 8192, kernel: str = "auto") -> None:
        import torch

        from mockserver.gpt import kernels
        from mockserver.gpt.decoder import Decoder
        from mockserver.gpt.model import GPT, load_model
        from mockserver.gpt.tokenizer import ASSETS, Tokenizer

        torch.set_num_threads(1)
        directory = assets or ASSETS
        self.model: GPT = load_model(directory)
        self.decoder = Decoder.of(self.model, kernels.load(kernel))
        self.kernel = self.decoder.kernel
        # The shipped tokenizer is shared with the torch-free scripted answers (and its cache).
        self.tokenizer: Tokenizer = (
            Tokenizer.shipped() if assets is None else Tokenizer.from_file(directory / "tokenizer.json")
        )
        if self.tokenizer.vocab_size != self.model.cfg.vocab_size:
            raise RuntimeError("tokenizer and model disagree on the vocabulary size")
        # Grow the rotary table once, now, so worker threads only ever read it.
        self.decoder.reach(max_positions + 1)
