"""The rest of the fault machinery on a live server: the rate limiter, latency, the journal and
the admin API, and the same fault decisions from the same seed in two server processes. (The
journal's verdicts and the latency timelines without a server: tests/unit/faults/.)"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import openai
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support.live import FROZEN, Live, serve_in_process, serve_in_thread

ADMIN = "/__mockserver"


@pytest.fixture(scope="module")
def limited() -> Iterator[Live]:
    settings = Settings(frozen_time=FROZEN, rate_limit_rpm=100, rate_limit_tpm=100_000, admin_token="admin-secret")
    with serve_in_thread(create_app(settings)) as live:
        yield live


AUTH = {"authorization": "Bearer admin-secret"}


# ---- rate limits ---------------------------------------------------------------------------


def test_remaining_counts_stay_exact_under_64_concurrent_clients(limited: Live) -> None:
    async def one(client: httpx.AsyncClient) -> int:
        response = await client.get("/v1/models", headers={"authorization": "Bearer key-concurrent"})
        assert response.status_code == 200
        return int(response.headers["x-ratelimit-remaining-requests"])

    async def burst() -> list[int]:
        async with httpx.AsyncClient(base_url=limited.url, limits=httpx.Limits(max_connections=64)) as client:
            return await asyncio.gather(*(one(client) for _ in range(64)))

    remaining = asyncio.run(burst())
    assert sorted(remaining) == list(range(36, 100))  # every request took exactly one, none twice


def test_an_empty_bucket_is_a_429_until_the_virtual_clock_refills_it(limited: Live) -> None:
    headers = {"authorization": "Bearer key-drain"}
    with httpx.Client() as client:
        statuses = [client.get(limited.base_url + "/models", headers=headers).status_code for _ in range(101)]
    assert statuses == [200] * 100 + [429]
    refused = httpx.get(limited.base_url + "/models", headers=headers)
    assert refused.json()["error"]["code"] == "rate_limit_exceeded"
    assert float(refused.headers["retry-after"]) == pytest.approx(0.6, abs=0.01)  # one request = 60 s / 100
    assert refused.headers["x-ratelimit-remaining-requests"] == "0"
    moved = httpx.post(limited.url + ADMIN + "/clock", json={"advance": 0.6}, headers=AUTH)
    assert moved.json() == {"now": FROZEN + 0.6, "virtual": True}
    assert httpx.get(limited.base_url + "/models", headers=headers).status_code == 200
    with (
        openai.OpenAI(base_url=limited.base_url, api_key="key-drain", max_retries=0) as client,
        pytest.raises(openai.RateLimitError),
    ):
        client.models.list()


def test_tokens_per_minute(limited: Live) -> None:
    headers = {"authorization": "Bearer key-tokens"}
    body = {"model": "m", "prompt": "x", "max_tokens": 40_000}
    first = httpx.post(limited.base_url + "/completions", json=body, headers=headers)
    assert first.status_code == 400  # context overflow, but the tokens were charged at the door
    assert int(first.headers["x-ratelimit-remaining-tokens"]) == 100_000 - 40_000  # 'x' / 4 + max_tokens
    httpx.post(limited.base_url + "/completions", json=body, headers=headers)
    third = httpx.post(limited.base_url + "/completions", json=body, headers=headers)
    assert third.status_code == 429 and third.json()["error"]["type"] == "tokens"


# ---- the admin API -------------------------------------------------------------------------


def test_admin_needs_its_token_and_answers_in_the_envelope(limited: Live) -> None:
    assert httpx.get(limited.url + ADMIN + "/journal").status_code == 401
    assert httpx.get(limited.url + ADMIN + "/journal", headers={"authorization": "Bearer nope"}).status_code == 401
    assert httpx.get(limited.url + ADMIN + "/journal", headers=AUTH).status_code == 200
    catalogue = httpx.get(limited.url + ADMIN + "/faults", headers=AUTH).json()["catalogue"]
    assert {"name": "stream.cut_after", "kind": "stream"}.items() <= catalogue[
        [c["name"] for c in catalogue].index("stream.cut_after")
    ].items()
    bad = httpx.post(limited.url + ADMIN + "/clock", json={"advance": -1}, headers=AUTH)
    assert bad.status_code == 400 and "error" in bad.json()


def test_clock_is_refused_on_real_time() -> None:
    with serve_in_thread(create_app(Settings())) as live:
        response = httpx.post(live.url + ADMIN + "/clock", json={"advance": 1})
        assert response.status_code == 400 and "--frozen-time" in response.json()["error"]["message"]
        assert httpx.get(live.url + ADMIN + "/clock").json()["virtual"] is False


def test_faults_endpoint_adds_session_rules_and_reset_clears_them(live: Live) -> None:
    added = httpx.post(live.url + ADMIN + "/faults", json={"faults": "http.503", "session": "s1"})
    assert added.status_code == 200 and added.json()["session"] == "s1"
    hit = httpx.get(live.base_url + "/models", headers={"x-mockserver-session": "s1"})
    assert hit.status_code == 503 and hit.headers["x-mockserver-faults"] == "http.503"
    assert httpx.get(live.base_url + "/models", headers={"x-mockserver-session": "s2"}).status_code == 200
    assert httpx.post(live.url + ADMIN + "/reset", params={"session": "s1"}).status_code == 200
    assert httpx.get(live.base_url + "/models", headers={"x-mockserver-session": "s1"}).status_code == 200


def test_admin_paths_are_not_journaled_and_provider_paths_are(live: Live) -> None:
    session = "journal-shape"
    httpx.post(
        live.base_url + "/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "seed": 3, "max_tokens": 3},
        headers={"x-mockserver-session": session},
    )
    journal = httpx.get(live.url + ADMIN + "/journal", params={"session": session}).json()
    (entry,) = journal["entries"]
    assert entry["status"] == 200 and entry["seed"] == 3 and entry["ended"] == "done"
    assert entry["body"]["messages"][0]["content"] == "hi" and entry["bytes"] > 0
    assert httpx.delete(live.url + ADMIN + "/journal", params={"session": session}).status_code == 200
    assert httpx.get(live.url + ADMIN + "/journal", params={"session": session}).json()["entries"] == []


# ---- latency ----------------------------------------------------------------------------


def test_server_latency_setting_and_time_scale() -> None:
    settings = Settings(frozen_time=FROZEN, latency="ttft=2000; itl=1000", time_scale=0.0001)
    with serve_in_thread(create_app(settings)) as live:
        body = {"model": "m", "prompt": "x", "max_tokens": 5, "temperature": 0}
        assert httpx.post(live.base_url + "/completions", json=body).elapsed.total_seconds() < 1.0


# ---- the same decisions from the same seed, in two processes -------------------------------


def _decisions(live: Live) -> list[int]:
    header = {"x-mockserver-fault": "http.500@p=0.3; http.429@p=0.3"}
    with httpx.Client(base_url=live.base_url) as client:
        return [client.get(f"/models/m-{i}", headers=header).status_code for i in range(400)]


def test_same_seed_same_fault_decisions_over_400_requests_in_two_processes() -> None:
    with serve_in_process(["--seed", "11"]) as first:
        a = _decisions(first)
    with serve_in_process(["--seed", "11"]) as second:
        b = _decisions(second)
    assert a == b
    counts = {status: a.count(status) for status in set(a)}
    assert set(counts) == {500, 429, 404}  # an unlisted model id: 404 when no fault fires
    assert 80 < counts[500] < 160 and 50 < counts[429] < 120  # p=0.3, then 0.3 of the rest
    with serve_in_thread(create_app(Settings(seed=12))) as other:
        assert _decisions(other) != a  # another global seed, other decisions
