"""A session given by header, query and body must agree, and a request that gives a session
never makes a global rule (faults, rules and scripted answers alike)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support.live import FROZEN

ADMIN = "/__mockserver"
A, B = {"x-mockserver-session": "A"}, {"x-mockserver-session": "B"}


@pytest.fixture()
def client() -> Iterator[TestClient]:
    with TestClient(create_app(Settings(frozen_time=FROZEN)), base_url="http://127.0.0.1") as client:
        yield client


def _models_status(client: TestClient, headers: dict[str, str]) -> int:
    return client.get("/v1/models", headers=headers).status_code


@pytest.mark.parametrize("endpoint", ["rules", "faults"])
@pytest.mark.parametrize("body_session", ["absent", None, "A"], ids=["absent", "null", "same"])
def test_a_fault_rule_under_a_session_header_stays_in_that_session(
    client: TestClient, endpoint: str, body_session: str | None
) -> None:
    body: dict[str, Any] = {"faults": "http.503"}
    if endpoint == "rules":
        body["path"] = "/v1/models"
    if body_session != "absent":
        body["session"] = body_session
    added = client.post(f"{ADMIN}/{endpoint}", json=body, headers=A)
    assert added.status_code == 200 and added.json()["session"] == "A"
    assert _models_status(client, A) == 503
    assert _models_status(client, B) == 200  # the leak the issue saw: B got A's rule
    assert _models_status(client, {}) == 200
    assert [r["session"] for r in client.get(f"{ADMIN}/rules").json()["rules"]] == ["A"]


@pytest.mark.parametrize("endpoint", ["rules", "faults"])
def test_a_session_header_and_body_that_differ_are_a_400_naming_session(client: TestClient, endpoint: str) -> None:
    response = client.post(f"{ADMIN}/{endpoint}", json={"faults": "http.503", "session": "B"}, headers=A)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "session" and set(error) == {"message", "type", "param", "code"}
    assert client.get(f"{ADMIN}/rules").json()["rules"] == []  # nothing added
    assert _models_status(client, B) == 200  # and the server goes on


def test_query_and_header_sessions_that_differ_are_a_400(client: TestClient) -> None:
    response = client.post(f"{ADMIN}/rules", params={"session": "B"}, json={"faults": "http.503"}, headers=A)
    assert response.status_code == 400 and response.json()["error"]["param"] == "session"
    same = client.post(f"{ADMIN}/rules", params={"session": "A"}, json={"faults": "http.503"}, headers=A)
    assert same.status_code == 200 and same.json()["session"] == "A"


def test_without_any_session_a_rule_is_still_global(client: TestClient) -> None:
    added = client.post(f"{ADMIN}/rules", json={"faults": "http.503", "path": "/v1/models", "session": None})
    assert added.status_code == 200 and "session" not in added.json()
    assert _models_status(client, A) == _models_status(client, B) == 503


def test_scripted_answers_under_a_session_header_stay_in_that_session(client: TestClient) -> None:
    items = [{"text": "one", "session": None}, {"text": "two"}, {"text": "three", "session": "A"}]
    added = client.post(f"{ADMIN}/answers", json=items, headers=A)
    assert added.status_code == 200
    assert [r.get("session") for r in added.json()["rules"]] == ["A", "A", "A"]
    other = client.post(f"{ADMIN}/answers", json=[{"text": "ok"}, {"text": "no", "session": "B"}], headers=A)
    assert other.status_code == 400 and other.json()["error"]["param"] == "session"
    every = client.get(f"{ADMIN}/answers").json()["rules"]
    assert len(every) == 3 and {r.get("session") for r in every} == {"A"}  # all or none: nothing of the 400
    assert client.get(f"{ADMIN}/answers", headers=B).json()["rules"] == []
