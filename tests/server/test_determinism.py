"""Same request + seed → same bytes: across runs, processes, concurrency, stream and not."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from tests.support.live import FROZEN, Live, serve_in_process

CHAT: dict[str, Any] = {
    "model": "gpt-4o-mini",
    "messages": [{"role": "user", "content": "Describe a quiet morning in the mountains."}],
    "max_tokens": 24,
    "logprobs": True,
    "top_logprobs": 3,
}
COMPLETION: dict[str, Any] = {
    "model": "m",
    "prompt": ["Once upon a time", "The report says"],
    "n": 2,
    "max_tokens": 16,
    "logprobs": 2,
}


def _post(url: str, path: str, body: dict[str, Any]) -> bytes:
    response = httpx.post(url + "/v1" + path, json=body, timeout=60)
    assert response.status_code == 200, response.text
    return response.content


def _content(raw: bytes) -> list[str]:
    return [c.get("message", {}).get("content") or c.get("text") for c in json.loads(raw)["choices"]]


@pytest.mark.parametrize(
    ("path", "body"), [("/chat/completions", CHAT), ("/completions", COMPLETION)], ids=["chat", "completions"]
)
def test_same_request_same_bytes(live: Live, path: str, body: dict[str, Any]) -> None:
    assert _post(live.url, path, body) == _post(live.url, path, body)


def test_without_seed_the_seed_is_derived_from_the_body(live: Live) -> None:
    a = httpx.post(live.base_url + "/chat/completions", json=CHAT)
    b = httpx.post(live.base_url + "/chat/completions", json={**CHAT, "user": "someone-else"})
    c = httpx.post(live.base_url + "/chat/completions", json={**CHAT, "max_tokens": 25})
    assert a.headers["x-mockserver-seed"] == b.headers["x-mockserver-seed"] != c.headers["x-mockserver-seed"]
    assert a.content == b.content


def test_seeds_change_sampled_output(live: Live) -> None:
    outputs = {
        tuple(_content(_post(live.url, "/chat/completions", {**CHAT, "seed": s, "temperature": 1.0}))) for s in range(4)
    }
    assert len(outputs) > 1


def test_temperature_zero_is_greedy_for_any_seed(live: Live) -> None:
    body = {**CHAT, "temperature": 0}
    outputs = {tuple(_content(_post(live.url, "/chat/completions", {**body, "seed": s}))) for s in range(4)}
    assert len(outputs) == 1
    done = json.loads(_post(live.url, "/chat/completions", {**body, "seed": 11}))
    for entry in done["choices"][0]["logprobs"]["content"]:
        assert entry["top_logprobs"][0]["token"] == entry["token"]


def test_identical_amid_16_concurrent_requests(live: Live) -> None:
    alone = _post(live.url, "/chat/completions", {**CHAT, "seed": 77})

    async def crowd() -> list[bytes]:
        async with httpx.AsyncClient(base_url=live.base_url, timeout=120) as c:
            bodies = [{**CHAT, "seed": 77 if i % 4 == 0 else i} for i in range(16)]
            responses = await asyncio.gather(*(c.post("/chat/completions", json=b) for b in bodies))
            return [r.content for i, r in enumerate(responses) if i % 4 == 0]

    for raw in asyncio.run(crowd()):
        assert raw == alone


def test_identical_in_another_server_process(live: Live) -> None:
    here = [_post(live.url, "/chat/completions", CHAT), _post(live.url, "/completions", COMPLETION)]
    with serve_in_process(["--frozen-time", str(FROZEN)]) as other:
        there = [_post(other.url, "/chat/completions", CHAT), _post(other.url, "/completions", COMPLETION)]
    assert here == there


def test_stream_content_equals_non_stream(live: Live) -> None:
    whole = json.loads(_post(live.url, "/chat/completions", {**CHAT, "n": 3}))
    texts = ["", "", ""]
    with httpx.stream("POST", live.base_url + "/chat/completions", json={**CHAT, "n": 3, "stream": True}) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                for choice in json.loads(line[6:])["choices"]:
                    texts[choice["index"]] += choice["delta"].get("content") or ""
    assert texts == [c["message"]["content"] for c in whole["choices"]]
