"""The smaller deviations from OpenAI's spec the hardening issue found, each as the spec says:
a 405 names the allowed methods, ``prompt: null`` is a new document, Responses takes every
input item type the spec lists, and ``/images/edits`` takes the JSON body form."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from mockserver.schemas.responses import OTHER_ITEM_TYPES
from tests.support.images import png_data_url, read_png, solid_png
from tests.support.live import Live


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("GET", "/v1/completions", {"POST"}),
        ("DELETE", "/v1/responses/resp_1/cancel", {"POST"}),
        ("PUT", "/v1/embeddings", {"POST"}),
        ("POST", "/v1/models", {"GET", "HEAD"}),
    ],
)
def test_a_405_names_the_allowed_methods(live: Live, method: str, path: str, allowed: set[str]) -> None:
    answer = httpx.request(method, live.url + path)
    assert answer.status_code == 405
    assert {m.strip() for m in answer.headers["allow"].split(",")} == allowed
    assert answer.json()["error"]["type"] == "invalid_request_error"


def test_a_null_prompt_is_a_new_document(live: Live) -> None:
    """The spec: prompt is nullable, and the model then writes from the document separator."""
    body = {"model": "m", "max_tokens": 8, "seed": 3}
    null = httpx.post(live.base_url + "/completions", json={**body, "prompt": None})
    separator = httpx.post(live.base_url + "/completions", json={**body, "prompt": "<|endoftext|>"})
    assert null.status_code == 200, null.text
    assert null.json()["usage"]["prompt_tokens"] == 1
    assert null.json()["choices"] == separator.json()["choices"]


# The least each other item type needs to say (the spec's required fields where it has them).
_ITEMS: dict[str, dict[str, Any]] = {
    "reasoning": {"id": "rs_1", "summary": []},
    "item_reference": {"id": "msg_1"},
    "web_search_call": {"id": "ws_1", "status": "completed", "action": {"type": "search", "query": "x"}},
    "custom_tool_call_output": {"call_id": "c1", "output": "the tool said 42"},
    "custom_tool_call": {"call_id": "c1", "name": "calc", "input": "6*7"},
    "computer_call_output": {"call_id": "c2", "output": {"type": "computer_screenshot", "image_url": "x"}},
}


@pytest.mark.parametrize("kind", sorted(OTHER_ITEM_TYPES))
def test_every_input_item_type_the_spec_lists_is_accepted(live: Live, kind: str) -> None:
    item = {"type": kind, **_ITEMS.get(kind, {"id": f"{kind}_1"})}
    body = {"model": "m", "max_output_tokens": 16, "input": [item, {"role": "user", "content": "Hi"}]}
    answer = httpx.post(live.base_url + "/responses", json=body)
    assert answer.status_code == 200, answer.text
    listed = httpx.get(f"{live.base_url}/responses/{answer.json()['id']}/input_items", params={"order": "asc"})
    first = listed.json()["data"][0]
    assert first["type"] == kind
    assert all(first[k] == v for k, v in item.items() if k != "id")


def test_a_tool_output_item_is_read_and_a_reasoning_item_is_not(live: Live) -> None:
    def prompt_tokens(items: list[dict[str, Any]]) -> int:
        body = {"model": "m", "max_output_tokens": 16, "input": [*items, {"role": "user", "content": "Hi"}]}
        answer = httpx.post(live.base_url + "/responses", json=body)
        assert answer.status_code == 200, answer.text
        return int(answer.json()["usage"]["input_tokens"])

    alone = prompt_tokens([])
    assert prompt_tokens([{"type": "reasoning", "id": "rs_1", "summary": []}]) == alone
    output = {"type": "custom_tool_call_output", "call_id": "c1", "output": "the tool said 42"}
    assert prompt_tokens([output]) > alone


def test_an_unknown_input_item_type_names_the_field(live: Live) -> None:
    body = {"model": "m", "input": [{"role": "user", "content": "Hi"}, {"type": "hologram", "id": "h"}]}
    answer = httpx.post(live.base_url + "/responses", json=body)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == "input[1].type"
    assert "'hologram' is not an input item type" in error["message"] and "_tag" not in error["message"]


def _edit(live: Live, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(live.base_url + "/images/edits", json=body, timeout=30)


def test_json_image_edits_take_data_urls_urls_and_file_ids(live: Live) -> None:
    base = {"model": "gpt-image-1", "prompt": "Add a red sun", "size": "1024x1024", "quality": "low"}
    for images in (
        [{"image_url": png_data_url(64, 64)}],
        [{"image_url": "https://example.com/cat.png"}],
        [{"file_id": "file-abc123"}, {"image_url": png_data_url(32, 32)}],
    ):
        answer = _edit(live, {**base, "images": images})
        assert answer.status_code == 200, answer.text
        png = base64.b64decode(answer.json()["data"][0]["b64_json"])
        assert read_png(png)[:2] == (1024, 1024)
        assert answer.json()["usage"]["input_tokens_details"]["image_tokens"] > 0
    once, again = (_edit(live, {**base, "images": [{"image_url": png_data_url(64, 64)}], "seed": 1}) for _ in "ab")
    assert once.content == again.content  # same request and seed, same bytes
    other = _edit(live, {**base, "images": [{"image_url": png_data_url(48, 48)}], "seed": 1})
    assert other.json()["data"] != once.json()["data"]  # another input image, another picture


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"images": []}, "images"),
        ({"images": [{"image_url": "x", "file_id": "y"}]}, "images[0]"),
        ({"images": [{"url": "https://example.com/a.png"}]}, "images[0]"),
        ({"images": [{"image_url": "ftp://example.com/a.png"}]}, "images[0].image_url"),
        ({"images": [{"image_url": "data:image/png;base64,!!!"}]}, "images[0].image_url"),
        ({"model": "dall-e-2"}, "model"),
        (
            {"mask": {"image_url": "data:image/png;base64," + base64.b64encode(solid_png(8, 8, alpha=True)).decode()}},
            "mask",
        ),
    ],
)
def test_json_image_edit_mistakes_name_the_field(live: Live, change: dict[str, Any], param: str) -> None:
    body = {"model": "gpt-image-1", "prompt": "Add a red sun", "images": [{"image_url": png_data_url(64, 64)}]}
    answer = _edit(live, {**body, **change})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == param
