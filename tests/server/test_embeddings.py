"""``POST /v1/embeddings`` through the official SDK against the live server."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import openai
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from mockserver.gpt.tokenizer import Tokenizer
from mockserver.media import vectors as embeddings
from mockserver.spine.backend import ModelBase
from mockserver.wire.json import dumps
from tests.support.live import Live
from tests.support.spec import validate

SMALL = "text-embedding-3-small"
TEXTS = ["The capital of France is Paris.", "It is rainy in London today.", "Thanks!"]


def vectors(response: Any) -> np.ndarray[Any, np.dtype[np.float32]]:
    return np.array([d.embedding for d in response.data], dtype=np.float32)


@pytest.fixture(scope="module")
def http(live: Live) -> Iterator[httpx.Client]:
    # One client for the module: each new httpx client builds an SSL context (~50 ms).
    with httpx.Client(base_url=live.url, timeout=30) as c:
        yield c


def post(http: httpx.Client, body: dict[str, Any], prefix: str = "") -> httpx.Response:
    return http.post(f"{prefix}/v1/embeddings", json=body)


@pytest.mark.parametrize(
    ("model", "size"),
    [(SMALL, 1536), ("text-embedding-3-large", 3072), ("text-embedding-ada-002", 1536), ("my-embedder", 1536)],
)
def test_native_dimensions_unit_length(client: openai.OpenAI, model: str, size: int) -> None:
    got = vectors(client.embeddings.create(model=model, input=TEXTS))
    assert got.shape == (len(TEXTS), size)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("count", [3, 20], ids=["small-body", "large-body"])  # large: written in a thread
def test_float_and_base64_are_the_same_vectors(client: openai.OpenAI, count: int) -> None:
    texts = [f"{TEXTS[i % 3]} {i}" for i in range(count)]
    as_base64 = client.embeddings.create(model=SMALL, input=texts)  # the SDK's default, decoded by it
    as_float = client.embeddings.create(model=SMALL, input=texts, encoding_format="float")
    # JSON carries each float32 as its shortest decimal, base64 its exact bytes: the same float32.
    assert np.array_equal(vectors(as_base64), vectors(as_float))
    assert vectors(as_float).shape == (count, 1536)


def test_base64_is_little_endian_float32(http: httpx.Client) -> None:
    floats = post(http, {"model": SMALL, "input": "Hello", "encoding_format": "float"}).json()
    packed = post(http, {"model": SMALL, "input": "Hello", "encoding_format": "base64"}).json()
    decoded = np.frombuffer(base64.b64decode(packed["data"][0]["embedding"]), dtype="<f4")
    assert np.array_equal(decoded, np.array(floats["data"][0]["embedding"], dtype=np.float32))


def test_floats_are_written_short_and_exact() -> None:
    import torch

    from mockserver.backends.reference.pooling import shortest

    values = torch.tensor([[0.0, 1.0, -0.1, 0.0058215605, 3e-9, -1e-30]])
    shown = shortest(list(values))[0]
    assert [repr(v) for v in shown[:5]] == ["0.0", "1.0", "-0.1", "0.0058215605", "3e-09"]
    assert np.array_equal(np.array(shown, dtype=np.float32), values.numpy()[0])  # -1e-30 too, written long


def test_render_is_dumps_one_embedding_at_a_time() -> None:
    body = embeddings.response("m", [[0.5, -0.25], [1.0, 0.0]], 7, "float")
    assert embeddings.render(body) == dumps(body)


class _NoEmbeddings(ModelBase):
    async def generate(self, request: Any) -> Any:  # pragma: no cover - never called
        raise NotImplementedError
        yield


async def test_a_backend_without_embeddings_is_a_clear_404() -> None:
    app = create_app(Settings(), backend=_NoEmbeddings())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        response = await c.post("/v1/embeddings", json={"model": SMALL, "input": "x"})
    assert response.status_code == 404
    assert "reference" in response.json()["error"]["message"]


def test_dimensions_truncate_and_renormalise(client: openai.OpenAI) -> None:
    full = vectors(client.embeddings.create(model="text-embedding-3-large", input=TEXTS))
    short = vectors(client.embeddings.create(model="text-embedding-3-large", input=TEXTS, dimensions=256))
    assert short.shape == (len(TEXTS), 256)
    np.testing.assert_allclose(np.linalg.norm(short, axis=1), 1.0, atol=1e-5)
    expected = full[:, :256] / np.linalg.norm(full[:, :256], axis=1, keepdims=True)
    np.testing.assert_allclose(short, expected, atol=1e-6)


def test_usage_counts_tokens_exactly(client: openai.OpenAI) -> None:
    tokenizer = Tokenizer.shipped()
    expected = sum(len(tokenizer.encode(t)) for t in TEXTS)
    usage = client.embeddings.create(model=SMALL, input=TEXTS).usage
    assert (usage.prompt_tokens, usage.total_tokens) == (expected, expected)


def test_same_input_same_bytes_alone_or_batched(http: httpx.Client) -> None:
    body = {"model": SMALL, "input": TEXTS, "encoding_format": "base64"}
    first, again = post(http, body).content, post(http, body).content
    assert first == again
    batched = [d["embedding"] for d in post(http, body).json()["data"]]
    alone = [post(http, {**body, "input": t}).json()["data"][0]["embedding"] for t in TEXTS]
    assert batched == alone
    repeated = post(http, {**body, "input": [TEXTS[1], TEXTS[1]]}).json()["data"]
    assert repeated[0]["embedding"] == repeated[1]["embedding"] == alone[1]


async def test_concurrent_requests_do_not_change_vectors(async_client: openai.AsyncOpenAI) -> None:
    alone = [vectors(await async_client.embeddings.create(model=SMALL, input=t)) for t in TEXTS]
    together = await asyncio.gather(*(async_client.embeddings.create(model=SMALL, input=t) for t in TEXTS * 3))
    for i, response in enumerate(together):
        assert np.array_equal(vectors(response), alone[i % len(TEXTS)])


def test_token_id_inputs(client: openai.OpenAI) -> None:
    ids = [Tokenizer.shipped().encode(t) for t in TEXTS]
    from_text = vectors(client.embeddings.create(model=SMALL, input=TEXTS))
    from_ids = vectors(client.embeddings.create(model=SMALL, input=ids))
    one = client.embeddings.create(model=SMALL, input=ids[0])
    assert np.array_equal(from_text, from_ids)
    assert np.array_equal(vectors(one)[0], from_text[0])
    assert one.usage.prompt_tokens == len(ids[0])


def test_response_matches_the_spec(http: httpx.Client) -> None:
    response = post(http, {"model": SMALL, "input": TEXTS, "encoding_format": "float", "dimensions": 8})
    assert response.status_code == 200
    body = response.json()
    validate("CreateEmbeddingResponse", body)
    assert body["object"] == "list" and body["model"] == SMALL
    assert [d["index"] for d in body["data"]] == [0, 1, 2]


def test_profile_prefix(http: httpx.Client) -> None:
    response = post(http, {"model": "nomic-ai/nomic-embed-text-v1.5", "input": "x"}, prefix="/fireworks")
    assert response.status_code == 200
    assert len(response.json()["data"][0]["embedding"]) == 1536


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "x"}, "model"),
        ({"model": SMALL}, "input"),
        ({"model": SMALL, "input": 5}, "input"),
        ({"model": SMALL, "input": []}, "input"),
        ({"model": SMALL, "input": ""}, "input"),
        ({"model": SMALL, "input": ["a", ""]}, "input[1]"),
        ({"model": SMALL, "input": [[1], []]}, "input[1]"),
        ({"model": SMALL, "input": ["a", 1]}, "input[1]"),
        ({"model": SMALL, "input": [5, 100277]}, "input"),
        ({"model": SMALL, "input": [[5], [-1]]}, "input[1]"),
        ({"model": SMALL, "input": ["a"] * 2049}, "input"),
        ({"model": SMALL, "input": [7] * 8193}, "input"),
        ({"model": SMALL, "input": ["x", [7] * 8193]}, "input[1]"),
        ({"model": SMALL, "input": [[7] * 8000] * 38}, "input"),  # 304,000 tokens in all
        ({"model": SMALL, "input": "x", "dimensions": 1537}, "dimensions"),
        ({"model": SMALL, "input": "x", "dimensions": 0}, "dimensions"),
        ({"model": "text-embedding-ada-002", "input": "x", "dimensions": 8}, "dimensions"),
        ({"model": SMALL, "input": "x", "encoding_format": "hex"}, "encoding_format"),
        ({"model": SMALL, "input": "x", "extra_body": 3}, "extra_body"),
    ],
    ids=[
        "no-model", "no-input", "input-number", "empty-list", "empty-string", "empty-string-in-list",
        "empty-token-list", "mixed-list", "bad-token-id", "negative-token-id", "too-many-inputs",
        "too-long", "too-long-in-list", "too-many-tokens", "dimensions-too-big", "dimensions-zero",
        "dimensions-on-ada", "encoding-format", "extra-body",
    ],
)  # fmt: skip
def test_bad_input_is_a_400_naming_the_parameter(http: httpx.Client, body: dict[str, Any], param: str) -> None:
    response = post(http, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["param"]) == ("invalid_request_error", param)
    assert error["message"]
    assert post(http, {"model": SMALL, "input": "still serving"}).status_code == 200


def test_a_lone_surrogate_is_a_400_not_a_crash(http: httpx.Client) -> None:
    raw = b'{"model": "text-embedding-3-small", "input": ["fine", "half a pair: \\ud800"]}'
    response = http.post("/v1/embeddings", content=raw, headers={"content-type": "application/json"})
    assert (response.status_code, response.json()["error"]["param"]) == (400, "input[1]")


def test_too_long_is_context_length_exceeded(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.embeddings.create(model=SMALL, input=[7] * 8193)
    assert caught.value.code == "context_length_exceeded" and caught.value.param == "input"


# (anchor, paraphrase, unrelated): ordinary English, in the flavour of the training corpus.
TRIPLES = [
    (
        "The capital of France is Paris.",
        "Paris is the capital city of France.",
        "My brother plays the guitar every evening.",
    ),
    (
        "It is rainy in London today.",
        "Today it is raining in London.",
        "The company helps clients build better websites.",
    ),
    (
        "She works at a bank in New York.",
        "She has a job at a New York bank.",
        "The weather is cold and snowy this morning.",
    ),
    ("I would like a cup of coffee, please.", "Could I have a coffee, please?", "The meeting starts at nine tomorrow."),
    ("The cat is sleeping on the sofa.", "On the sofa, the cat is asleep.", "Prices of houses rose again this year."),
    (
        "He lives in Berlin and works as a teacher.",
        "He is a teacher who lives in Berlin.",
        "Please send me the report by Friday.",
    ),
    (
        "The team won the football match yesterday.",
        "Yesterday the team won their football game.",
        "My phone battery is almost empty.",
    ),
    (
        "Can you help me find a good book?",
        "Could you help me to find a good book?",
        "The river flows into the sea near the city.",
    ),
    (
        "The company makes software for hospitals.",
        "This company builds software used by hospitals.",
        "We went hiking in the mountains last summer.",
    ),
    ("Thank you very much for your help.", "Thanks a lot for helping me.", "The train to Madrid leaves at noon."),
]


def test_a_paraphrase_ranks_nearer_than_an_unrelated_sentence(client: openai.OpenAI) -> None:
    flat = [s for triple in TRIPLES for s in triple]
    got = vectors(client.embeddings.create(model=SMALL, input=flat)).reshape(len(TRIPLES), 3, -1)
    anchor, paraphrase, unrelated = got[:, 0], got[:, 1], got[:, 2]
    near = (anchor * paraphrase).sum(axis=1)  # unit vectors: dot product = cosine
    far = (anchor * unrelated).sum(axis=1)
    wins = int((near > far).sum())
    assert wins == len(TRIPLES), f"the paraphrase ranked nearer in only {wins} of {len(TRIPLES)}: {near - far}"
