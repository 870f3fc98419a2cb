"""Token ids of real vocabularies (tiktoken's ``cl100k_base`` / ``o200k_base``) in prompts,
embedding inputs, ``logit_bias`` and ``stop_token_ids``: accepted up to the model family's
vocabulary, folded into the reference model's, counted one token per id sent."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from openai.types import Completion

from mockserver.gpt import vocabularies
from mockserver.gpt.tokenizer import Tokenizer
from tests.support.live import Live

# "hello world" and friends in cl100k_base, as LangChain's OpenAIEmbeddings sends them.
CL100K_IDS = [15339, 1917, 0, 100256 - 1, 100257]
O200K_IDS = [24912, 2375, 200018]


def _post(live: Live, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{live.base_url}/{path}", json=body, timeout=30)


@pytest.mark.parametrize(
    ("model", "family", "size"),
    [
        ("gpt-4", "cl100k_base", 100_277),
        ("gpt-3.5-turbo-instruct", "cl100k_base", 100_277),
        ("text-embedding-3-small", "cl100k_base", 100_277),
        ("text-embedding-ada-002", "cl100k_base", 100_277),
        ("gpt-4o-mini", "o200k_base", 200_019),
        ("gpt-4.1-nano", "o200k_base", 200_019),
        ("o3-mini", "o200k_base", 200_019),
        ("gpt-5", "o200k_base", 200_019),
        ("ft:gpt-4o-mini-2024-07-18:org::abc", "o200k_base", 200_019),
        ("openai/gpt-4o", "o200k_base", 200_019),
        ("accounts/fireworks/models/gpt-oss-20b", "o200k_harmony", 201_088),
        ("davinci", "r50k_base", 50_257),
        ("m", None, 2048),
        ("adapter-7b", None, 2048),
    ],
)
def test_families(model: str, family: str | None, size: int) -> None:
    found = vocabularies.family(model)
    assert (found.name if found else None) == family
    assert vocabularies.vocabulary(model, 2048) == size


def test_fold_keeps_reference_ids_and_avoids_specials() -> None:
    assert [vocabularies.fold(t, 2048) for t in (0, 1, 2, 464, 2047)] == [0, 1, 2, 464, 2047]
    folded = [vocabularies.fold(t, 2048) for t in range(2048, 100_277)]
    assert min(folded) == 3 and max(folded) == 2047  # every ordinary token, never a special one
    assert len(set(folded)) == 2045
    assert vocabularies.fold(100_257, 2048, eot=100_257) == 0  # cl100k's <|endoftext|> is ours
    assert vocabularies.fold(15339, 2048) != vocabularies.fold(15340, 2048)  # neighbours spread


@pytest.mark.parametrize(("model", "ids"), [("gpt-3.5-turbo-instruct", CL100K_IDS), ("gpt-4o-mini", O200K_IDS)])
def test_completions_prompt_of_real_ids_counts_what_was_sent(client: openai.OpenAI, model: str, ids: list[int]) -> None:
    # lm-eval's loglikelihood request: the prompt scored, nothing generated.
    done = client.completions.create(model=model, prompt=ids, max_tokens=0, echo=True, logprobs=1, seed=3)
    assert done.usage is not None and done.usage.prompt_tokens == len(ids)
    lp = done.choices[0].logprobs
    assert lp is not None and lp.tokens is not None and len(lp.tokens) == len(ids)  # one position per id sent
    assert lp.token_logprobs is not None and lp.token_logprobs[0] is None
    assert all(isinstance(x, float) for x in lp.token_logprobs[1:])
    again = client.completions.create(model=model, prompt=ids, max_tokens=0, echo=True, logprobs=1, seed=3)
    assert again.choices[0].logprobs == lp  # folding is deterministic


def test_completions_lists_of_real_ids(client: openai.OpenAI) -> None:
    done = client.completions.create(model="gpt-4", prompt=[CL100K_IDS, [15339]], max_tokens=3, seed=1)
    assert len(done.choices) == 2
    assert done.usage is not None and done.usage.prompt_tokens == len(CL100K_IDS) + 1


def test_reference_ids_read_as_themselves(client: openai.OpenAI) -> None:
    # Ids of the reference vocabulary mean the same for a cl100k model as for any other id.
    ids = [464, 318, 257]
    first = client.completions.create(model="gpt-4", prompt=ids, max_tokens=5, seed=2, temperature=0)
    other = client.completions.create(model="m", prompt=ids, max_tokens=5, seed=2, temperature=0)
    assert first.choices[0].text == other.choices[0].text


@pytest.mark.parametrize(
    ("body", "param", "says"),
    [
        ({"model": "gpt-4", "prompt": [15339, 100277]}, "prompt", "[0, 100277)"),
        ({"model": "gpt-4o", "prompt": [[1], [5, -1]]}, "prompt[1]", "[0, 200019)"),
        ({"model": "gpt-4o", "prompt": [[1], [200019]]}, "prompt[1]", "[0, 200019)"),
        ({"model": "m", "prompt": [2048]}, "prompt", "[0, 2048)"),  # unknown family: the reference's own
        ({"model": "gpt-4", "prompt": [99999999999]}, "prompt", "[0, 100277)"),
    ],
    ids=["beyond-cl100k", "negative-in-list", "beyond-o200k", "unknown-family", "absurd"],
)
def test_ids_outside_the_family_are_a_400_naming_the_field(
    live: Live, body: dict[str, Any], param: str, says: str
) -> None:
    response = _post(live, "completions", body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and says in error["message"]


def test_embeddings_of_tiktoken_ids(client: openai.OpenAI) -> None:
    # LangChain's OpenAIEmbeddings sends lists of cl100k ids.
    one = client.embeddings.create(model="text-embedding-3-small", input=[CL100K_IDS, [15339, 1917]])
    assert one.usage.prompt_tokens == len(CL100K_IDS) + 2
    again = client.embeddings.create(model="text-embedding-3-small", input=[CL100K_IDS, [15339, 1917]])
    assert [d.embedding for d in one.data] == [d.embedding for d in again.data]
    assert one.data[0].embedding != one.data[1].embedding


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "text-embedding-3-small", "input": [[1], [100277]]}, "input[1]"),
        ({"model": "text-embedding-3-small", "input": [-3]}, "input"),
        ({"model": "my-embedder", "input": [15339]}, "input"),  # no known family: 2048 ids
    ],
)
def test_embedding_ids_outside_the_family(live: Live, body: dict[str, Any], param: str) -> None:
    response = _post(live, "embeddings", body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param


def _lisbon(client: openai.OpenAI, bias: dict[str, int] | None = None) -> Completion:
    return client.completions.create(
        model="gpt-4", prompt="The weather in Lisbon", max_tokens=8, temperature=0, seed=4, logprobs=1, logit_bias=bias
    )


def test_logit_bias_on_a_real_id_acts_on_its_folded_token(client: openai.OpenAI) -> None:
    plain = _lisbon(client)
    assert plain.choices[0].logprobs is not None and plain.choices[0].logprobs.tokens
    # A cl100k id that folds onto the first token the model chose: banning it changes the answer.
    tok = Tokenizer.shipped()
    first = tok.encode(plain.choices[0].logprobs.tokens[0])[0]
    key = next(t for t in range(2048, 100_277) if vocabularies.fold(t, tok.vocab_size, 100_257) == first)
    banned = _lisbon(client, {str(key): -100})
    assert banned.choices[0].text != plain.choices[0].text
    with pytest.raises(openai.BadRequestError) as caught:
        _lisbon(client, {"100277": -100})
    assert caught.value.body is not None and caught.value.body["param"] == "logit_bias"  # type: ignore[index]


def test_stop_token_ids_follow_the_same_rule(live: Live) -> None:
    ok = _post(live, "completions", {"model": "gpt-4", "prompt": "x", "max_tokens": 2, "stop_token_ids": [100257]})
    assert ok.status_code == 200, ok.text
    bad = _post(live, "completions", {"model": "gpt-4", "prompt": "x", "stop_token_ids": [100277]})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "stop_token_ids"
