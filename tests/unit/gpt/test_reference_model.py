"""Fast checks of the shipped reference assets: tokenizer.json, model.safetensors, config.json."""

from __future__ import annotations

import json
import re
from dataclasses import fields

import pytest
import torch
from safetensors import safe_open

from mockserver.gpt.model import GPT, GPTConfig, load_model
from mockserver.gpt.tokenizer import ASSETS, SPECIAL_TOKENS, Tokenizer

PASSAGE = (
    "The capital of France is Paris. Anna Müller works at a bakery in Zürich, where she bakes "
    "bread every morning. José García likes coffee ☕ and long walks by the sea 🌊. "
)


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.from_file(ASSETS / "tokenizer.json")


@pytest.fixture(scope="module")
def model() -> GPT:
    return load_model(ASSETS)


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


def test_config_matches_weights(model: GPT, tok: Tokenizer) -> None:
    config = json.loads((ASSETS / "config.json").read_text())
    assert set(config) == {f.name for f in fields(GPTConfig)}
    cfg = GPTConfig(**config)
    assert cfg == model.cfg and cfg.vocab_size == tok.vocab_size
    with safe_open(str(ASSETS / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
        assert f.get_slice("embed").get_shape() == [cfg.vocab_size, cfg.n_embd]
        assert f.get_slice("blocks.0.w_qkv").get_shape() == [cfg.n_embd, 3 * cfg.n_embd]
    assert keys == set(model.state_dict())
    assert sum(1 for k in keys if k.endswith(".w_qkv")) == cfg.n_layer
    assert (ASSETS / "model.safetensors").stat().st_size < 8_000_000


def test_prefill_matches_forward(model: GPT, tok: Tokenizer) -> None:
    ids = tok.encode(PASSAGE)
    assert 10 < len(ids) <= model.cfg.window
    with torch.inference_mode():
        full = model(torch.tensor([ids]))[0]
    prefilled, cache = model.prefill(ids, all_logits=True)
    assert cache.position == len(ids)
    torch.testing.assert_close(prefilled, full, atol=1e-5, rtol=0)
    last, _ = model.prefill(ids)
    torch.testing.assert_close(last[0], full[-1], atol=1e-5, rtol=0)


def test_incremental_steps_match_prefill_beyond_the_window(model: GPT, tok: Tokenizer) -> None:
    ids = (tok.encode(PASSAGE) * 20)[:300]
    assert len(ids) == 300 > model.cfg.window  # crosses a prefill chunk and the cache limit
    expected, _ = model.prefill(ids, all_logits=True)
    got, cache = model.prefill(ids[:1], all_logits=True)
    rows = [got[0]]
    for token in ids[1:]:
        logits, cache = model.step(token, cache)
        rows.append(logits)
    torch.testing.assert_close(torch.stack(rows), expected, atol=1e-4, rtol=0)


def test_greedy_chat_reply_ends_and_reads_like_words(model: GPT, tok: Tokenizer) -> None:
    logits, cache = model.prefill(tok.render_chat([("user", "Tell me about the city of Paris.")]))
    logits = logits[-1]
    reply: list[int] = []
    while len(reply) < 120:
        token = int(logits.argmax())
        reply.append(token)
        if token == tok.im_end_id:
            break
        logits, cache = model.step(token, cache)
    assert reply[-1] == tok.im_end_id, tok.decode(reply)
    assert tok.eos_id not in reply and tok.im_start_id not in reply
    pieces = tok.decode(reply).split()
    words = [p for p in pieces if re.fullmatch(r"[A-Za-z]+(['-][A-Za-z]+)*", p.strip('.,;:!?"()'))]
    assert len(pieces) >= 3 and len(words) >= 0.7 * len(pieces), pieces
