"""The torch module is the model's definition (and trains it); serving computes it without torch.
These hold the two together: the files the server reads with NumPy are the module's parameters,
bit for bit, and the kernels' logits are the module's forward pass to float noise. Skipped where
torch is not installed (the plain install: it lives in the ``train`` and ``test`` extras)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mockserver.gpt import kernels  # noqa: E402  (after the skip: this file needs torch)
from mockserver.gpt.checkpoint import CheckpointError, load_weights, weights_from  # noqa: E402
from mockserver.gpt.decoder import Decoder, weights_of  # noqa: E402
from mockserver.gpt.model import GPT, load_model  # noqa: E402
from mockserver.gpt.tokenizer import ASSETS, Tokenizer  # noqa: E402

PASSAGE = (
    "The capital of France is Paris. Anna Müller works at a bakery in Zürich, where she bakes "
    "bread every morning. José García likes coffee ☕ and long walks by the sea 🌊. "
)


@pytest.fixture(scope="module")
def model() -> GPT:
    torch.set_num_threads(1)  # tiny ops: OpenMP's spinning threads only slow them down
    return load_model(ASSETS)


def _flat(weights: kernels.Weights) -> list[np.ndarray]:
    return [weights.embed, weights.head, weights.norm, *(a for layer in weights.layers for a in layer)]


def test_the_files_served_without_torch_are_the_modules_parameters(model: GPT) -> None:
    cfg, served = load_weights(ASSETS)
    assert cfg == model.cfg
    live = weights_of(model)
    assert (served.n_head, served.window) == (live.n_head, live.window)
    for a, b in zip(_flat(served), _flat(live), strict=True):
        assert a.dtype == b.dtype == np.float32 and a.flags.c_contiguous and np.array_equal(a, b)


@pytest.mark.parametrize("kernel", ["numpy", "auto"])
def test_the_kernels_compute_the_torch_forward_pass(model: GPT, kernel: str) -> None:
    """The shipped weights through torch's forward pass and through the kernel serving uses
    (read from the files, without torch): the logits agree to float noise."""
    tok = Tokenizer.from_file(ASSETS / "tokenizer.json")
    ids = (tok.encode(PASSAGE) * 8)[: model.cfg.window]  # the longest sequence the module takes
    assert len(ids) == model.cfg.window
    with torch.inference_mode():
        defined = model(torch.tensor([ids]))[0].numpy()
    served, _ = Decoder.read(ASSETS, kernels.load(kernel)).prefill(ids, all_logits=True)
    np.testing.assert_allclose(served, defined, atol=5e-5, rtol=0)
    assert np.array_equal(served.argmax(-1), defined.argmax(-1))


def test_weights_that_do_not_fit_the_config_are_refused(model: GPT) -> None:
    tensors = {k: v.numpy() for k, v in model.state_dict().items()}
    with pytest.raises(CheckpointError, match="missing \\['norm'\\]"):
        weights_from(model.cfg, {k: v for k, v in tensors.items() if k != "norm"})
    with pytest.raises(CheckpointError, match="embed: float64"):
        weights_from(model.cfg, {**tensors, "embed": tensors["embed"].astype(np.float64)})
