"""Request parameters read against a profile: the one place a body's fields become rules.

Two steps, both shared by every generation endpoint:

* :func:`prepare` works on the raw JSON object, before the schema: fields sent inside a
  literal ``extra_body`` object (Nebius documents one; the OpenAI SDK instead merges its
  ``extra_body`` into the top level) are lifted to the top level, and with ``--strict``
  the fields the profile's provider does not document are rejected or dropped.
* :func:`sampling` turns the validated fields into a :class:`~mockserver.spine.request.Sampling`
  with the profile's defaults, after checking what a schema cannot: the profile's upper
  bounds, ``logit_bias`` and ``stop_token_ids`` against the model's vocabulary, and the
  rules that tie two fields together.

And the server's :class:`~mockserver.http.limits.Limits`, before the work they bound:
:func:`check_sizes` on the raw object (lists, prompts) before the schema reads it, and
:func:`choices` (prompts × ``n`` or ``best_of``) before any prompt is built. A message quotes
at most a short prefix of what was sent (:func:`~mockserver.errors.clip`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mockserver.errors import InvalidRequest, clip
from mockserver.http.limits import Limits
from mockserver.profiles import Endpoint, Profile
from mockserver.schemas.common import GenerationFields, stop_tuple
from mockserver.spine.request import Mirostat, Sampling
from mockserver.wire.json import Json
from mockserver.wire.scope import DEPLOYMENT

__all__ = [
    "LISTS",
    "best_of",
    "check_limits",
    "check_sizes",
    "choices",
    "invalid",
    "listed",
    "prepare",
    "sampling",
    "service_tier",
]

LOGIT_BIAS_RANGE = 100.0
SHOWN = 5  # problems one message names (then "and N more")
KEY = 40  # characters of a key or value one problem quotes
# Per-request lists (and maps) no longer than --max-list: each costs work per entry.
LISTS = ("logit_bias", "stop_token_ids", "tools", "functions", "images")
# The Azure deployment the request's path names (/openai/deployments/{deployment}/…), set by
# the path layer (mockserver.http.prefix) for the request's task: Azure routes by it and
# ignores the body's model, so here it is the model, whatever the body says or leaves out.


def invalid(param: str, problem: str) -> InvalidRequest:
    return InvalidRequest(f"Invalid value for '{param}': {problem}", param=param)


def prepare(data: dict[str, Any], profile: Profile, endpoint: Endpoint, strict: bool) -> dict[str, Any]:
    """The body with ``extra_body`` lifted, an Azure deployment as its ``model``, and, under
    ``strict``, the profile's rule applied."""
    extra = data.get("extra_body")
    if isinstance(extra, dict):
        clashes = sorted(k for k, v in extra.items() if k in data and data[k] != v)
        if clashes:
            raise invalid(f"extra_body.{clashes[0]}", "it is also given, differently, at the top level.")
        data = {**{k: v for k, v in data.items() if k != "extra_body"}, **extra}
    elif extra is not None:
        raise invalid("extra_body", "must be an object.")
    deployment = DEPLOYMENT.get()
    if deployment is not None:
        data = {**data, "model": deployment}
    if not strict:
        return data
    unknown = sorted(k for k in data if k not in profile.documented[endpoint])
    if not unknown:
        return data
    if profile.rejects_unknown:
        many = len(unknown) > 1
        raise InvalidRequest(
            f"Unrecognized request argument{'s' if many else ''} supplied: {', '.join(unknown)}",
            param=unknown[0],
        )
    return {k: v for k, v in data.items() if k not in unknown}


def check_limits(body: GenerationFields, profile: Profile) -> None:
    """The profile's upper bounds (``logprobs`` ≤ 5 on OpenAI's completions, and so on)."""
    for name, highest in profile.limits.items():
        value = getattr(body, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > highest:
            raise invalid(name, f"must be less than or equal to {highest}.")


def _logit_bias(raw: dict[str, Any] | None, vocab: int | None) -> tuple[tuple[int, float], ...]:
    """Token id → bias in [-100, 100]; the first few bad keys are named in one message."""
    if not raw:
        return ()
    problems: list[str] = []
    bias: dict[int, float] = {}
    for key, value in raw.items():
        shown = clip(key, KEY)
        try:
            token = int(key)
        except ValueError:
            problems.append(f"'{shown}' is not a token id")
            continue
        if token < 0 or (vocab is not None and token >= vocab):
            problems.append(f"'{shown}' is outside the vocabulary [0, {vocab})" if vocab else f"'{shown}' is negative")
        elif isinstance(value, bool) or not isinstance(value, int | float):
            problems.append(f"'{shown}' has a bias that is not a number")
        elif not -LOGIT_BIAS_RANGE <= value <= LOGIT_BIAS_RANGE:
            problems.append(f"'{shown}' has bias {clip(str(value), KEY)}, outside [-100, 100]")
        else:
            bias[token] = float(value)
    if problems:
        raise invalid("logit_bias", _listed(problems) + ".")
    return tuple(sorted(bias.items()))


def _listed(problems: list[str]) -> str:
    """The first :data:`SHOWN` problems, and how many more there are."""
    more = len(problems) - SHOWN
    return "; ".join(problems[:SHOWN]) + (f"; and {more} more" if more > 0 else "")


def _stop_token_ids(ids: list[int] | None, vocab: int | None) -> tuple[int, ...]:
    bad = [t for t in ids or () if t < 0 or (vocab is not None and t >= vocab)]
    if bad:
        more = f" and {len(bad) - SHOWN} more" if len(bad) > SHOWN else ""
        shown = ", ".join(clip(str(t), KEY) for t in bad[:SHOWN]) + more
        raise invalid("stop_token_ids", f"token ids [{shown}] are outside the vocabulary [0, {vocab}).")
    return tuple(ids or ())


def check_sizes(data: Json, limits: Limits) -> None:
    """The raw body against ``limits``, before the schema reads it: no per-request list
    (:data:`LISTS`) longer than ``list_entries``, no more prompts than ``choices``."""
    for name in LISTS:
        value = data.get(name)
        if isinstance(value, dict | list) and len(value) > limits.list_entries:
            raise invalid(
                name,
                f"{len(value)} entries, over this server's limit of {limits.list_entries} per list (--max-list).",
            )
    prompt = data.get("prompt")
    if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int):  # a list of prompts
        choices(len(prompt), 1, None, limits)


def choices(prompts: int, n: int, best_of: int | None, limits: Limits) -> None:
    """Choices one request generates: ``prompts`` × ``n`` (``best_of`` candidates, when more),
    at most ``limits.choices``; the 400 names the field that makes them too many."""
    each = max(n, best_of or 0)
    made = prompts * each
    if made <= limits.choices:
        return
    limit = f"over this server's limit of {limits.choices} choices per request (--max-choices)"
    if prompts > limits.choices or each == 1:
        raise invalid("prompt", f"{prompts} prompts, each answered at least once, are {limit}.")
    name = "best_of" if best_of is not None and best_of > n else "n"
    per = f"{prompts} prompts × {name}={each}" if prompts > 1 else f"{name}={each}"
    raise invalid(name, f"{per} make {made} choices, {limit}.")


# Limits of float32 arithmetic, found by fuzzing: a temperature of 1e-300 or a repetition
# penalty of 5e-324 is a valid number that divides logits into infinities (and NaN
# probabilities). Below these the limit behaviour is what is meant, so it is what is done:
# a vanishing temperature is greedy; a vanishing penalty is this small one.
MIN_TEMPERATURE = 1e-4
MIN_REPETITION = 1e-4


def _temperature(given: float | None) -> float:
    if given is None:
        return 1.0
    return 0.0 if given < MIN_TEMPERATURE else given


def sampling(
    body: GenerationFields,
    profile: Profile,
    vocab: int | None,
    *,
    max_tokens: int | None,
    logprobs: int | None,
    echo: bool = False,
) -> Sampling:
    """The validated fields as a :class:`Sampling`; ``max_tokens`` is the endpoint's value
    (already defaulted), ``logprobs`` the number of alternatives (None: no logprobs)."""
    check_limits(body, profile)
    if body.min_tokens and max_tokens is not None and body.min_tokens > max_tokens:
        raise invalid("min_tokens", f"must be less than or equal to max_tokens ({max_tokens}).")
    if body.prompt_logprobs is not None and body.stream:
        raise invalid("prompt_logprobs", "prompt logprobs are not available when 'stream' is true.")
    behaviour = body.context_length_exceeded_behavior
    return Sampling(
        temperature=_temperature(body.temperature),
        top_p=1.0 if body.top_p is None else body.top_p,
        top_k=max(0, body.top_k or 0),
        min_p=body.min_p or 0.0,
        presence_penalty=body.presence_penalty or 0.0,
        frequency_penalty=body.frequency_penalty or 0.0,
        repetition_penalty=1.0 if body.repetition_penalty is None else max(body.repetition_penalty, MIN_REPETITION),
        logit_bias=_logit_bias(body.logit_bias, vocab),
        mirostat=Mirostat(body.mirostat_target, body.mirostat_lr or 0.1) if body.mirostat_target else None,
        max_tokens=max_tokens,
        min_tokens=body.min_tokens or 0,
        ignore_eos=bool(body.ignore_eos),
        stop=stop_tuple(body.stop),
        stop_token_ids=_stop_token_ids(body.stop_token_ids, vocab),
        keep_stop=profile.keep_stop if body.include_stop_str_in_output is None else body.include_stop_str_in_output,
        truncate=profile.truncate_by_default if behaviour is None else behaviour == "truncate",
        keep_prompt_tokens=body.truncate_prompt_tokens,
        logprobs=logprobs,
        prompt_logprobs=body.prompt_logprobs,
        echo=echo,
    )


def best_of(body: GenerationFields, n: int) -> int | None:
    """``best_of``, checked against ``n`` and streaming."""
    if body.best_of is None:
        return None
    if body.best_of < n:
        raise invalid("best_of", f"must be greater than or equal to n ({n}).")
    if body.stream and body.best_of > 1:
        raise invalid("best_of", "results cannot be streamed when best_of is greater than 1.")
    return body.best_of


def listed(items: Sequence[Json], order: str, after: str | None, missing: str) -> list[Json]:
    """A stored list in ``order`` (``asc``/``desc``), from the item after ``after`` (a 400
    naming ``after`` when there is no such item: ``missing`` says where it was looked for)."""
    shown = list(items) if order == "asc" else list(reversed(items))
    if after is None:
        return shown
    ids = [item["id"] for item in shown]
    if after not in ids:
        raise invalid("after", f"no {missing.format(after=after)}.")
    return shown[ids.index(after) + 1 :]


def service_tier(body: GenerationFields, profile: Profile, endpoint: Endpoint) -> str | None:
    """The tier the response reports (None: no ``service_tier`` field)."""
    asked = body.service_tier
    if asked is None:
        return profile.default_service_tier if "service_tier" in profile.documented[endpoint] else None
    if profile.service_tiers and asked not in profile.service_tiers:
        allowed = ", ".join(sorted(profile.service_tiers))
        raise invalid("service_tier", f"'{asked}' is not one of {allowed}.")
    return profile.service_tier_served.get(asked, asked)
