"""A rate limiter: token buckets for requests and tokens per minute, per API key and model.

Buckets start full and refill continuously (a minute's allowance per minute) on the server's
clock, so on a virtual clock a test steps through windows without sleeping. A request takes
one request and its estimated tokens — the prompt's characters / 4 plus ``max_tokens``
(or 16), as providers estimate before generating — atomically for both buckets; when either
bucket cannot pay, it is a 429 and nothing is taken. Every answer carries the
``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` headers.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any

from mockserver.clock import Clock
from mockserver.state.base import Draw
from mockserver.state.sync import Bridge

__all__ = ["Decision", "RateLimiter", "estimate_tokens"]

PREFIX = "ratelimit:"


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    headers: dict[str, str]
    retry_after: float  # seconds until the request would pass (0 when allowed)
    exhausted: str = ""  # "requests" or "tokens"


def _duration(seconds: float) -> str:
    """OpenAI's reset format: ``1s``, ``6m0s``, ``120ms``."""
    if seconds < 1:
        return f"{max(0, math.ceil(seconds * 1000))}ms"
    minutes, rest = divmod(math.ceil(seconds), 60)
    return f"{minutes}m{rest}s" if minutes else f"{rest}s"


def estimate_tokens(body: Any) -> int:
    """What a request will cost, as providers estimate it before generating (see the module
    docstring): every wire's prompt and its cap on the answer (Gemini's ``contents`` and
    ``generationConfig.maxOutputTokens`` included)."""
    if not isinstance(body, dict):
        return 1
    text = str(body.get("messages") or body.get("prompt") or body.get("input") or body.get("contents") or "")
    config = body.get("generationConfig") or body.get("generation_config")
    capped = config.get("maxOutputTokens") or config.get("max_output_tokens") if isinstance(config, dict) else None
    wanted = body.get("max_completion_tokens") or body.get("max_tokens") or body.get("max_output_tokens") or capped
    return max(1, len(text) // 4 + (wanted if isinstance(wanted, int) else 16))


class RateLimiter:
    """Token buckets in the state (``draw``: every bucket paid or none, atomically across the
    processes of a shared state), keyed ``ratelimit:<kind>:<hashed key>:<model>`` — the API
    key is hashed, so no secret reaches the state's storage."""

    def __init__(
        self, clock: Clock, requests_per_minute: int = 0, tokens_per_minute: int = 0, bridge: Bridge | None = None
    ) -> None:
        self.clock = clock
        self.rpm = requests_per_minute
        self.tpm = tokens_per_minute
        self.bridge = bridge if bridge is not None else Bridge()
        self._hashed: dict[str, str] = {}  # API key → its digest (a few keys, used again and again)

    @property
    def active(self) -> bool:
        return bool(self.rpm or self.tpm)

    def reset(self) -> None:
        self.bridge.call(self.areset())

    async def areset(self) -> None:
        await self.bridge.state.forget(PREFIX)

    def _hash(self, key: str) -> str:
        digest = self._hashed.get(key)
        if digest is None:
            if len(self._hashed) >= 1024:
                self._hashed.clear()
            digest = self._hashed[key] = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return digest

    async def take(self, key: str, model: str, tokens: int) -> Decision:
        """Charge one request of ``tokens`` (estimated) to ``(key, model)``, or refuse it."""
        now = self.clock.now()
        where = f"{self._hash(key)}:{model}"
        needs: list[tuple[str, int, float]] = []
        if self.rpm:
            needs.append(("requests", self.rpm, 1.0))
        if self.tpm:
            needs.append(("tokens", self.tpm, float(tokens)))
        draws = [Draw(f"{PREFIX}{kind}:{where}", float(per), per / 60.0, amount) for kind, per, amount in needs]
        drawn = await self.bridge.state.draw(draws, now)
        headers: dict[str, str] = {}
        for (name, per, _), level in zip(needs, drawn.levels, strict=True):
            headers[f"x-ratelimit-limit-{name}"] = str(per)
            headers[f"x-ratelimit-remaining-{name}"] = str(max(0, math.floor(level)))
            headers[f"x-ratelimit-reset-{name}"] = _duration((per - level) / (per / 60.0))
        exhausted = "" if drawn.allowed else needs[drawn.short][0]
        return Decision(drawn.allowed, headers, drawn.wait, exhausted)
