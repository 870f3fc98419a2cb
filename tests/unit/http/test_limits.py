"""The request limits, piece by piece: the depth scan against a recursive reference, strict JSON
and the paths it names, clipped echoes, and the choice and list bounds naming their field."""

from __future__ import annotations

import json
import random
import sys
from typing import Any

import pytest

from mockserver.errors import ECHO, MAX_MESSAGE, APIError, InvalidRequest, RequestTooLarge, clip
from mockserver.http.limits import Limits, too_deep
from mockserver.profiles import PROFILES, Profile
from mockserver.routes import params
from mockserver.schemas.common import GenerationFields
from mockserver.wire.json import NotFinite, NotJson, loads

# ---- too_deep -----------------------------------------------------------------------------


def depth(value: Any) -> int:
    """The reference: how many arrays and objects nest, by walking the parsed value."""
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


# Strings that would fool a scan that does not know where strings are.
NASTY = ["[[[[", "]]]]", "{[", '\\"[[', "\\\\", '\\\\"', 'a\\\\\\"[', "}", "\\u005b", "ü[", ""]


def _random_value(rng: random.Random, room: int) -> Any:
    kind = rng.random()
    if room <= 0 or kind < 0.3:
        return rng.choice([rng.choice(NASTY), rng.randint(-5, 5), 1.5, None, True])
    if kind < 0.65:
        return [_random_value(rng, room - 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(NASTY) + str(i): _random_value(rng, room - 1) for i in range(rng.randint(0, 3))}


def _cases(seed: int, count: int) -> list[Any]:
    rng = random.Random(seed)
    return [_random_value(rng, rng.randint(0, 12)) for _ in range(count)]


@pytest.mark.parametrize("seed", range(4))
def test_too_deep_agrees_with_a_recursive_walk(seed: int) -> None:
    for value in _cases(seed, 150):
        for indent in (None, 1):
            raw = json.dumps(value, indent=indent, ensure_ascii=seed % 2 == 0).encode()
            real = depth(value)
            for limit in {max(real - 1, 0), real, real + 1, 2}:
                assert too_deep(raw, limit) == (real > limit), (raw[:300], real, limit)


def _nested(levels: int, inner: str = "1", opener: str = "[", closer: str = "]") -> bytes:
    return (opener * levels + inner + closer * levels).encode()


@pytest.mark.parametrize(
    ("raw", "real"),
    [
        pytest.param(_nested(100_000), 100_000, id="array-100k-deep"),
        pytest.param(('{"a":' * 100_000 + "1" + "}" * 100_000).encode(), 100_000, id="object-100k-deep"),
        pytest.param(json.dumps({"s": "[" * 100_000}).encode(), 1, id="brackets-in-a-string"),
        pytest.param(json.dumps(["\\" * 7 + '"' + "[" * 500]).encode(), 1, id="escaped-quotes-then-brackets"),
        pytest.param(json.dumps([["\\"], "[[[", [["]"]]]).encode(), 3, id="trailing-backslash-string"),
        pytest.param(json.dumps([[]] * 50_000).encode(), 2, id="wide-shallow"),
        pytest.param(json.dumps({"k[[[[": {"]]]]": {"{{{{": []}}}).encode(), 4, id="brackets-in-keys"),
    ],
)
def test_too_deep_on_adversarial_bodies(raw: bytes, real: int) -> None:
    for limit in (2, 64, 1000):
        assert too_deep(raw, limit) == (real > limit)


def test_too_deep_on_one_deep_branch_among_many() -> None:
    # A deep chain hidden behind many shallow siblings: removal by levels must still find it.
    value: Any = 1
    for _ in range(70):
        value = [value]
    raw = json.dumps([[[1]] * 1000, {"x": value}, [[]] * 1000]).encode()
    assert depth(json.loads(raw)) == 72
    assert too_deep(raw, 71) and not too_deep(raw, 72)


def test_too_deep_is_never_a_recursion() -> None:
    # Deeper than the interpreter could walk: the scan must not recurse.
    raw = _nested(sys.getrecursionlimit() * 200)
    assert too_deep(raw, 64)


# ---- loads --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "path", "literal"),
    [
        pytest.param(b'{"temperature": NaN}', "temperature", "NaN", id="nan-top"),
        pytest.param(b'{"a": [1, 2, Infinity]}', "a[2]", "Infinity", id="infinity-in-list"),
        pytest.param(b'{"a": {"b": -Infinity}}', "a.b", "-Infinity", id="minus-infinity"),
        pytest.param(
            b'{"tools": [{"type": "function", "parameters": {"properties": {"x": {"maximum": 1e400}}}}]}',
            "tools[0].parameters.properties.x.maximum",
            "1e400",
            id="overflow-deep",
        ),
        pytest.param(b'{"x": 1, "y": [NaN, NaN]}', "y[0]", "NaN", id="first-of-two"),
        pytest.param(b"[NaN]", "[0]", "NaN", id="top-level-list"),
        pytest.param(b"NaN", None, "NaN", id="bare"),
    ],
)
def test_loads_refuses_numbers_json_cannot_carry(raw: bytes, path: str | None, literal: str) -> None:
    with pytest.raises(NotFinite) as caught:
        loads(raw)
    assert caught.value.param == path
    assert f"'{literal}'" in caught.value.message
    assert (path is None) == caught.value.message.startswith("Invalid JSON body")


def test_loads_clips_a_long_key_in_the_path() -> None:
    key = "k" * 10_000
    with pytest.raises(NotFinite) as caught:
        loads(json.dumps({key: 1}).replace("1", "NaN").encode())
    assert caught.value.param is not None and len(caught.value.param) < 100
    assert len(caught.value.message) < 300


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(b'{"a": 1e308, "b": -1.5e-400}', {"a": 1e308, "b": -0.0}, id="big-and-underflow"),
        pytest.param(b'{"s": "NaN Infinity"}', {"s": "NaN Infinity"}, id="words-in-strings"),
        pytest.param(b'{"n": 12345678901234567890123}', {"n": 12345678901234567890123}, id="big-int"),
    ],
)
def test_loads_keeps_what_json_can_carry(raw: bytes, expected: Any) -> None:
    assert loads(raw) == expected


@pytest.mark.parametrize("raw", [b"{", b"", b"\xff", b'{"a": nan}'], ids=["cut", "empty", "not-utf8", "lowercase-nan"])
def test_loads_not_json(raw: bytes) -> None:
    with pytest.raises(NotJson):
        loads(raw)


def test_loads_too_deep_for_the_parser_is_not_json() -> None:
    with pytest.raises(NotJson):
        loads(_nested(sys.getrecursionlimit() * 20))


# ---- clip and the message bound -----------------------------------------------------------


def test_clip() -> None:
    assert clip("short") == "short"
    assert clip("x" * ECHO) == "x" * ECHO
    long = clip("x" * 100_000)
    assert long.startswith("x" * ECHO) and long.endswith("(100000 characters)") and len(long) < ECHO + 40
    assert clip("abcdef", 3) == "abc… (6 characters)"


def test_every_message_and_param_is_bounded_whatever_its_maker_did() -> None:
    error = InvalidRequest("m" * 1_000_000, param="p" * 1_000_000)
    body = json.dumps(error.body())
    assert len(body) < MAX_MESSAGE + 600
    assert error.param is not None and len(error.param) <= 300


def test_request_too_large_names_the_limit() -> None:
    error = RequestTooLarge(1024, 5000)
    assert error.status == 413 and error.code == "request_too_large"
    assert "5000 bytes" in error.message and "1024" in error.message


# ---- choices and check_sizes --------------------------------------------------------------

LIMITS = Limits(choices=16, list_entries=8)


@pytest.mark.parametrize(
    ("prompts", "n", "best_of", "param"),
    [
        pytest.param(17, 1, None, "prompt", id="prompts-alone"),
        pytest.param(1, 17, None, "n", id="n-alone"),
        pytest.param(4, 5, None, "n", id="prompts-times-n"),
        pytest.param(1, 2, 17, "best_of", id="best-of"),
        pytest.param(4, 1, 5, "best_of", id="prompts-times-best-of"),
        pytest.param(20, 2, None, "prompt", id="too-many-prompts-whatever-n"),
    ],
)
def test_choices_over_the_limit_name_the_field(prompts: int, n: int, best_of: int | None, param: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        params.choices(prompts, n, best_of, LIMITS)
    assert caught.value.param == param
    assert "--max-choices" in caught.value.message and "16" in caught.value.message


@pytest.mark.parametrize(("prompts", "n", "best_of"), [(16, 1, None), (1, 16, None), (4, 4, None), (2, 1, 8)])
def test_choices_at_the_limit_pass(prompts: int, n: int, best_of: int | None) -> None:
    params.choices(prompts, n, best_of, LIMITS)


@pytest.mark.parametrize(
    ("data", "param"),
    [
        pytest.param({"logit_bias": {str(i): 1 for i in range(9)}}, "logit_bias", id="logit-bias"),
        pytest.param({"stop_token_ids": list(range(9))}, "stop_token_ids", id="stop-token-ids"),
        pytest.param({"tools": [{}] * 9}, "tools", id="tools"),
        pytest.param({"functions": [{}] * 9}, "functions", id="functions"),
        pytest.param({"images": ["x"] * 9}, "images", id="images"),
        pytest.param({"prompt": ["hi"] * 17}, "prompt", id="prompts"),
    ],
)
def test_check_sizes_names_the_list(data: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        params.check_sizes(data, LIMITS)
    assert caught.value.param == param


@pytest.mark.parametrize(
    "data",
    [
        {"logit_bias": {str(i): 1 for i in range(8)}, "stop_token_ids": list(range(8))},
        {"prompt": list(range(1000))},  # one prompt of token ids, not 1000 prompts
        {"prompt": ["hi"] * 16},
        {"prompt": []},
    ],
    ids=["at-limit", "token-ids", "prompts-at-limit", "empty"],
)
def test_check_sizes_passes_what_fits(data: dict[str, Any]) -> None:
    params.check_sizes(data, LIMITS)


def _error_size(error: APIError) -> int:
    return len(json.dumps(error.body()))


def test_a_huge_logit_bias_of_bad_keys_gets_a_small_error() -> None:
    # The 12.5 MB logit_bias, at a bounded size: the error must not grow with it.
    keys = {f"bad-key-{i:06d}-" + "x" * 40: 1 for i in range(200_000)}
    with pytest.raises(InvalidRequest) as caught:
        params.check_sizes({"logit_bias": keys}, Limits())
    assert caught.value.param == "logit_bias" and _error_size(caught.value) < 1000
    # Under a raised --max-list the keys are read one by one: still a short error.
    body = GenerationFields.model_validate({"model": "m", "logit_bias": keys})
    with pytest.raises(InvalidRequest) as caught:
        params.sampling(body, _profile(), 50_000, max_tokens=16, logprobs=None)
    assert caught.value.param == "logit_bias"
    assert "and 199995 more" in caught.value.message and _error_size(caught.value) < 1500


def test_bad_stop_token_ids_are_listed_briefly() -> None:
    body = GenerationFields.model_validate({"model": "m", "stop_token_ids": [10**30 + i for i in range(50_000)]})
    with pytest.raises(InvalidRequest) as caught:
        params.sampling(body, _profile(), 50_000, max_tokens=16, logprobs=None)
    assert caught.value.param == "stop_token_ids" and _error_size(caught.value) < 1000


def _profile() -> Profile:
    return PROFILES["openai"]
