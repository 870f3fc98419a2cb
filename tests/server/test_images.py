"""The images endpoints through the official openai SDK against a live server (the painter
itself: tests/unit/media/test_painting.py)."""

from __future__ import annotations

import base64
import struct
from typing import Any

import httpx
import openai
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support.images import read_png, solid_png
from tests.support.live import FROZEN, Live
from tests.support.spec import validate

PROMPT = "a red fox under a golden sky"
# The SDK marks create_variation deprecated; the endpoint still exists and is tested here.
pytestmark = pytest.mark.filterwarnings("ignore:deprecated:DeprecationWarning")


def b64(item: Any) -> bytes:
    return base64.b64decode(item.b64_json)


# --- generations --------------------------------------------------------------------------------


def test_b64_and_url_give_the_same_picture(client: openai.OpenAI, live: Live) -> None:
    raw = client.images.with_raw_response.generate(
        prompt=PROMPT, size="256x256", response_format="b64_json", extra_body={"seed": 7}
    )
    assert raw.headers["x-mockserver-seed"] == "7"
    validate("ImagesResponse", raw.http_response.json())
    done = raw.parse()
    assert done.created == int(FROZEN) and done.data is not None and len(done.data) == 1
    png = b64(done.data[0])
    assert read_png(png) == (256, 256, 2)

    by_url = client.images.generate(prompt=PROMPT, size="256x256", extra_body={"seed": 7})  # url: dall-e-2's default
    assert by_url.data is not None and by_url.data[0].url is not None
    url = by_url.data[0].url
    assert url.startswith(live.url + "/images/") and url.endswith(".png")
    fetched = httpx.get(url)
    assert fetched.status_code == 200 and fetched.headers["content-type"] == "image/png"
    assert fetched.content == png


def test_same_request_same_bytes_and_prompt_or_seed_changes_them(client: openai.OpenAI) -> None:
    def one(prompt: str, **extra: Any) -> bytes:
        done = client.images.generate(prompt=prompt, size="256x256", response_format="b64_json", extra_body=extra)
        assert done.data is not None
        return b64(done.data[0])

    assert one(PROMPT, seed=1) == one(PROMPT, seed=1)
    assert one(PROMPT) == one(PROMPT)  # the derived seed is stable too
    assert one(PROMPT, seed=1) != one("a blue whale", seed=1)
    assert one(PROMPT, seed=1) != one(PROMPT, seed=2)


def test_n_images_differ_and_the_first_does_not_depend_on_n(client: openai.OpenAI) -> None:
    three = client.images.generate(prompt=PROMPT, n=3, size="256x256", response_format="b64_json")
    single = client.images.generate(prompt=PROMPT, size="256x256", response_format="b64_json")
    assert three.data is not None and single.data is not None
    pictures = [b64(d) for d in three.data]
    assert len(set(pictures)) == 3 and pictures[0] == b64(single.data[0])


def test_dall_e_3_revises_the_prompt(client: openai.OpenAI) -> None:
    raw = client.images.with_raw_response.generate(
        model="dall-e-3", prompt=PROMPT, size="1792x1024", style="natural", response_format="b64_json"
    )
    validate("ImagesResponse", raw.http_response.json())
    done = raw.parse()
    assert done.data is not None and done.data[0].revised_prompt is not None
    assert done.data[0].revised_prompt.startswith(PROMPT) and done.usage is None
    assert read_png(b64(done.data[0]))[:2] == (1792, 1024)


def test_gpt_image_answers_b64_with_usage(client: openai.OpenAI) -> None:
    raw = client.images.with_raw_response.generate(
        model="gpt-image-1", prompt=PROMPT, size="1024x1536", quality="low", background="transparent"
    )
    validate("ImagesResponse", raw.http_response.json())
    done = raw.parse()
    assert done.data is not None and done.data[0].url is None
    assert read_png(b64(done.data[0])) == (1024, 1536, 6)
    assert (done.size, done.quality, done.background, done.output_format) == ("1024x1536", "low", "transparent", "png")
    usage = done.usage
    assert usage is not None and usage.output_tokens == 408
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert usage.input_tokens == usage.input_tokens_details.text_tokens > 0


def test_a_gpt_only_parameter_without_model_picks_a_gpt_image_model(live: Live) -> None:
    data = httpx.post(live.base_url + "/images/generations", json={"prompt": "x", "moderation": "low"}).json()
    assert "b64_json" in data["data"][0] and "usage" in data


# --- edits and variations -----------------------------------------------------------------------


def test_dall_e_2_edit_with_mask(client: openai.OpenAI) -> None:
    image, mask = solid_png(64, 64, alpha=True), solid_png(64, 64, alpha=True)
    raw = client.images.with_raw_response.edit(
        image=("in.png", image, "image/png"),
        mask=("mask.png", mask, "image/png"),
        prompt=PROMPT,
        model="dall-e-2",
        size="256x256",
        response_format="b64_json",
        n=2,
    )
    validate("ImagesResponse", raw.http_response.json())
    done = raw.parse()
    assert done.data is not None and len(done.data) == 2
    assert [read_png(b64(d))[:2] for d in done.data] == [(256, 256), (256, 256)]
    other = client.images.edit(
        image=("in.png", solid_png(64, 64, alpha=True, rgb=b"\xff\x00\x00"), "image/png"),
        prompt=PROMPT,
        model="dall-e-2",
        size="256x256",
        response_format="b64_json",
    )
    assert other.data is not None and b64(other.data[0]) != b64(done.data[0])  # the input image counts


def test_gpt_image_edit_takes_several_images_and_auto_follows_the_first(client: openai.OpenAI) -> None:
    done = client.images.edit(
        image=[("a.png", solid_png(96, 64), "image/png"), ("b.png", solid_png(32, 32), "image/png")],
        prompt=PROMPT,
        quality="low",
    )
    assert done.data is not None and done.usage is not None
    assert read_png(b64(done.data[0]))[:2] == (1536, 1024) and done.size == "1536x1024"
    assert done.usage.input_tokens_details.image_tokens > 0


def test_variations(client: openai.OpenAI) -> None:
    raw = client.images.with_raw_response.create_variation(
        image=("in.png", solid_png(32, 32), "image/png"), n=2, size="256x256", response_format="b64_json"
    )
    validate("ImagesResponse", raw.http_response.json())
    done = raw.parse()
    assert done.data is not None
    pictures = [b64(d) for d in done.data]
    assert len(set(pictures)) == 2 and all(read_png(p)[:2] == (256, 256) for p in pictures)


# --- bad input ----------------------------------------------------------------------------------

GIF = b"GIF89a" + struct.pack("<HH", 32, 32) + bytes(20)


@pytest.mark.parametrize(
    ("call", "param"),
    [
        (lambda c: c.images.generate(prompt="x", size="1792x1024"), "size"),
        (lambda c: c.images.generate(model="dall-e-3", prompt="x", n=2), "n"),
        (lambda c: c.images.generate(prompt="x" * 1001), "prompt"),
        (lambda c: c.images.generate(model="dall-e-3", prompt="x" * 4001), "prompt"),
        (lambda c: c.images.generate(prompt=""), "prompt"),
        (lambda c: c.images.generate(model="gpt-image-1", prompt="x", response_format="url"), "response_format"),
        (lambda c: c.images.generate(model="gpt-image-1", prompt="x", output_format="jpeg"), "output_format"),
        (lambda c: c.images.generate(model="gpt-image-1", prompt="x", size="1792x1024"), "size"),
        (lambda c: c.images.generate(model="dall-e-2", prompt="x", quality="hd"), "quality"),
        (lambda c: c.images.generate(model="dall-e-2", prompt="x", style="vivid"), "style"),
        (lambda c: c.images.generate(prompt="x", n=11), "n"),
        (lambda c: c.images.create_variation(image=("a.gif", GIF, "image/gif")), "image"),
        (lambda c: c.images.create_variation(image=("a.png", solid_png(32, 16), "image/png")), "image"),
        (lambda c: c.images.create_variation(image=("a.png", b"not an image", "image/png")), "image"),
        (lambda c: c.images.create_variation(image=("a.png", solid_png(8, 8), "image/png"), model="x"), "model"),
        (
            lambda c: c.images.edit(
                image=("a.png", solid_png(32, 32), "image/png"),
                mask=("m.png", solid_png(16, 16, alpha=True), "image/png"),
                prompt="x",
                model="dall-e-2",
            ),
            "mask",
        ),
        (
            lambda c: c.images.edit(
                image=("a.png", solid_png(32, 32), "image/png"),
                mask=("m.png", solid_png(32, 32), "image/png"),
                prompt="x",
            ),
            "mask",
        ),
        (lambda c: c.images.edit(image=("a.png", solid_png(8, 8), "image/png"), prompt="x", model="dall-e-3"), "model"),
    ],
    ids=[
        "size-for-dall-e-2",
        "n-for-dall-e-3",
        "prompt-dall-e-2",
        "prompt-dall-e-3",
        "prompt-empty",
        "response_format-gpt",
        "output_format-jpeg",
        "size-for-gpt",
        "quality-dall-e-2",
        "style-dall-e-2",
        "n-11",
        "variation-gif",
        "variation-not-square",
        "variation-garbage",
        "variation-model",
        "mask-size",
        "mask-no-alpha",
        "edit-dall-e-3",
    ],
)
def test_bad_input_is_a_400_naming_the_parameter(client: openai.OpenAI, call: Any, param: str) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        call(client)
    assert caught.value.status_code == 400
    assert caught.value.param == param, caught.value.message
    validate("ErrorResponse", caught.value.response.json())


def test_variations_want_multipart_and_unknown_image_ids_are_404(live: Live) -> None:
    # Edits take the spec's JSON form too (images by reference): without images it names them.
    answer = httpx.post(live.base_url + "/images/edits", json={"prompt": "x"})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "images"
    answer = httpx.post(live.base_url + "/images/variations", json={"model": "dall-e-2"})
    assert answer.status_code == 400 and "multipart/form-data" in answer.json()["error"]["message"]
    answer = httpx.post(live.base_url + "/images/variations", files={"image": ("a.png", b"x")}, data={"n": "two"})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "n"
    missing = httpx.get(live.url + "/images/img-0000.png")
    assert missing.status_code == 404
    validate("ErrorResponse", missing.json())


@pytest.mark.parametrize(("extra", "param"), [({"seed": 1}, "seed"), ({"foo": 1}, "foo")], ids=["seed", "unknown"])
async def test_strict_refuses_what_openai_does_not_document(extra: dict[str, Any], param: str) -> None:
    app = create_app(Settings(strict=True, frozen_time=FROZEN))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        answer = await c.post("/v1/images/generations", json={"prompt": "x", "size": "256x256", **extra})
        assert answer.status_code == 400 and answer.json()["error"]["param"] == param
        assert (await c.post("/v1/images/generations", json={"prompt": "x", "size": "256x256"})).status_code == 200
