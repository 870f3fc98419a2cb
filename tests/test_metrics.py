"""``GET /metrics``: requests, latency, tokens, faults and streams, counted per endpoint
template and profile, in a registry per app. The session server is shared, so every check
compares two scrapes around the requests it makes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import openai
import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from starlette.routing import Route

from mockserver.app import create_app
from mockserver.config import Settings
from mockserver.http.metrics import Endpoints, Metrics
from mockserver.routes.table import routes
from tests.live import Live

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


def test_each_app_has_a_registry_of_its_own() -> None:
    one, two = create_app(Settings()), create_app(Settings())
    assert one.state.metrics.registry is not two.state.metrics.registry
    assert REGISTRY.get_sample_value("mockserver_requests_total") is None  # never the global one


@pytest.mark.parametrize(
    ("path", "label"),
    [
        pytest.param("/v1/chat/completions", "/v1/chat/completions", id="static"),
        pytest.param("/v1/models/org/model-1", "/v1/models/{model}", id="path-param"),
        pytest.param("/v1/responses/resp_1/cancel", "/v1/responses/{response_id}/cancel", id="nested"),
        pytest.param("/v1/responses/input_tokens", "/v1/responses/input_tokens", id="static-before-template"),
        pytest.param("/v1/nope", "other", id="unknown"),
    ],
)
def test_endpoint_labels(path: str, label: str) -> None:
    assert Endpoints(routes()).label(path) == label


def test_fault_names_drop_their_parameters() -> None:
    metrics = Metrics(version="0", backend="reference", profile="openai")
    metrics.count_faults("/v1/completions", b"stream.cut_after=3@p=0.5; latency.ttft=200,jitter=1; made.up")
    counted = {
        sample.labels["fault"]: sample.value
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for sample in family.samples
        if sample.name == "mockserver_faults_total"
    }
    assert counted == {"stream.cut_after": 1.0, "latency.ttft": 1.0, "other": 1.0}


def test_templates_only_come_from_routes_with_paths() -> None:
    endpoints = Endpoints([Route("/a/{x:int}", lambda request: None)])
    assert endpoints.label("/a/12") == "/a/{x}"
    assert endpoints.label("/a/b") == "other"
