"""Fault echoes in the grammar they were written in: ``parse(render(x)) == x``, and the
parameter names a spec gave are kept (``http.429,retry_after=0.5`` never reads as a probability)."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from mockserver.faults.catalogue import Fault, parse
from mockserver.faults.rules import RuleBook

SPELLINGS = [
    "http.429,retry_after=0.5",
    "http.429=0.5",
    "http.429",
    "http.429,retry_after=0.5@p=0.25",
    "http.503,retry_after=0",  # a default, written: still echoed
    "stream.stall_after=2,for=0.25,keepalive=0.1",
    "stream.stall_after=2,keepalive=0.1,for=0.25",  # the order written
    "stream.stall_after,n=2",
    "stream.cut_after=3",
    "latency.ttft,ms=250",
    "http.should_retry=0",
    "transport.reset@p=0.5",
]


@pytest.mark.parametrize("spec", SPELLINGS)
def test_a_fault_renders_as_it_was_written(spec: str) -> None:
    (fault,) = parse(spec)
    assert fault.render() == spec
    assert parse(fault.render()) == (fault,)


def test_two_spellings_are_one_fault_each_echoed_its_own_way() -> None:
    named, short = parse("http.429,retry_after=0.5; http.429=0.5")
    assert named == short
    assert (named.render(), short.render()) == ("http.429,retry_after=0.5", "http.429=0.5")


@pytest.mark.parametrize(
    ("spec", "echo"),
    [
        (" http.429 , retry_after = 0.5 ", "http.429,retry_after=0.5"),  # spaces go, names stay
        ("http.429=1,retry_after=2", "http.429,retry_after=2"),  # given twice: the later one
        ("http.500@p=1", "http.500"),  # certain: no suffix
    ],
)
def test_a_spec_is_echoed_in_its_own_grammar_tidied(spec: str, echo: str) -> None:
    (fault,) = parse(spec)
    assert fault.render() == echo and parse(echo) == (fault,)


def test_a_fault_made_in_code_names_what_differs_from_the_defaults() -> None:
    fault = Fault("http.429", MappingProxyType({"retry_after": 0.5}))
    assert fault.render() == "http.429,retry_after=0.5"
    assert parse(fault.render()) == (fault,)
    assert Fault("http.429", MappingProxyType({"retry_after": 1.0})).render() == "http.429"


def test_the_rule_list_echoes_the_spec_as_written() -> None:
    book = RuleBook()
    rule = book.add({"faults": "http.429,retry_after=0.5; stream.cut_after=3"})
    assert rule.to_json()["faults"] == "http.429,retry_after=0.5; stream.cut_after=3"
