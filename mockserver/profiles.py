"""Provider dialects as data: what differs between the APIs we stand in for.

One :class:`Profile` record per dialect; no code branches on a provider's name. A server
answers as one profile by default (``--profile``) and as any other under a path prefix that
is the profile's name: ``/fireworks/v1/completions`` is Fireworks, ``/v1/completions`` the
server's own profile. Each record's ``notes`` say where its provider's documentation was
silent and which behaviour of its documented engine we chose.

Parameters: without ``--strict`` every profile *honours* every parameter any profile
documents (a test double must not refuse what the application's real provider accepts) and
ignores parameters nobody documents. With ``--strict`` a profile answers exactly as its
provider documents: a parameter outside ``documented`` is rejected with the provider's
error if ``rejects_unknown``, and otherwise ignored (dropped before it can take effect).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeVar

from mockserver.errors import ErrorStyle, NotFound
from mockserver.spine.request import Endpoint

__all__ = ["PROFILES", "Endpoint", "Models", "Profile", "model_not_found", "profile_named"]

_K = TypeVar("_K")
_V = TypeVar("_V")


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _frozen(mapping: Mapping[_K, _V]) -> Mapping[_K, _V]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    notes: str
    models: tuple[str, ...]  # what /v1/models lists when --models is not given
    documented: Mapping[Endpoint, frozenset[str]]  # request fields the provider documents
    rejects_unknown: bool = False  # with --strict: undocumented fields → 400 (else ignored)
    # Upper bounds of integer parameters (the lower bounds are everyone's, in the schemas).
    limits: Mapping[str, int] = field(default_factory=lambda: _frozen({}))
    default_max_tokens: Mapping[Endpoint, int | None] = field(
        default_factory=lambda: _frozen({"completions": 16, "chat": None})
    )
    keep_stop: bool = False  # the matched stop string stays in the returned text
    truncate_by_default: bool = False  # context_length_exceeded_behavior default: truncate
    usage_in_stream: Literal["on_request", "always"] = "on_request"  # always: on the last chunk
    eos_finish_reason: str = "stop"  # finish_reason when the model ended by itself
    completion_object: str = "text_completion"
    chat_object: str = "chat.completion"
    chunk_object: str = "chat.completion.chunk"
    # chat ``logprobs`` given as an integer k: the legacy completions format ({tokens,
    # token_logprobs, top_logprobs}) some providers document; where none is documented ("no")
    # it means OpenAI's format with k alternatives, and a 400 under --strict.
    chat_int_logprobs: Literal["no", "legacy"] = "no"
    service_tiers: frozenset[str] = frozenset()  # accepted ``service_tier`` values
    service_tier_served: Mapping[str, str] = field(default_factory=lambda: _frozen({}))  # asked → reported
    default_service_tier: str | None = None  # reported when none was asked (None: field absent)
    system_fingerprint: str | None = None  # None: the field is absent unless in ``extras``
    extras: Mapping[str, Any] = field(default_factory=lambda: _frozen({}))  # more top-level fields
    stop_reason: bool = False  # vLLM's per-choice ``stop_reason``
    usage_details: Literal["openai", "null", "none"] = "openai"  # *_tokens_details objects
    error_style: ErrorStyle = "openai"
    # Where chat puts a reasoning model's thinking (None: not returned, as on OpenAI, which
    # reports only the count in completion_tokens_details.reasoning_tokens).
    reasoning_field: str | None = None
    # Routes the provider's server has outside /v1/, served under the profile's prefix too
    # (vLLM's tokenizer routes: /vllm/tokenize as vLLM serves /tokenize).
    root_routes: frozenset[str] = frozenset()
    # What an answer's ``model`` says for an alias: the dated snapshot it resolves to (OpenAI
    # answers ``gpt-4o-mini`` with ``gpt-4o-mini-2024-07-18``); a name not listed, a dated one
    # included, is echoed as sent.
    snapshots: Mapping[str, str] = field(default_factory=lambda: _frozen({}))

    def answered_model(self, model: str) -> str:
        """The ``model`` an answer to a request for ``model`` reports."""
        return self.snapshots.get(model, model)


# ---- what each provider documents -----------------------------------------------------------

_OPENAI_COMPLETIONS = _names(
    "model prompt best_of echo frequency_penalty logit_bias logprobs max_tokens n "
    "presence_penalty seed stop stream stream_options suffix temperature top_p user"
)
_OPENAI_CHAT = _names(
    "model messages audio frequency_penalty function_call functions logit_bias logprobs "
    "max_completion_tokens max_tokens metadata modalities moderation n parallel_tool_calls "
    "prediction presence_penalty prompt_cache_key prompt_cache_options prompt_cache_retention "
    "reasoning_effort response_format safety_identifier seed service_tier stop store stream "
    "stream_options temperature tool_choice tools top_logprobs top_p user verbosity "
    "web_search_options"
)
# vLLM's extra sampling parameters (its OpenAI server's protocol), shared by its descendants.
_VLLM_EXTRAS = _names(
    "top_k min_p repetition_penalty stop_token_ids include_stop_str_in_output ignore_eos "
    "min_tokens prompt_logprobs skip_special_tokens spaces_between_special_tokens "
    "truncate_prompt_tokens"
)
_FIREWORKS_COMMON = _names(
    "model stream stream_options n stop max_tokens temperature top_p top_k min_p "
    "frequency_penalty presence_penalty repetition_penalty mirostat_target mirostat_lr "
    "ignore_eos logprobs echo logit_bias context_length_exceeded_behavior response_format "
    "user seed"
)
_TOGETHER_COMMON = _names(
    "model max_tokens stop temperature top_p top_k repetition_penalty stream logprobs echo n "
    "min_p presence_penalty frequency_penalty logit_bias seed safety_model response_format"
)

OPENAI = Profile(
    name="openai",
    notes="OpenAI's own API: the default. Wire format and limits per OpenAI's OpenAPI description.",
    models=("gpt-4o-mini", "gpt-4o", "gpt-4.1-mini", "gpt-3.5-turbo", "gpt-3.5-turbo-instruct"),
    documented=_frozen({"completions": _OPENAI_COMPLETIONS, "chat": _OPENAI_CHAT}),
    rejects_unknown=True,  # "Unrecognized request argument supplied: …"
    limits=_frozen({"logprobs": 5, "top_logprobs": 20, "best_of": 20}),
    service_tiers=frozenset({"auto", "default", "flex", "scale", "priority", "fast"}),
    service_tier_served=_frozen({"auto": "default", "fast": "priority"}),
    default_service_tier="default",
    system_fingerprint="fp_mockserver",
    # The snapshots OpenAI's aliases pointed at (its model pages), as its answers name them.
    snapshots=_frozen(
        {
            "gpt-4o-mini": "gpt-4o-mini-2024-07-18",
            "gpt-4o": "gpt-4o-2024-08-06",
            "gpt-4.1": "gpt-4.1-2025-04-14",
            "gpt-4.1-mini": "gpt-4.1-mini-2025-04-14",
            "gpt-4.1-nano": "gpt-4.1-nano-2025-04-14",
            "gpt-4-turbo": "gpt-4-turbo-2024-04-09",
            "gpt-4": "gpt-4-0613",
            "gpt-3.5-turbo": "gpt-3.5-turbo-0125",
            "o1": "o1-2024-12-17",
            "o3-mini": "o3-mini-2025-01-31",
            "o3": "o3-2025-04-16",
            "o4-mini": "o4-mini-2025-04-16",
            "gpt-5": "gpt-5-2025-08-07",
            "gpt-5-mini": "gpt-5-mini-2025-08-07",
            "gpt-5-nano": "gpt-5-nano-2025-08-07",
        }
    ),
)

FIREWORKS = Profile(
    reasoning_field="reasoning_content",
    name="fireworks",
    notes=(
        "Fireworks AI. Documented: stop strings are kept in the text, context overflow truncates "
        "max_tokens by default, usage rides on the last streamed chunk, logprobs ≤ 5 (an integer "
        "on chat gives the legacy format), top_k ≤ 100, chat max_tokens defaults to 2000. Errors "
        "use Fireworks' {error: {object, type, message}} body."
    ),
    models=(
        "accounts/fireworks/models/llama-v3p1-8b-instruct",
        "accounts/fireworks/models/llama-v3p3-70b-instruct",
        "accounts/fireworks/models/qwen3-30b-a3b",
    ),
    documented=_frozen(
        {
            "completions": _FIREWORKS_COMMON | {"prompt", "images"},
            "chat": _FIREWORKS_COMMON | {"messages", "top_logprobs", "tools", "tool_choice", "reasoning_effort"},
        }
    ),
    limits=_frozen({"logprobs": 5, "top_logprobs": 5, "top_k": 100}),
    default_max_tokens=_frozen({"completions": 16, "chat": 2000}),
    keep_stop=True,
    truncate_by_default=True,
    usage_in_stream="always",
    chat_int_logprobs="legacy",
    usage_details="none",
    error_style="fireworks",
)

TOGETHER = Profile(
    reasoning_field="reasoning",
    name="together",
    notes=(
        "Together AI. finish_reason is 'eos' when the model ends by itself; usage rides on the last "
        "streamed chunk; logprobs is an integer 0-20 on both endpoints (legacy format on chat). "
        "Undocumented there, chosen from its OpenAPI file: max_tokens unset fills the context."
    ),
    models=(
        "meta-llama/Llama-3.3-70B-Instruct-Turbo",
        "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo",
        "Qwen/Qwen2.5-7B-Instruct-Turbo",
    ),
    documented=_frozen(
        {
            "completions": _TOGETHER_COMMON | {"prompt"},
            "chat": _TOGETHER_COMMON
            | {"messages", "context_length_exceeded_behavior", "tools", "tool_choice", "function_call"},
        }
    ),
    limits=_frozen({"logprobs": 20, "top_logprobs": 20}),
    default_max_tokens=_frozen({"completions": None, "chat": None}),
    usage_in_stream="always",
    eos_finish_reason="eos",
    chat_int_logprobs="legacy",
    usage_details="none",
)

NEBIUS = Profile(
    reasoning_field="reasoning_content",
    name="nebius",
    notes=(
        "Nebius Token Factory. Documented: service_tier (auto, default, over-limit, flex, no-limit) "
        "reported in every completion, the ai_project_id query parameter, an extra_body field. "
        "Undocumented, chosen from vLLM (its engine): max_tokens unset fills the context, logprobs ≤ 20, "
        "OpenAI's error envelope."
    ),
    models=("meta-llama/Llama-3.3-70B-Instruct", "meta-llama/Meta-Llama-3.1-70B-Instruct", "Qwen/Qwen3-32B"),
    documented=_frozen(
        {
            "completions": _OPENAI_COMPLETIONS - {"best_of", "suffix", "seed"} | {"extra_body", "service_tier"},
            "chat": _OPENAI_CHAT | {"extra_body"} | _VLLM_EXTRAS,
        }
    ),
    limits=_frozen({"logprobs": 20, "top_logprobs": 20}),
    default_max_tokens=_frozen({"completions": None, "chat": None}),
    service_tiers=frozenset({"auto", "default", "over-limit", "flex", "no-limit"}),
    default_service_tier="auto",
    usage_details="none",
)

NEBUL = Profile(
    reasoning_field="reasoning_content",
    name="nebul",
    notes=(
        "Nebul. Documented: completions with suffix and best_of, max_tokens default 16. "
        "Undocumented, chosen from vLLM (its engine): stop_reason per choice, logprobs ≤ 20, vLLM's "
        "error body {error: {message, type: BadRequestError, param, code: 400}}."
    ),
    models=("Qwen/Qwen3-30B-A3B-Instruct-2507", "meta-llama/Llama-3.3-70B-Instruct"),
    documented=_frozen(
        {
            "completions": _OPENAI_COMPLETIONS | _VLLM_EXTRAS,
            "chat": _OPENAI_CHAT | _VLLM_EXTRAS,
        }
    ),
    limits=_frozen({"logprobs": 20, "top_logprobs": 20}),
    stop_reason=True,
    usage_details="null",
    error_style="vllm",
)

NEBULABLOCK = Profile(
    reasoning_field="reasoning_content",
    name="nebulablock",
    notes=(
        "Nebula Block. Its documented response is vLLM's: system_fingerprint, service_tier and "
        "prompt_logprobs present and null, *_tokens_details null. The rest follows vLLM: chat "
        "max_tokens unset fills the context, vLLM's error body."
    ),
    models=("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.3-70B-Instruct", "Qwen/Qwen2.5-VL-7B-Instruct"),
    documented=_frozen(
        {
            "completions": _OPENAI_COMPLETIONS | _VLLM_EXTRAS,
            "chat": frozenset({"messages", "model", "max_tokens", "temperature", "top_p", "stream"}),
        }
    ),
    limits=_frozen({"logprobs": 20, "top_logprobs": 20}),
    extras=_frozen({"system_fingerprint": None, "service_tier": None, "prompt_logprobs": None}),
    stop_reason=True,
    usage_details="null",
    error_style="vllm",
)

TOKENHUB = Profile(
    reasoning_field="reasoning_content",
    name="tokenhub",
    notes=(
        "Tokenhub, a gateway. Documented: provider-prefixed model ids, completions max_tokens default "
        "16, best_of, logprobs ≤ 5, stop strings not returned. OpenAI's error envelope (it claims full "
        "compatibility)."
    ),
    models=("openai/gpt-3.5-turbo-instruct", "openai/gpt-4o-mini", "meta-llama/llama-3.3-70b-instruct"),
    documented=_frozen(
        {
            "completions": _names("model prompt max_tokens temperature stream stop best_of logprobs stream_options"),
            "chat": _OPENAI_CHAT,
        }
    ),
    limits=_frozen({"logprobs": 5, "top_logprobs": 20, "best_of": 20}),
    usage_details="none",
)

VLLM = Profile(
    reasoning_field="reasoning_content",
    name="vllm",
    notes=(
        "A vLLM OpenAI-compatible server: every vLLM sampling extension documented, unknown fields "
        "ignored, stop_reason per choice, prompt_logprobs, the nested error body with code = status."
    ),
    models=("mockserver-reference",),
    documented=_frozen(
        {
            "completions": _OPENAI_COMPLETIONS | _VLLM_EXTRAS,
            "chat": _OPENAI_CHAT | _VLLM_EXTRAS | {"best_of"},
        }
    ),
    limits=_frozen({"logprobs": 20, "top_logprobs": 20, "prompt_logprobs": 20}),
    extras=_frozen({"system_fingerprint": None}),
    stop_reason=True,
    usage_details="null",
    error_style="vllm",
    root_routes=frozenset({"tokenize", "detokenize", "tokenizer_info"}),
)

# Google's Gemini API (generateContent): its request fields in both spellings Google's JSON
# parser takes (camelCase and the proto's snake_case), plus what the route puts in the body it
# reads (``model`` from the path, ``stream`` for ``:streamGenerateContent?alt=sse``).
_GEMINI_GENERATE = _names(
    "contents systemInstruction system_instruction generationConfig generation_config tools "
    "toolConfig tool_config safetySettings safety_settings cachedContent cached_content labels "
    "model stream"
)

GEMINI = Profile(
    name="gemini",
    notes=(
        "Google's Gemini API (generativelanguage.googleapis.com), its own wire: models/{model}:generateContent, "
        ":streamGenerateContent, :countTokens, :embedContent, :batchEmbedContents under /v1beta/ (and "
        "/gemini/v1beta/, /gemini/v1/). Documented: candidateCount 1-8, Google's error body "
        "{error: {code, message, status}}, unknown fields rejected. Undocumented, chosen: maxOutputTokens "
        "unset fills the context; a function call ends a candidate with STOP, as Gemini's do."
    ),
    models=(
        "gemini-2.5-flash",
        "gemini-2.5-pro",
        "gemini-2.5-flash-lite",
        "gemini-2.0-flash",
        "gemini-embedding-001",
        "text-embedding-004",
    ),
    documented=_frozen({"completions": _GEMINI_GENERATE, "chat": _GEMINI_GENERATE}),
    rejects_unknown=True,  # 'Invalid JSON payload received. Unknown name "…": Cannot find field.'
    limits=_frozen({"candidateCount": 8, "logprobs": 20}),
    default_max_tokens=_frozen({"completions": None, "chat": None}),
    usage_details="none",
    error_style="gemini",
)

# Anthropic's Messages API (POST /v1/messages), per the official SDK's MessageCreateParams; ``seed``
# is ours (Anthropic has none): a raw client or ``extra_body`` pins an answer with it.
_ANTHROPIC_MESSAGES = _names(
    "model messages max_tokens system stop_sequences stream temperature top_p top_k tools tool_choice "
    "thinking metadata service_tier output_config container context_management mcp_servers "
    "inference_geo speed cache_control diagnostics thread seed"
)

ANTHROPIC = Profile(
    name="anthropic",
    notes=(
        "Anthropic's Messages API, its own wire: /v1/messages, /v1/messages/count_tokens and /v1/models "
        "at the root (/v1/messages*) and under /anthropic/. Documented: max_tokens required, temperature "
        "0-1, Anthropic's error body {type: error, error: {type, message}} typed by status (529 "
        "overloaded_error), unknown fields rejected. Chosen: a prompt and max_tokens over the window lower "
        "max_tokens (Anthropic's max_tokens is a cap); usage.service_tier is 'standard'."
    ),
    models=("claude-sonnet-5", "claude-opus-5", "claude-haiku-4-5", "claude-sonnet-4-6"),
    documented=_frozen({"completions": _ANTHROPIC_MESSAGES, "chat": _ANTHROPIC_MESSAGES}),
    rejects_unknown=True,  # "extra_field: Extra inputs are not permitted"
    default_max_tokens=_frozen({"completions": None, "chat": None}),
    truncate_by_default=True,
    service_tiers=frozenset({"auto", "standard_only"}),
    service_tier_served=_frozen({"auto": "standard", "standard_only": "standard"}),
    default_service_tier="standard",
    usage_details="none",
    error_style="anthropic",
)

PROFILES: Mapping[str, Profile] = _frozen(
    {p.name: p for p in (OPENAI, FIREWORKS, TOGETHER, NEBIUS, NEBUL, NEBULABLOCK, TOKENHUB, VLLM, GEMINI, ANTHROPIC)}
)


def profile_named(name: str) -> Profile:
    """The profile called ``name`` (a ``ValueError`` listing the known ones otherwise)."""
    found = PROFILES.get(name)
    if found is None:
        raise ValueError(f"unknown profile {name!r}; known: {', '.join(PROFILES)}")
    return found


def model_not_found(model: str) -> NotFound:
    return NotFound(
        f"The model `{model}` does not exist or you do not have access to it.",
        param="model",
        code="model_not_found",
    )


@dataclass(frozen=True, slots=True)
class Models:
    """The model ids each profile lists and their context windows.

    ``explicit`` (``--models``) replaces every profile's list; without it each lists its
    provider's ids, at ``default_window``. An unlisted id is served at ``default_window``,
    or is a 404 ``model_not_found`` when ``reject_unknown``.
    """

    explicit: Mapping[str, int] = field(default_factory=lambda: _frozen({}))
    default_window: int = 8192
    reject_unknown: bool = False

    def listed(self, profile: Profile) -> Mapping[str, int]:
        """Listed model id → context window, as ``profile`` lists them."""
        return self.explicit or dict.fromkeys(profile.models, self.default_window)

    def context_window(self, model: str, profile: Profile) -> int:
        """The model's context window; an unlisted model's is the default, unless rejected."""
        if self.explicit:
            window = self.explicit.get(model)
            if window is not None:
                return window
        elif model in profile.models:
            return self.default_window
        if self.reject_unknown:
            raise model_not_found(model)
        return self.default_window
