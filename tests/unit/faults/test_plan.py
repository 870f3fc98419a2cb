"""A request's fault plan: which of its faults an answer really gets (only those are reported),
and the scope's applied list that ``x-mockserver-faults`` and the journal read."""

from __future__ import annotations

from typing import Any

import pytest

from mockserver.faults.catalogue import parse
from mockserver.faults.plan import applicable, note, planned
from mockserver.wire.scope import APPLIED_KEY, PLAN_KEY

PLAN = parse("http.503@p=0; latency.ttft=5; content.refusal; stream.cut_after=2; transport.reset@p=0")


def _names(faults: Any) -> list[str]:
    return [f.render() for f in faults]


@pytest.mark.parametrize(
    ("generated", "stream", "paced", "expected"),
    [
        (True, True, True, ["latency.ttft=5", "content.refusal", "stream.cut_after=2"]),
        (True, False, True, ["latency.ttft=5", "content.refusal"]),  # no stream: no stream fault
        (False, True, True, ["latency.ttft=5", "stream.cut_after=2"]),  # a recording: no content fault
        (False, False, True, ["latency.ttft=5"]),
        (False, True, False, ["stream.cut_after=2"]),  # not under the engine: no latency
        (False, False, False, []),
    ],
)
def test_an_answer_gets_only_the_faults_that_apply_to_it(
    generated: bool, stream: bool, paced: bool, expected: list[str]
) -> None:
    assert _names(applicable(PLAN, generated=generated, stream=stream, paced=paced)) == expected


def test_noted_faults_are_kept_once_in_order() -> None:
    scope: dict[str, Any] = {APPLIED_KEY: []}
    http, latency, content, stream = PLAN[0], PLAN[1], PLAN[2], PLAN[3]
    note(scope, [stream, latency])
    note(scope, [latency, content, stream])
    note(scope, [])
    assert scope[APPLIED_KEY] == [stream, latency, content]
    assert http not in scope[APPLIED_KEY]


def test_noting_without_an_injector_is_harmless() -> None:
    scope: dict[str, Any] = {}
    note(scope, PLAN)
    assert scope == {}


def test_the_plan_is_what_the_edge_left_in_the_scope() -> None:
    assert planned({}) == ()
    assert planned({PLAN_KEY: PLAN}) == PLAN
