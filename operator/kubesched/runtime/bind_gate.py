"""The bind gate: closed while the API server is unreachable, so that no bind request leaves then.

A bind whose request got no reply at all (refused, reset, TLS, EOF, a timeout) closes the gate.
Binds wait at it, their pods still assumed where the algorithm put them, instead of failing one
after another with a backoff and a `FailedScheduling` event each that could not be posted either.
One probe asks the API server, with exponential backoff, and opens the gate when it answers.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from kubesched.kube.retry import backoff_delay
from kubesched.telemetry import metrics

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class ProbeBackoff:
    """Delays between probes: `initial` doubling up to `maximum`, each with up to `jitter` of itself added."""

    initial: float = 0.25
    # One GET /readyz a second costs the server nothing, and a longer cap would leave binds waiting
    # after the server is back, up to the cap (the watches reconnect sooner).
    maximum: float = 1.0
    jitter: float = 0.1

    def delays(self, rng: random.Random) -> Callable[[], float]:
        """The next delay, on each call."""
        failures = itertools.count()
        return lambda: backoff_delay(next(failures), self.initial, self.maximum, self.jitter, rng)


class BindGate:
    """Open unless the API server stopped answering; binds `wait_open` before every request."""

    def __init__(
        self,
        probe: Callable[[], Awaitable[bool]],
        backoff: ProbeBackoff = ProbeBackoff(),
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self._probe = probe
        self._backoff = backoff
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._open = asyncio.Event()
        self._open.set()
        self._probing: asyncio.Task[None] | None = None
        self._closed_at = 0.0
        self._waiting = 0
        self.pauses = 0
        self.probes = 0  # probes sent, over all pauses

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    @property
    def waiting(self) -> int:
        """Binds held at the gate now."""
        return self._waiting

    async def wait_open(self) -> None:
        """Return at once while the gate is open, else once a probe got an answer (or `reset`)."""
        if self._open.is_set():
            return
        self._waiting += 1
        try:
            await self._open.wait()
        finally:
            self._waiting -= 1

    def close(self, error: str) -> None:
        """A request got no reply: hold every bind until the API server answers a probe."""
        if not self._open.is_set():
            return
        self._open.clear()
        self._closed_at = self._clock()
        self.pauses += 1
        metrics.BIND_PAUSES.inc()
        log.warning("api_unreachable", error=error)
        self._probing = asyncio.create_task(self._probe_until_answered(), name="api-probe")

    def reset(self) -> None:
        """Open now and stop probing: the term ended or the process stops, and the binds held give up."""
        if self._probing is not None:
            self._probing.cancel()
            self._probing = None
        self._open.set()

    async def _probe_until_answered(self) -> None:
        delays = self._backoff.delays(self._rng)
        probes = 0
        while True:
            await self._sleep(delays())
            probes += 1
            self.probes += 1
            try:
                if await self._probe():
                    break
            except Exception as exc:  # a bug: the binds' own replies decide, rather than a gate shut for good
                log.error("api_probe_error", error=repr(exc))
                break
        log.info(
            "api_reachable",
            paused_seconds=round(self._clock() - self._closed_at, 3),
            held=self._waiting,
            probes=probes,
        )
        self._probing = None
        self._open.set()


__all__ = ["BindGate", "ProbeBackoff"]
