"""All-or-none admin writes, on every State engine (issue 34, item 6).

``POST /__mockserver/answers`` with a list is all or none. Its rules are one field of the
state's map, written whole, so:

* a list whose last rule is wrong (a lone surrogate, a pathological ``match``) is a 400 and
  leaves nothing — not the first rules, answering after the next write;
* while lists of rules are written again and again, a reader on another process of the fleet
  (``--workers 2`` on SQLite and Redis) only ever sees whole lists.

Memory (one process), SQLite and Redis (when a ``redis-server`` is there), each a real server.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.reliability.conftest import Budget
from tests.reliability.harness import HealthProbe, child_server, error_envelope
from tests.support.redis_server import RedisServer, binary

BATCH = 25
CHAT = {"model": "m", "messages": [{"role": "user", "content": "which one?"}], "max_tokens": 16}


@pytest.fixture(params=["memory", "sqlite", "redis"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    """The serve flags of each engine (more than one process where the state is shared)."""
    if request.param == "memory":
        yield ["--state", "memory"]
    elif request.param == "sqlite":
        yield ["--state", f"sqlite:{tmp_path / 'state.db'}", "--workers", "2"]
    else:
        if binary() is None:
            pytest.skip("no redis-server (make envs installs one)")
        with RedisServer() as redis:
            yield ["--state", redis.url, "--workers", "2"]


def _rules(tag: str, bad: dict[str, Any] | None = None) -> bytes:
    rules: list[dict[str, Any]] = [{"match": f"{tag}-{i}", "text": f"{tag} {i}"} for i in range(BATCH)]
    if bad is not None:
        rules.append(bad)
    return json.dumps(rules).encode()  # json.dumps writes a lone surrogate as its escape


def test_a_list_is_written_all_or_none(
    engine: list[str], tmp_path: Path, budget: Budget, figures: dict[str, Any]
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("- text: The default.\n")
    args = ["--backend", "script", "--rules", str(rules), *engine]
    with child_server(args, tmp_path / "server.log") as server:
        admin = server.url + "/__mockserver/answers"
        headers = {"content-type": "application/json"}
        for bad, param in (({"text": "\ud800"}, f"[{BATCH}].text"), ({"match": "(a+)+$", "text": "x"}, "match")):
            refused = httpx.post(admin, content=_rules("bad", bad), headers=headers, timeout=30)
            assert refused.status_code == 400, refused.text[:300]
            assert error_envelope(refused.json())["param"] == param
        for _ in range(4):  # any process of the fleet: none of the list is there, and none answers
            assert [r["text"] for r in httpx.get(admin, timeout=30).json()["rules"]] == ["The default."]
            got = httpx.post(
                server.base_url + "/chat/completions", json={**CHAT, "messages": [{"role": "user", "content": "bad-0"}]}
            )
            assert got.json()["choices"][0]["message"]["content"] == "The default."

        writes = 40 if budget.name == "full" else 6
        seen: list[int] = []
        stop, reading = threading.Event(), threading.Event()

        def read() -> None:
            with httpx.Client(timeout=30) as client:
                while not stop.is_set():
                    found = client.get(admin).json()["rules"]
                    seen.append(len(found) - 1)  # but the pinned default
                    reading.set()

        reader = threading.Thread(target=read, daemon=True)
        with HealthProbe(server.url) as probe:
            reader.start()
            assert reading.wait(60), "the reader never read"  # the writes begin once it reads
            try:
                with httpx.Client(timeout=30) as client:
                    for i in range(writes):
                        assert client.post(admin, content=_rules(f"w{i}"), headers=headers).status_code == 200
                        if i % 3 == 2:
                            assert client.delete(admin).status_code == 200
            finally:
                stop.set()
                reader.join(timeout=60)
        probe.check()
        assert seen, "the reader never read"
        torn = [n for n in seen if n % BATCH]
        assert not torn, f"a reader saw part of a list: {torn[:5]} rules"
        figures[f"{engine[1].split(':')[0]}: lists read whole"] = f"{len(seen)} reads, none torn"
        figures[f"{engine[1].split(':')[0]}: /health while lists were written"] = probe.figures()
