"""How long the event loop is blocked: the watch handlers, the bind replies and the queue share it,
so a long stretch of work delays all of them (the elector runs on a loop of its own).

A timer due every `interval` runs late by as long as the loop was busy when it fell due; the lateness
is observed into a histogram, the worst kept in a gauge, and a stretch over `warn_after` is logged.
A watchdog thread samples the loop thread's stack while it is blocked, so that the log says where.

A stall that begins just after the timer ran is seen up to `interval` short, so the interval is half
`warn_after`: a stall of 1.5 times `warn_after` is always told. Each tick wakes the loop and each
look wakes the watchdog, idle or not, so neither runs more often than that needs (the cost of a
shorter tick: docs/explanation/design.md, "Kept").
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import structlog

from kubesched.telemetry import metrics

log = structlog.get_logger(__name__)


MAX_STALL_SITES = 1000  # distinct stacks kept for the last log line


class LoopLagMonitor:
    def __init__(self, interval: float = 0.025, warn_after: float = 0.05, warn_every: float = 10.0) -> None:
        self.interval = interval
        self.warn_after = warn_after
        self.warn_every = warn_every
        self.worst = 0.0
        self.worst_busy = 0.0  # the longest lag the loop's own CPU time could account for
        self._warned_at = -float("inf")
        self._gc_callback: Callable[[str, dict[str, Any]], None] | None = None
        self._beat = time.perf_counter()
        self._stalled: Counter[str] = Counter()  # where the current stall was sampled
        self.stall_sites: Counter[str] = Counter()  # where every stall was sampled, for the last log

    def watch_gc(self) -> None:
        """Log the garbage collector's long pauses: a full collection stops every thread."""
        started: list[float] = [0.0]

        def callback(phase: str, info: dict[str, Any]) -> None:
            if phase == "start":
                started[0] = time.perf_counter()
                return
            took = time.perf_counter() - started[0]
            if took > self.warn_after:
                log.warning("gc_pause", seconds=round(took, 3), generation=info.get("generation"))

        self.unwatch_gc()
        self._gc_callback = callback
        gc.callbacks.append(callback)

    def unwatch_gc(self) -> None:
        if self._gc_callback is not None and self._gc_callback in gc.callbacks:
            gc.callbacks.remove(self._gc_callback)
        self._gc_callback = None

    async def run(self) -> None:
        """Measure until cancelled."""
        self.watch_gc()
        stop = threading.Event()
        self._beat = time.perf_counter() + self.interval
        watchdog = threading.Thread(
            target=self._watch, args=(threading.get_ident(), stop), name="loop-lag-watchdog", daemon=True
        )
        watchdog.start()
        try:
            while True:
                cpu = time.thread_time()
                self._beat = due = time.perf_counter() + self.interval
                await asyncio.sleep(self.interval)
                lag = max(time.perf_counter() - due, 0.0)
                self.observe(lag, busy=min(lag, time.thread_time() - cpu))
        finally:
            stop.set()
            self.unwatch_gc()

    def _watch(self, loop_thread: int, stop: threading.Event) -> None:
        """Sample the loop thread's stack every `warn_after / 5` while it is late by half `warn_after`
        (the samples are kept only if the lag goes on past it). A stall inside one C call (a large
        JSON parse) holds the GIL: its sample lands just after. A sample in the selector means the
        loop was ready but waited for the CPU or the GIL."""
        while not stop.wait(watchdog_wait(time.perf_counter(), self._beat, self.warn_after)):
            if time.perf_counter() - self._beat > self.warn_after / 2:
                frame = sys._current_frames().get(loop_thread)
                if frame is not None:
                    self._stalled[stack_site(frame)] += 1

    def observe(self, lag: float, busy: float | None = None) -> None:
        """`busy`: how much of the lag the loop thread's own CPU time could account for; the rest it
        waited for a core (the API server and etcd share this machine's two) or for the GIL."""
        metrics.EVENT_LOOP_LAG.observe(lag)
        busy = lag if busy is None else busy
        if busy > self.worst_busy:
            self.worst_busy = busy
            metrics.EVENT_LOOP_BUSY_MAX.set(busy)
        record = lag > self.worst
        if record:
            self.worst = lag
            metrics.EVENT_LOOP_LAG_MAX.set(lag)
        where, self._stalled = self._stalled, Counter()
        if lag <= self.warn_after:
            return
        self.stall_sites.update(where)
        if len(self.stall_sites) > MAX_STALL_SITES:  # months of stalls: keep the likeliest culprits
            self.stall_sites = Counter(dict(self.stall_sites.most_common(MAX_STALL_SITES // 2)))
        now = time.monotonic()
        if record or now - self._warned_at >= self.warn_every:  # a new worst is always told
            self._warned_at = now
            log.warning(
                "event_loop_blocked",
                seconds=round(lag, 3),
                own_cpu=round(busy, 3),
                worst=round(self.worst, 3),
                where=[site for site, _ in where.most_common(3)],
            )

    def top_stall_sites(self, count: int = 5) -> list[tuple[str, int]]:
        """The places the loop was most often sampled while blocked, with how many samples."""
        return self.stall_sites.most_common(count)


def watchdog_wait(now: float, beat: float, warn_after: float) -> float:
    """How long the watchdog sleeps: until the loop, due to tick at `beat`, would be late by half
    `warn_after`, and from then on `warn_after / 5` between samples (at least 5 ms either way)."""
    period = max(warn_after / 5, 0.005)
    return max(beat + warn_after / 2 - now, period)


def stack_site(frame: Any, depth: int = 4) -> str:
    """The innermost frames of a stack, innermost first: `module:function:line < caller ...`."""
    sites: list[str] = []
    while frame is not None and len(sites) < depth:
        code = frame.f_code
        module = frame.f_globals.get("__name__", "?")
        sites.append(f"{module}:{code.co_name}:{frame.f_lineno}")
        frame = frame.f_back
    return " < ".join(sites)
