"""``--state redis+sentinel://HOST:PORT/SERVICE/DB`` served: a ``mockserver serve`` process finds
its primary through a real Sentinel (:mod:`tests.support.redis_sentinel`), answers a scripted chat
through the official SDK, and what it keeps is in that primary's database. No failover here: the
State contract itself runs on the Sentinel too (``redis-sentinel`` in tests/state/conftest.py).
"""

from __future__ import annotations

import httpx
import openai
import pytest

from mockserver.state.redis.client import target
from tests.support.live import serve_in_process
from tests.support.redis_sentinel import SERVICE, RedisSentinel
from tests.support.redis_server import Client


def test_the_url_names_the_sentinel_and_the_service(redis_sentinel: RedisSentinel) -> None:
    named = target(redis_sentinel.url)
    assert (named.kind, named.nodes, named.service) == ("sentinel", (("127.0.0.1", redis_sentinel.port),), SERVICE)


@pytest.mark.parametrize("db", [0, 3], ids=["db0", "db3"])
async def test_a_server_on_a_sentinels_primary_answers_and_keeps_its_state_there(
    redis_sentinel: RedisSentinel, db: int
) -> None:
    redis_sentinel.flush()
    url = redis_sentinel.url.rsplit("/", 1)[0] + f"/{db}"
    with serve_in_process(["--backend", "script", "--state", url]) as live:
        added = httpx.post(live.url + "/__mockserver/answers", json={"text": "Found through a Sentinel."})
        assert added.status_code == 200, added.text
        with openai.OpenAI(base_url=live.base_url, api_key="sk-test", max_retries=0) as client:
            answer = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
        assert answer.choices[0].message.content == "Found through a Sentinel."
    primary = Client(redis_sentinel.primary.url.rsplit("/", 1)[0] + f"/{db}")  # the primary itself, not the Sentinel
    try:
        journal = await primary.call("LRANGE", "mockserver:{state}:l:journal:list", 0, -1)
        rules = await primary.call("HGETALL", "mockserver:{state}:m:script:rules")
    finally:
        await primary.close()
    assert [b'"path":"/v1/chat/completions"' in entry for entry in journal] == [True]  # the chat, journaled there
    kept = rules.values() if isinstance(rules, dict) else rules[1::2]  # RESP3's map, or RESP2's field, value, …
    assert [b"Found through a Sentinel." in rule for rule in kept] == [True]  # the scripted rule, kept there
