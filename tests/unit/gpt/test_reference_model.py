"""Fast checks of the shipped reference assets: tokenizer.json, model.safetensors, config.json,
read as the server reads them (NumPy, no torch). The torch definition is held to the kernels in
test_torch_definition.py."""

from __future__ import annotations

import json
import re
from dataclasses import fields

import numpy as np
import pytest
from safetensors import safe_open

from mockserver.gpt import kernels
from mockserver.gpt.checkpoint import GPTConfig, read_config
from mockserver.gpt.decoder import Decoder
from mockserver.gpt.tokenizer import ASSETS, SPECIAL_TOKENS, Tokenizer

PASSAGE = (
    "The capital of France is Paris. Anna Müller works at a bakery in Zürich, where she bakes "
    "bread every morning. José García likes coffee ☕ and long walks by the sea 🌊. "
)


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.from_file(ASSETS / "tokenizer.json")


@pytest.fixture(scope="module")
def decoder() -> Decoder:
    return Decoder.read(ASSETS, kernels.load())


# -- tokenizer --------------------------------------------------------------------------------


def test_special_tokens_have_ids_0_1_2(tok: Tokenizer) -> None:
    assert (tok.eos_id, tok.im_start_id, tok.im_end_id) == (0, 1, 2)
    assert [tok.token_name(i) for i in range(3)] == list(SPECIAL_TOKENS)


@pytest.mark.parametrize(
    "text",
    [
        "Hello, world! How are you today?",
        "  leading spaces,\ttabs\nand\n\nnewlines  ",
        "Crème brûlée in Zürich, señor Muñoz; Łódź and Kraków.",
        "Emoji: 🎉🚀 👩🏽‍💻 🇫🇷 and CJK 東京.",
        "x = 3.14 * (a + b) // 2; print(f'{x!r}')",
    ],
)
def test_round_trip(tok: Tokenizer, text: str) -> None:
    assert tok.decode(tok.encode(text)) == text


def test_every_token_has_distinct_bytes(tok: Tokenizer) -> None:
    ordinary = [tok.token_bytes(i) for i in range(tok.vocab_size) if i not in tok.special_ids]
    assert all(ordinary)
    assert len(set(ordinary)) == len(ordinary) == tok.vocab_size - 3
    assert {bytes([b]) for b in range(256)} <= set(ordinary)  # byte-level: every byte encodes
    # multi-byte characters exist as whole tokens (the corpus has accents and emoji)
    assert any(len(b.decode("utf-8", "ignore")) == 1 and len(b) > 1 for b in ordinary)


def test_render_chat_layout(tok: Tokenizer) -> None:
    ids = tok.render_chat([("developer", "Be brief."), ("user", "Hi")])
    assert ids == tok.render_chat([("system", "Be brief."), ("user", "Hi")])
    assert ids[0] == tok.im_start_id and ids.count(tok.im_start_id) == 3 and ids.count(tok.im_end_id) == 2
    first_end = ids.index(tok.im_end_id)
    assert tok.decode(ids[1:first_end]) == "system\nBe brief."
    assert tok.decode(ids[first_end + 1 :]) == "\nuser\nHi\nassistant\n"
    closed = tok.render_chat([("user", "Hi")], generation_prompt=False)
    assert closed[-2:] == [tok.im_end_id, *tok.encode("\n")]


# -- model ------------------------------------------------------------------------------------


def test_config_matches_weights(decoder: Decoder, tok: Tokenizer) -> None:
    config = json.loads((ASSETS / "config.json").read_text())
    assert set(config) == {f.name for f in fields(GPTConfig)}
    cfg = read_config(ASSETS)
    assert cfg == GPTConfig(**config) and cfg.vocab_size == tok.vocab_size == decoder.weights.vocab
    with safe_open(str(ASSETS / "model.safetensors"), "np") as f:
        shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118 (not a dict)
    assert shapes == cfg.shapes()  # every parameter, by the torch module's names
    assert shapes["embed"] == (cfg.vocab_size, cfg.n_embd) and shapes["blocks.0.w_qkv"] == (cfg.n_embd, 3 * cfg.n_embd)
    assert sum(1 for k in shapes if k.endswith(".w_qkv")) == cfg.n_layer
    assert (ASSETS / "model.safetensors").stat().st_size < 8_000_000


def test_the_kernels_answer_the_same_bytes(decoder: Decoder, tok: Tokenizer) -> None:
    """The shipped weights through the NumPy kernel and through the one ``auto`` picks (the C
    copy when the package was built with it): the same bits."""
    ids = tok.encode(PASSAGE)
    prefilled, slots = decoder.prefill(ids, all_logits=True)
    assert slots.position[0] == len(ids)
    numpy_kernel, _ = Decoder.read(ASSETS, kernels.load("numpy")).prefill(ids, all_logits=True)
    assert np.array_equal(prefilled, numpy_kernel)
    last, _ = decoder.prefill(ids)
    assert np.array_equal(last[0], prefilled[-1])


def test_incremental_steps_are_the_prefill_beyond_the_window(decoder: Decoder, tok: Tokenizer) -> None:
    """A prompt prefilled in pieces and the same tokens fed one by one: the same bits (every
    row is computed the same way, whatever rows share its call), past the window too."""
    ids = (tok.encode(PASSAGE) * 20)[:300]
    assert len(ids) == 300 > decoder.window  # crosses prefill chunks and the slot's room
    expected, _ = decoder.prefill(ids, all_logits=True)
    slots = decoder.slots(1)
    slot = slots.take()
    rows = [decoder.step(slots, [(slot, token)])[0] for token in ids]
    assert np.array_equal(np.stack(rows), expected)


def test_only_the_window_reaches_the_next_token(decoder: Decoder, tok: Tokenizer) -> None:
    """Each layer reaches window − 1 tokens back: what came before that cannot change a logit
    (rotary embeddings see only distances, so the position itself does not matter either)."""
    ids = (tok.encode(PASSAGE) * 30)[:900]
    reach = 2 * (decoder.window - 1)
    tail = ids[-reach - 1 :]
    a, _ = decoder.prefill(ids)
    b, _ = decoder.prefill(ids[:3] + tail)  # a different beginning, the same reach
    np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)


def test_greedy_chat_reply_ends_and_reads_like_words(decoder: Decoder, tok: Tokenizer) -> None:
    logits, slots = decoder.prefill(tok.render_chat([("user", "Tell me about the city of Paris.")]))
    row = logits[-1]
    reply: list[int] = []
    while len(reply) < 120:
        token = int(np.argmax(row))
        reply.append(token)
        if token == tok.im_end_id:
            break
        row = decoder.step(slots, [(0, token)])[0]
    assert reply[-1] == tok.im_end_id, tok.decode(reply)
    assert tok.eos_id not in reply and tok.im_start_id not in reply
    pieces = tok.decode(reply).split()
    words = [p for p in pieces if re.fullmatch(r"[A-Za-z]+(['-][A-Za-z]+)*", p.strip('.,;:!?"()'))]
    assert len(pieces) >= 3 and len(words) >= 0.7 * len(pieces), pieces
