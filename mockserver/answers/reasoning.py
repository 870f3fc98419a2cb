"""Reasoning models: which model ids think before they answer, and for how long.

A model id matching one of ``--reasoning-models`` (shell-style patterns, any case: ``o3*``) is a
reasoning model: the reference model first samples a "think" turn, then the answer. Its
length is capped by the effort asked (chat ``reasoning_effort``, Responses
``reasoning.effort``; ``medium`` when not asked) and by ``max_tokens``, which thinking
spends too: a budget used up while thinking ends with ``finish_reason: "length"`` and no
answer, as on OpenAI. Reasoning tokens are counted in ``completion_tokens`` (``output_tokens``)
and reported as ``reasoning_tokens``.
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase
from functools import lru_cache

from mockserver.errors import InvalidRequest

__all__ = ["DEFAULT_PATTERNS", "EFFORT_TOKENS", "think_budget"]

# Reasoning tokens per effort level (the reference model is tiny: these keep replies quick).
EFFORT_TOKENS = {"none": 0, "minimal": 8, "low": 16, "medium": 32, "high": 64, "xhigh": 128}
DEFAULT_PATTERNS = ("o1*", "o3*", "o4*", "gpt-5*", "*deepseek-r1*", "*qwq*", "*thinking*", "*reasoning*")


@lru_cache(maxsize=1024)
def reasons(model: str, patterns: tuple[str, ...]) -> bool:
    """Is ``model`` a reasoning model? (Asked on every request: remembered.)"""
    return any(fnmatchcase(model.lower(), pattern.lower()) for pattern in patterns)


def think_budget(model: str, effort: str | None, patterns: Sequence[str], param: str) -> int:
    """How many tokens ``model`` thinks at ``effort`` (0: not a reasoning model, or ``none``)."""
    if effort is not None and effort not in EFFORT_TOKENS:
        raise InvalidRequest(
            f"Invalid value for '{param}': '{effort}' is not one of {', '.join(EFFORT_TOKENS)}.", param=param
        )
    if not reasons(model, tuple(patterns)):
        if effort is not None:
            raise InvalidRequest(
                f"Unsupported parameter: '{param}' is not supported with this model.",
                param=param,
                code="unsupported_parameter",
            )
        return 0
    return EFFORT_TOKENS[effort or "medium"]
