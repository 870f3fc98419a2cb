"""``GET /metrics``: requests, latency, tokens, faults and streams, counted per endpoint
template and profile, in a registry per app. The session server is shared, so every check
compares two scrapes around the requests it makes. (The registry, labels and names without a
server: tests/unit/http/test_metrics.py.)"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.live import Live

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
CHAT = "/v1/chat/completions"
MESSAGES = [{"role": "user", "content": "Say hi"}]
RESET = {"x-mockserver-fault": "transport.reset"}


def scrape(live: Live) -> Samples:
    response = httpx.get(live.url + "/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


class Moved:
    """What changed between two scrapes, by sample name and (a subset of) labels."""

    def __init__(self, before: Samples, after: Samples) -> None:
        self.before, self.after = before, after

    def __call__(self, name: str, **labels: str) -> float:
        wanted = set(labels.items())
        keys = {key for key in self.after.keys() | self.before.keys() if key[0] == name and wanted <= key[1]}
        return sum(self.after.get(key, 0.0) - self.before.get(key, 0.0) for key in keys)


@contextmanager
def watching(live: Live) -> Iterator[Moved]:
    before = scrape(live)
    moved = Moved(before, before)
    yield moved
    moved.after = scrape(live)


def test_a_chat_completion_counts_its_request_latency_and_tokens(live: Live, client: openai.OpenAI) -> None:
    with watching(live) as moved:
        answer = client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=5)  # type: ignore[arg-type]
    assert answer.usage is not None
    ok = {"endpoint": CHAT, "method": "POST", "status": "200", "profile": "openai"}
    assert moved("mockserver_requests_total", **ok) == 1
    assert moved("mockserver_request_duration_seconds_count", endpoint=CHAT, method="POST") == 1
    assert moved("mockserver_tokens_total", endpoint=CHAT, type="prompt") == answer.usage.prompt_tokens
    assert moved("mockserver_tokens_total", endpoint=CHAT, type="completion") == answer.usage.completion_tokens
    assert moved("mockserver_streams_total") == 0
    assert moved("mockserver_requests_total", endpoint="/metrics") == 0  # scrapes are not counted


def test_a_stream_counts_as_a_stream_with_its_usage(live: Live, client: openai.OpenAI) -> None:
    with watching(live) as moved:
        chunks = list(
            client.completions.create(
                model="m", prompt="Once", max_tokens=6, stream=True, stream_options={"include_usage": True}
            )
        )
    usage = chunks[-1].usage
    assert usage is not None
    assert moved("mockserver_streams_total", endpoint="/v1/completions", profile="openai") == 1
    assert moved("mockserver_requests_total", endpoint="/v1/completions", status="200") == 1
    assert moved("mockserver_tokens_total", endpoint="/v1/completions", type="completion") == usage.completion_tokens
    assert moved("mockserver_tokens_total", endpoint="/v1/completions", type="prompt") == usage.prompt_tokens


def test_a_fault_is_counted_by_name_with_its_status(live: Live, client: openai.OpenAI) -> None:
    with watching(live) as moved, pytest.raises(openai.InternalServerError):
        client.chat.completions.create(
            model="m",
            messages=MESSAGES,  # type: ignore[arg-type]
            max_tokens=5,
            extra_headers={"x-mockserver-fault": "http.503"},
        )
    assert moved("mockserver_faults_total", endpoint=CHAT, fault="http.503") == 1
    assert moved("mockserver_requests_total", endpoint=CHAT, status="503") == 1
    assert moved("mockserver_tokens_total", endpoint=CHAT) == 0  # answered before the model ran


def test_a_transport_fault_is_counted_though_no_answer_carries_its_name(live: Live) -> None:
    before = scrape(live)
    with pytest.raises(httpx.TransportError):
        httpx.post(live.base_url + "/completions", json={"model": "m", "prompt": "Hi"}, headers=RESET)
    deadline = time.monotonic() + 5  # the server counts once it has hung up, just after the client sees it
    while True:
        moved = Moved(before, scrape(live))
        if moved("mockserver_faults_total", fault="transport.reset") or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert moved("mockserver_faults_total", endpoint="/v1/completions", fault="transport.reset") == 1
    assert moved("mockserver_requests_total", endpoint="/v1/completions", status="none") == 1


def test_paths_are_labelled_by_route_template_and_unknown_ones_as_other(live: Live) -> None:
    with watching(live) as moved:
        assert httpx.get(live.base_url + "/no/such/thing").status_code == 404
        assert httpx.get(live.base_url + "/responses/resp_nope").status_code == 404
        assert httpx.get(live.url + "/health").status_code == 200
    assert moved("mockserver_requests_total", endpoint="other", method="GET", status="404") == 1
    assert moved("mockserver_requests_total", endpoint="/v1/responses/{response_id}", status="404") == 1
    assert moved("mockserver_requests_total", endpoint="/health", status="200") == 1
    assert not any("resp_nope" in value for _, labels in moved.after for _, value in labels)


def test_a_prefixed_path_counts_under_its_endpoint_and_profile(live: Live) -> None:
    body = {"model": "m", "messages": MESSAGES, "max_tokens": 3}
    with watching(live) as moved:
        assert httpx.post(live.url + "/fireworks" + CHAT, json=body).status_code == 200
    assert moved("mockserver_requests_total", endpoint=CHAT, profile="fireworks", status="200") == 1
    assert moved("mockserver_tokens_total", endpoint=CHAT, profile="fireworks", type="completion") > 0


def test_metrics_describe_the_server(live: Live) -> None:
    info = scrape(live)
    labels = next(dict(key[1]) for key in info if key[0] == "mockserver_info")
    assert labels["backend"] == "script,reference" and labels["profile"] == "openai"  # the backend chain
    assert info[("mockserver_requests_in_flight", frozenset())] >= 0
