"""Files and Uploads over a real socket with the official SDK: the exact bytes back, listing
with its filters and pages, expiry on the server's clock, the size limit, deletes, uploads in
parts (order, byte count and MD5 checked), and the bad input of both APIs."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator

import httpx
import openai
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support.live import FROZEN, Live, serve_in_thread
from tests.support.spec import validate

LIMIT = 64 * 1024  # the server's --max-file-bytes


@pytest.fixture(scope="module")
def server() -> Iterator[Live]:
    settings = Settings(frozen_time=FROZEN, max_file_bytes=LIMIT, backend="script")
    with serve_in_thread(create_app(settings)) as s:
        yield s


@pytest.fixture
def sdk(server: Live) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0) as c:
        yield c


def test_a_file_comes_back_byte_for_byte_and_is_gone_once_deleted(sdk: openai.OpenAI) -> None:
    data = bytes(range(256)) * 7 + b"\r\n\x00not text"  # not UTF-8, CR LF and NUL kept
    made = sdk.files.create(file=("blob.bin", data), purpose="user_data")
    validate("OpenAIFile", made.model_dump(mode="json"))
    assert (made.bytes, made.filename, made.purpose, made.created_at) == (len(data), "blob.bin", "user_data", FROZEN)
    assert sdk.files.retrieve(made.id) == made
    assert sdk.files.content(made.id).read() == data
    deleted = sdk.files.delete(made.id)
    validate("DeleteFileResponse", deleted.model_dump(mode="json"))
    assert deleted.deleted and deleted.id == made.id
    with pytest.raises(openai.NotFoundError):
        sdk.files.retrieve(made.id)
    with pytest.raises(openai.NotFoundError):
        sdk.files.content(made.id)
    with pytest.raises(openai.NotFoundError):
        sdk.files.delete(made.id)


def test_the_same_upload_gets_the_same_id_on_a_fresh_server_and_the_next_one_here(sdk: openai.OpenAI) -> None:
    first = sdk.files.create(file=("same.txt", b"same bytes"), purpose="assistants").id
    second = sdk.files.create(file=("same.txt", b"same bytes"), purpose="assistants").id
    assert first != second  # a second upload is a second File
    app = create_app(Settings(frozen_time=FROZEN, backend="script"))
    with serve_in_thread(app) as fresh, openai.OpenAI(base_url=fresh.base_url, api_key="sk", max_retries=0) as other:
        assert other.files.create(file=("same.txt", b"same bytes"), purpose="assistants").id == first


def test_list_filters_by_purpose_and_pages_in_either_order(sdk: openai.OpenAI) -> None:
    made = [sdk.files.create(file=(f"e{i}.jsonl", b"{}\n"), purpose="fine-tune").id for i in range(3)]
    page = sdk.files.list(purpose="fine-tune", limit=2, order="asc")
    validate("ListFilesResponse", page.model_dump(mode="json"))
    assert [f.id for f in page.data] == made[:2] and page.has_more
    assert [f.id for f in sdk.files.list(purpose="fine-tune", limit=2, order="asc", after=made[1]).data] == made[2:]
    assert [f.id for f in sdk.files.list(purpose="fine-tune").data] == made[::-1]  # newest first by default


def test_a_file_expires_on_the_servers_clock(sdk: openai.OpenAI, server: Live) -> None:
    made = sdk.files.create(
        file=("short.txt", b"x"), purpose="user_data", expires_after={"anchor": "created_at", "seconds": 3600}
    )
    assert made.expires_at == made.created_at + 3600
    httpx.post(server.url + "/__mockserver/clock", json={"advance": 3600}).raise_for_status()
    with pytest.raises(openai.NotFoundError):
        sdk.files.retrieve(made.id)


@pytest.mark.parametrize(
    ("fields", "files", "param"),
    [
        pytest.param({"purpose": "fun"}, {"file": ("a.txt", b"x")}, "purpose", id="purpose"),
        pytest.param({}, {"file": ("a.txt", b"x")}, "purpose", id="no-purpose"),
        pytest.param({"purpose": "user_data"}, {}, "file", id="no-file"),
        pytest.param({"purpose": "user_data"}, {"file": ("a.bin", b"x" * (LIMIT + 1))}, "file", id="too-large"),
        pytest.param(
            {"purpose": "user_data", "expires_after[anchor]": "created_at", "expires_after[seconds]": "60"},
            {"file": ("a.txt", b"x")},
            "expires_after.seconds",
            id="expiry",
        ),
        pytest.param({"purpose": "batch"}, {"file": ("a.jsonl", b"\xff\xfe")}, "file", id="batch-not-text"),
    ],
)
def test_bad_uploads_are_400_naming_the_parameter(
    server: Live, fields: dict[str, str], files: dict[str, tuple[str, bytes]], param: str
) -> None:
    answer = httpx.post(server.base_url + "/files", data=fields, files=files or {"other": ("x", b"")})
    assert answer.status_code == 400, answer.text
    validate("ErrorResponse", answer.json())
    assert answer.json()["error"]["param"] == param
    assert httpx.get(server.url + "/health").status_code == 200


def test_an_upload_in_parts_completes_in_the_order_given(sdk: openai.OpenAI) -> None:
    data = os.urandom(3000)
    upload = sdk.uploads.create(
        bytes=len(data), filename="big.bin", mime_type="application/octet-stream", purpose="assistants"
    )
    validate("Upload", upload.model_dump(mode="json"))
    assert upload.status == "pending"
    parts = [sdk.uploads.parts.create(upload.id, data=chunk) for chunk in (data[2000:], data[:1000], data[1000:2000])]
    validate("UploadPart", parts[0].model_dump(mode="json"))
    done = sdk.uploads.complete(
        upload.id, part_ids=[parts[1].id, parts[2].id, parts[0].id], md5=hashlib.md5(data).hexdigest()
    )
    validate("Upload", done.model_dump(mode="json"))
    assert done.status == "completed" and done.file is not None
    assert sdk.files.content(done.file.id).read() == data
    with pytest.raises(openai.BadRequestError):
        sdk.uploads.cancel(upload.id)  # completed: no longer pending


def test_an_upload_checks_bytes_and_md5_and_can_be_cancelled(sdk: openai.OpenAI) -> None:
    upload = sdk.uploads.create(bytes=4, filename="a.txt", mime_type="text/plain", purpose="assistants")
    part = sdk.uploads.parts.create(upload.id, data=b"abc")
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.uploads.complete(upload.id, part_ids=[part.id])
    assert caught.value.param == "bytes"
    more = sdk.uploads.parts.create(upload.id, data=b"d")
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.uploads.complete(upload.id, part_ids=[part.id, more.id], md5="0" * 32)
    assert caught.value.param == "md5"
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.uploads.complete(upload.id, part_ids=["part_nope"])
    assert caught.value.param == "part_ids"
    assert sdk.uploads.cancel(upload.id).status == "cancelled"
    with pytest.raises(openai.BadRequestError):
        sdk.uploads.parts.create(upload.id, data=b"e")
    with pytest.raises(openai.NotFoundError):
        sdk.uploads.cancel("upload_nope")


def test_a_batch_upload_that_is_not_jsonl_is_refused_at_completion(sdk: openai.OpenAI) -> None:
    upload = sdk.uploads.create(bytes=5, filename="in.jsonl", mime_type="application/jsonl", purpose="batch")
    part = sdk.uploads.parts.create(upload.id, data=b"a,b,c")
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.uploads.complete(upload.id, part_ids=[part.id])
    assert caught.value.param == "part_ids"
    assert sdk.uploads.cancel(upload.id).status == "cancelled"  # still pending: nothing half-made
