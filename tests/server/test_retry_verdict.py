"""The journal's verdict on the real OpenAI SDK retrying a constant ``retry-after``, and the
fault echoes it sees, over a real server."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import httpx
import openai
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support.live import FROZEN, Live, serve_in_thread

FAULT = "http.429,retry_after=0.5"


@pytest.fixture(scope="module")
def server() -> Iterator[Live]:
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN))) as live:
        yield live


def test_the_sdk_waiting_a_constant_retry_after_backs_off(server: Live) -> None:
    session = "constant-retry-after"
    headers = {"x-mockserver-fault": FAULT, "x-mockserver-session": session}
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=3, default_headers=headers)
    with client, pytest.raises(openai.RateLimitError) as raised:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    assert raised.value.response.headers["x-mockserver-faults"] == FAULT  # as written, not "http.429=0.5"
    journal = httpx.get(server.url + "/__mockserver/journal", params={"session": session}).json()
    entries = journal["entries"]
    assert [e["retry_attempt"] for e in entries] == [0, 1, 2, 3]
    assert all(e["faults"] == [FAULT] and e["retry_after"] == 0.5 for e in entries)
    gaps = [b["time"] - a["time"] for a, b in itertools.pairwise(entries)]
    assert all(gap >= 0.5 for gap in gaps), gaps  # the SDK waited what it was told, each time
    verdicts = journal["verdicts"]
    assert verdicts["honoured_retry_after"] is True
    assert verdicts["backed_off"] is True, (gaps, verdicts)
    assert verdicts["offending_entries"]["no_backoff"] == []


def test_rule_echoes_keep_the_grammar_they_were_written_in(server: Live) -> None:
    session = "echo"
    added = httpx.post(
        server.url + "/__mockserver/rules", json={"faults": f"{FAULT}; stream.cut_after=3", "session": session}
    ).json()
    try:
        assert added["faults"] == f"{FAULT}; stream.cut_after=3"
        listed = httpx.get(server.url + "/__mockserver/rules", params={"session": session}).json()["rules"]
        assert [r["faults"] for r in listed] == [f"{FAULT}; stream.cut_after=3"]
    finally:
        httpx.delete(f"{server.url}/__mockserver/rules/{added['id']}")
