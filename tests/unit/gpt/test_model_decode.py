"""The traced single-token step computes exactly what eager mode computes."""

from __future__ import annotations

import pytest
import torch

from mockserver.gpt.model import GPT, load_model
from mockserver.gpt.tokenizer import ASSETS


@pytest.fixture(scope="module")
def model() -> GPT:
    return load_model(ASSETS)


def test_step_is_traced(model: GPT) -> None:
    assert model._traced_step is not None


@pytest.mark.parametrize("prompt_length", [1, 50, 254, 400])
def test_traced_step_is_bit_identical_to_eager(model: GPT, prompt_length: int) -> None:
    ids = [(7 * i + 3) % model.cfg.vocab_size for i in range(prompt_length)]
    _, cache = model.prefill(ids)
    eager_cache = cache
    for token in (5, 17, 99, 1000, 3, 8, 200, 42):  # crosses the window edge for 254
        traced_logits, cache = model.step(token, cache)
        eager_logits, eager_cache = model.step(token, eager_cache, eager=True)
        assert torch.equal(traced_logits, eager_logits)
        assert all(torch.equal(a, b) for a, b in zip(cache.keys, eager_cache.keys, strict=True))
        assert cache.keys[0].size(2) <= model.cfg.window - 1


def test_traced_step_stays_identical_in_other_threads(model: GPT) -> None:
    """Graph optimisation is a per-thread switch in TorchScript; pool threads must not fuse."""
    import threading

    _, start = model.prefill(list(range(40)))
    expected: list[torch.Tensor] = []
    cache = start
    for token in range(30):
        logits, cache = model.step(token, cache, eager=True)
        expected.append(logits)
    got: list[torch.Tensor] = []

    def run() -> None:
        torch.set_num_threads(1)
        c = start
        for token in range(30):
            logits, c = model.step(token, c)
            got.append(logits)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    assert len(got) == 30
    assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))
