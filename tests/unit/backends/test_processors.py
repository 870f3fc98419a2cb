"""The logits processors of :class:`mockserver.backends.reference.sampling.Sampler`, one by one, on small
hand-made logits where the expected result can be worked out by hand, and Mirostat on the
reference model's real logits."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import numpy as np
import pytest

from mockserver.backends.reference.sampling import Sampler, pick
from mockserver.spine.request import Mirostat, Sampling

LOGITS = np.array([2.0, -1.0, 0.5, 3.0, 1.0], np.float32)  # greedy: 3, then 0
GREEDY = Sampling(temperature=0.0)


def _sampler(params: Sampling, prompt: tuple[int, ...] = (), ends: tuple[int, ...] = ()) -> Sampler:
    return Sampler(params, random.Random(0), LOGITS.size, prompt_ids=prompt, end_ids=ends)


def test_no_processor_is_the_plain_pick() -> None:
    sampler = _sampler(Sampling(temperature=0.7, top_k=3))
    reference = random.Random(0)
    draws = [sampler.pick(LOGITS) for _ in range(50)]
    assert draws == [pick(LOGITS, 0.7, 3, 1.0, reference) for _ in range(50)]


def test_processing_never_touches_the_input_logits() -> None:
    before = LOGITS.copy()
    sampler = _sampler(
        replace(GREEDY, logit_bias=((1, 5.0),), repetition_penalty=1.5, presence_penalty=1.0, min_tokens=2),
        prompt=(0,),
        ends=(3,),
    )
    sampler.observe(2)
    sampler.process(LOGITS)
    assert np.array_equal(LOGITS, before)


def test_logit_bias_is_added() -> None:
    out = _sampler(replace(GREEDY, logit_bias=((1, 10.0), (3, -100.0)))).process(LOGITS)
    assert out.tolist() == pytest.approx([2.0, 9.0, 0.5, -97.0, 1.0])


def test_plus_100_forces_and_minus_100_bans() -> None:
    assert _sampler(replace(GREEDY, logit_bias=((1, 100.0),))).pick(LOGITS) == 1
    assert _sampler(replace(GREEDY, logit_bias=((3, -100.0),))).pick(LOGITS) == 0
    hot = _sampler(replace(Sampling(temperature=1.0), logit_bias=((1, 100.0),)))
    assert {hot.pick(LOGITS) for _ in range(200)} == {1}


def test_repetition_penalty_divides_positive_and_multiplies_negative_seen_logits() -> None:
    sampler = _sampler(replace(GREEDY, repetition_penalty=2.0), prompt=(0, 1))
    sampler.observe(3)
    out = sampler.process(LOGITS)
    # seen: 0 (2.0 → 1.0), 1 (-1.0 → -2.0), 3 (3.0 → 1.5); unseen 2 and 4 unchanged
    assert out.tolist() == pytest.approx([1.0, -2.0, 0.5, 1.5, 1.0])


def test_frequency_and_presence_follow_openais_formula() -> None:
    sampler = _sampler(replace(GREEDY, frequency_penalty=0.5, presence_penalty=0.25), prompt=(4,))
    for token in (3, 3, 0):
        sampler.observe(token)
    out = sampler.process(LOGITS)
    # logit[j] -= count[j] * 0.5 + (count[j] > 0) * 0.25, over generated tokens only (4 is prompt)
    assert out.tolist() == pytest.approx([2.0 - 0.75, -1.0, 0.5, 3.0 - 1.25, 1.0])


def test_negative_penalties_reward_repetition() -> None:
    sampler = _sampler(replace(GREEDY, presence_penalty=-1.5, frequency_penalty=-0.5))
    assert sampler.pick(LOGITS) == 3
    sampler.observe(4)
    assert sampler.process(LOGITS)[4] == pytest.approx(3.0)  # 1.0 + 1.5 + 0.5
    sampler.observe(4)
    assert sampler.pick(LOGITS) == 4  # 1.0 + 1.5 + 2 × 0.5 = 3.5 > 3.0


def test_min_tokens_holds_back_the_end_tokens_then_releases_them() -> None:
    forced_end = ((3, 50.0),)  # the end token 3 would win every time
    sampler = _sampler(replace(GREEDY, logit_bias=forced_end, min_tokens=2), ends=(3,))
    assert sampler.pick(LOGITS) == 0
    sampler.observe(0)
    assert sampler.pick(LOGITS) == 0
    sampler.observe(0)
    assert sampler.pick(LOGITS) == 3  # two tokens exist: the end may come


def test_ignore_eos_never_samples_an_end_token() -> None:
    sampler = _sampler(replace(Sampling(temperature=1.0), ignore_eos=True, logit_bias=((3, 5.0),)), ends=(3, 0))
    draws = set()
    for _ in range(300):
        token = sampler.pick(LOGITS)
        sampler.observe(token)
        draws.add(token)
    assert draws and not draws & {0, 3}


def test_min_p_keeps_tokens_at_least_that_share_of_the_best() -> None:
    probs = np.exp(LOGITS - LOGITS.max()) / np.exp(LOGITS - LOGITS.max()).sum()
    sampler = _sampler(replace(Sampling(temperature=1.0), min_p=0.3))
    allowed = {i for i in range(5) if probs[i] >= 0.3 * probs.max()}
    assert allowed == {0, 3}
    assert {sampler.pick(LOGITS) for _ in range(500)} == allowed


def test_min_p_zero_and_one() -> None:
    assert {_sampler(replace(Sampling(temperature=1.0), min_p=1.0)).pick(LOGITS) for _ in range(100)} == {3}
    wide = _sampler(replace(Sampling(temperature=1.0), min_p=1e-9, presence_penalty=1e-9))
    assert {wide.pick(LOGITS) for _ in range(2000)} == {0, 1, 2, 3, 4}


def test_same_seed_same_processed_draws() -> None:
    params = replace(Sampling(temperature=1.2), min_p=0.05, frequency_penalty=0.7, repetition_penalty=1.3)

    def run() -> list[int]:
        sampler = _sampler(params, prompt=(2,))
        out = []
        for _ in range(100):
            token = sampler.pick(LOGITS)
            sampler.observe(token)
            out.append(token)
        return out

    assert run() == run()


def test_mirostat_drops_tokens_more_surprising_than_mu() -> None:
    # mu starts at 2τ = 2 bits: tokens with p < 1/4 are out, whatever the draw.
    probs = np.exp(LOGITS - LOGITS.max()) / np.exp(LOGITS - LOGITS.max()).sum()
    sampler = _sampler(replace(Sampling(temperature=1.0), mirostat=Mirostat(target=1.0, lr=0.0)))
    allowed = {i for i in range(5) if probs[i] >= 0.25}
    assert {sampler.pick(LOGITS) for _ in range(300)} == allowed


@pytest.mark.parametrize("target", [1.0, 2.5])
def test_mirostat_keeps_the_observed_surprise_near_its_target(target: float) -> None:
    """Mirostat v2 on the reference model's real logits over 300 tokens: the running mean of
    the observed surprise (bits, in the truncated distribution) settles near τ."""
    from mockserver.backends.reference.runtime import Runtime

    runtime = Runtime()
    decoder = runtime.decoder
    ids = runtime.tokenizer.encode("The weather in the city was")
    sampler = Sampler(
        Sampling(temperature=1.0, mirostat=Mirostat(target=target, lr=0.1), ignore_eos=True),
        random.Random(7),
        runtime.tokenizer.vocab_size,
        end_ids=runtime.tokenizer.special_ids,  # a long run, unbroken by a new document
    )
    assert sampler.mirostat is not None
    logits, slots = decoder.prefill(ids)
    row = logits[-1]
    surprises = []
    for _ in range(300):
        token = sampler.pick(row)
        sampler.observe(token)
        surprises.append(sampler.mirostat.surprise)
        row = decoder.step(slots, [(0, token)])[0]
    settled = surprises[50:]
    mean = sum(settled) / len(settled)
    assert abs(mean - target) < 0.1 * target + 0.05, mean  # measured: 0.975 for 1.0, 2.476 for 2.5
    assert not math.isnan(sampler.mirostat.mu)


def test_vanishing_temperature_and_penalty_are_their_limits_not_nan() -> None:
    """Found by fuzzing /openapi.json: a temperature of 1e-300 or a repetition penalty of
    5e-324 divided the logits into infinities and the probabilities into NaN."""
    import numpy as np

    from mockserver.routes import params

    assert params._temperature(1e-300) == 0.0  # the limit of a vanishing temperature: greedy
    assert params._temperature(0.5) == 0.5
    logits = np.linspace(-5, 5, 64, dtype=np.float32)
    sampler = Sampler(
        Sampling(repetition_penalty=params.MIN_REPETITION, temperature=params.MIN_TEMPERATURE),
        random.Random(1),
        64,
        prompt_ids=[60, 61, 62],
    )
    with np.errstate(divide="raise", invalid="raise", over="raise"):  # underflow to 0 is fine
        assert np.isfinite(sampler.process(logits)).all()
        assert 0 <= sampler.pick(logits) < 64
