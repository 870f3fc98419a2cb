"""Sampling as pure functions of logits and an explicit generator."""

from __future__ import annotations

import random

import numpy as np
import pytest

from mockserver.backends.reference.sampling import best, pick, top_candidates
from mockserver.gpt.kernels import spec

LOGITS = np.array([1.0, 3.0, 2.0, 0.5, 2.9], np.float32)


def _draws(n: int, **kw: float) -> list[int]:
    rng = random.Random(1234)
    return [
        pick(LOGITS, kw.get("temperature", 1.0), int(kw.get("top_k", 0)), kw.get("top_p", 1.0), rng) for _ in range(n)
    ]


def test_temperature_zero_is_argmax_and_draws_nothing() -> None:
    rng = random.Random(0)
    state = rng.getstate()
    assert pick(LOGITS, 0.0, 0, 1.0, rng) == 1
    assert rng.getstate() == state


@pytest.mark.parametrize(
    ("kw", "allowed"), [({"top_k": 1}, {1}), ({"top_k": 2}, {1, 4}), ({"top_p": 0.0}, {1}), ({"top_p": 0.5}, {1, 4})]
)
def test_filters_restrict_the_support(kw: dict[str, float], allowed: set[int]) -> None:
    assert set(_draws(300, **kw)) == allowed


def test_frequencies_follow_the_softmax() -> None:
    draws = _draws(20000)
    expected = np.exp(LOGITS - LOGITS.max()) / np.exp(LOGITS - LOGITS.max()).sum()
    for token in range(5):
        assert abs(draws.count(token) / 20000 - float(expected[token])) < 0.015


def test_low_temperature_sharpens() -> None:
    assert _draws(2000, temperature=0.2).count(1) > _draws(2000, temperature=1.5).count(1)


def test_same_generator_seed_same_draws() -> None:
    assert _draws(50) == _draws(50)


def test_logprobs_are_raw_and_top_is_sorted() -> None:
    lp = spec.log_softmax(LOGITS)
    assert abs(float(np.exp(lp.astype(np.float64)).sum()) - 1.0) < 1e-6
    top = top_candidates(lp, 3)
    assert [i for i, _ in top] == [1, 4, 2]
    assert top_candidates(lp, 0) == []


@pytest.mark.parametrize("k", [0, 1, 2, 3, 4, 6, 9])
def test_best_takes_the_largest_and_ties_go_to_the_lower_id(k: int) -> None:
    values = np.array([1.0, 5.0, 3.0, 5.0, 3.0, 3.0, -1.0, 5.0], np.float32)
    ranked = sorted(range(8), key=lambda i: (-values[i], i))
    assert best(values, k).tolist() == ranked[:k]


def test_top_p_works_on_the_renormalised_top_k() -> None:
    # top-3 of LOGITS renormalised: ids 1, 4, 2 with 0.44, 0.40, 0.16; the 0.7 nucleus is {1, 4}.
    assert set(_draws(400, top_k=3, top_p=0.7)) == {1, 4}


def test_wide_nucleus_beyond_the_first_guess() -> None:
    flat = np.zeros(2048, np.float32)
    rng = random.Random(3)
    seen = {pick(flat, 1.0, 0, 0.5, rng) for _ in range(4000)}
    assert 64 < len(seen) <= 1024  # half of a flat vocabulary, far more than the guessed 64
