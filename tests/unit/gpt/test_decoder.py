"""The decoder: sequences in slots, rows through the kernel, and no row ever changed by the
others that share its call (the promise batched decoding rests on), on the shipped model."""

from __future__ import annotations

import numpy as np
import pytest

from mockserver.gpt import kernels
from mockserver.gpt.decoder import SPARE, Decoder, Slots
from mockserver.gpt.tokenizer import ASSETS


@pytest.fixture(scope="module")
def decoder() -> Decoder:
    return Decoder.read(ASSETS, kernels.load())


def _ids(n: int, seed: int = 0) -> list[int]:
    return [int(t) for t in np.random.default_rng(seed).integers(3, 2048, n)]


def _alone(decoder: Decoder, ids: list[int]) -> np.ndarray:  # type: ignore[type-arg]
    return decoder.prefill(ids)[0][0]


@pytest.mark.parametrize("size", [2, 3, 4, 8, 17, 64])
def test_a_batched_step_is_each_row_alone(decoder: Decoder, size: int) -> None:
    """Sequences of every length (short, at the window, past it, over a slot's room) step
    together; each row's logits and the keys it leaves are those of its sequence alone."""
    lengths = [1 + (37 * i) % 700 for i in range(size)]
    prompts = [_ids(n, seed=i) for i, n in enumerate(lengths)]
    slots = decoder.slots(1)
    placed = [slots.copy(decoder.prefill(p)[1], 0) for p in prompts]
    tokens = [5 + i for i in range(size)]
    batched = decoder.step(slots, list(zip(placed, tokens, strict=True)))
    for prompt, token, row in zip(prompts, tokens, batched, strict=True):
        assert np.array_equal(row, _alone(decoder, [*prompt, token])), len(prompt)
    after = decoder.step(slots, [(s, 9) for s in placed])  # and they carry on as alone
    for prompt, token, row in zip(prompts, tokens, after, strict=True):
        assert np.array_equal(row, _alone(decoder, [*prompt, token, 9]))


def test_rows_join_and_leave_between_steps(decoder: Decoder) -> None:
    slots = decoder.slots(2)
    a = slots.copy(decoder.prefill(_ids(40, 1))[1], 0)
    b = slots.copy(decoder.prefill(_ids(300, 2))[1], 0)
    decoder.step(slots, [(a, 7), (b, 8)])
    slots.free(a)
    c = slots.copy(decoder.prefill(_ids(10, 3))[1], 0)
    assert c == a  # the lowest free slot is handed out again
    row_b, row_c = decoder.step(slots, [(b, 9), (c, 10)])
    assert np.array_equal(row_b, _alone(decoder, [*_ids(300, 2), 8, 9]))
    assert np.array_equal(row_c, _alone(decoder, [*_ids(10, 3), 10]))


def test_slots_grow_and_keep_their_keys(decoder: Decoder) -> None:
    slots = Slots(decoder.weights, 1)
    first = slots.copy(decoder.prefill(_ids(30, 4))[1], 0)
    more = [slots.copy(decoder.prefill(_ids(5 + i, 5 + i))[1], 0) for i in range(4)]
    assert slots.slots == 8 and slots.in_use() == 5 and first == 0 and more == [1, 2, 3, 4]
    row = decoder.step(slots, [(first, 11)])[0]
    assert np.array_equal(row, _alone(decoder, [*_ids(30, 4), 11]))


def test_scoring_leaves_the_sequence_as_it_was(decoder: Decoder) -> None:
    prompt, answer = _ids(20, 6), _ids(9, 7)
    _, slots = decoder.prefill(prompt)
    scored = decoder.score(slots, 0, answer)
    expected, _ = decoder.prefill(prompt + answer, all_logits=True)
    assert np.array_equal(scored, expected[len(prompt) :])
    assert slots.end[0] == len(prompt) and slots.position[0] == len(prompt)
    assert np.array_equal(decoder.step(slots, [(0, 3)])[0], _alone(decoder, [*prompt, 3]))


def test_a_long_feed_is_cut_into_pieces_a_slot_has_room_for(decoder: Decoder) -> None:
    prompt = _ids(10, 8)
    _, slots = decoder.prefill(prompt)
    fed = _ids(5 * SPARE + 5, 9)  # past the window: the slot keeps its last window − 1 keys
    last = decoder.extend(slots, 0, fed)
    assert last.shape == (1, decoder.weights.vocab)
    assert np.array_equal(last[0], _alone(decoder, prompt + fed))
    assert slots.end[0] - slots.start[0] == decoder.window - 1


def test_states_are_the_residual_stream_of_the_text_alone(decoder: Decoder) -> None:
    ids = _ids(150, 10)
    states = decoder.states(ids, depth=1)
    assert states.shape == (2, 150, decoder.weights.n_embd)
    assert np.array_equal(states[0], decoder.weights.embed[ids])
    assert np.array_equal(decoder.states(ids[:70], depth=1), states[:, :70])  # a prefix's own
    full = decoder.states(ids)
    assert full.shape == (3, 150, decoder.weights.n_embd) and np.array_equal(full[:2], states)
    one = decoder.alone([ids[5], ids[9]], depth=1)
    assert np.array_equal(one[:, 0], decoder.states([ids[5]], depth=1)[:, 0])
    assert np.array_equal(one[:, 1], decoder.states([ids[9]], depth=1)[:, 0])


def test_the_numpy_kernel_decodes_the_same_bits(decoder: Decoder) -> None:
    """The package installed without a C compiler answers exactly as with it."""
    slow = Decoder(decoder.weights, kernels.load("numpy"), *decoder._rope)
    prompt = _ids(280, 11)
    ours, _ = decoder.prefill(prompt, all_logits=True)
    theirs, _ = slow.prefill(prompt, all_logits=True)
    assert np.array_equal(ours, theirs)
    slots_a, slots_b = decoder.slots(3), slow.slots(3)
    for s in (slots_a, slots_b):
        for i in range(3):
            s.copy(decoder.prefill(_ids(5 + 100 * i, 12 + i))[1], 0)
    assert np.array_equal(decoder.step(slots_a, [(0, 4), (1, 5), (2, 6)]), slow.step(slots_b, [(0, 4), (1, 5), (2, 6)]))


def test_a_small_buffer_grows_without_changing_a_bit(decoder: Decoder) -> None:
    """Private slots start small (a request's prompt, not the window: a new buffer costs its
    pages) and grow to the full room, then recycle it, as the sequence runs."""
    ids = _ids(330, 13)
    slots = decoder.slots(2, capacity=2)
    other = slots.take()
    slot = slots.take()
    decoder.extend(slots, other, _ids(3, 14))
    rows = [decoder.step(slots, [(slot, t)])[0] for t in ids]
    assert slots.cache.capacity == slots.room
    expected, _ = decoder.prefill(ids, all_logits=True)
    assert np.array_equal(np.stack(rows), expected)
    assert np.array_equal(decoder.step(slots, [(other, 5)])[0], _alone(decoder, [*_ids(3, 14), 5]))


def test_a_copy_into_smaller_buffers_makes_them_room(decoder: Decoder) -> None:
    prompt = _ids(200, 15)
    _, source = decoder.prefill(prompt)
    small = decoder.slots(1, capacity=4)
    slot = small.copy(source, 0)
    assert small.cache.capacity >= 200
    assert np.array_equal(decoder.step(small, [(slot, 3)])[0], _alone(decoder, [*prompt, 3]))
