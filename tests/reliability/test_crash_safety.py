"""Crash safety: a server SIGKILLed in the middle of its writes leaves files the next one
reads whole.

* Recording (``--record-mode all`` proxying another mockserver): every cassette file loads,
  and every recording whose response the client saw end is in it (the interaction is
  appended, fsynced and renamed before the last byte goes out). A server then starts on
  the directory and replays.
* The SQLite store: the file passes ``PRAGMA integrity_check``, and every response whose
  create returned before the kill — foreground, streamed to its end, background, a stored
  chat completion — is retrievable by a fresh server on the same file.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx

from mockserver.app import create_app
from mockserver.cassettes.files import CassetteDir
from mockserver.config import Settings
from tests.reliability.conftest import Budget
from tests.reliability.harness import FROZEN, Child, Json, child_server, frames, thread_server

MODEL = "gpt-4o-mini"
CASSETTES = ("mockserver.yaml", "chat", "nested/deeper/completions", "big")
CLIENTS = 12
KINDS = ("foreground", "stream", "background", "chat")


async def _until_killed(child: Child, seconds: float, one: Any) -> None:
    """``CLIENTS`` clients calling ``one(http, number)`` in a loop; SIGKILL after ``seconds``.
    The clients' errors after the kill are expected: they are not counted."""

    async def client(http: httpx.AsyncClient, number: int) -> None:
        for attempt in range(10_000):  # bounded: the kill ends it long before
            try:  # ≡ number + attempt (mod 4): every client goes through the kinds from its own start
                await one(http, number * 10_001 + attempt)
            except (httpx.HTTPError, json.JSONDecodeError, KeyError):
                return  # the server is gone

    async with httpx.AsyncClient(base_url=child.url, timeout=httpx.Timeout(30.0, connect=5.0)) as http:
        tasks = [asyncio.create_task(client(http, i)) for i in range(CLIENTS)]
        await asyncio.sleep(seconds)
        child.kill()
        await asyncio.wait_for(asyncio.gather(*tasks), 60)


def _warm(base_url: str) -> None:
    """Wait for the model (it loads in the background): the kill is meant for busy writers."""
    body = {"model": MODEL, "input": "Hi", "max_output_tokens": 16, "store": False}
    assert httpx.post(base_url + "/responses", json=body, timeout=60).status_code == 200


# ---- recording ----------------------------------------------------------------------------


def _recording_body(number: int) -> tuple[str, Json]:
    stream = number % 2 == 0
    if number % 3:
        body: Json = {"model": MODEL, "messages": [{"role": "user", "content": f"Say {number}."}], "max_tokens": 6}
        path = "/v1/chat/completions"
    else:
        body = {"model": MODEL, "prompt": f"Count to {number}:", "max_tokens": 6}
        path = "/v1/completions"
    if stream:
        body["stream"] = True
    return path, body


def test_sigkill_while_recording_leaves_every_cassette_loadable(
    tmp_path: Path, budget: Budget, figures: dict[str, Any]
) -> None:
    directory = tmp_path / "cassettes"
    seen: dict[str, list[Json]] = defaultdict(list)  # cassette → bodies whose response ended
    rng = random.Random(7)
    sizes = []
    with thread_server(create_app(Settings(frozen_time=float(FROZEN)))) as upstream:
        _warm(upstream.live.base_url)
        for round_ in range(budget.crash_rounds):
            args = ["--cassettes", str(directory), "--record-mode", "all", "--upstream", upstream.live.url]
            with child_server([*args, "--frozen-time", FROZEN], tmp_path / f"recorder-{round_}.log") as child:

                async def record(http: httpx.AsyncClient, number: int) -> None:
                    path, body = _recording_body(number)
                    cassette = CASSETTES[number % len(CASSETTES)]
                    headers = {} if cassette == "mockserver.yaml" else {"x-mockserver-cassette": cassette}
                    async with http.stream("POST", path, json=body, headers=headers) as response:
                        raw = await response.aread()  # the whole body: the response ended
                    assert response.status_code == 200 and response.headers["x-mockserver-source"] == "record"
                    if body.get("stream"):
                        assert frames(raw)[-1].data == "[DONE]"
                    seen[cassette.removesuffix(".yaml")].append(body)

                asyncio.run(_until_killed(child, rng.uniform(1.0, 2.5), record))
            assert child.proc.returncode == -9
            loaded = CassetteDir(directory).load_all()  # raises, naming the file, if one is torn
            sizes.append(sum(len(batch) for batch in loaded.values()))
            recorded = {
                name.removesuffix(".yaml"): [json.loads(i.request.body) for i in batch]
                for name, batch in loaded.items()
            }
            for cassette, bodies in seen.items():
                missing = [b for b in bodies if b not in recorded.get(cassette, [])]
                assert not missing, f"{cassette}: {len(missing)} recordings the client saw end are lost: {missing[:3]}"
        leftovers = sorted(p.name for p in directory.rglob(".*.tmp"))

        # A server starts on what the kills left, and replays.
        with child_server(["--cassettes", str(directory), "--frozen-time", FROZEN], tmp_path / "replay.log") as child:
            body = next(b[0] for b in seen.values() if b)
            path = "/v1/completions" if "prompt" in body else "/v1/chat/completions"
            replayed = httpx.post(child.url + path, json=body, timeout=30)
            assert replayed.status_code == 200, replayed.text
            assert replayed.headers["x-mockserver-source"] == "replay"
    figures.update(
        rounds=budget.crash_rounds,
        **{"recordings the client saw end": sum(len(b) for b in seen.values())},
        **{"interactions on disk after each kill": sizes},
        **{"temporary files left by a kill": len(leftovers)},
    )


# ---- the SQLite store ---------------------------------------------------------------------


def test_sigkill_with_a_sqlite_store_keeps_every_committed_response(
    tmp_path: Path, budget: Budget, figures: dict[str, Any]
) -> None:
    path = tmp_path / "store.sqlite"
    created: dict[str, tuple[str, Json]] = {}  # id → (kind, what the create returned)
    rng = random.Random(11)
    checked = []

    offset = 0  # each round asks new questions

    async def create(http: httpx.AsyncClient, number: int) -> None:
        number += offset
        kind = KINDS[number % len(KINDS)]
        if kind == "chat":
            body: Json = {"model": MODEL, "messages": [{"role": "user", "content": f"n{number}"}], "max_tokens": 4}
            response = await http.post("/v1/chat/completions", json={**body, "store": True})
            assert response.status_code == 200
            created[response.json()["id"]] = (kind, response.json())
            return
        body = {"model": MODEL, "input": f"Say {number}.", "max_output_tokens": 16}
        if kind == "stream":
            async with http.stream("POST", "/v1/responses", json={**body, "stream": True}) as response:
                raw = await response.aread()
            assert response.status_code == 200
            last = json.loads(frames(raw)[-1].data)
            assert last["type"] in ("response.completed", "response.incomplete")
            created[last["response"]["id"]] = (kind, last["response"])
            return
        response = await http.post("/v1/responses", json={**body, "background": kind == "background"})
        assert response.status_code == 200
        created[response.json()["id"]] = (kind, response.json())

    stranded: list[int] = []  # background runs the kill stopped: their process is gone

    def verify(child: Child) -> None:
        stranded.append(0)
        with httpx.Client(base_url=child.base_url, timeout=30) as http:
            for response_id, (kind, answer) in created.items():
                where = f"/chat/completions/{response_id}" if kind == "chat" else f"/responses/{response_id}"
                found = http.get(where)
                assert found.status_code == 200, f"{kind} {response_id}: {found.status_code} {found.text[:300]}"
                if kind in ("foreground", "stream", "chat"):  # finished before the kill: as it was answered
                    kept = found.json()  # (a stored chat completion also shows its metadata)
                    assert {k: kept.get(k) for k in answer} == answer, f"{kind} {response_id} changed"
                else:
                    stranded[-1] += found.json()["status"] in ("queued", "in_progress")

    store = ["--store", f"sqlite:{path}", "--frozen-time", FROZEN]
    for round_ in range(budget.crash_rounds + 1):
        with child_server(store, tmp_path / f"store-{round_}.log") as child:
            verify(child)  # what the earlier kills left
            checked.append(len(created))
            if round_ < budget.crash_rounds:
                offset = (round_ + 1) * 10**9
                _warm(child.base_url)
                asyncio.run(_until_killed(child, rng.uniform(1.0, 2.5), create))
        if round_ < budget.crash_rounds:
            assert child.proc.returncode == -9
            with sqlite3.connect(path, timeout=10) as db:
                assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    figures.update(
        rounds=budget.crash_rounds,
        **{"responses committed before a kill": len(created)},
        **{"retrieved by each fresh server": checked},
        **{"by kind": {k: sum(1 for v in created.values() if v[0] == k) for k in KINDS}},
        **{"background runs left queued/in_progress": stranded[-1]},
    )
    assert created, "nothing was created before the kills"
