"""A rate limiter: token buckets for requests and tokens per minute, per API key and model.

Buckets start full and refill continuously (a minute's allowance per minute) on the server's
clock, so on a virtual clock a test steps through windows without sleeping. A request takes
one request and its estimated tokens — the prompt's characters / 4 plus ``max_tokens``
(or 16), as providers estimate before generating — atomically for both buckets; when either
bucket cannot pay, it is a 429 and nothing is taken. Every answer carries the
``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` headers.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any

from mockserver.clock import Clock

__all__ = ["Decision", "RateLimiter", "estimate_tokens"]


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
    if not isinstance(body, dict):
        return 1
    text = str(body.get("messages") or body.get("prompt") or body.get("input") or "")
    wanted = body.get("max_completion_tokens") or body.get("max_tokens") or body.get("max_output_tokens") or 16
    return max(1, len(text) // 4 + (wanted if isinstance(wanted, int) else 16))


class _Bucket:
    def __init__(self, per_minute: int, now: float) -> None:
        self.capacity = float(per_minute)
        self.level = float(per_minute)
        self.rate = per_minute / 60.0
        self.at = now

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + max(0.0, now - self.at) * self.rate)
        self.at = now

    def wait_for(self, amount: float) -> float:
        # A hair of tolerance: epoch seconds near 1.7e9 resolve only ~0.2 µs, and 0.6 s at
        # 100/min must refill one whole request, not 0.9999996 of one.
        return 0.0 if self.level + 1e-5 >= amount else (amount - self.level) / self.rate

    def to_full(self) -> float:
        return (self.capacity - self.level) / self.rate


class RateLimiter:
    def __init__(self, clock: Clock, requests_per_minute: int = 0, tokens_per_minute: int = 0) -> None:
        self.clock = clock
        self.rpm = requests_per_minute
        self.tpm = tokens_per_minute
        self._buckets: dict[tuple[str, str, str], _Bucket] = {}
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return bool(self.rpm or self.tpm)

    def reset(self) -> None:
        with self._lock:
            self._buckets.clear()

    def _bucket(self, kind: str, key: str, model: str, per_minute: int, now: float) -> _Bucket:
        bucket = self._buckets.get((kind, key, model))
        if bucket is None:
            bucket = self._buckets[(kind, key, model)] = _Bucket(per_minute, now)
        bucket.refill(now)
        return bucket

    def take(self, key: str, model: str, tokens: int) -> Decision:
        """Charge one request of ``tokens`` (estimated) to ``(key, model)``, or refuse it."""
        with self._lock:
            now = self.clock.now()
            needs: list[tuple[str, _Bucket, float]] = []
            if self.rpm:
                needs.append(("requests", self._bucket("requests", key, model, self.rpm, now), 1.0))
            if self.tpm:
                needs.append(("tokens", self._bucket("tokens", key, model, self.tpm, now), float(tokens)))
            waits = [(bucket.wait_for(amount), kind) for kind, bucket, amount in needs]
            wait, kind = max(waits) if waits else (0.0, "")
            if wait <= 0.0:
                for _, bucket, amount in needs:
                    bucket.level -= amount
            headers: dict[str, str] = {}
            for name, bucket, _ in needs:
                headers[f"x-ratelimit-limit-{name}"] = str(int(bucket.capacity))
                headers[f"x-ratelimit-remaining-{name}"] = str(max(0, math.floor(bucket.level)))
                headers[f"x-ratelimit-reset-{name}"] = _duration(bucket.to_full())
            return Decision(wait <= 0.0, headers, wait, kind if wait > 0.0 else "")
