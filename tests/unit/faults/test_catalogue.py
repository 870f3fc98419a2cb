"""The fault catalogue without a server: the header grammar, and the docs naming every fault.
(Each fault's symptom as a client sees it: tests/server/test_faults.py.)"""

from __future__ import annotations

import pytest

from mockserver.faults.catalogue import CATALOGUE, FaultError, parse
from tests.support.live import ROOT


def test_grammar_round_trips() -> None:
    text = "stream.stall_after=2,for=1.5,keepalive=0.5; http.429,retry_after=2@p=0.25; transport.reset"
    faults = parse(text)
    assert [f.render() for f in faults] == [
        "stream.stall_after=2,for=1.5,keepalive=0.5",
        "http.429,retry_after=2@p=0.25",  # as written: "http.429=2@p=…" would read as a probability
        "transport.reset",
    ]
    assert parse("; ".join(f.render() for f in faults)) == faults
    with pytest.raises(FaultError, match="known:"):
        parse("http.418")


def test_the_docs_document_every_fault() -> None:
    page = (ROOT / "docs" / "faults.md").read_text()
    assert [name for name in CATALOGUE if f"`{name}" not in page] == []
