"""How long the event loop is blocked: the watch handlers, the bind replies and the queue share it,
so a long stretch of work delays all of them (the elector runs on a loop of its own).

A timer due every `interval` runs late by as long as the loop was busy when it fell due; the lateness
is observed into a histogram, the worst kept in a gauge, and a stretch over `warn_after` is logged.
"""

from __future__ import annotations

import asyncio
import time

import structlog

from kubesched import metrics

log = structlog.get_logger(__name__)


class LoopLagMonitor:
    def __init__(self, interval: float = 0.05, warn_after: float = 0.05, warn_every: float = 10.0) -> None:
        self.interval = interval
        self.warn_after = warn_after
        self.warn_every = warn_every
        self.worst = 0.0
        self._warned_at = -float("inf")

    async def run(self) -> None:
        """Measure until cancelled."""
        while True:
            due = time.perf_counter() + self.interval
            await asyncio.sleep(self.interval)
            self.observe(max(time.perf_counter() - due, 0.0))

    def observe(self, lag: float) -> None:
        metrics.EVENT_LOOP_LAG.observe(lag)
        if lag > self.worst:
            self.worst = lag
            metrics.EVENT_LOOP_LAG_MAX.set(lag)
        now = time.monotonic()
        if lag > self.warn_after and now - self._warned_at >= self.warn_every:
            self._warned_at = now
            log.warning("event_loop_blocked", seconds=round(lag, 3), worst=round(self.worst, 3))
