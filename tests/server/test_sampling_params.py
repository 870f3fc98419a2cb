"""Every sampling parameter, proved by its effect on the reference model's real logits with
fixed seeds, through the official SDK (extension parameters travel in ``extra_body``, as an
application sends them to a provider)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from mockserver.gpt.tokenizer import ASSETS, Tokenizer
from tests.support.live import FROZEN, Live, serve_in_thread

PROMPT = "The weather in Lisbon today is"
CHAT = [{"role": "user", "content": "Tell me about the sea."}]


@pytest.fixture(scope="module")
def small() -> Iterator[Live]:
    """A server whose models have small windows (context overflow) besides a default one."""
    app = create_app(Settings(frozen_time=FROZEN, models=["m", "small@48"]))
    with serve_in_thread(app) as server:
        yield server


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.from_file(ASSETS / "tokenizer.json")


def _complete(client: openai.OpenAI, **kw: Any) -> Any:
    extra = {k: kw.pop(k) for k in list(kw) if k not in _SDK_COMPLETION_ARGS}
    return client.completions.create(
        model=kw.pop("model", "m"), prompt=kw.pop("prompt", PROMPT), extra_body=extra, **kw
    )


_SDK_COMPLETION_ARGS = frozenset(
    {"model", "prompt", "max_tokens", "temperature", "top_p", "n", "seed", "logprobs", "echo", "stop", "stream"}
    | {"presence_penalty", "frequency_penalty", "logit_bias", "best_of", "suffix"}
)


def _tokens(done: Any, index: int = 0) -> list[str]:
    return list(done.choices[index].logprobs.tokens)


def _distinct_share(tokens: list[str]) -> float:
    return len(set(tokens)) / len(tokens)


# ---- logit_bias -------------------------------------------------------------------------


def test_plus_100_on_one_token_at_temperature_0_repeats_it(client: openai.OpenAI, tok: Tokenizer) -> None:
    token = tok.encode(" sea")
    assert len(token) == 1
    done = _complete(client, temperature=0, max_tokens=10, logit_bias={str(token[0]): 100}, logprobs=0)
    assert _tokens(done) == [" sea"] * 10
    assert done.choices[0].text == " sea" * 10
    assert done.choices[0].finish_reason == "length"


def test_minus_100_on_every_greedy_token_changes_the_output(client: openai.OpenAI, tok: Tokenizer) -> None:
    greedy = _complete(client, temperature=0, max_tokens=12, logprobs=0)
    banned = {tok.encode(t)[0] for t in _tokens(greedy) if len(tok.encode(t)) == 1}
    assert banned
    other = _complete(client, temperature=0, max_tokens=12, logprobs=0, logit_bias={str(i): -100 for i in banned})
    assert other.choices[0].text != greedy.choices[0].text
    assert not {tok.encode(t)[0] for t in _tokens(other) if len(tok.encode(t)) == 1} & banned


def test_logit_bias_keeps_reporting_the_models_own_logprobs(client: openai.OpenAI, tok: Tokenizer) -> None:
    token = tok.encode(" sea")[0]
    done = _complete(client, temperature=0, max_tokens=3, logit_bias={str(token): 100}, logprobs=1)
    assert all(lp < -1.0 for lp in done.choices[0].logprobs.token_logprobs)  # forced, not believed


def test_logit_bias_names_every_bad_key(live: Live) -> None:
    body = {"model": "m", "prompt": "x", "logit_bias": {"abc": 1, "99999": 1, "7": 150, "8": -3.5, "9": "big"}}
    response = httpx.post(live.base_url + "/completions", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "logit_bias"
    for key in ("'abc'", "'99999'", "'7'", "'9'"):
        assert key in error["message"]
    assert "'8'" not in error["message"]  # -3.5 is a fine bias
    assert httpx.get(live.url + "/health").status_code == 200


# ---- repetition controls ------------------------------------------------------------------


def _long(client: openai.OpenAI, **kw: Any) -> list[str]:
    done = _complete(client, **{"temperature": 0, "max_tokens": 200, "ignore_eos": True, "logprobs": 0, **kw})
    assert done.usage.completion_tokens == 200
    return _tokens(done)


@pytest.mark.parametrize(
    "penalty",
    [
        pytest.param({"presence_penalty": 1.5}, id="presence"),
        pytest.param({"frequency_penalty": 1.0}, id="frequency"),
        pytest.param({"repetition_penalty": 1.5}, id="repetition"),
    ],
)
def test_penalties_lower_repetition_over_200_tokens(client: openai.OpenAI, penalty: dict[str, float]) -> None:
    plain = _distinct_share(_long(client))
    penalised = _distinct_share(_long(client, **penalty))
    assert penalised > plain + 0.15, (plain, penalised)


def test_negative_presence_and_low_repetition_penalty_raise_repetition(client: openai.OpenAI) -> None:
    plain = _distinct_share(_long(client, temperature=1.0, seed=3))
    rewarded = _distinct_share(_long(client, temperature=1.0, seed=3, presence_penalty=-2.0, repetition_penalty=0.5))
    assert rewarded < plain - 0.1, (plain, rewarded)


# ---- truncation of the distribution ---------------------------------------------------------


def test_min_p_only_samples_tokens_near_the_best(client: openai.OpenAI) -> None:
    done = _complete(client, temperature=1.0, seed=11, max_tokens=60, min_p=0.3, logprobs=1)
    assert done.usage.completion_tokens > 5
    lp = done.choices[0].logprobs
    for own, top in zip(lp.token_logprobs, lp.top_logprobs, strict=True):
        best = max(top.values())
        assert own >= best + math.log(0.3) - 1e-4  # p ≥ 0.3 × p_max (no other processor on)


def test_mirostat_lower_target_means_less_surprising_text(client: openai.OpenAI) -> None:
    def mean_surprise(target: float) -> float:
        done = _complete(
            client, temperature=1.0, seed=5, max_tokens=120, ignore_eos=True, logprobs=0, mirostat_target=target
        )
        lps = done.choices[0].logprobs.token_logprobs
        return -sum(lps) / len(lps)

    assert mean_surprise(0.5) < mean_surprise(3.0) < mean_surprise(6.0)


# ---- length and ending ---------------------------------------------------------------------


def test_ignore_eos_reaches_exactly_max_tokens(client: openai.OpenAI) -> None:
    short = client.chat.completions.create(model="m", messages=CHAT, seed=1)  # type: ignore[arg-type]
    assert short.choices[0].finish_reason == "stop"
    assert short.usage is not None and short.usage.completion_tokens < 100
    long = client.chat.completions.create(
        model="m",
        messages=CHAT,  # type: ignore[arg-type]
        seed=1,
        max_tokens=100,
        extra_body={"ignore_eos": True},
    )
    assert long.choices[0].finish_reason == "length"
    assert long.usage is not None and long.usage.completion_tokens == 100
    assert long.choices[0].message.content is not None
    assert long.choices[0].message.content.startswith(short.choices[0].message.content or "")


def test_min_tokens_delays_the_end(client: openai.OpenAI) -> None:
    short = client.chat.completions.create(model="m", messages=CHAT, seed=1)  # type: ignore[arg-type]
    assert short.usage is not None
    minimum = short.usage.completion_tokens + 5
    longer = client.chat.completions.create(
        model="m",
        messages=CHAT,  # type: ignore[arg-type]
        seed=1,
        max_tokens=300,
        extra_body={"min_tokens": minimum},
    )
    assert longer.usage is not None and longer.usage.completion_tokens >= minimum
    assert (minimum, longer.usage.completion_tokens) == (13, 23)  # seed 1 ends 10 tokens past the minimum


def test_min_tokens_also_holds_back_stop_strings(client: openai.OpenAI) -> None:
    text = _complete(client, temperature=0, max_tokens=30).choices[0].text
    stop = text[2:4]
    assert _complete(client, temperature=0, max_tokens=30, stop=[stop]).choices[0].text == text[:2]
    held = _complete(client, temperature=0, max_tokens=30, stop=[stop], min_tokens=10, logprobs=0)
    assert held.usage.completion_tokens >= 10
    assert held.usage.completion_tokens == 20
    assert len(held.choices[0].text) > 2


def test_min_tokens_over_max_tokens_is_a_400(live: Live) -> None:
    body = {"model": "m", "prompt": "x", "max_tokens": 3, "min_tokens": 5}
    response = httpx.post(live.base_url + "/completions", json=body)
    assert response.status_code == 400 and response.json()["error"]["param"] == "min_tokens"


def test_stop_token_ids_end_the_choice_at_that_token(live: Live, tok: Tokenizer) -> None:
    base = {"model": "m", "prompt": PROMPT, "max_tokens": 12, "temperature": 0, "logprobs": 0}
    greedy = httpx.post(live.url + "/vllm/v1/completions", json=base).json()["choices"][0]
    tokens = greedy["logprobs"]["tokens"]
    third = tok.encode(tokens[2])
    assert len(third) == 1
    stopped = httpx.post(live.url + "/vllm/v1/completions", json={**base, "stop_token_ids": third}).json()
    choice = stopped["choices"][0]
    assert choice["text"] == "".join(tokens[:2])
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] == third[0]
    assert stopped["usage"]["completion_tokens"] == 2  # the stop token is not text and not counted


def test_stop_token_ids_outside_the_vocabulary_are_a_400(live: Live) -> None:
    response = httpx.post(live.base_url + "/completions", json={"model": "m", "prompt": "x", "stop_token_ids": [5000]})
    assert response.status_code == 400 and response.json()["error"]["param"] == "stop_token_ids"


def test_include_stop_str_in_output(client: openai.OpenAI) -> None:
    text = _complete(client, temperature=0, max_tokens=30).choices[0].text
    stop = text[5:8]
    kept = _complete(client, temperature=0, max_tokens=30, stop=[stop], include_stop_str_in_output=True)
    assert kept.choices[0].text == text[:8]


# ---- context overflow -----------------------------------------------------------------------


def test_truncate_lowers_max_tokens_to_fit_the_window(small: Live) -> None:
    body = {"model": "small", "prompt": "The", "max_tokens": 500, "temperature": 0, "ignore_eos": True}
    error = httpx.post(small.base_url + "/completions", json=body)
    assert error.status_code == 400 and error.json()["error"]["code"] == "context_length_exceeded"
    truncated = httpx.post(
        small.base_url + "/completions", json={**body, "context_length_exceeded_behavior": "truncate"}
    ).json()
    usage = truncated["usage"]
    assert usage["prompt_tokens"] + usage["completion_tokens"] == 48
    assert truncated["choices"][0]["finish_reason"] == "length"
    # Fireworks truncates by default; a prompt that alone overflows is still an error.
    assert httpx.post(small.url + "/fireworks/v1/completions", json=body).status_code == 200
    huge = {**body, "prompt": "word " * 60, "context_length_exceeded_behavior": "truncate"}
    assert httpx.post(small.base_url + "/completions", json=huge).status_code == 400


def test_truncate_prompt_tokens_keeps_the_last_k(live: Live) -> None:
    body = {
        "model": "m",
        "prompt": "one two three four five six seven eight nine ten",
        "max_tokens": 6,
        "temperature": 0,
    }
    whole = httpx.post(live.url + "/vllm/v1/completions", json=body).json()
    kept = httpx.post(live.url + "/vllm/v1/completions", json={**body, "truncate_prompt_tokens": 3}).json()
    tail = httpx.post(live.url + "/vllm/v1/completions", json={**body, "prompt": " eight nine ten"}).json()
    assert kept["usage"]["prompt_tokens"] == 3 < whole["usage"]["prompt_tokens"]
    assert kept["choices"][0]["text"] == tail["choices"][0]["text"]  # what the model read: the last 3


# ---- best_of -------------------------------------------------------------------------------


def test_best_of_returns_the_most_likely_candidates_of_the_same_seed(client: openai.OpenAI) -> None:
    candidates = _complete(client, temperature=1.0, seed=21, max_tokens=8, n=5, logprobs=0)
    scores = sorted(
        ((sum(c.logprobs.token_logprobs), c.text) for c in candidates.choices), key=lambda s: s[0], reverse=True
    )
    best = _complete(client, temperature=1.0, seed=21, max_tokens=8, n=2, best_of=5)
    assert [c.text for c in best.choices] == [text for _, text in scores[:2]]
    assert [c.index for c in best.choices] == [0, 1]
    assert best.choices[0].logprobs is None  # not asked for, though used for ranking
    assert best.usage.completion_tokens == candidates.usage.completion_tokens  # every candidate is billed


def test_best_of_ranks_per_prompt(client: openai.OpenAI) -> None:
    best = _complete(client, prompt=["One", "Two"], temperature=1.0, seed=2, max_tokens=5, best_of=3, logprobs=0)
    assert [c.index for c in best.choices] == [0, 1]
    every = _complete(client, prompt=["One", "Two"], temperature=1.0, seed=2, max_tokens=5, n=3, logprobs=0)
    for p in range(2):
        mine = every.choices[3 * p : 3 * p + 3]
        assert best.choices[p].text == max(mine, key=lambda c: sum(c.logprobs.token_logprobs)).text


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        pytest.param({"best_of": 1, "n": 2}, "best_of", id="best-of-below-n"),
        pytest.param({"best_of": 3, "stream": True}, "best_of", id="best-of-stream"),
        pytest.param({"best_of": 21}, "best_of", id="best-of-over-20"),
        pytest.param({"suffix": "x", "echo": True}, "suffix", id="suffix-with-echo"),
        pytest.param({"prompt_logprobs": 2, "stream": True}, "prompt_logprobs", id="prompt-logprobs-stream"),
        pytest.param({"repetition_penalty": 0}, "repetition_penalty", id="repetition-zero"),
        pytest.param({"presence_penalty": 2.5}, "presence_penalty", id="presence-high"),
        pytest.param({"frequency_penalty": -3}, "frequency_penalty", id="frequency-low"),
        pytest.param({"min_p": 1.5}, "min_p", id="min-p-high"),
        pytest.param({"mirostat_target": -1}, "mirostat_target", id="mirostat-negative"),
        pytest.param({"context_length_exceeded_behavior": "wrap"}, "context_length_exceeded_behavior", id="overflow"),
        pytest.param({"ignore_eos": "yes"}, "ignore_eos", id="ignore-eos-type"),
    ],
)
def test_out_of_range_is_a_400_naming_the_parameter(live: Live, extra: dict[str, Any], param: str) -> None:
    response = httpx.post(live.base_url + "/completions", json={"model": "m", "prompt": "x", **extra})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param


# ---- suffix and prompt_logprobs -------------------------------------------------------------


def test_suffix_conditions_the_generation(client: openai.OpenAI, tok: Tokenizer) -> None:
    plain = _complete(client, temperature=0, max_tokens=12)
    insert = _complete(client, temperature=0, max_tokens=12, suffix=" and the rain fell on the sea all night.")
    assert insert.choices[0].text != plain.choices[0].text
    suffix_tokens = len(tok.encode(" and the rain fell on the sea all night."))
    assert insert.usage.prompt_tokens == plain.usage.prompt_tokens + suffix_tokens + 1  # + the separator


def test_prompt_logprobs_match_echo_scores(live: Live) -> None:
    base = {"model": "m", "prompt": PROMPT, "max_tokens": 1, "temperature": 0}
    echoed = httpx.post(live.base_url + "/completions", json={**base, "echo": True, "logprobs": 0}).json()
    scored = httpx.post(live.base_url + "/completions", json={**base, "prompt_logprobs": 2}).json()
    positions = scored["choices"][0]["prompt_logprobs"]
    echo_lp = echoed["choices"][0]["logprobs"]["token_logprobs"]
    n_prompt = scored["usage"]["prompt_tokens"]
    assert len(positions) == n_prompt and positions[0] is None and echo_lp[0] is None
    for position, expected in zip(positions[1:], echo_lp[1:n_prompt], strict=True):
        ranks = sorted(entry["rank"] for entry in position.values())
        assert {1, 2} <= set(ranks) or len(position) == 2  # the top 2, plus the prompt token
        own = [e for e in position.values() if math.isclose(e["logprob"], expected, abs_tol=1e-5)]
        assert own, (position, expected)
    for position in positions[1:]:
        best = min(position.values(), key=lambda e: e["rank"])
        assert best["rank"] == 1 and all(best["logprob"] >= e["logprob"] for e in position.values())


def test_chat_prompt_logprobs_sit_at_the_top_level(live: Live) -> None:
    body = {"model": "m", "messages": CHAT, "max_tokens": 2, "prompt_logprobs": 0}
    done = httpx.post(live.url + "/vllm/v1/chat/completions", json=body).json()
    assert len(done["prompt_logprobs"]) == done["usage"]["prompt_tokens"]
    assert all(len(p) == 1 for p in done["prompt_logprobs"][1:])  # prompt_logprobs 0: the token alone


# ---- determinism of every processor ---------------------------------------------------------

PROCESSED: dict[str, Any] = {
    "presence_penalty": 0.8,
    "frequency_penalty": 0.4,
    "repetition_penalty": 1.2,
    "min_p": 0.05,
    "top_k": 40,
    "logit_bias": {"300": 2.5},
    "min_tokens": 5,
}


@pytest.mark.parametrize("extra", [PROCESSED, {"mirostat_target": 3.0, "mirostat_lr": 0.2}], ids=["stack", "mirostat"])
def test_processed_requests_are_deterministic_and_stream_alike(live: Live, extra: dict[str, Any]) -> None:
    body = {"model": "m", "messages": CHAT, "max_tokens": 40, "seed": 9, "temperature": 1.1, **extra}
    first = httpx.post(live.base_url + "/chat/completions", json=body)
    second = httpx.post(live.base_url + "/chat/completions", json=body)
    assert first.content == second.content
    text = ""
    with httpx.stream("POST", live.base_url + "/chat/completions", json={**body, "stream": True}) as stream:
        for line in stream.iter_lines():
            if line.startswith("data: {"):
                for choice in json.loads(line[6:])["choices"]:
                    text += choice["delta"].get("content") or ""
    assert text == first.json()["choices"][0]["message"]["content"]
