"""OpenAI's platform surface — Files, Uploads, Batches — through the official SDK (sync and
async), every object validated against the spec's schemas; and, against every backend
(scripted answers, a replay of recordings, the reference model), a batch line answered byte
for byte as the same request sent directly."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Iterator
from typing import Any, Final

import httpx
import openai
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support.backends import Backend
from tests.support.live import FROZEN, Borrowed, Live, serve_in_thread
from tests.support.spec import validate

CHAT: Final = "/v1/chat/completions"
STEP = 0.5  # the servers' --batch-step-time (the default)
TERMINAL = ("completed", "failed", "expired", "cancelled")


@pytest.fixture(scope="module")
def own_script() -> Iterator[Live]:
    """A script-only server of this module's own: its clock is stepped here, the session's never."""
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN, backend="script"))) as server:
        yield server


@pytest.fixture(scope="module")
def own_reference(live: Live) -> Iterator[Live]:
    assert live.app is not None
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN), backend=Borrowed(live.app.state.ctx.model))) as s:
        yield s


def _server(backend: Backend, request: pytest.FixtureRequest) -> Live:
    """Where the batch runs: the replay backend's own server (made for this test), or this
    module's twin of the script or reference one (the session's clocks are never moved)."""
    if backend.name == "replay":
        return backend.live
    own: Live = request.getfixturevalue(f"own_{backend.name}")
    return own


def _step(http: httpx.Client, server: Live, client: openai.OpenAI, batch_id: str, status: str) -> Any:
    """One step of the server's clock: the batch moves from ``status`` to its next one."""
    http.post(server.url + "/__mockserver/clock", json={"advance": STEP}).raise_for_status()
    deadline = time.monotonic() + 30
    while (batch := client.batches.retrieve(batch_id)).status == status:
        assert time.monotonic() < deadline, f"batch stayed {status}"
        time.sleep(0.01)
    validate("Batch", batch.model_dump(mode="json"))
    return batch


def test_a_batch_line_is_the_direct_answer_on_every_backend(backend: Backend, request: pytest.FixtureRequest) -> None:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Batch me."}], "max_tokens": 6, "seed": 3}
    backend.prepare("/chat/completions", body)
    server = _server(backend, request)  # after prepare: a replay server loads its cassettes at start
    if backend.name == "script":
        rule = {"model": "gpt-4o-mini", "text": "A scripted line."}
        httpx.post(server.url + "/__mockserver/answers", json=rule).raise_for_status()
    row = {"custom_id": "only", "method": "POST", "url": CHAT, "body": body}
    with openai.OpenAI(base_url=server.base_url, api_key="sk", max_retries=0) as client, httpx.Client() as http:
        file = client.files.create(file=("in.jsonl", (json.dumps(row) + "\n").encode()), purpose="batch")
        validate("OpenAIFile", file.model_dump(mode="json"))
        batch = client.batches.create(input_file_id=file.id, endpoint=CHAT, completion_window="24h")
        validate("Batch", batch.model_dump(mode="json"))
        batch = _step(http, server, client, batch.id, "validating")
        assert batch.status == "in_progress"
        # The line ran as the clock read now: the same request sent directly now gets the same bytes.
        direct = http.post(server.base_url + "/chat/completions", json=body)
        assert direct.status_code == 200, direct.text
        while batch.status not in TERMINAL:
            batch = _step(http, server, client, batch.id, batch.status)
        assert batch.status == "completed", batch
        (line,) = client.files.content(batch.output_file_id).read().decode().splitlines()
    assert f'"body":{direct.text}}}' in line
    assert json.loads(line)["response"]["request_id"] == direct.headers["x-request-id"]


def test_files_and_uploads_through_the_async_sdk(backend: Backend) -> None:
    if backend.name != "script":
        pytest.skip("the platform's objects do not depend on the backend: once is enough")
    server = backend.live

    async def scenario() -> None:
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="sk", max_retries=0) as client:
            made = await client.files.create(file=("a.txt", b"alpha"), purpose="user_data")
            validate("OpenAIFile", made.model_dump(mode="json"))
            listed = await client.files.list(purpose="user_data")
            validate("ListFilesResponse", listed.model_dump(mode="json"))
            assert made.id in [f.id for f in listed.data]
            assert (await client.files.content(made.id)).read() == b"alpha"
            validate("DeleteFileResponse", (await client.files.delete(made.id)).model_dump(mode="json"))
            data = b"0123456789" * 50
            upload = await client.uploads.create(
                bytes=len(data), filename="d.jsonl", mime_type="text/jsonl", purpose="batch"
            )
            validate("Upload", upload.model_dump(mode="json"))
            part = await client.uploads.parts.create(upload.id, data=b'{"a": 1}\n' + data[9:])
            validate("UploadPart", part.model_dump(mode="json"))
            done = await client.uploads.complete(
                upload.id, part_ids=[part.id], md5=hashlib.md5(b'{"a": 1}\n' + data[9:]).hexdigest()
            )
            validate("Upload", done.model_dump(mode="json"))
            assert done.file is not None and done.file.purpose == "batch"
            batches = await client.batches.list(limit=5)
            validate("ListBatchesResponse", batches.model_dump(mode="json"))

    asyncio.run(scenario())
