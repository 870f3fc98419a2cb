"""Crash recovery: background responses a SIGKILLed server left running are failed, saying why,
and a resumed stream of one always ends with its terminator.

* Restart: a server with a SQLite store runs background responses slowly (some still queued,
  some in progress) and is SIGKILLed; a new server on the same file answers each as ``failed``
  with an error saying the server restarted, and a stream resumed after the last event the
  client saw gets the rest, then ``error`` and ``response.failed``, and ends.
* Two servers on one file: B never fails a run of A while A lives (B's start-up look, its
  sweeps, a stream of A's run followed through B); once A is SIGKILLed, B's follower ends with
  the failure and B's sweeper fails A's other runs without anyone asking.

The same rules in-process, owner by owner: tests/unit/lifecycle/test_orphans.py.
"""

from __future__ import annotations

import concurrent.futures
import functools
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai
import pytest

from mockserver.lifecycle.runs import SWEEP
from tests.reliability.conftest import Budget
from tests.reliability.harness import Child, child_server

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="SIGKILL and /proc: Linux")

MODEL = "gpt-4o-mini"
# A long scripted answer (no model to load): at a few tokens per second it runs for a minute.
ANSWER = " ".join(f"word{n}" for n in range(120))


def _args(tmp_path: Path, *pacing: str) -> list[str]:
    rules = tmp_path / "rules.yaml"
    rules.write_text(f"- endpoint: responses\n  text: {ANSWER}\n")
    return ["--backend", "script", "--rules", str(rules), "--store", f"sqlite:{tmp_path / 'store.sqlite'}", *pacing]


@contextmanager
def _sdk(child: Child) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=child.base_url, api_key="sk-test", max_retries=0, timeout=30) as client:
        yield client


def _until(what: str, check: Callable[[], bool], seconds: float) -> float:
    """Poll ``check`` until it holds (an AssertionError naming ``what`` after ``seconds``);
    how long it took."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < seconds, f"{what}: not within {seconds:g} s"
        time.sleep(0.05)
    return time.monotonic() - start


def _status(client: openai.OpenAI, response_id: str) -> str:
    return str(client.responses.retrieve(response_id).status)


def _is(client: openai.OpenAI, response_id: str, status: str) -> bool:
    return _status(client, response_id) == status


def _start(client: openai.OpenAI, text: str) -> tuple[str, int]:
    """A streamed background response, read until it is queued and then hung up on, as a
    client that drops would: its id and the last sequence number read."""
    with client.responses.create(model=MODEL, input=text, background=True, stream=True) as stream:
        for event in stream:
            if event.type == "response.queued":
                return event.response.id, event.sequence_number
    raise AssertionError("the stream ended before response.queued")


def _read_on(client: openai.OpenAI, response_id: str, after: int, until: str) -> int:
    """Resume a stream, read until an event of type ``until``, hang up; the last number read."""
    with client.responses.retrieve(response_id, stream=True, starting_after=after) as stream:
        for event in stream:
            if event.type == until:
                return event.sequence_number
    raise AssertionError(f"the stream of {response_id} ended before {until}")


def _resumed(client: openai.OpenAI, response_id: str, after: int | None = None) -> list[Any]:
    """Every event of a stream of ``response_id`` resumed after ``after`` (None: from the start)."""
    if after is None:
        return list(client.responses.retrieve(response_id, stream=True))
    return list(client.responses.retrieve(response_id, stream=True, starting_after=after))


def _ends_failed(events: list[Any], first: int) -> None:
    """The events are numbered on from ``first`` with none missing, and end as a run that failed
    because its server went away ends."""
    assert [e.sequence_number for e in events] == list(range(first, first + len(events)))
    assert [e.type for e in events[-2:]] == ["error", "response.failed"], [e.type for e in events]
    assert "restarted" in events[-2].message
    assert events[-1].response.status == "failed" and events[-1].response.error is not None


def _failed(client: openai.OpenAI, response_id: str) -> None:
    response = client.responses.retrieve(response_id)
    assert response.status == "failed", f"{response_id}: {response.status}"
    assert response.error is not None and response.error.code == "server_error"
    assert "restarted" in response.error.message


def test_a_restarted_server_fails_what_the_killed_one_left_running(
    tmp_path: Path, budget: Budget, figures: dict[str, Any]
) -> None:
    count = budget.crash_rounds  # responses of each kind: in progress, still queued
    pacing = ("--responses-queue-time", "2", "--responses-tokens-per-second", "2")
    seen: dict[str, int] = {}  # id → the last sequence number a client read before the kill
    with child_server(_args(tmp_path, *pacing), tmp_path / "killed.log") as child, _sdk(child) as client:
        running = [_start(client, f"Run {n}.") for n in range(count)]
        for response_id, after in running:  # once queued, the wait is the same for all
            seen[response_id] = _read_on(client, response_id, after, "response.output_text.delta")
        queued = [_start(client, f"Wait {n}.") for n in range(count)]
        seen.update(queued)
        running_ids, queued_ids = [r for r, _ in running], [r for r, _ in queued]
        statuses = {r: _status(client, r) for r in seen}
        child.kill()
    assert child.proc.returncode == -9
    assert statuses == {**dict.fromkeys(running_ids, "in_progress"), **dict.fromkeys(queued_ids, "queued")}

    started = time.monotonic()
    with child_server(_args(tmp_path), tmp_path / "restarted.log") as child, _sdk(child) as client:
        up = time.monotonic() - started
        # Failed at start-up, before any request: the file says so as soon as /health answers.
        with sqlite3.connect(tmp_path / "store.sqlite") as db:
            marks = ", ".join("?" for _ in seen)
            found = dict(db.execute(f"SELECT id, status FROM responses WHERE id IN ({marks})", list(seen)))
        db.close()
        assert found == dict.fromkeys(seen, "failed")
        assert "response(s) left running by a server that is gone" in child.output()
        for response_id in seen:
            _failed(client, response_id)
        took = []
        for response_id, after in seen.items():  # each resumed after the last event its client read
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                start = time.monotonic()
                events = pool.submit(_resumed, client, response_id, after).result(timeout=30)
                took.append(round(time.monotonic() - start, 3))
            _ends_failed(events, after + 1)
            if response_id in queued_ids:
                assert [e.type for e in events] == ["error", "response.failed"]
    figures.update(
        **{"left running by the kill": f"{count} in progress, {count} queued"},
        **{"seconds to a healthy restarted server": round(up, 2)},
        **{"seconds each resumed stream took to end": took},
    )


def test_a_server_sharing_the_file_fails_runs_only_once_their_server_died(
    tmp_path: Path, figures: dict[str, Any]
) -> None:
    pacing = ("--responses-tokens-per-second", "1")
    with child_server(_args(tmp_path, *pacing), tmp_path / "a.log") as a, _sdk(a) as on_a:
        (swept, _), (followed, _) = _start(on_a, "1"), _start(on_a, "2")
        for response_id in (swept, followed):
            _until(f"{response_id} in progress", functools.partial(_is, on_a, response_id, "in_progress"), 30)
        with child_server(_args(tmp_path, *pacing), tmp_path / "b.log") as b, _sdk(b) as on_b:
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                following = pool.submit(_resumed, on_b, followed)
                # B's start-up look has been, and by now at least one sweep: A lives, so nothing fails.
                time.sleep(SWEEP + 0.5)
                assert not following.done(), following.result()
                assert _status(on_b, swept) == _status(on_b, followed) == "in_progress"
                assert "left running by a server that is gone" not in b.output()
                a.kill()
                killed = time.monotonic()
                events = following.result(timeout=30)
                ended = time.monotonic() - killed
            _ends_failed(events, 0)
            deltas = [e for e in events if e.type == "response.output_text.delta"]
            assert deltas, "B's follower saw none of A's text while A ran"
            # Nobody asks about ``swept``: only B's sweeper can fail it.
            sweep = _until("the sweeper fails A's run", functools.partial(_is, on_b, swept, "failed"), 4 * SWEEP)
            _failed(on_b, swept)
            _ends_failed(_resumed(on_b, swept, 0), 1)
    figures.update(
        **{"seconds from the kill to the end of B's follower": round(ended, 2)},
        **{"seconds from then to B's sweeper failing the other run": round(sweep, 2)},
        **{"text deltas B followed while A lived": len(deltas)},
    )
