"""Retries and rate limits: the one exponential backoff and the one token bucket of the operator."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field


def backoff_delay(
    failures: int, base: float, cap: float, jitter: float = 0.0, rng: random.Random | None = None
) -> float:
    """`base` doubled per failure before this one, at most `cap`; `jitter` is the fraction of it added
    at random (negative: taken off), so that replicas that failed together do not retry in step."""
    delay = min(cap, base * 2.0 ** max(failures, 0))
    if jitter:
        delay *= 1.0 + (rng or random).uniform(0.0, jitter)
    return delay


@dataclass(slots=True)
class TokenBucket:
    """client-go's rate limit: `qps` tokens a second, at most `burst` saved up, full at first."""

    qps: float
    burst: int
    clock: Callable[[], float] = time.monotonic
    _tokens: float = field(init=False)
    _stamp: float = field(init=False)
    _lock: asyncio.Lock = field(init=False, default_factory=asyncio.Lock)

    def __post_init__(self) -> None:
        self._tokens = float(self.burst)
        self._stamp = self.clock()

    def _refill(self) -> None:
        now = self.clock()
        self._tokens = min(float(self.burst), self._tokens + max(now - self._stamp, 0.0) * self.qps)
        self._stamp = now

    def try_acquire(self) -> bool:
        """Take a token if one is there, without waiting."""
        self._refill()
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True

    async def acquire(self) -> None:
        """Take a token, waiting for it; no limit when `qps` is 0."""
        if self.qps <= 0:
            return
        async with self._lock:
            self._refill()
            self._tokens -= 1
            if self._tokens < 0:
                # Waiting while holding the lock keeps the requests in arrival order.
                await asyncio.sleep(-self._tokens / self.qps)


__all__ = ["TokenBucket", "backoff_delay"]
