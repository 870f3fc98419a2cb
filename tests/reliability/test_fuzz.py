"""Fuzzing: hypothesis-made request bodies for every generation-like endpoint, and a bigger
schemathesis pass over ``/openapi.json`` than tests/contract/test_openapi.py's.

The bodies are near misses more often than noise: each starts from a valid request and gets
fields with plausible values, wrong types, out-of-range numbers, NaN and infinities, lone
surrogates, huge integers, unknown fields; or the body is not a JSON object at all. Whatever
comes, the server answers below 500, every error in OpenAI's envelope (in-band in a stream),
and stays up.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mockserver.app import create_app
from mockserver.config import Settings
from mockserver.media.painting import encode_png
from mockserver.profiles import PROFILES
from tests.reliability.conftest import Budget
from tests.reliability.harness import Json, described, error_envelope, errors_logged, frames, thread_server
from tests.support.live import Live

# ---- values ------------------------------------------------------------------------------
# Each field has plausible values (valid, or nearly: the interesting crashes are deep inside
# generation, behind validation) and hostile ones; a body spoils none, one or a few of its fields.

_HUGE = st.sampled_from([2**31, 2**53 + 1, 2**63, 2**64 + 7, -(2**63) - 1, 10**30])
_ODD_FLOATS = st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e308, -0.0, 5e-324])
_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", " ", "\x00", "\ud800", "a\udfffb", "😀" * 8, "\u202e", "<|endoftext|>", "\r\n\r\n"]),
)
_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-5, 300), _HUGE, st.floats(-3, 3), _ODD_FLOATS, _TEXT)
ANY = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_TEXT, inner, max_size=4)),
    max_leaves=12,
)
BAD = st.one_of(ANY, _HUGE, _ODD_FLOATS, st.integers(-1000, -1), st.integers(10**4, 10**7))
VOCAB = 2048  # the reference model's
WORDS = st.lists(st.sampled_from(["the", "sea", "cat", "42", " ", "é", "日本", "😀", "\n", "{", "}"]), max_size=8).map(
    "".join
)
TEXTS = st.one_of(WORDS, WORDS, WORDS, _TEXT)
PNG = encode_png(16, 16, [b"\x20\x80\xc0\xff" * 16] * 16, alpha=True)
IMAGE_URLS = st.sampled_from(
    ["data:image/png;base64," + base64.b64encode(PNG).decode()] * 3 + ["data:image/png;base64,AAAA", "https://x/y.png"]
)
TOKEN = st.integers(0, VOCAB - 1)


def unit(low: float, high: float) -> st.SearchStrategy[float]:
    return st.floats(low, high, allow_nan=False)


MODELS = st.sampled_from(["gpt-4o-mini", "gpt-4o", "o3-mini", "gpt-3.5-turbo-instruct", "text-embedding-3-small"])
SAMPLING: dict[str, st.SearchStrategy[Any]] = {
    "temperature": unit(0, 2),
    "top_p": unit(0, 1),
    "top_k": st.integers(-1, 120),
    "min_p": unit(0, 1),
    "presence_penalty": unit(-2, 2),
    "frequency_penalty": unit(-2, 2),
    "repetition_penalty": unit(0.01, 2),
    "logit_bias": st.dictionaries(TOKEN.map(str), st.one_of(unit(-100, 100), st.integers(-100, 100)), max_size=4),
    "mirostat_target": unit(0.01, 10),
    "mirostat_lr": unit(0.01, 1),
    "n": st.integers(1, 3),
    "best_of": st.integers(1, 4),
    "seed": st.one_of(st.integers(0, 10**6), st.integers(-(2**63), 2**64)),
    "stop": st.one_of(TEXTS, st.lists(TEXTS, max_size=4)),
    "stop_token_ids": st.lists(TOKEN, max_size=4),
    "include_stop_str_in_output": st.booleans(),
    "min_tokens": st.integers(0, 12),
    "ignore_eos": st.booleans(),
    "context_length_exceeded_behavior": st.sampled_from(["truncate", "error"]),
    "prompt_logprobs": st.integers(0, 5),
    "truncate_prompt_tokens": st.integers(1, 40),
    "service_tier": st.sampled_from(["auto", "default", "flex"]),
    "stream": st.booleans(),
    "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()}),
    "user": TEXTS,
}
SCHEMA = st.fixed_dictionaries(
    {
        "type": st.just("object"),
        "properties": st.dictionaries(
            st.sampled_from("abc"),
            st.sampled_from(
                [{"type": "string"}, {"type": "integer", "minimum": 3}, {"enum": ["x", 1]}, {"type": "array"}]
            ),
        ),
    },
    optional={"required": st.lists(st.sampled_from("abcd"), max_size=2), "additionalProperties": st.booleans()},
)
FUNCTION = st.fixed_dictionaries(
    {"name": st.sampled_from(["f", "get_weather", "a" * 64]), "parameters": SCHEMA},
    optional={"description": TEXTS, "strict": st.booleans()},
)
TOOL = st.fixed_dictionaries({"type": st.just("function"), "function": FUNCTION})
PART = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": TEXTS}),
    st.fixed_dictionaries(
        {
            "type": st.just("image_url"),
            "image_url": st.fixed_dictionaries(
                {"url": IMAGE_URLS},
                optional={"detail": st.sampled_from(["low", "high", "auto", "x"])},
            ),
        }
    ),
)
MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["system", "developer", "user", "user", "assistant", "tool"]),
        "content": st.one_of(TEXTS, st.none(), st.lists(PART, max_size=3)),
    },
    optional={
        "name": st.sampled_from(["bob", "x"]),
        "tool_call_id": st.sampled_from(["call_1", ""]),
        "tool_calls": st.lists(
            st.fixed_dictionaries(
                {
                    "id": st.just("call_1"),
                    "type": st.just("function"),
                    "function": st.fixed_dictionaries({"name": st.just("f"), "arguments": TEXTS}),
                }
            ),
            max_size=2,
        ),
    },
)
CHAT = {
    **SAMPLING,
    "max_tokens": st.integers(1, 64),
    "max_completion_tokens": st.integers(1, 64),
    "logprobs": st.one_of(st.booleans(), st.integers(0, 5)),
    "top_logprobs": st.integers(0, 20),
    "tools": st.lists(TOOL, max_size=2),
    "tool_choice": st.one_of(
        st.sampled_from(["auto", "none", "required"]),
        st.just({"type": "function", "function": {"name": "f"}}),
    ),
    "parallel_tool_calls": st.booleans(),
    "functions": st.lists(FUNCTION, max_size=2),
    "function_call": st.one_of(st.sampled_from(["auto", "none"]), st.just({"name": "f"})),
    "response_format": st.one_of(
        st.sampled_from([{"type": "text"}, {"type": "json_object"}]),
        st.fixed_dictionaries(
            {
                "type": st.just("json_schema"),
                "json_schema": st.fixed_dictionaries(
                    {"name": st.sampled_from(["out", "x"]), "schema": SCHEMA}, optional={"strict": st.booleans()}
                ),
            }
        ),
    ),
    "reasoning_effort": st.sampled_from(["minimal", "low", "medium", "high"]),
    "store": st.booleans(),
    "metadata": st.dictionaries(WORDS, TEXTS, max_size=3),
}
COMPLETIONS = {
    **SAMPLING,
    "suffix": TEXTS,
    "max_tokens": st.integers(0, 64),
    "echo": st.booleans(),
    "logprobs": st.integers(0, 5),
    "response_format": st.one_of(
        st.sampled_from([{"type": "json_object"}, {"type": "text"}]),
        st.fixed_dictionaries({"type": st.just("json_object"), "schema": SCHEMA}),
    ),
}
ITEM = st.one_of(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "system", "developer", "assistant"]),
            "content": st.one_of(
                TEXTS,
                st.lists(
                    st.fixed_dictionaries(
                        {"type": st.sampled_from(["input_text", "output_text", "input_image", "input_file"])},
                        optional={"text": TEXTS, "image_url": IMAGE_URLS},
                    ),
                    max_size=3,
                ),
            ),
        },
        optional={"type": st.just("message")},
    ),
    st.fixed_dictionaries({"type": st.just("function_call_output"), "call_id": st.just("call_1"), "output": TEXTS}),
    st.fixed_dictionaries(
        {"type": st.just("function_call"), "call_id": st.just("call_1"), "name": st.just("f"), "arguments": TEXTS}
    ),
)
RESPONSES = {
    **SAMPLING,
    "instructions": TEXTS,
    "max_output_tokens": st.integers(16, 64),
    "top_logprobs": st.integers(0, 20),
    "include": st.lists(st.sampled_from(["message.output_text.logprobs", "reasoning.encrypted_content"]), max_size=2),
    "text": st.one_of(
        st.just({"format": {"type": "json_object"}}),
        st.fixed_dictionaries(
            {
                "format": st.fixed_dictionaries(
                    {"type": st.just("json_schema"), "name": st.just("out"), "schema": SCHEMA},
                    optional={"strict": st.booleans()},
                )
            }
        ),
        st.just({"verbosity": "low"}),
    ),
    "tools": st.lists(
        st.fixed_dictionaries({"type": st.just("function"), "name": st.sampled_from(["f", "g"]), "parameters": SCHEMA}),
        max_size=2,
    ),
    "tool_choice": st.one_of(st.sampled_from(["auto", "none", "required"]), st.just({"type": "function", "name": "f"})),
    "reasoning": st.fixed_dictionaries({}, optional={"effort": st.sampled_from(["low", "medium", "high"])}),
    "store": st.booleans(),
    "background": st.booleans(),
    "metadata": st.dictionaries(WORDS, TEXTS, max_size=3),
    "truncation": st.sampled_from(["auto", "disabled"]),
    "previous_response_id": st.sampled_from(["resp_nope", ""]),
    "max_tool_calls": st.integers(1, 3),
    "parallel_tool_calls": st.booleans(),
}
EMBEDDINGS = {
    "dimensions": st.integers(1, 3072),
    "encoding_format": st.sampled_from(["float", "base64"]),
    "user": TEXTS,
}
IMAGES = {
    "model": st.sampled_from(["dall-e-2", "dall-e-3", "gpt-image-1"]),
    "n": st.integers(1, 3),
    "size": st.sampled_from(["256x256", "512x512", "1024x1024", "1792x1024", "1024x1536", "auto", "64x48", "320x960"]),
    "quality": st.sampled_from(["standard", "hd", "low", "medium", "high", "auto"]),
    "response_format": st.sampled_from(["url", "b64_json"]),
    "style": st.sampled_from(["vivid", "natural"]),
    "background": st.sampled_from(["transparent", "opaque", "auto"]),
    "output_format": st.sampled_from(["png", "jpeg", "webp"]),
    "output_compression": st.integers(0, 100),
    "stream": st.booleans(),
    "partial_images": st.integers(0, 3),
    "moderation": st.sampled_from(["low", "auto"]),
    "seed": st.integers(0, 10**6),
    "user": TEXTS,
}


@st.composite
def bodies(draw: st.DrawFn, required: dict[str, st.SearchStrategy[Any]], fields: dict[str, Any]) -> bytes:
    """A request body: usually a JSON object with the required fields and some optional ones,
    none, one or a few of them spoilt (a hostile value, or left out); sometimes JSON that is
    not an object, or not JSON."""
    shape = draw(st.integers(0, 19))
    if shape == 0:
        return draw(st.binary(max_size=64))
    if shape == 1:
        return json.dumps(draw(ANY)).encode()
    body: Json = {name: draw(strategy) for name, strategy in required.items()}
    for name in draw(st.lists(st.sampled_from(sorted(fields)), max_size=6, unique=True)):
        body[name] = draw(fields[name])
    spoilt = draw(st.sampled_from([0, 0, 0, 1, 1, 2, 4]))
    for name in draw(st.lists(st.sampled_from(sorted(body)), max_size=spoilt, unique=True)) if body else []:
        if draw(st.integers(0, 4)):
            body[name] = draw(BAD)
        else:
            del body[name]
    if draw(st.integers(0, 9)) == 0:
        body[draw(_TEXT)] = draw(ANY)  # a field nobody knows
    return json.dumps(body, allow_nan=True).encode()


def _sendable(value: Any) -> str:
    """A form field's text: UTF-8 cannot carry a lone surrogate, so such text goes escaped."""
    text = str(value)
    try:
        text.encode()
    except UnicodeEncodeError:
        return ascii(text)
    return text


@st.composite
def multipart(draw: st.DrawFn, variation: bool) -> tuple[dict[str, str], list[tuple[str, tuple[str, bytes, str]]]]:
    """An image edit or variation: form fields (strings) and image files, good or bad."""
    png = PNG
    data: dict[str, str] = {}
    if not variation and draw(st.integers(0, 9)):
        data["prompt"] = _sendable(draw(TEXTS))
    for name in draw(st.lists(st.sampled_from(["n", "size", "response_format", "model", "quality"]), max_size=3)):
        data[name] = _sendable(draw(st.one_of(IMAGES[name], IMAGES[name], IMAGES[name], BAD)))
    files = []
    for _ in range(draw(st.sampled_from([0, 1, 1, 1, 1, 2]))):
        content = draw(st.one_of(st.just(png), st.just(png), st.binary(max_size=64), st.just(png[:40])))
        files.append(("image", ("in.png", content, draw(st.sampled_from(["image/png", "image/png", "text/plain"])))))
    return data, files


PROMPTS = st.one_of(TEXTS, st.lists(TEXTS, min_size=1, max_size=3), st.lists(TOKEN, min_size=1, max_size=6))
ENDPOINTS: dict[str, tuple[dict[str, st.SearchStrategy[Any]], dict[str, Any]]] = {
    "/v1/chat/completions": ({"model": MODELS, "messages": st.lists(MESSAGE, min_size=1, max_size=3)}, CHAT),
    "/v1/completions": ({"model": MODELS, "prompt": PROMPTS}, COMPLETIONS),
    "/v1/responses": ({"model": MODELS, "input": st.one_of(TEXTS, st.lists(ITEM, min_size=1, max_size=3))}, RESPONSES),
    "/v1/embeddings": ({"model": MODELS, "input": PROMPTS}, EMBEDDINGS),
    "/v1/images/generations": ({"prompt": TEXTS}, IMAGES),
}
# Every provider dialect answers under its own prefix (/fireworks/v1/...); unprefixed is OpenAI's.
# Gemini's prefix is a wire of its own (no OpenAI paths, Google's envelope): tests/server/test_gemini.py.
PREFIXES = st.sampled_from(["", "", "", *(f"/{name}" for name in PROFILES if name not in ("openai", "gemini"))])


# ---- checks ------------------------------------------------------------------------------


INTERNAL = "The server had an error"


def check_answer(response: httpx.Response) -> None:
    """Below 500; an error is in the envelope; a stream's frames are JSON, errors enveloped."""
    assert response.status_code < 500, f"{response.status_code}: {response.text[:800]}"
    kind = response.headers.get("content-type", "")
    if response.status_code >= 400:
        error_envelope(response.json())
        return
    if kind.startswith("text/event-stream"):
        for f in frames(response.content):
            if f.data == "[DONE]":
                continue
            event = json.loads(f.data)
            if "error" in event:  # in-band: enveloped, and never the server's own failure
                assert error_envelope(event)["type"] != "server_error", event
            if f.event == "error" or event.get("type") == "error":
                assert isinstance(event.get("message"), str) and event["message"], event
                assert event.get("code") != "server_error" and INTERNAL not in event["message"], event
            if event.get("type") == "response.failed":
                assert event["response"]["error"]["code"] != "server_error", event
    elif kind.startswith("application/json"):
        response.json()


@pytest.fixture(scope="module")
def fuzz_server() -> Iterator[Live]:
    # A small context window keeps every generation a body can ask for short.
    with thread_server(create_app(Settings(context_window=160, frozen_time=1_700_000_000.0))) as server:
        yield server.live


def _run(budget: Budget, strategy: st.SearchStrategy[Any], send: Callable[[Any], httpx.Response]) -> dict[str, int]:
    """Run the examples; how many got each class of status (2xx, 4xx)."""
    statuses: dict[str, int] = {}

    def one(example: Any) -> None:
        response = send(example)
        kind = f"{response.status_code // 100}xx"
        statuses[kind] = statuses.get(kind, 0) + 1
        check_answer(response)

    test = settings(
        max_examples=budget.fuzz_examples,
        deadline=None,
        derandomize=True,  # the same bodies every run: CI failures reproduce
        database=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )(given(strategy)(one))
    test()
    return dict(sorted(statuses.items()))


@pytest.mark.parametrize("path", sorted(ENDPOINTS))
def test_fuzzed_bodies_get_no_5xx_and_enveloped_errors(
    path: str, fuzz_server: Live, budget: Budget, figures: dict[str, Any]
) -> None:
    required, fields = ENDPOINTS[path]
    with httpx.Client(base_url=fuzz_server.url, timeout=60) as client, errors_logged() as errors:
        headers = {"content-type": "application/json"}
        sent = _run(
            budget,
            st.tuples(PREFIXES, bodies(required, fields)),
            lambda case: client.post(case[0] + path, content=case[1], headers=headers),
        )
    assert not errors, described(errors)
    assert httpx.get(fuzz_server.url + "/health", timeout=10).status_code == 200
    figures.update(cases=sum(sent.values()), statuses=sent)


@pytest.mark.parametrize("path", ["/v1/images/edits", "/v1/images/variations"])
def test_fuzzed_image_uploads_get_no_5xx_and_enveloped_errors(
    path: str, fuzz_server: Live, budget: Budget, figures: dict[str, Any]
) -> None:
    with httpx.Client(base_url=fuzz_server.url, timeout=60) as client, errors_logged() as errors:
        sent = _run(
            budget,
            multipart(path.endswith("variations")),
            lambda form: client.post(path, data=form[0], files=form[1] or None),
        )
    assert not errors, described(errors)
    assert httpx.get(fuzz_server.url + "/health", timeout=10).status_code == 200
    figures.update(cases=sum(sent.values()), statuses=sent)


def test_schemathesis_finds_no_server_error(tmp_path: Path, budget: Budget, figures: dict[str, Any]) -> None:
    """A bigger pass than tests/contract/test_openapi.py's: more examples per operation, both
    workers, its own seed (the CI pass is derandomized)."""
    if not budget.schemathesis_examples:
        pytest.skip("short run: tests/contract/test_openapi.py runs the small schemathesis pass")
    with thread_server(create_app(Settings(context_window=48, frozen_time=1_700_000_000.0))) as server:
        run = subprocess.run(
            [
                str(Path(sys.executable).with_name("schemathesis")),
                "run",
                server.live.url + "/openapi.json",
                "--checks",
                "not_a_server_error,response_schema_conformance,status_code_conformance,content_type_conformance",
                "--max-examples",
                str(budget.schemathesis_examples),
                "--seed",
                "20241122",
                "--workers",
                "2",
                "--request-timeout",
                "60",
            ],
            capture_output=True,
            text=True,
            timeout=1500,
            cwd=tmp_path,  # schemathesis keeps a cache directory where it runs
        )
        assert httpx.get(server.live.url + "/health", timeout=10).status_code == 200
    counted = re.search(r"(\d+) generated", run.stdout)
    figures.update(cases=int(counted.group(1)) if counted else "?", exit=run.returncode)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
