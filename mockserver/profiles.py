"""Provider dialects as data: what differs between the APIs we stand in for.

Only OpenAI's dialect exists so far; the providers' issue adds the others as more records of
the same shape, so no code branches on a provider's name.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OPENAI", "Profile"]


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    max_completion_logprobs: int  # /v1/completions ``logprobs``
    max_top_logprobs: int  # /v1/chat/completions ``top_logprobs``
    completion_max_tokens: int  # /v1/completions default ``max_tokens``
    system_fingerprint: str | None


OPENAI = Profile(
    name="openai",
    max_completion_logprobs=5,
    max_top_logprobs=20,
    completion_max_tokens=16,
    system_fingerprint="fp_mockserver",
)
