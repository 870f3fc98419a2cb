"""``/openapi.json``: valid OpenAPI 3.1, complete against the route table, and true — a
bounded schemathesis run over it finds no 5xx and no answer outside the documented shapes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx
from openapi_spec_validator import validate as validate_openapi
from starlette.routing import Route

from mockserver.app import create_app
from mockserver.config import Settings
from mockserver.routes.openapi import OPERATIONS, document
from mockserver.routes.table import routes
from tests.support.live import Live, serve_in_thread


def test_the_document_is_valid_openapi_3_1(live: Live) -> None:
    served = httpx.get(live.url + "/openapi.json").json()
    assert served == document()
    assert served["openapi"].startswith("3.1")
    validate_openapi(served)


def test_every_route_is_documented_and_every_operation_routed() -> None:
    routed = set()
    for route in routes():
        if not isinstance(route, Route) or route.path.startswith("/__mockserver"):
            continue  # the admin API is ours to steer tests, not a provider surface
        path = re.sub(r"\{(\w+)(:\w+)?\}", r"{\1}", route.path)
        routed.update((method.lower(), path) for method in route.methods or () if method != "HEAD")
    routed.add(("get", "/metrics"))  # answered by the metrics layer in front of the routes
    documented = {(op.method, op.path) for op in OPERATIONS}
    assert routed == documented


def test_fuzzing_finds_no_server_error_and_no_undocumented_answer(tmp_path: Path) -> None:
    """schemathesis (its own CLI, bounded and deterministic) over every operation: positive and
    negative cases from the schemas, then its stateful links."""
    # A small context window keeps every generation the fuzzer can ask for short.
    with serve_in_thread(create_app(Settings(context_window=48, frozen_time=1_700_000_000.0))) as live:
        run = subprocess.run(
            [
                str(Path(sys.executable).with_name("schemathesis")),
                "run",
                live.url + "/openapi.json",
                "--checks",
                "not_a_server_error,response_schema_conformance,status_code_conformance,content_type_conformance",
                "--max-examples",
                "3",  # per operation: ~70 operations, one test within the suite's budget
                "--generation-deterministic",
                "--workers",
                "1",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,  # schemathesis keeps a cache directory where it runs
        )
        assert httpx.get(live.url + "/health").status_code == 200  # and the server is still up
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
