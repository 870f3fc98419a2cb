"""Chat completions through the official openai SDK against a live server. The tests taking
``backend`` run against every backend (script, replay, reference: tests/contract/conftest.py)."""

from __future__ import annotations

import openai
import pytest

from tests.support.backends import Backend
from tests.support.live import Live
from tests.support.spec import validate

MESSAGES = [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Tell me about Paris."}]


def test_non_stream_parses_and_usage_adds_up(backend: Backend) -> None:
    body = {"model": "gpt-4o-mini", "messages": MESSAGES, "max_tokens": 12, "seed": 3}
    backend.prepare("/chat/completions", body)
    done = backend.client.chat.completions.create(**body)  # type: ignore[call-overload]
    assert done.object == "chat.completion"
    assert done.id.startswith("chatcmpl-")
    choice = done.choices[0]
    assert choice.message.role == "assistant"
    assert isinstance(choice.message.content, str)
    assert choice.finish_reason == "length"
    assert done.usage is not None
    assert done.usage.total_tokens == done.usage.prompt_tokens + done.usage.completion_tokens
    assert done.usage.completion_tokens == 12
    validate("CreateChatCompletionResponse", done.model_dump(mode="json", exclude_unset=True))
    assert set(backend.sources) == {backend.name}


def test_raw_body_validates_against_spec(live: Live) -> None:
    import httpx

    body = {"model": "gpt-4o-mini", "messages": MESSAGES, "max_tokens": 8, "logprobs": True, "top_logprobs": 3}
    data = httpx.post(live.base_url + "/chat/completions", json=body).json()
    validate("CreateChatCompletionResponse", data)


def test_logprobs_are_self_consistent(client: openai.OpenAI) -> None:
    done = client.chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, max_tokens=10, logprobs=True, top_logprobs=5, seed=1
    )
    choice = done.choices[0]
    assert choice.logprobs is not None and choice.logprobs.content is not None
    entries = choice.logprobs.content
    assert done.usage is not None
    assert choice.finish_reason == "length"
    assert len(entries) == done.usage.completion_tokens == 10
    assert "".join(e.token for e in entries) == choice.message.content
    for entry in entries:
        assert entry.logprob <= 0
        assert len(entry.top_logprobs) == 5
        assert bytes(entry.bytes or []).decode() == entry.token
        probs = [t.logprob for t in entry.top_logprobs]
        assert probs == sorted(probs, reverse=True)
        # The sampled token is among the top 5 here, and scores the same there.
        assert [alt.logprob for alt in entry.top_logprobs if alt.token == entry.token] == [entry.logprob]


def test_greedy_logprob_is_the_top_alternative(client: openai.OpenAI) -> None:
    done = client.chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, max_tokens=8, temperature=0, logprobs=True, top_logprobs=1
    )
    assert done.choices[0].logprobs is not None
    content = done.choices[0].logprobs.content
    assert content is not None and len(content) == 8
    for entry in content:
        assert entry.top_logprobs[0].token == entry.token
        assert entry.top_logprobs[0].logprob == entry.logprob


def test_n_choices_in_order(client: openai.OpenAI) -> None:
    done = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, max_tokens=6, n=3, seed=9)
    assert [c.index for c in done.choices] == [0, 1, 2]
    assert len({c.message.content for c in done.choices}) > 1  # independent draws


def test_stream_matches_non_stream(backend: Backend) -> None:
    kwargs = dict(model="gpt-4o-mini", messages=MESSAGES, max_tokens=20, n=2, seed=5, logprobs=True, top_logprobs=2)
    streamed = {"stream": True, "stream_options": {"include_usage": True}}
    backend.prepare("/chat/completions", kwargs, {**kwargs, **streamed})
    whole = backend.client.chat.completions.create(**kwargs)  # type: ignore[call-overload]
    chunks = list(backend.client.chat.completions.create(**streamed, **kwargs))  # type: ignore[call-overload]
    texts = {0: "", 1: ""}
    finishes: dict[int, list[str]] = {0: [], 1: []}
    roles = []
    tokens: dict[int, list[str]] = {0: [], 1: []}
    for chunk in chunks[:-1]:
        assert chunk.usage is None
        validate("CreateChatCompletionStreamResponse", chunk.model_dump(mode="json", exclude_unset=True))
        for c in chunk.choices:
            if c.delta.role:
                roles.append(c.index)
            texts[c.index] += c.delta.content or ""
            if c.finish_reason:
                finishes[c.index].append(c.finish_reason)
            if c.logprobs and c.logprobs.content:
                tokens[c.index] += [t.token for t in c.logprobs.content]
    assert sorted(roles) == [0, 1]
    usage_chunk = chunks[-1]
    assert usage_chunk.choices == [] and usage_chunk.usage == whole.usage
    for c in whole.choices:
        assert texts[c.index] == c.message.content
        assert finishes[c.index] == [c.finish_reason]  # exactly one finish_reason per choice
        assert c.logprobs is not None
        assert tokens[c.index] == [t.token for t in c.logprobs.content or []]
    assert len({ch.id for ch in chunks}) == 1 and chunks[0].id == whole.id
    assert set(backend.sources) == {backend.name}


def test_stream_without_include_usage_has_no_usage_chunk(backend: Backend) -> None:
    body = {"model": "gpt-4o-mini", "messages": MESSAGES, "max_tokens": 4, "stream": True}
    backend.prepare("/chat/completions", body)
    chunks = list(backend.client.chat.completions.create(**body))  # type: ignore[call-overload]
    assert all(chunk.choices for chunk in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert set(backend.sources) == {backend.name}


def test_stop_string_is_cut_and_excluded(client: openai.OpenAI) -> None:
    base = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, max_tokens=30, temperature=0)
    text = base.choices[0].message.content or ""
    assert len(text) > 4
    stop = text[2:4]
    cut = client.chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, max_tokens=30, temperature=0, stop=[stop]
    )
    assert cut.choices[0].message.content == text[: text.find(stop)]
    assert cut.choices[0].finish_reason == "stop"
    streamed = client.chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, max_tokens=30, temperature=0, stop=stop, stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == cut.choices[0].message.content


def test_max_completion_tokens(client: openai.OpenAI) -> None:
    done = client.chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, max_completion_tokens=3, temperature=0, seed=0
    )
    assert done.choices[0].finish_reason == "length"
    assert done.usage is not None and done.usage.completion_tokens == 3


def test_model_ends_replies_by_itself(client: openai.OpenAI) -> None:
    stops = 0
    for seed in range(6):
        done = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, seed=seed)
        stops += done.choices[0].finish_reason == "stop"
    assert stops == 6


async def test_async_client_stream_and_non_stream(async_client: openai.AsyncOpenAI) -> None:
    whole = await async_client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, max_tokens=10, seed=2)
    stream = await async_client.chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, max_tokens=10, seed=2, stream=True
    )
    text = ""
    async for chunk in stream:
        text += chunk.choices[0].delta.content or ""
    assert text == whole.choices[0].message.content


@pytest.mark.parametrize("role", ["developer", "assistant", "tool"])
def test_other_roles_are_accepted(client: openai.OpenAI, role: str) -> None:
    messages = [{"role": role, "content": "Noted.", **({"tool_call_id": "call_1"} if role == "tool" else {})}]
    messages.append({"role": "user", "content": [{"type": "text", "text": "And now?"}]})
    done = client.chat.completions.create(model="gpt-4o-mini", messages=messages, max_tokens=4)  # type: ignore[arg-type]
    assert done.choices[0].message.content is not None
