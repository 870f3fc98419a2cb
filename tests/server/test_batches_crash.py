"""A batch whose server is SIGKILLed mid-run is resumed, not re-run and not stuck: the next
server on the same SQLite state takes it up from its last progress write, answers only the
lines no write holds, and the output file has every line once, in order. (The file it runs was
uploaded to the first server: its bytes live on the state, and the second reads them.)"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Final

import httpx
import openai
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from tests.reliability.harness import FROZEN, child_server
from tests.support.live import serve_in_thread

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="SIGKILL and /proc: Linux")

CHAT: Final = "/v1/chat/completions"
LINES = 16


def _until(what: str, check: object, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_a_killed_servers_batch_resumes_from_its_last_progress_write(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("- endpoint: chat\n  text: Resumed, not repeated.\n")
    args = ["--backend", "script", "--rules", str(rules), "--state", f"sqlite:{tmp_path / 'state.db'}",
            "--frozen-time", FROZEN, "--batch-step-time", "1"]  # fmt: skip
    rows = "".join(
        json.dumps({"custom_id": f"r{i:02}", "method": "POST", "url": CHAT,
                    "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"q{i}"}]}}) + "\n"
        for i in range(LINES)
    ).encode()  # fmt: skip
    with child_server(args, tmp_path / "a.log") as first:
        sdk = openai.OpenAI(base_url=first.base_url, api_key="sk", max_retries=0)
        file_id = sdk.files.create(file=("in.jsonl", rows), purpose="batch").id
        # Each line waits 100 ms of real time, so the run is still going when the server dies.
        slow = {"x-mockserver-line-fault": "latency.queue=100"}
        batch = sdk.batches.create(input_file_id=file_id, endpoint=CHAT, completion_window="24h", extra_headers=slow)
        httpx.post(first.url + "/__mockserver/clock", json={"advance": 1}).raise_for_status()

        def counted() -> int:
            counts = sdk.batches.retrieve(batch.id).request_counts
            return counts.completed if counts is not None else 0

        _until("no progress write before the kill", lambda: counted() >= 3)
        kept = counted()
        first.kill()
    assert kept < LINES
    started = time.time()  # the journal is on the state too: the second server's lines come after
    # The next server: in this process (only the first had to be a process to SIGKILL).
    settings = Settings(backend="script", rules=str(rules), state=f"sqlite:{tmp_path / 'state.db'}",
                        frozen_time=float(FROZEN), batch_step_time=1)  # fmt: skip
    with serve_in_thread(create_app(settings)) as second:
        sdk = openai.OpenAI(base_url=second.base_url, api_key="sk", max_retries=0)
        assert sdk.files.content(file_id).read() == rows  # the bytes live on the state
        _until("not resumed", lambda: sdk.batches.retrieve(batch.id).request_counts.completed == LINES)  # type: ignore[union-attr]
        for status in ("finalizing", "completed"):
            httpx.post(second.url + "/__mockserver/clock", json={"advance": 1}).raise_for_status()
            _until(f"not {status}", lambda s=status: sdk.batches.retrieve(batch.id).status == s)
        done = sdk.batches.retrieve(batch.id)
        assert done.output_file_id is not None and done.error_file_id is None
        out = [json.loads(r) for r in sdk.files.content(done.output_file_id).read().decode().splitlines()]
        assert [r["custom_id"] for r in out] == [f"r{i:02}" for i in range(LINES)]
        entries = httpx.get(second.url + "/__mockserver/journal").json()["entries"]
        rerun = [
            e["batch"]["custom_id"]
            for e in entries
            if (e.get("batch") or {}).get("id") == batch.id and e["time"] >= started
        ]
        # Only what no progress write held ran again: a tail of the lines, at most LINES - kept.
        assert rerun == [f"r{i:02}" for i in range(LINES - len(rerun), LINES)]
        assert len(rerun) <= LINES - kept
