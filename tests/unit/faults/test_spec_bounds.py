"""Fault specs are checked once, where they are parsed: every number finite and in range,
whether the spec comes from the header, the admin API or ``--faults``."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from mockserver.cli import main
from mockserver.config import Settings
from mockserver.faults.catalogue import CATALOGUE, LIMITS, FaultError, parse
from mockserver.faults.rules import Rule, RuleFieldError

REFUSED = [
    ("http.429,retry_after=inf", "not a finite number"),
    ("http.429,retry_after=nan", "not a finite number"),
    ("http.429,retry_after=1e400", "not a finite number"),
    ("http.429,retry_after=-inf", "not a finite number"),
    ("http.429=NaN", "not a finite number"),
    ("http.500@p=nan", "not a finite number"),
    ("http.500@p=inf", "not a finite number"),
    ("http.500@p=1.5", "probability in [0, 1]"),
    ("http.500@p=-0.1", "probability in [0, 1]"),
    ("http.429,retry_after=86401", "retry_after must be between 0 and 86400"),
    ("http.503=-1", "retry_after must be between 0 and 86400"),
    ("latency.ttft=600001", "ms must be between 0 and 600000"),
    ("stream.cut_after=1e7", "n must be between 0 and 1000000"),
    ("stream.stall_after=1,for=1e9", "for must be between 0 and 3600"),
    ("stream.stall_after=1,keepalive=inf", "not a finite number"),
    ("http.should_retry=2", "value must be between 0 and 1"),
]


@pytest.mark.parametrize(("spec", "fragment"), REFUSED, ids=[s for s, _ in REFUSED])
def test_a_number_out_of_range_or_not_finite_is_refused_with_its_name(spec: str, fragment: str) -> None:
    with pytest.raises(FaultError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        parse(spec)


ACCEPTED = [
    "http.429,retry_after=86400",
    "http.429,retry_after=0",
    "http.500@p=0",
    "http.500@p=1",
    "latency.ttft=600000",
    "stream.cut_after=1000000",
    "stream.stall_after=1,for=3600,keepalive=3600",
    "http.should_retry=0",
]


@pytest.mark.parametrize("spec", ACCEPTED)
def test_the_bounds_themselves_are_accepted(spec: str) -> None:
    (fault,) = parse(spec)
    assert all(math.isfinite(v) for v in fault.params.values()) and 0 <= fault.probability <= 1


def test_every_parameter_of_the_catalogue_has_a_bound() -> None:
    params = {key for entry in CATALOGUE.values() for key in entry.defaults}
    assert params <= set(LIMITS)
    for name, entry in CATALOGUE.items():  # and every default sits inside it
        assert all(0 <= value <= LIMITS[key] for key, value in entry.defaults.items()), name


def test_a_rule_names_the_field_at_fault() -> None:
    with pytest.raises(RuleFieldError, match="finite") as bad_spec:
        Rule.from_json({"faults": "http.429,retry_after=inf"}, 1)
    assert bad_spec.value.field == "faults"
    with pytest.raises(RuleFieldError) as bad_nth:
        Rule.from_json({"faults": "http.500", "nth": 1.5}, 1)  # not a list: no TypeError
    assert bad_nth.value.field == "nth"
    with pytest.raises(RuleFieldError) as bad_session:
        Rule.from_json({"faults": "http.500", "session": 7}, 1)
    assert bad_session.value.field == "session"


def test_settings_refuse_the_spec() -> None:
    with pytest.raises(ValidationError, match="not a finite number"):
        Settings(faults="http.429,retry_after=inf")


@pytest.mark.parametrize("spec", ["http.429,retry_after=inf", "http.500@p=nan", "latency.itl=1e400"])
def test_serve_with_such_faults_exits_2_with_one_line(spec: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--faults", spec]) == 2
    err = capsys.readouterr().err.strip()
    assert "--faults" in err and "finite" in err and "Traceback" not in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("spec", ["http.429,retry_after=inf", "http.500@p=nan", "http.429,retry_after=1e400"])
def test_the_header_and_the_admin_api_refuse_it_and_the_server_goes_on(spec: str) -> None:
    from starlette.testclient import TestClient

    from mockserver.app import create_app

    with TestClient(create_app(Settings()), base_url="http://127.0.0.1") as client:
        by_header = client.get("/v1/models", headers={"x-mockserver-fault": spec})
        assert by_header.status_code == 400 and by_header.json()["error"]["param"] == "x-mockserver-fault"
        by_admin = client.post("/__mockserver/faults", json={"faults": spec})
        assert by_admin.status_code == 400 and by_admin.json()["error"]["param"] == "faults"
        assert client.get("/__mockserver/rules").json()["rules"] == []
        assert client.get("/v1/models").status_code == 200  # nothing was kept that breaks later requests
