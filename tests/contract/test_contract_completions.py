"""Legacy completions through the official openai SDK against a live server. The tests taking
``backend`` run against every backend (script, replay, reference: tests/contract/conftest.py)."""

from __future__ import annotations

import math

import openai
import pytest

from tests.support.backends import Backend
from tests.support.spec import validate

PROMPT = "The weather in Lisbon today is"


def test_non_stream_parses(backend: Backend) -> None:
    body = {"model": "gpt-3.5-turbo-instruct", "prompt": PROMPT, "seed": 1}
    backend.prepare("/completions", body)
    done = backend.client.completions.create(**body)  # type: ignore[call-overload]
    assert done.object == "text_completion" and done.id.startswith("cmpl-")
    assert done.usage is not None
    assert done.choices[0].finish_reason == "length"
    assert done.usage.completion_tokens == 16  # the default max_tokens
    assert done.usage.total_tokens == done.usage.prompt_tokens + done.usage.completion_tokens
    validate("CreateCompletionResponse", done.model_dump(mode="json", exclude_unset=True))
    assert set(backend.sources) == {backend.name}


@pytest.mark.parametrize(
    ("prompt", "prompts"),
    [
        pytest.param(["one", "two"], 2, id="strings"),
        pytest.param([464, 693, 287], 1, id="token-ids"),
        pytest.param([[464, 693], [287, 1000, 5]], 2, id="token-id-lists"),
    ],
)
def test_prompt_forms_and_choice_order(client: openai.OpenAI, prompt: object, prompts: int) -> None:
    done = client.completions.create(model="gpt-3.5-turbo-instruct", prompt=prompt, n=2, max_tokens=3)  # type: ignore[arg-type]
    assert [c.index for c in done.choices] == list(range(prompts * 2))


def test_prompt_major_order_matches_single_prompts(client: openai.OpenAI) -> None:
    both = client.completions.create(model="m", prompt=["Alpha", "Beta"], n=2, max_tokens=4, temperature=0)
    beta = client.completions.create(model="m", prompt="Beta", n=1, max_tokens=4, temperature=0)
    assert both.choices[2].text == both.choices[3].text == beta.choices[0].text


def test_logprobs_shape_and_offsets(client: openai.OpenAI) -> None:
    done = client.completions.create(model="m", prompt=PROMPT, max_tokens=8, logprobs=3, seed=4)
    lp = done.choices[0].logprobs
    assert lp is not None and lp.tokens and lp.token_logprobs and lp.top_logprobs and lp.text_offset is not None
    assert done.usage is not None
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset)
    assert not any(t.startswith("bytes:") for t in lp.tokens)  # no token splits a character
    assert "".join(lp.tokens) == done.choices[0].text
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(len(lp.tokens))]
    assert lp.text_offset == sorted(lp.text_offset) and lp.text_offset[0] == 0
    # The requested alternatives, plus the sampled token where it is not among them (the first and last).
    assert [len(top) for top in lp.top_logprobs] == [4, 3, 3, 3, 3, 3, 3, 4]
    for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs, strict=True):
        assert top[token] == logprob


def test_echo_scores_the_prompt(client: openai.OpenAI) -> None:
    done = client.completions.create(model="m", prompt=PROMPT, max_tokens=0, echo=True, logprobs=1)
    choice = done.choices[0]
    assert choice.text == PROMPT and choice.finish_reason == "length"
    lp = choice.logprobs
    assert lp is not None and lp.token_logprobs is not None and lp.top_logprobs is not None
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    assert all(isinstance(x, float) and x <= 0 for x in lp.token_logprobs[1:])
    assert done.usage is not None and done.usage.completion_tokens == 0
    assert done.usage.prompt_tokens == len(lp.tokens or [])
    total = sum(x for x in lp.token_logprobs[1:] if x is not None)
    assert math.isfinite(total)


def test_echo_with_generation_continues_the_prompt(client: openai.OpenAI) -> None:
    plain = client.completions.create(model="m", prompt=PROMPT, max_tokens=5, temperature=0)
    echoed = client.completions.create(model="m", prompt=PROMPT, max_tokens=5, temperature=0, echo=True)
    assert echoed.choices[0].text == PROMPT + plain.choices[0].text


def test_stream_matches_non_stream_with_usage(backend: Backend) -> None:
    kwargs = dict(model="m", prompt=[PROMPT, "Once upon a time"], n=2, max_tokens=12, seed=8, logprobs=2, echo=True)
    streamed = {"stream": True, "stream_options": {"include_usage": True}}
    backend.prepare("/completions", kwargs, {**kwargs, **streamed})
    whole = backend.client.completions.create(**kwargs)  # type: ignore[call-overload]
    chunks = list(backend.client.completions.create(**streamed, **kwargs))  # type: ignore[call-overload]
    texts: dict[int, str] = {}
    finishes: dict[int, list[str]] = {}
    offsets: dict[int, list[int]] = {}
    for chunk in chunks[:-1]:
        for c in chunk.choices:
            texts[c.index] = texts.get(c.index, "") + c.text
            if c.finish_reason:
                finishes.setdefault(c.index, []).append(c.finish_reason)
            if c.logprobs and c.logprobs.text_offset:
                offsets.setdefault(c.index, []).extend(c.logprobs.text_offset)
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage
    for c in whole.choices:
        assert texts[c.index] == c.text
        assert finishes[c.index] == [c.finish_reason]
        assert c.logprobs is not None and offsets[c.index] == c.logprobs.text_offset
    assert set(backend.sources) == {backend.name}


def test_stop_sequences(client: openai.OpenAI) -> None:
    letter = "Dear Maria,"  # greedy continues this one at length
    base = client.completions.create(model="m", prompt=letter, max_tokens=30, temperature=0).choices[0].text
    assert len(base) > 6
    stops = [base[5:7], "\u0000never"]
    cut = client.completions.create(model="m", prompt=letter, max_tokens=30, temperature=0, stop=stops)
    assert cut.choices[0].text == base[: base.find(stops[0])]
    assert cut.choices[0].finish_reason == "stop"


def test_max_tokens_gives_length(client: openai.OpenAI) -> None:
    done = client.completions.create(model="m", prompt=PROMPT, max_tokens=2, temperature=0, stop=None)
    assert done.choices[0].finish_reason == "length"
    assert done.usage is not None and done.usage.completion_tokens == 2


def test_raw_stream_is_sse_with_done(backend: Backend) -> None:
    body = {"model": "m", "prompt": PROMPT, "max_tokens": 3, "stream": True}
    backend.prepare("/completions", body)
    with backend.http.stream("POST", backend.base_url + "/completions", json=body) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]" and lines.count("data: [DONE]") == 1
    assert set(backend.sources) == {backend.name}
