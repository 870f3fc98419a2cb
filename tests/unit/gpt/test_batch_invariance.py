"""Batch invariance on this CPU: every operation of the batched decoding step computes each row
bit for bit as the single-row step computes it alone, for B = 1…64 (rows of different
values, the model's own weights and shapes), and so does the whole step.

Why each op is checked separately: a batched product ``X[B, in] @ W`` is *not* invariant here
(MKL changes kernel at B = 4 and rounds differently), so invariance is a property of each
kernel on this machine, not something to assume. ``tests/server/test_batching.py`` then
checks whole answers, byte for byte.
"""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from mockserver.gpt.batched import SPARE, SlotCache, _attend, step_rows
from mockserver.gpt.model import GPT, Block, KVCache, load_model
from mockserver.gpt.tokenizer import ASSETS

SIZES = range(1, 65)


@pytest.fixture(scope="module")
def model() -> GPT:
    torch.set_num_threads(1)  # as the model threads run
    return load_model(ASSETS)


def _block(model: GPT) -> Block:
    block = model.blocks[0]
    assert isinstance(block, Block)
    return block


def _weights(model: GPT) -> dict[str, Tensor]:
    block = _block(model)
    assert model._head is not None
    return {"qkv": block.w_qkv, "proj": block.w_proj, "fc": block.w_fc, "out": block.w_out, "head": model._head}


def _rows(b: int, *shape: int, seed: int) -> Tensor:
    return torch.randn(b, *shape, generator=torch.Generator().manual_seed(seed)) * (1 + seed % 3)


@pytest.mark.parametrize("name", ["qkv", "proj", "fc", "out", "head"])
def test_bmm_against_the_expanded_weight_is_the_single_row_mm(model: GPT, name: str) -> None:
    w = _weights(model)[name]
    n_in, n_out = w.shape
    for b in SIZES:
        x = _rows(b, 1, n_in, seed=b)
        batched = torch.bmm(x, w.expand(b, n_in, n_out))
        for i in range(b):
            assert torch.equal(batched[i], x[i] @ w), (name, b, i)


@pytest.mark.parametrize("name", ["proj", "out"])
def test_baddbmm_is_the_single_row_addmm(model: GPT, name: str) -> None:
    """The residual add is fused into the product on both paths (addmm alone, baddbmm batched)."""
    w = _weights(model)[name]
    n_in, n_out = w.shape
    for b in SIZES:
        x, residual = _rows(b, 1, n_in, seed=b), _rows(b, 1, n_out, seed=b + 100)
        batched = torch.baddbmm(residual, x, w.expand(b, n_in, n_out))
        for i in range(b):
            assert torch.equal(batched[i], torch.addmm(residual[i], x[i], w)), (name, b, i)


def test_layer_norm_and_gelu_work_row_by_row(model: GPT) -> None:
    c = model.cfg.n_embd
    norm = _block(model).norm1
    for b in SIZES:
        x, h = _rows(b, 1, c, seed=b), _rows(b, 1, 4 * c, seed=b + 7)
        normed = F.layer_norm(x, (c,), norm)
        activated = F.gelu(h, approximate="tanh")
        for i in range(b):
            assert torch.equal(normed[i], F.layer_norm(x[i], (c,), norm))
            assert torch.equal(activated[i], F.gelu(h[i], approximate="tanh"))


def test_rotary_multiply_works_row_by_row(model: GPT) -> None:
    """Each row turned by its own position's multipliers, as Block.decode turns one."""
    h, d = model.cfg.n_head, model.cfg.head_size
    table = model.rotary.multipliers(0, 4096)
    for b in SIZES:
        qkv = _rows(b, 1, 3 * h * d, seed=b)
        positions = torch.tensor([(97 * i + b) % 4096 for i in range(b)])
        pairs = torch.view_as_complex(qkv[:, 0, : 2 * h * d].reshape(b, 2 * h, d // 2, 2))
        turned = torch.view_as_real(pairs * table[positions].unsqueeze(1)).view(b, 2, h, d)
        for i in range(b):
            one = torch.view_as_complex(qkv[i, 0, : 2 * h * d].view(2 * h, d // 2, 2))
            alone = torch.view_as_real(one * table[int(positions[i])]).view(2, 1, h, 1, d)
            assert torch.equal(turned[i], alone.view(2, h, d))


def test_attention_over_a_slot_view_is_attention_over_the_concatenated_cache(model: GPT) -> None:
    """Per row, over its own length: a view of the slot buffer reads the same numbers in the
    same order as the tensor the single-row step concatenates (any length, any offset)."""
    h, d = model.cfg.n_head, model.cfg.head_size
    capacity = model.cfg.window - 1 + SPARE
    for b in SIZES:
        keys, values = _rows(b, h, capacity, d, seed=b), _rows(b, h, capacity, d, seed=b + 1)
        q = _rows(b, h, 1, d, seed=b + 2)
        for i in range(b):
            start = (13 * i) % SPARE
            end = start + 1 + (37 * i + b) % model.cfg.window
            past_k, new_k = keys[i : i + 1, :, start : end - 1].clone(), keys[i : i + 1, :, end - 1 : end].clone()
            past_v, new_v = values[i : i + 1, :, start : end - 1].clone(), values[i : i + 1, :, end - 1 : end].clone()
            alone = F.scaled_dot_product_attention(
                q[i : i + 1], torch.cat((past_k, new_k), dim=2), torch.cat((past_v, new_v), dim=2)
            )
            viewed = F.scaled_dot_product_attention(
                q[i : i + 1], keys[i : i + 1, :, start:end], values[i : i + 1, :, start:end]
            )
            assert torch.equal(viewed, alone), (b, i, start, end)


def test_rows_of_one_span_attend_in_one_call_as_each_would_alone(model: GPT) -> None:
    """Rows whose keys have the same span share one attention call (neighbouring slots as a
    view, others gathered): the kernel computes each (row, head) by itself, in the same order."""
    h, d = model.cfg.n_head, model.cfg.head_size
    capacity = model.cfg.window - 1 + SPARE
    for b in SIZES:
        keys, values = _rows(b + 3, h, capacity, d, seed=b), _rows(b + 3, h, capacity, d, seed=b + 1)
        q = _rows(b, h, 1, d, seed=b + 2)
        rng = random.Random(b)
        start = rng.randrange(SPARE)
        end = start + 1 + rng.randrange(model.cfg.window)
        for slots in (list(range(3, 3 + b)), sorted(rng.sample(range(b + 3), b))):
            spans = [(start, end)] * b
            together = _attend(q, keys, values, slots, spans)
            for i, s in enumerate(slots):
                alone = F.scaled_dot_product_attention(
                    q[i : i + 1], keys[s : s + 1, :, start:end].clone(), values[s : s + 1, :, start:end].clone()
                )
                assert torch.equal(together[i : i + 1], alone), (b, i, slots)


def test_scores_of_a_row_of_the_batch_are_the_scores_of_that_row_alone(model: GPT) -> None:
    """What the sampler and logprobs do to a row of the step's logits [B, V] (a view)."""
    v = model.cfg.vocab_size
    for b in (1, 2, 5, 17, 64):
        logits = _rows(b, v, seed=b) * 3
        for i in range(b):
            row, alone = logits[i], logits[i].clone()
            assert torch.equal(row.log_softmax(-1), alone.log_softmax(-1))
            assert torch.equal((row / 0.7).softmax(-1), (alone / 0.7).softmax(-1))
            assert torch.equal(row.topk(40).values, alone.topk(40).values)


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 8, 16, 31, 32, 33, 64])
def test_the_batched_step_is_the_single_row_step_for_every_row(model: GPT, size: int) -> None:
    """Rows of different lengths (one token to past the window, so the window slides and a slot
    moves its keys to the front), joining and leaving: logits and keys equal the traced step's."""
    rng = random.Random(size)
    vocab = model.cfg.vocab_size
    cache = SlotCache(model, slots=2)  # grows while rows join
    alone: dict[int, KVCache] = {}
    for _ in range(size):
        length = rng.choice((1, 2, 9, 60, 200, 254, 255, 300))
        _, prefilled = model.prefill([rng.randrange(3, vocab) for _ in range(length)])
        alone[cache.load(prefilled)] = prefilled
    for step in range(SPARE + 6):  # long enough for a full slot to move
        if step == 20 and size > 2:  # one row leaves, another joins in its place
            gone = min(alone)
            cache.free(gone)
            del alone[gone]
            _, prefilled = model.prefill([rng.randrange(3, vocab) for _ in range(40)])
            alone[cache.load(prefilled)] = prefilled
        slots = sorted(alone, key=lambda s: rng.random())  # any order in the batch (same spans share a call)
        tokens = [rng.randrange(3, vocab) for _ in slots]
        batched = step_rows(model, cache, slots, tokens)
        for i, (slot, token) in enumerate(zip(slots, tokens, strict=True)):
            logits, alone[slot] = model.step(token, alone[slot])
            assert torch.equal(batched[i], logits), (size, step, slot)
    for slot, single in alone.items():
        exported = cache.export(slot)
        assert exported.position == single.position
        for mine, theirs in zip(exported.keys + exported.values, single.keys + single.values, strict=True):
            assert torch.equal(mine, theirs)
