"""The loaded model and tokenizer: the one place torch is imported for serving."""

from __future__ import annotations

from pathlib import Path

__all__ = ["ASSET_FILES", "Runtime"]

ASSET_FILES = ("config.json", "model.safetensors", "tokenizer.json")


class Runtime:
    """The loaded model and tokenizer (import of torch happens here, and only here)."""

    def __init__(self, assets: Path | None = None, max_positions: int = 8192) -> None:
        import torch

        from mockserver.gpt.model import GPT, load_model
        from mockserver.gpt.tokenizer import ASSETS, Tokenizer

        torch.set_num_threads(1)
        directory = assets or ASSETS
        self.model: GPT = load_model(directory)
        # The shipped tokenizer is shared with the torch-free scripted answers (and its cache).
        self.tokenizer: Tokenizer = (
            Tokenizer.shipped() if assets is None else Tokenizer.from_file(directory / "tokenizer.json")
        )
        if self.tokenizer.vocab_size != self.model.cfg.vocab_size:
            raise RuntimeError("tokenizer and model disagree on the vocabulary size")
        # Grow the rotary table once, now, so worker threads only ever read it.
        self.model.rotary.multipliers(0, max_positions + 1)
