"""Metrics without a server: a registry per app, endpoint templates as labels, fault names."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from starlette.routing import Route

from mockserver.app import create_app
from mockserver.config import Settings
from mockserver.faults.catalogue import CATALOGUE
from mockserver.http.metrics import Endpoints, Metrics
from mockserver.routes.table import routes


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
    metrics = Metrics(version="0", backend="reference", profile="openai", faults=CATALOGUE)
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
