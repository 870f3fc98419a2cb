"""Batches over a real socket with the official SDK, on a frozen clock: every status watched
as the clock moves, each line answered byte for byte as the same request sent directly, the
validation failures OpenAI names, runtime rejections to the error file, cancel, expiry on
demand, seeded line faults, the journal's batch entries, and the bad input of the API."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any, Final

import httpx
import openai
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support.live import FROZEN, Live, serve_in_thread
from tests.support.spec import validate

STEP = 1.0  # the server's --batch-step-time
CHAT: Final = "/v1/chat/completions"
TERMINAL = ("completed", "failed", "expired", "cancelled")


@pytest.fixture(scope="module")
def server() -> Iterator[Live]:
    """Scripted answers (each echoes nothing of the question: the lines' bodies still differ by
    id and seed); every backend answering a line as it answers directly is tests/contract's."""
    settings = Settings(frozen_time=FROZEN, batch_step_time=STEP, backend="script")
    with serve_in_thread(create_app(settings)) as s:
        httpx.post(s.url + "/__mockserver/answers", json={"text": "A scripted answer."}).raise_for_status()
        yield s


@pytest.fixture
def sdk(server: Live) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0) as c:
        yield c


def advance(server: Live, seconds: float = STEP) -> None:
    httpx.post(server.url + "/__mockserver/clock", json={"advance": seconds}).raise_for_status()


def settled(sdk: openai.OpenAI, batch_id: str, status: str) -> Any:
    """The batch once it shows ``status`` (its task runs when the clock moved: a few ms)."""
    deadline = time.monotonic() + 20
    while True:
        batch = sdk.batches.retrieve(batch_id)
        if batch.status == status or time.monotonic() > deadline:
            assert batch.status == status, batch
            return batch
        time.sleep(0.01)


def line(custom_id: str, content: str, url: str = CHAT, **extra: Any) -> dict[str, Any]:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}], "max_tokens": 4, **extra}
    return {"custom_id": custom_id, "method": "POST", "url": url, "body": body}


def upload(sdk: openai.OpenAI, rows: list[Any], name: str = "in.jsonl") -> str:
    text = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)
    return sdk.files.create(file=(name, text.encode()), purpose="batch").id


def run(sdk: openai.OpenAI, server: Live, rows: list[Any], **headers: str) -> Any:
    """A batch of ``rows`` taken to its end, one step of the clock per status."""
    batch = sdk.batches.create(
        input_file_id=upload(sdk, rows), endpoint=CHAT, completion_window="24h", extra_headers=headers
    )
    while batch.status not in TERMINAL:
        advance(server)
        batch = moved(sdk, batch.id, batch.status)
    return batch


def moved(sdk: openai.OpenAI, batch_id: str, status: str) -> Any:
    """The batch once it has left ``status`` (each step of the clock moves it one status on)."""
    deadline = time.monotonic() + 20
    while True:
        batch = sdk.batches.retrieve(batch_id)
        if batch.status != status:
            return batch
        assert time.monotonic() < deadline, f"batch {batch_id} stayed {status}"
        time.sleep(0.01)


def lines_of(sdk: openai.OpenAI, file_id: str | None) -> list[dict[str, Any]]:
    if file_id is None:
        return []
    return [json.loads(row) for row in sdk.files.content(file_id).read().decode().splitlines()]


def test_every_status_on_the_clock_and_each_line_as_a_direct_call(sdk: openai.OpenAI, server: Live) -> None:
    rows = [line("a", "Tell me about Lisbon."), line("b", "And Porto?", seed=7)]
    batch = sdk.batches.create(
        input_file_id=upload(sdk, rows), endpoint=CHAT, completion_window="24h", metadata={"job": "nightly"}
    )
    validate("Batch", batch.model_dump(mode="json"))
    assert (batch.status, batch.metadata, batch.expires_at) == (
        "validating",
        {"job": "nightly"},
        batch.created_at + 86400,
    )
    time.sleep(0.05)
    assert sdk.batches.retrieve(batch.id).status == "validating"  # the clock has not moved
    advance(server)
    running = settled(sdk, batch.id, "in_progress")
    assert running.in_progress_at == batch.created_at + 1
    assert running.request_counts is not None and running.request_counts.total == 2
    # The lines ran as the clock read in_progress_at: the same requests sent now, directly,
    # get the same bytes the output file holds.
    direct = {r["custom_id"]: httpx.post(server.base_url + "/chat/completions", json=r["body"]).content for r in rows}
    advance(server)
    settled(sdk, batch.id, "finalizing")
    advance(server)
    done = settled(sdk, batch.id, "completed")
    validate("Batch", done.model_dump(mode="json"))
    assert done.request_counts is not None
    assert (done.request_counts.completed, done.request_counts.failed) == (2, 0)
    assert done.error_file_id is None and done.output_file_id is not None
    raw = sdk.files.content(done.output_file_id).read()
    for row in raw.decode().splitlines():
        got = json.loads(row)
        assert got["response"]["status_code"] == 200 and got["error"] is None
        assert got["id"].startswith("batch_req_")
        assert ('"body":' + direct[got["custom_id"]].decode() + "}").encode() in row.encode()
    assert done.usage is not None and done.usage.total_tokens > 0
    output = sdk.files.retrieve(done.output_file_id)
    assert (output.purpose, output.bytes) == ("batch_output", len(raw))


def test_a_line_the_endpoint_rejects_goes_to_the_error_file_and_the_rest_run(sdk: openai.OpenAI, server: Live) -> None:
    rows = [line("ok", "Hello."), line("hot", "Hello.", temperature=9), line("ok2", "Bye.")]
    done = run(sdk, server, rows)
    assert done.status == "completed"
    assert done.request_counts is not None
    assert (done.request_counts.completed, done.request_counts.failed) == (2, 1)
    (bad,) = lines_of(sdk, done.error_file_id)
    assert bad["custom_id"] == "hot" and bad["error"] is None
    assert bad["response"]["status_code"] == 400
    assert bad["response"]["body"]["error"]["param"] == "temperature"
    assert [r["custom_id"] for r in lines_of(sdk, done.output_file_id)] == ["ok", "ok2"]


@pytest.mark.parametrize(
    ("row", "code", "param"),
    [
        pytest.param("{not json", "invalid_json_line", None, id="json"),
        pytest.param(line("x", "hi", url="/v1/completions"), "invalid_url", "url", id="url"),
        pytest.param(
            {**line("x", "hi"), "body": {"model": "gpt-4o-mini"}}, "invalid_request", "body.messages", id="missing"
        ),
        pytest.param(line("x", "hi", stream=True), "invalid_request", "body.stream", id="stream"),
        pytest.param(line("first", "again"), "duplicate_custom_id", "custom_id", id="duplicate"),
    ],
)
def test_a_bad_line_fails_the_whole_batch_at_validation(
    sdk: openai.OpenAI, server: Live, row: Any, code: str, param: str | None
) -> None:
    batch = sdk.batches.create(
        input_file_id=upload(sdk, [line("first", "hi"), row]), endpoint=CHAT, completion_window="24h"
    )
    advance(server)
    failed = settled(sdk, batch.id, "failed")
    validate("Batch", failed.model_dump(mode="json"))
    assert failed.errors is not None and failed.errors.data is not None
    (error,) = failed.errors.data
    assert (error.code, error.line, error.param) == (code, 2, param)
    assert failed.failed_at is not None and failed.output_file_id is None


def test_cancel_watches_cancelling_then_cancelled_and_a_finished_batch_is_409(sdk: openai.OpenAI, server: Live) -> None:
    batch = sdk.batches.create(input_file_id=upload(sdk, [line("a", "hi")]), endpoint=CHAT, completion_window="24h")
    cancelling = sdk.batches.cancel(batch.id)
    assert cancelling.status == "cancelling" and cancelling.cancelling_at is not None
    assert sdk.batches.cancel(batch.id).status == "cancelling"  # again: the same, no error
    advance(server)
    cancelled = settled(sdk, batch.id, "cancelled")
    assert cancelled.cancelled_at is not None and cancelled.output_file_id is None
    with pytest.raises(openai.ConflictError):
        sdk.batches.cancel(run(sdk, server, [line("b", "hi")]).id)


def test_an_expired_batch_on_demand_keeps_what_ran_and_lists_the_rest(sdk: openai.OpenAI, server: Live) -> None:
    rows = [line(f"r{i}", f"n{i}") for i in range(3)]
    done = run(sdk, server, rows, **{"x-mockserver-batch-expire": "1"})
    assert done.status == "expired" and done.expired_at is not None
    assert [r["custom_id"] for r in lines_of(sdk, done.output_file_id)] == ["r0"]
    rest = lines_of(sdk, done.error_file_id)
    assert [(r["custom_id"], r["error"]["code"], r["response"]) for r in rest] == [
        ("r1", "batch_expired", None),
        ("r2", "batch_expired", None),
    ]


def test_the_window_passing_expires_a_waiting_batch(sdk: openai.OpenAI, server: Live) -> None:
    batch = sdk.batches.create(input_file_id=upload(sdk, [line("a", "hi")]), endpoint=CHAT, completion_window="24h")
    advance(server, 86_400)
    expired = settled(sdk, batch.id, "expired")
    assert [r["error"]["code"] for r in lines_of(sdk, expired.error_file_id)] == ["batch_expired"]


def test_line_faults_are_seeded_and_the_journal_shows_each_line(sdk: openai.OpenAI, server: Live) -> None:
    rows = [line(f"r{i}", f"question {i}") for i in range(12)]
    fault = {"x-mockserver-line-fault": "http.500@p=0.5", "x-mockserver-session": "batch-faults"}
    first, again = run(sdk, server, rows, **fault), run(sdk, server, rows, **fault)
    failed = [r["custom_id"] for r in lines_of(sdk, first.error_file_id)]
    assert 0 < len(failed) < 12  # a share, not all or none
    assert failed == [r["custom_id"] for r in lines_of(sdk, again.error_file_id)]  # the same share
    assert {r["response"]["status_code"] for r in lines_of(sdk, first.error_file_id)} == {500}
    entries = httpx.get(server.url + "/__mockserver/journal", params={"session": "batch-faults"}).json()["entries"]
    of_first = [e for e in entries if (e.get("batch") or {}).get("id") == first.id]
    assert [e["batch"]["custom_id"] for e in of_first] == [f"r{i}" for i in range(12)]
    assert all(e["path"] == CHAT for e in of_first)
    assert sorted(e["batch"]["custom_id"] for e in of_first if e["status"] == 500) == sorted(failed)


def test_the_input_file_deleted_before_the_batch_runs_fails_it_cleanly(sdk: openai.OpenAI, server: Live) -> None:
    file_id = upload(sdk, [line("a", "hi")])
    batch = sdk.batches.create(input_file_id=file_id, endpoint=CHAT, completion_window="24h")
    sdk.files.delete(file_id)
    advance(server)
    failed = settled(sdk, batch.id, "failed")
    assert failed.errors is not None and failed.errors.data is not None
    assert [(e.code, e.param) for e in failed.errors.data] == [("file_not_found", "input_file_id")]


def test_list_pages_newest_first(sdk: openai.OpenAI, server: Live) -> None:
    file_id = upload(sdk, [line("a", "hi")])
    made = [sdk.batches.create(input_file_id=file_id, endpoint=CHAT, completion_window="24h").id for _ in range(3)]
    page = sdk.batches.list(limit=2)
    validate("ListBatchesResponse", page.model_dump(mode="json"))
    assert [b.id for b in page.data] == made[::-1][:2] and page.has_more
    rest = sdk.batches.list(limit=2, after=page.data[-1].id)
    assert rest.data[0].id == made[0]
    for batch_id in made:
        sdk.batches.cancel(batch_id)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        pytest.param({"endpoint": CHAT, "completion_window": "24h"}, "input_file_id", id="no-file"),
        pytest.param(
            {"input_file_id": "FILE", "endpoint": "/v1/videos", "completion_window": "24h"}, "endpoint", id="endpoint"
        ),
        pytest.param(
            {"input_file_id": "FILE", "endpoint": CHAT, "completion_window": "1h"}, "completion_window", id="window"
        ),
        pytest.param(
            {"input_file_id": "FILE", "endpoint": CHAT, "completion_window": "24h", "metadata": {"k": 1}},
            "metadata",
            id="metadata",
        ),
        pytest.param(
            {"input_file_id": "USER", "endpoint": CHAT, "completion_window": "24h"}, "input_file_id", id="purpose"
        ),
    ],
)
def test_bad_create_requests_are_400_naming_the_parameter(
    sdk: openai.OpenAI, server: Live, body: dict[str, Any], param: str
) -> None:
    if body.get("input_file_id") == "FILE":
        body["input_file_id"] = upload(sdk, [line("a", "hi")])
    elif body.get("input_file_id") == "USER":
        body["input_file_id"] = sdk.files.create(file=("notes.txt", b"hello"), purpose="user_data").id
    answer = httpx.post(server.base_url + "/batches", json=body)
    assert answer.status_code == 400, answer.text
    validate("ErrorResponse", answer.json())
    assert answer.json()["error"]["param"] == param
    assert httpx.get(server.url + "/health").status_code == 200


def test_unknown_ids_are_404_and_a_bad_line_fault_is_400(sdk: openai.OpenAI, server: Live) -> None:
    with pytest.raises(openai.NotFoundError):
        sdk.batches.retrieve("batch_nope")
    with pytest.raises(openai.NotFoundError):
        sdk.batches.cancel("batch_nope")
    with pytest.raises(openai.NotFoundError):
        sdk.batches.create(input_file_id="file-nope", endpoint=CHAT, completion_window="24h")
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.batches.create(
            input_file_id=upload(sdk, [line("a", "hi")]),
            endpoint=CHAT,
            completion_window="24h",
            extra_headers={"x-mockserver-line-fault": "http.999"},
        )
    assert caught.value.param == "x-mockserver-line-fault"


def test_a_file_that_is_not_jsonl_is_refused_at_upload(sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.files.create(file=("in.jsonl", b"custom_id,url\nx,y\n"), purpose="batch")
    assert caught.value.param == "file"


def test_a_fault_rule_matches_lines_by_their_path(sdk: openai.OpenAI, server: Live) -> None:
    session = {"x-mockserver-session": "batch-rule"}
    rule = {"path": CHAT, "nth": 2, "faults": "http.429", "session": "batch-rule"}
    httpx.post(server.url + "/__mockserver/rules", json=rule).raise_for_status()
    done = run(sdk, server, [line(f"r{i}", f"ask {i}") for i in range(3)], **session)
    (limited,) = lines_of(sdk, done.error_file_id)
    assert (limited["custom_id"], limited["response"]["status_code"]) == ("r1", 429)  # the second call only
    assert limited["response"]["body"]["error"]["code"] == "rate_limit_exceeded"
    assert [r["custom_id"] for r in lines_of(sdk, done.output_file_id)] == ["r0", "r2"]
