"""The input file's judge (every problem OpenAI names, with its line), the lines the output
and error files hold, and progress kept in chunks that a resumed batch goes on from."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Final

import pytest

from mockserver.batches.inprocess import Answer
from mockserver.batches.lines import MAX_LINES, not_jsonl, read_lines
from mockserver.batches.progress import Progress
from mockserver.batches.record import error_line, legal, output_line, usage_of
from mockserver.state.memory import MemoryState

CHAT: Final = "/v1/chat/completions"


def row(custom_id: str = "a", url: str = CHAT, **body: Any) -> bytes:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **body}
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": url, "body": body}).encode()


def served(model: str) -> str | None:
    return None if model == "m" else f"The model '{model}' does not exist."


@pytest.mark.parametrize(
    ("bad", "code", "param"),
    [
        pytest.param(b"[1, 2]", "invalid_json_line", None, id="not-object"),
        pytest.param(b'{"custom_id": 5}', "invalid_request", "custom_id", id="custom-id"),
        pytest.param(row("b").replace(b'"POST"', b'"GET"'), "invalid_request", "method", id="method"),
        pytest.param(row("b", model="nope"), "model_not_found", "body.model", id="model"),
        pytest.param(row("b", url="/v1/embeddings"), "invalid_url", "url", id="url"),
    ],
)
def test_each_problem_names_its_line(bad: bytes, code: str, param: str | None) -> None:
    lines, problems = read_lines(row() + b"\n\n" + bad + b"\n", CHAT, served)
    assert [(p.code, p.line, p.param) for p in problems] == [(code, 3, param)]  # blank lines count
    assert [line.custom_id for line in lines] == ["a"]


def test_every_bad_line_is_named_and_an_empty_or_huge_file_is_one_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    _, problems = read_lines(b"{\n" + row() + b"\nnope\n", CHAT, served)
    assert [(p.code, p.line) for p in problems] == [("invalid_json_line", 1), ("invalid_json_line", 3)]
    assert [p.code for p in read_lines(b"\n \n", CHAT, served)[1]] == ["empty_file"]
    assert MAX_LINES == 50_000  # OpenAI's limit; a smaller one here keeps the file small
    monkeypatch.setattr("mockserver.batches.lines.MAX_LINES", 3)
    many = b"\n".join(row(str(i)) for i in range(4))
    assert [p.code for p in read_lines(many, CHAT, served)[1]] == ["too_many_requests"]


def test_a_line_body_is_compact_json_whatever_it_was_sent_as() -> None:
    (line,), _ = read_lines(
        b'{"custom_id": "x", "method": "POST", "url": "/v1/moderations", "body": {"input": "a b"}}',
        "/v1/moderations",
        served,
    )
    assert line.body == b'{"input":"a b"}'


@pytest.mark.parametrize(
    ("data", "fine"),
    [(row(), True), (b"\xff", False), (b"", False), (b"a,b\n", False), (b"[1]\n", False)],
    ids=["jsonl", "binary", "empty", "csv", "array"],
)
def test_not_jsonl_at_all(data: bytes, fine: bool) -> None:
    assert (not_jsonl(data) is None) is fine


def test_an_output_line_holds_the_endpoints_bytes_as_they_came() -> None:
    body = b'{"id":"chatcmpl-1","n":1.50}'  # 1.50: bytes a re-encoding would change
    line = output_line("batch_1", "c-1", Answer(200, "req_1", body))
    assert line.endswith(b'"response":{"status_code":200,"request_id":"req_1","body":' + body + b'},"error":null}')
    assert json.loads(line)["custom_id"] == "c-1"
    multi = output_line("batch_1", "c-2", Answer(502, None, b"<html>\nbad gateway</html>"))
    assert b"\n" not in multi and json.loads(multi)["response"]["body"] == "<html>\nbad gateway</html>"
    assert json.loads(error_line("batch_1", "c-3", "batch_expired", "late"))["error"]["code"] == "batch_expired"


def test_usage_of_each_endpoints_shape() -> None:
    assert usage_of(b'{"usage": {"prompt_tokens": 3, "completion_tokens": 4}}') == (3, 4)
    assert usage_of(b'{"usage": {"input_tokens": 5, "output_tokens": 6}}') == (5, 6)
    assert usage_of(b"not json") == (0, 0)


def test_the_status_machine() -> None:
    assert legal("validating", "in_progress") and legal("in_progress", "cancelling")
    assert not legal("completed", "cancelling") and not legal("validating", "completed")


def test_progress_resumes_from_its_last_whole_chunk() -> None:
    async def scenario() -> None:
        state = MemoryState()
        progress = await Progress.read(state, "b")
        progress.add("b", "r0", Answer(200, "q", b'{"usage":{"prompt_tokens":2,"completion_tokens":1}}'))
        progress.add("b", "r1", Answer(500, "q", b'{"error":{}}'))
        await progress.flush(state, "b")
        progress.add("b", "r2", Answer(200, "q", b"{}"))  # gathered, never written: lost in a crash
        again = await Progress.read(state, "b")
        assert (again.done, again.tally.completed, again.tally.failed, again.chunks) == (2, 1, 1, 1)
        assert [json.loads(x)["custom_id"] for x in again.outputs] == ["r0"]
        assert [json.loads(x)["custom_id"] for x in again.errors] == ["r1"]
        assert again.usage()["total_tokens"] == 3
        again.add("b", "r2", Answer(200, "q", b"{}"))
        await again.flush(state, "b")
        final = await Progress.read(state, "b")
        assert [json.loads(x)["custom_id"] for x in final.outputs] == ["r0", "r2"]
        await final.forget(state, "b")
        assert (await Progress.read(state, "b")).done == 0

    asyncio.run(scenario())
