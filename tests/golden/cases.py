"""The golden corpus: requests whose exact answers must survive a refactor byte for byte.

Each server configuration gets a list of cases, sent in order to a fresh server (stateful
things — scripted sequences, stored responses, replay positions — depend on that order).
``tests/golden/record.py`` writes what the server answers to ``corpus.json``;
``tests/golden/test_golden.py`` asks again and compares.
"""

from __future__ import annotations

import base64
import itertools
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SERVERS", "Case", "cases"]


@dataclass(frozen=True)
class Case:
    id: str
    method: str
    path: str
    body: Any = None  # JSON
    headers: dict[str, str] = field(default_factory=dict)
    stream: bool = False
    # Background responses: poll GET {path}/{id} until it ends, and record that too.
    poll: bool = False


# server name -> Settings fields (frozen time is added by the recorder).
SERVERS: dict[str, dict[str, Any]] = {
    "model": {},
    "strict": {"strict": True},
    "rules": {"rules": "tests/golden/rules.yaml"},
    "replay": {"cassettes": "cassettes", "on_miss": "reference"},
    "replay_strict": {"cassettes": "cassettes"},
}

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
RESPONSES = "/v1/responses"

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search_flights",
        "description": "Find flights between two cities on a date.",
        "parameters": {
            "type": "object",
            "properties": {
                "origin": {"type": "string"},
                "destination": {"type": "string"},
                "date": {"type": "string", "format": "date"},
                "passengers": {"type": "integer", "minimum": 1, "maximum": 9},
            },
            "required": ["origin", "destination", "date"],
        },
    },
}
PERSON = {
    "type": "json_schema",
    "json_schema": {
        "name": "person",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "age": {"type": "integer", "minimum": 0, "maximum": 120},
                "email": {"type": "string", "format": "email"},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
            },
            "required": ["name", "age", "email", "tags"],
            "additionalProperties": False,
        },
    },
}


def _png(width: int, height: int) -> str:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    raw = b"".join(b"\x00" + b"\x00" * (3 * width) for _ in range(height))
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    return "data:image/png;base64," + base64.b64encode(png).decode()


PROMPTS = [
    "Tell me about the sea.",
    "The weather today",
    "Once upon a time",
    "Lisbon is",
    "Write a haiku about winter.",
]
USERS = [
    "Tell me about Lisbon.",
    "What's the weather in Paris?",
    "Hello!",
    "Find me flights from Lisbon to Oslo next Friday.",
    "Describe the picture.",
    "Summarise the history of Rome in one line.",
]


def _msgs(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def _fault(spec: str) -> dict[str, str]:
    return {"x-mockserver-fault": spec}


def _completions() -> list[Case]:
    out: list[Case] = []
    shapes: list[tuple[str, dict[str, Any]]] = [
        ("plain", {}),
        ("n3", {"n": 3}),
        ("logprobs", {"logprobs": 3}),
        ("echo_logprobs", {"echo": True, "logprobs": 2}),
        ("echo_zero", {"echo": True, "logprobs": 1, "max_tokens": 0}),
        ("stop", {"stop": [" the", "."]}),
        ("suffix", {"suffix": " and that is all."}),
        ("best_of", {"best_of": 3, "n": 2, "logprobs": 1}),
        ("greedy", {"temperature": 0}),
        ("top_k_p", {"top_k": 5, "top_p": 0.8}),
        ("penalties", {"presence_penalty": 1.2, "frequency_penalty": 0.6}),
        ("bias", {"logit_bias": {"13": 100}}),
    ]
    for (name, extra), prompt in zip(shapes, itertools.cycle(PROMPTS), strict=False):
        body = {"model": "gpt-3.5-turbo-instruct", "prompt": prompt, "max_tokens": 12, "seed": 5, **extra}
        out.append(Case(f"completions/{name}", "POST", COMPLETIONS, body))
        if "best_of" not in extra:
            streamed = {**body, "stream": True, "stream_options": {"include_usage": True}}
            out.append(Case(f"completions/{name}/stream", "POST", COMPLETIONS, streamed, stream=True))
    out += [
        Case("completions/prompts", "POST", COMPLETIONS, {"model": "m", "prompt": PROMPTS[:3], "n": 2, "seed": 1}),
        Case("completions/token_ids", "POST", COMPLETIONS, {"model": "m", "prompt": [464, 318, 257], "seed": 2}),
        Case("completions/token_lists", "POST", COMPLETIONS, {"model": "m", "prompt": [[464, 318], [40, 41]]}),
        Case("completions/no_seed", "POST", COMPLETIONS, {"model": "m", "prompt": "Hello", "max_tokens": 8}),
        Case("completions/no_seed_reordered", "POST", COMPLETIONS, {"max_tokens": 8, "prompt": "Hello", "model": "m"}),
        Case(
            "completions/json",
            "POST",
            COMPLETIONS,
            {"model": "m", "prompt": "A person:", "response_format": {"type": "json_object"}, "max_tokens": 60},
        ),
        Case(
            "completions/mirostat",
            "POST",
            "/fireworks/v1/completions",
            {
                "model": "accounts/fireworks/models/llama-v3p1-8b-instruct",
                "prompt": "Hi",
                "mirostat_target": 3.0,
                "max_tokens": 10,
                "seed": 9,
            },
        ),
        Case(
            "completions/fireworks",
            "POST",
            "/fireworks/v1/completions",
            {
                "model": "accounts/fireworks/models/llama-v3p1-8b-instruct",
                "prompt": "Hi",
                "max_tokens": 10,
                "seed": 9,
                "stream": True,
            },
            stream=True,
        ),
        Case(
            "completions/vllm",
            "POST",
            "/vllm/v1/completions",
            {
                "model": "m",
                "prompt": "Hi there",
                "max_tokens": 6,
                "seed": 9,
                "prompt_logprobs": 2,
                "min_tokens": 3,
                "stop_token_ids": [13],
            },
        ),
        Case("completions/err_temperature", "POST", COMPLETIONS, {"model": "m", "prompt": "x", "temperature": 9}),
        Case(
            "completions/err_echo_suffix",
            "POST",
            COMPLETIONS,
            {"model": "m", "prompt": "x", "echo": True, "suffix": "y"},
        ),
        Case("completions/err_token", "POST", COMPLETIONS, {"model": "m", "prompt": [99999999]}),
        Case("completions/err_context", "POST", COMPLETIONS, {"model": "m", "prompt": "x", "max_tokens": 100000}),
        Case("completions/err_json", "POST", COMPLETIONS, "{not json"),
    ]
    return out


def _chat() -> list[Case]:
    out: list[Case] = []
    shapes: list[tuple[str, dict[str, Any]]] = [
        ("plain", {}),
        ("n2", {"n": 2}),
        ("logprobs", {"logprobs": True, "top_logprobs": 3}),
        ("stop", {"stop": ["\n", " is"]}),
        ("greedy", {"temperature": 0}),
        ("max_completion", {"max_completion_tokens": 5}),
        ("system", {"messages": [{"role": "system", "content": "Be brief."}, *_msgs("Tell me about Oslo.")]}),
        ("tool_auto", {"tools": [WEATHER, SEARCH]}),
        ("tool_required", {"tools": [WEATHER, SEARCH], "tool_choice": "required"}),
        (
            "tool_named",
            {"tools": [WEATHER, SEARCH], "tool_choice": {"type": "function", "function": {"name": "search_flights"}}},
        ),
        ("tool_none", {"tools": [WEATHER], "tool_choice": "none"}),
        ("tool_serial", {"tools": [WEATHER, SEARCH], "parallel_tool_calls": False}),
        ("tool_logprobs", {"tools": [WEATHER], "tool_choice": "required", "logprobs": True, "top_logprobs": 2}),
        ("functions", {"functions": [WEATHER["function"]], "function_call": "auto"}),
        ("json_object", {"response_format": {"type": "json_object"}, "max_tokens": 80}),
        ("json_schema", {"response_format": PERSON, "max_tokens": 120}),
        ("reasoning", {"model": "o3-mini", "reasoning_effort": "low", "max_completion_tokens": 40}),
        (
            "image",
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "Describe the picture."},
                            {"type": "image_url", "image_url": {"url": _png(600, 300), "detail": "high"}},
                        ],
                    }
                ]
            },
        ),
        (
            "tool_result",
            {
                "tools": [WEATHER],
                "messages": [
                    *_msgs("What's the weather in Paris?"),
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": '{"city":"Paris","unit":"celsius"}'},
                            }
                        ],
                    },
                    {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},
                ],
            },
        ),
        ("store", {"store": True, "metadata": {"suite": "golden"}}),
        ("penalty", {"frequency_penalty": 1.5, "presence_penalty": -0.5}),
    ]
    for (name, extra), user in zip(shapes, itertools.cycle(USERS), strict=False):
        body = {"model": "gpt-4o-mini", "messages": _msgs(user), "max_tokens": 16, "seed": 11, **extra}
        if "max_completion_tokens" in extra:
            body.pop("max_tokens")
        out.append(Case(f"chat/{name}", "POST", CHAT, body))
        streamed = {**body, "stream": True, "stream_options": {"include_usage": True}}
        out.append(Case(f"chat/{name}/stream", "POST", CHAT, streamed, stream=True))
        if name in ("plain", "tool_auto", "json_schema"):
            out.append(Case(f"chat/{name}/stream_bare", "POST", CHAT, {**body, "stream": True}, stream=True))
    for profile in ("fireworks", "together", "nebius", "vllm", "nebul", "nebulablock", "tokenhub"):
        body = {"model": "m", "messages": _msgs("Tell me about Lisbon."), "max_tokens": 8, "seed": 3}
        out.append(Case(f"chat/profile_{profile}", "POST", f"/{profile}/v1/chat/completions", body))
        out.append(
            Case(
                f"chat/profile_{profile}/stream",
                "POST",
                f"/{profile}/v1/chat/completions",
                {**body, "stream": True},
                stream=True,
            )
        )
        out.append(
            Case(f"chat/profile_{profile}/err", "POST", f"/{profile}/v1/chat/completions", {**body, "temperature": -1})
        )
    out += [
        Case("chat/err_role", "POST", CHAT, {"model": "m", "messages": [{"role": "wizard", "content": "x"}]}),
        Case("chat/err_top_logprobs", "POST", CHAT, {"model": "m", "messages": _msgs("x"), "top_logprobs": 3}),
        Case("chat/err_n", "POST", CHAT, {"model": "m", "messages": _msgs("x"), "n": 500}),
        Case(
            "chat/err_stream_options",
            "POST",
            CHAT,
            {"model": "m", "messages": _msgs("x"), "stream_options": {"include_usage": True}},
        ),
        Case(
            "chat/err_schema",
            "POST",
            CHAT,
            {
                "model": "m",
                "messages": _msgs("x"),
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": {"type": "integer", "minimum": 5, "maximum": 1}},
                },
            },
        ),
        Case(
            "chat/err_tool_choice",
            "POST",
            CHAT,
            {
                "model": "m",
                "messages": _msgs("x"),
                "tools": [WEATHER],
                "tool_choice": {"type": "function", "function": {"name": "nope"}},
            },
        ),
        Case("chat/stored_list", "GET", CHAT + "?limit=5"),
        Case("chat/err_method", "PUT", CHAT),
        Case("chat/err_route", "GET", "/v1/nothing"),
    ]
    return out


def _responses() -> list[Case]:
    out: list[Case] = []
    base = {"model": "gpt-4o-mini", "max_output_tokens": 24, "seed": 21}
    shapes: list[tuple[str, dict[str, Any]]] = [
        ("plain", {"input": "Tell me about the sea."}),
        (
            "items",
            {
                "input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi there"}]}],
                "instructions": "Answer in one line.",
            },
        ),
        ("logprobs", {"input": "Lisbon is", "include": ["message.output_text.logprobs"], "top_logprobs": 2}),
        ("tools", {"input": "What's the weather in Paris?", "tools": [{"type": "function", **WEATHER["function"]}]}),
        (
            "tool_required",
            {"input": "Hello", "tool_choice": "required", "tools": [{"type": "function", **SEARCH["function"]}]},
        ),
        (
            "json",
            {
                "input": "A person",
                "max_output_tokens": 120,
                "text": {
                    "format": {
                        "type": "json_schema",
                        "name": "person",
                        "schema": PERSON["json_schema"]["schema"],
                        "strict": True,
                    }
                },
            },
        ),
        (
            "reasoning",
            {"model": "o4-mini", "input": "Think about the sea.", "reasoning": {"effort": "low", "summary": "auto"}},
        ),
        ("greedy", {"input": "Once upon a time", "temperature": 0}),
        ("short", {"input": "Tell me everything about the world.", "max_output_tokens": 16}),
        ("unstored", {"input": "Not kept", "store": False}),
        (
            "image",
            {
                "input": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "input_text", "text": "What is this?"},
                            {"type": "input_image", "image_url": _png(100, 100), "detail": "low"},
                        ],
                    }
                ]
            },
        ),
        (
            "function_output",
            {
                "input": [
                    {"role": "user", "content": "What's the weather in Paris?"},
                    {
                        "type": "function_call",
                        "call_id": "call_9",
                        "name": "get_weather",
                        "arguments": '{"city":"Paris","unit":"celsius"}',
                    },
                    {"type": "function_call_output", "call_id": "call_9", "output": '{"temp": 21}'},
                ],
                "tools": [{"type": "function", **WEATHER["function"]}],
            },
        ),
    ]
    for name, extra in shapes:
        body = {**base, **extra}
        out.append(Case(f"responses/{name}", "POST", RESPONSES, body))
        out.append(Case(f"responses/{name}/stream", "POST", RESPONSES, {**body, "stream": True}, stream=True))
    out += [
        Case("responses/background", "POST", RESPONSES, {**base, "input": "Slowly now", "background": True}, poll=True),
        Case(
            "responses/background_stream",
            "POST",
            RESPONSES,
            {**base, "input": "Slowly streamed", "background": True, "stream": True},
            stream=True,
        ),
        Case(
            "responses/input_tokens",
            "POST",
            RESPONSES + "/input_tokens",
            {"model": "gpt-4o-mini", "input": "How many tokens is this?", "instructions": "Count."},
        ),
        Case("responses/err_background", "POST", RESPONSES, {**base, "input": "x", "background": True, "store": False}),
        Case("responses/err_include", "POST", RESPONSES, {**base, "input": "x", "include": ["nope"]}),
        Case("responses/err_previous", "POST", RESPONSES, {**base, "input": "x", "previous_response_id": "resp_no"}),
        Case("responses/err_input", "POST", RESPONSES, {**base, "input": [{"role": "user", "content": 5}]}),
        Case("responses/err_retrieve", "GET", RESPONSES + "/resp_missing"),
    ]
    return out


def _faults() -> list[Case]:
    chat = {"model": "gpt-4o-mini", "messages": _msgs("Tell me about the sea."), "max_tokens": 10, "seed": 3}
    tools = {**chat, "messages": _msgs("What's the weather in Paris?"), "tools": [WEATHER]}
    structured = {**chat, "response_format": PERSON, "max_tokens": 120}
    completion = {"model": "m", "prompt": "The weather today", "max_tokens": 8, "seed": 4}
    response = {"model": "gpt-4o-mini", "input": "Tell me about the sea.", "max_output_tokens": 16, "seed": 4}
    out: list[Case] = []
    content = ["content.length", "content.filter", "content.refusal"]
    stream = [
        "stream.cut_after=3",
        "stream.no_done",
        "stream.double_done",
        "stream.error_at=2",
        "stream.no_finish_reason",
        "stream.no_usage",
        "stream.malformed_at=2",
        "stream.split_utf8",
        "stream.bytewise",
    ]
    for spec in content:
        out.append(Case(f"faults/chat/{spec}", "POST", CHAT, chat, _fault(spec)))
        out.append(Case(f"faults/chat/{spec}/stream", "POST", CHAT, {**chat, "stream": True}, _fault(spec), True))
        out.append(Case(f"faults/completions/{spec}", "POST", COMPLETIONS, completion, _fault(spec)))
        out.append(Case(f"faults/responses/{spec}", "POST", RESPONSES, response, _fault(spec)))
    for spec in ("content.bad_arguments", "content.off_schema"):
        out.append(Case(f"faults/tools/{spec}", "POST", CHAT, tools, _fault(spec)))
        out.append(Case(f"faults/json/{spec}", "POST", CHAT, structured, _fault(spec)))
    for spec in stream:
        body = {**chat, "stream": True, "stream_options": {"include_usage": True}}
        out.append(Case(f"faults/chat/{spec}", "POST", CHAT, body, _fault(spec), True))
        out.append(
            Case(f"faults/completions/{spec}", "POST", COMPLETIONS, {**completion, "stream": True}, _fault(spec), True)
        )
    for spec in ("stream.no_completed", "stream.skip_sequence=3", "stream.cut_after=4", "stream.error_at=5"):
        out.append(
            Case(f"faults/responses/{spec}", "POST", RESPONSES, {**response, "stream": True}, _fault(spec), True)
        )
    for spec in (
        "http.429",
        "http.429,retry_after=2",
        "http.503",
        "http.502",
        "http.400",
        "http.404",
        "http.quota",
        "http.500; http.should_retry=0",
    ):
        out.append(Case(f"faults/http/{spec}", "POST", CHAT, chat, _fault(spec)))
    for spec in ("latency.ttft=5", "latency.itl=1", "http.503@p=0.5", "content.length@p=0.5"):
        out.append(Case(f"faults/misc/{spec}", "POST", CHAT, chat, _fault(spec)))
        out.append(Case(f"faults/misc/{spec}/stream", "POST", CHAT, {**chat, "stream": True}, _fault(spec), True))
    out += [
        Case("faults/err_unknown", "POST", CHAT, chat, _fault("stream.sideways")),
        Case("faults/embeddings/http.503", "POST", "/v1/embeddings", {"model": "m", "input": "x"}, _fault("http.503")),
    ]
    return out


def _other() -> list[Case]:
    return [
        Case("models/list", "GET", "/v1/models"),
        Case("models/one", "GET", "/v1/models/gpt-4o-mini"),
        Case("models/fireworks", "GET", "/fireworks/v1/models"),
        Case(
            "embeddings/one",
            "POST",
            "/v1/embeddings",
            {"model": "text-embedding-3-small", "input": "The sea is calm.", "dimensions": 8},
        ),
        Case(
            "embeddings/many",
            "POST",
            "/v1/embeddings",
            {"model": "text-embedding-3-small", "input": ["a", "b c"], "dimensions": 4, "encoding_format": "base64"},
        ),
        Case("embeddings/err", "POST", "/v1/embeddings", {"model": "m", "input": []}),
        Case(
            "images/one",
            "POST",
            "/v1/images/generations",
            {"model": "dall-e-2", "prompt": "A lighthouse", "size": "256x256", "response_format": "b64_json"},
        ),
        Case("health", "GET", "/health"),
    ]


def _sweep() -> list[Case]:
    """The same requests over several seeds and temperatures: sampling itself."""
    out: list[Case] = []
    for seed, temperature in itertools.product((0, 1, 2, 3, 4), (0.7, 1.3)):
        chat = {
            "model": "gpt-4o",
            "messages": _msgs(USERS[seed]),
            "max_tokens": 20,
            "seed": seed,
            "temperature": temperature,
        }
        out.append(Case(f"sweep/chat/{seed}/{temperature}", "POST", CHAT, chat))
        out.append(Case(f"sweep/chat/{seed}/{temperature}/stream", "POST", CHAT, {**chat, "stream": True}, stream=True))
        text = {"model": "m", "prompt": PROMPTS[seed], "max_tokens": 20, "seed": seed, "temperature": temperature}
        out.append(Case(f"sweep/completions/{seed}/{temperature}", "POST", COMPLETIONS, text))
    return out


def _transport() -> list[Case]:
    chat = {"model": "gpt-4o-mini", "messages": _msgs("Tell me about the sea."), "max_tokens": 10, "seed": 3}
    streamed = {**chat, "stream": True}
    return [
        Case("transport/reset", "POST", CHAT, chat, _fault("transport.reset")),
        Case("transport/empty", "POST", CHAT, chat, _fault("transport.empty")),
        Case("transport/truncated", "POST", CHAT, chat, _fault("transport.truncated")),
        Case("transport/reset_after", "POST", CHAT, streamed, _fault("stream.reset_after=3"), True),
        Case("transport/stall", "POST", CHAT, streamed, _fault("stream.stall_after=2,for=0.05"), True),
        Case(
            "transport/stall_keepalive",
            "POST",
            CHAT,
            streamed,
            _fault("stream.stall_after=2,for=0.25,keepalive=0.1"),
            True,
        ),
    ]


def _model_cases() -> list[Case]:
    return [*_completions(), *_chat(), *_responses(), *_faults(), *_other(), *_sweep(), *_transport()]


def _strict_cases() -> list[Case]:
    chat = {"model": "m", "messages": _msgs("Tell me about Lisbon."), "max_tokens": 8, "seed": 3}
    return [
        Case("strict/chat", "POST", CHAT, chat),
        Case("strict/unknown_field", "POST", CHAT, {**chat, "mystery": 1}),
        Case("strict/fireworks_top_k", "POST", "/fireworks/v1/chat/completions", {**chat, "top_k": 4}),
        Case("strict/openai_top_k", "POST", CHAT, {**chat, "top_k": 4}),
        Case("strict/fireworks_int_logprobs", "POST", "/fireworks/v1/chat/completions", {**chat, "logprobs": 2}),
        Case("strict/openai_int_logprobs", "POST", CHAT, {**chat, "logprobs": 2}),
        Case(
            "strict/nebius_completions",
            "POST",
            "/nebius/v1/completions",
            {"model": "m", "prompt": "Hi", "max_tokens": 4, "seed": 1, "top_k": 3},
        ),
    ]


def _rules_cases() -> list[Case]:
    """Against tests/golden/rules.yaml."""
    out: list[Case] = []
    base = {"model": "gpt-4o-mini", "seed": 2}
    weather = {**base, "messages": _msgs("What's the weather in Paris?"), "tools": [WEATHER]}
    for i in range(3):  # a sequence: call, text, then the last repeats
        out.append(Case(f"rules/weather/{i}", "POST", CHAT, weather))
    out.append(Case("rules/weather/stream", "POST", CHAT, {**weather, "stream": True}, stream=True))
    greet = {**base, "messages": _msgs("Hello there, greet me")}
    out += [
        Case("rules/greet", "POST", CHAT, greet),
        Case(
            "rules/greet/stream",
            "POST",
            CHAT,
            {**greet, "stream": True, "stream_options": {"include_usage": True}},
            stream=True,
        ),
        Case("rules/greet/logprobs", "POST", CHAT, {**greet, "logprobs": True, "top_logprobs": 2}),
        Case("rules/greet/logprobs_stream", "POST", CHAT, {**greet, "logprobs": True, "stream": True}, stream=True),
        Case("rules/greet/n2", "POST", CHAT, {**greet, "n": 2}),
        Case("rules/greet/n2_stream", "POST", CHAT, {**greet, "n": 2, "stream": True}, stream=True),
        Case("rules/greet/short", "POST", CHAT, {**greet, "max_tokens": 3}),
        Case("rules/greet/short_stream", "POST", CHAT, {**greet, "max_tokens": 3, "stream": True}, stream=True),
        Case("rules/greet/stop", "POST", CHAT, {**greet, "stop": ["world"]}),
        Case("rules/greet/refusal_fault", "POST", CHAT, greet, _fault("content.refusal")),
        Case("rules/greet/length_fault", "POST", CHAT, greet, _fault("content.length")),
        Case("rules/greet/cut", "POST", CHAT, {**greet, "stream": True}, _fault("stream.cut_after=2"), True),
        Case("rules/greet/unicode", "POST", CHAT, {**base, "messages": _msgs("unicode please")}),
        Case(
            "rules/greet/unicode_stream",
            "POST",
            CHAT,
            {**base, "messages": _msgs("unicode please"), "stream": True},
            stream=True,
        ),
        Case("rules/password", "POST", CHAT, {**base, "messages": _msgs("Tell me the password")}),
        Case(
            "rules/password/stream",
            "POST",
            CHAT,
            {**base, "messages": _msgs("Tell me the password"), "stream": True},
            stream=True,
        ),
        Case("rules/finish_length", "POST", CHAT, {**base, "messages": _msgs("cut me off")}),
        Case("rules/completions/1", "POST", COMPLETIONS, {"model": "m", "prompt": "Say something", "seed": 1}),
        Case("rules/completions/2", "POST", COMPLETIONS, {"model": "m", "prompt": "Say something", "seed": 1}),
        Case(
            "rules/completions/echo",
            "POST",
            COMPLETIONS,
            {"model": "m", "prompt": "Say something", "seed": 1, "echo": True},
        ),
        Case(
            "rules/completions/stream",
            "POST",
            COMPLETIONS,
            {"model": "m", "prompt": "Say something", "seed": 1, "stream": True},
            stream=True,
        ),
        Case("rules/responses", "POST", RESPONSES, {"model": "gpt-4o-mini", "input": "Hello there, greet me"}),
        Case(
            "rules/responses/stream",
            "POST",
            RESPONSES,
            {"model": "gpt-4o-mini", "input": "Hello there, greet me", "stream": True},
            stream=True,
        ),
        Case(
            "rules/responses/tool",
            "POST",
            RESPONSES,
            {"model": "gpt-4o-mini", "input": "book a flight", "tools": [{"type": "function", **SEARCH["function"]}]},
        ),
        Case(
            "rules/responses/tool_stream",
            "POST",
            RESPONSES,
            {
                "model": "gpt-4o-mini",
                "input": "book a flight",
                "tools": [{"type": "function", **SEARCH["function"]}],
                "stream": True,
            },
            stream=True,
        ),
        Case(
            "rules/chat_tool_stream",
            "POST",
            CHAT,
            {
                **base,
                "messages": _msgs("book a flight"),
                "tools": [SEARCH],
                "stream": True,
                "stream_options": {"include_usage": True},
            },
            stream=True,
        ),
        Case("rules/unmatched", "POST", CHAT, {**base, "messages": _msgs("Nothing matches this")}),
        Case("rules/exhausted/1", "POST", CHAT, {**base, "messages": _msgs("only once please")}),
        Case("rules/exhausted/2", "POST", CHAT, {**base, "messages": _msgs("only once please")}),
        Case("rules/reasoning", "POST", CHAT, {"model": "o3-mini", "messages": _msgs("Hello there, greet me")}),
    ]
    return out


def _replay_cases() -> list[Case]:
    lisbon = {"model": "gpt-4o-mini", "messages": _msgs("Tell me about Lisbon."), "seed": 7, "max_tokens": 24}
    weather = {
        "model": "gpt-4o-mini",
        "messages": _msgs("What is the weather in Lisbon?"),
        "tools": [WEATHER],
    }
    weather["tools"] = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The current weather in a city.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "city": {"type": "string"},
                        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    },
                    "required": ["city"],
                },
            },
        }
    ]
    logprobs = {
        "model": "gpt-3.5-turbo-instruct",
        "prompt": "The weather today",
        "max_tokens": 12,
        "logprobs": 2,
        "seed": 3,
    }
    sea = {"model": "gpt-4o-mini", "input": "Tell me about the sea.", "max_output_tokens": 24, "temperature": 0}
    out = [
        Case(
            "replay/chat_stream",
            "POST",
            CHAT,
            {**lisbon, "stream": True, "stream_options": {"include_usage": True}},
            stream=True,
        ),
        Case("replay/chat_folded", "POST", CHAT, lisbon),
        Case("replay/completions", "POST", COMPLETIONS, logprobs),
        Case("replay/completions_unfolded", "POST", COMPLETIONS, {**logprobs, "stream": True}, stream=True),
        Case(
            "replay/completions_unfolded_usage",
            "POST",
            COMPLETIONS,
            {**logprobs, "stream": True, "stream_options": {"include_usage": True}},
            stream=True,
        ),
        Case("replay/responses_stream", "POST", RESPONSES, {**sea, "stream": True}, stream=True),
        Case("replay/responses_folded", "POST", RESPONSES, sea),
        Case("replay/tool_stream", "POST", CHAT, {**weather, "stream": True}, stream=True),
        Case(
            "replay/cut",
            "POST",
            CHAT,
            {**lisbon, "stream": True, "stream_options": {"include_usage": True}},
            _fault("stream.cut_after=4"),
            True,
        ),
        Case(
            "replay/no_finish",
            "POST",
            CHAT,
            {**lisbon, "stream": True, "stream_options": {"include_usage": True}},
            _fault("stream.no_finish_reason"),
            True,
        ),
        Case("replay/http_fault", "POST", CHAT, lisbon, _fault("http.503")),
        Case("replay/prefix", "POST", "/fireworks/v1/chat/completions", lisbon),
        Case("replay/miss", "POST", CHAT, {**lisbon, "seed": 8}),
        Case("replay/miss_stream", "POST", CHAT, {**lisbon, "seed": 8, "stream": True}, stream=True),
        Case("replay/miss_responses", "POST", RESPONSES, {**sea, "temperature": 0.5}),
    ]
    return out


def _replay_strict_cases() -> list[Case]:
    lisbon = {"model": "gpt-4o-mini", "messages": _msgs("Tell me about Lisbon."), "seed": 7, "max_tokens": 24}
    return [
        Case("replay_strict/hit", "POST", CHAT, lisbon),
        Case("replay_strict/hit_again", "POST", CHAT, lisbon),
        Case("replay_strict/miss", "POST", CHAT, {**lisbon, "max_tokens": 25}),
        Case("replay_strict/miss_stream", "POST", CHAT, {**lisbon, "max_tokens": 25, "stream": True}, stream=True),
        Case("replay_strict/embeddings", "POST", "/v1/embeddings", {"model": "m", "input": "x"}),
        Case("replay_strict/models", "GET", "/v1/models"),
    ]


def cases() -> dict[str, list[Case]]:
    found = {
        "model": _model_cases(),
        "strict": _strict_cases(),
        "rules": _rules_cases(),
        "replay": _replay_cases(),
        "replay_strict": _replay_strict_cases(),
    }
    ids = [c.id for group in found.values() for c in group]
    duplicated = {i for i in ids if ids.count(i) > 1}
    assert not duplicated, duplicated
    return found
